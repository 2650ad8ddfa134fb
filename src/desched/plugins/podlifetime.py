"""PodLifeTime (deschedule): evicts pods matching every configured criterion — older than
`maxPodLifeTimeSeconds`, in one of `states`, with a matching condition or exit code, of an
included owner kind — oldest first across the cluster."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

import msgspec

from desched.decoding.go import Int32
from desched.framework.evictor import EvictionLimitError
from desched.framework.registry import PluginSpec, Scope
from desched.framework.types import Handle
from desched.framework.verdicts import criteria_verdict, listing_scope, no_exit_code
from desched.model.labels import matcher_unless_empty
from desched.model.meta import LabelSelector
from desched.model.node import Node
from desched.model.pod import ContainerStatus, Pod
from desched.policy_files.args import (
    Namespaces,
    namespace_allowed,
    namespace_scope,
    validate_label_selector,
    validate_namespaces,
)
from desched.util.duration import human_duration

PHASES = ("Running", "Pending", "Succeeded", "Failed", "Unknown")
POD_REASONS = ("NodeAffinity", "NodeLost", "Shutdown", "UnexpectedAdmissionError")
WAITING_REASONS = ("PodInitializing", "ContainerCreating", "ImagePullBackOff", "CrashLoopBackOff",
                   "CreateContainerConfigError", "ErrImagePull", "CreateContainerError",
                   "InvalidImageName")
TERMINATED_REASONS = ("OOMKilled", "Error", "Completed", "DeadlineExceeded", "Evicted",
                      "ContainerCannotRun", "StartError")
ALLOWED_STATES = frozenset(PHASES + POD_REASONS + WAITING_REASONS + TERMINATED_REASONS)


class OwnerKinds(msgspec.Struct, forbid_unknown_fields=True):
    include: list[str] = []
    exclude: list[str] = []


class ConditionFilter(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    type: str = ""
    status: str = ""
    reason: str = ""
    min_time_since_last_transition_seconds: int | None = None


class PodLifeTimeArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    owner_kinds: OwnerKinds | None = None
    max_pod_life_time_seconds: int | None = None
    states: list[str] = []
    conditions: list[ConditionFilter] = []
    exit_codes: list[Int32] = []
    including_init_containers: bool = False
    including_ephemeral_containers: bool = False


def validate(args: PodLifeTimeArgs) -> list[str]:
    errs = validate_namespaces(args.namespaces) + validate_label_selector(args.label_selector)
    if args.owner_kinds is not None and args.owner_kinds.include and args.owner_kinds.exclude:
        errs.append("only one of Include/Exclude ownerKinds can be set")
    if args.states and not set(args.states) <= ALLOWED_STATES:
        errs.append(f"states must be one of [{' '.join(sorted(ALLOWED_STATES))}]")
    for i, cond in enumerate(args.conditions):
        if (not cond.type and not cond.status and not cond.reason
                and cond.min_time_since_last_transition_seconds is None):
            errs.append(f"conditions[{i}]: at least one of type, status, reason, or "
                        f"minTimeSinceLastTransitionSeconds must be set")
    if (args.max_pod_life_time_seconds is None and not args.states and not args.conditions
            and not args.exit_codes):
        errs.append("at least one filtering criterion must be specified (maxPodLifeTimeSeconds, "
                    "states, conditions, or exitCodes)")
    if args.max_pod_life_time_seconds is not None and args.max_pod_life_time_seconds < 0:
        errs.append("maxPodLifeTimeSeconds must be a non-negative number")
    return errs


def _statuses(pod: Pod, init: bool, ephemeral: bool) -> list[ContainerStatus]:
    out = list(pod.status.container_statuses)
    if init:
        out.extend(pod.status.init_container_statuses)
    if ephemeral:
        out.extend(pod.status.ephemeral_container_statuses)
    return out


class PodLifeTime:
    def __init__(self, args: PodLifeTimeArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.labels = matcher_unless_empty(args.label_selector)
        self.states = frozenset(args.states)
        self.exit_codes = frozenset(args.exit_codes)
        # The age is the only criterion: a pod the listing finds old enough by its
        # creationTimestamp meets them all (criteria_reason would say so, pod by pod).
        # The limit as each reason names it: the same for every pod.
        limit = args.max_pod_life_time_seconds
        self._limit_text = ("" if limit is None else
                            f"maxPodLifeTimeSeconds {limit} ({human_duration(limit)})")
        self._age_only = (args.max_pod_life_time_seconds is not None and not self.states
                          and args.owner_kinds is None and not args.conditions
                          and not self.exit_codes)

    def _age_seconds(self, pod: Pod, now: datetime) -> float | None:
        created = pod.metadata.creation_timestamp
        return None if created is None else (now - created).total_seconds()

    def criteria_reason(self, pod: Pod, now: datetime, misses: list[str] | None = None,
                        describe: bool = True) -> str | None:
        """Why the pod matches every configured criterion, or None when one fails; then, when
        `misses` is given (explain), which one and why goes there. With `describe` off the age is
        left out of the text (the listing tests tens of thousands of pods and evicts few)."""
        a = self.args
        parts: list[str] = []
        if a.max_pod_life_time_seconds is not None:
            age = self._age_seconds(pod, now)
            limit = a.max_pod_life_time_seconds
            # uint(now - created) > max: a negative age is never old enough.
            if age is None or age < 0 or int(age) <= limit:
                if misses is not None:
                    misses.append("pod has no creationTimestamp" if age is None else
                                  f"pod age {int(age)}s ({human_duration(max(int(age), 0))}) "
                                  f"does not exceed maxPodLifeTimeSeconds {limit} "
                                  f"({human_duration(limit)})")
                return None
            if describe:
                parts.append(f"pod age {int(age)}s ({human_duration(age)}) exceeds "
                             f"{self._limit_text}")
        if self.states:
            matched = self._matching_state(pod)
            if matched is None:
                if misses is not None:
                    misses.append(f"pod is in none of the states {', '.join(sorted(self.states))}")
                return None
            parts.append(f"pod is in state {matched}")
        if a.owner_kinds is not None:
            kinds = {ref.kind for ref in pod.metadata.owner_references}
            if a.owner_kinds.include and not kinds & set(a.owner_kinds.include):
                if misses is not None:
                    misses.append(f"its owner kinds {sorted(kinds)} are not in "
                                  f"ownerKinds.include {a.owner_kinds.include}")
                return None
            if a.owner_kinds.exclude and kinds & set(a.owner_kinds.exclude):
                if misses is not None:
                    misses.append(f"its owner kind {sorted(kinds & set(a.owner_kinds.exclude))}"
                                  f" is in ownerKinds.exclude")
                return None
        if a.conditions:
            matched = self._matching_condition(pod, now)
            if matched is None:
                if misses is not None:
                    misses.append("pod has none of the conditions the plugin looks for")
                return None
            parts.append(f"pod has condition {matched}")
        if self.exit_codes:
            code = self._matching_exit_code(pod)
            if code is None:
                if misses is not None:
                    misses.append(no_exit_code(self.exit_codes))
                return None
            parts.append(f"a container exited with code {code}")
        return "; ".join(parts)

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why this run passed the pod over (explain only): its labels, or the first criterion
        it fails."""
        return criteria_verdict(listing_scope(pod, self.labels), lambda misses:
                                self.criteria_reason(pod, self.handle.now, misses))

    def _matching_state(self, pod: Pod) -> str | None:
        states = self.states
        if pod.status.phase in states:
            return pod.status.phase
        if pod.status.reason in states:
            return pod.status.reason
        for cs in _statuses(pod, self.args.including_init_containers,
                            self.args.including_ephemeral_containers):
            state = cs.state
            if state is None:
                continue
            if state.waiting is not None and state.waiting.reason in states:
                return state.waiting.reason
            if state.terminated is not None and state.terminated.reason in states:
                return state.terminated.reason
        return None

    def _matching_condition(self, pod: Pod, now: datetime) -> str | None:
        for f in self.args.conditions:
            for cond in pod.conditions:
                if f.type and cond.type != f.type:
                    continue
                if f.status and cond.status != f.status:
                    continue
                if f.reason and cond.reason != f.reason:
                    continue
                if f.min_time_since_last_transition_seconds is not None:
                    ltt = cond.last_transition_time
                    if ltt is None or ((now - ltt).total_seconds()
                                       < f.min_time_since_last_transition_seconds):
                        continue
                return f"{cond.type}={cond.status}" + (f" ({cond.reason})" if cond.reason else "")
        return None

    def _matching_exit_code(self, pod: Pod) -> int | None:
        for cs in _statuses(pod, self.args.including_init_containers, False):
            term = cs.state.terminated if cs.state is not None else None
            if term is not None and term.exit_code in self.exit_codes:
                return term.exit_code
        return None

    def deschedule(self, nodes: list[Node]) -> None:
        handle, now = self.handle, self.handle.now
        snapshot = handle.snapshot
        namespaces, labels = self.args.namespaces, self.labels
        max_age = self.args.max_pod_life_time_seconds
        # int(age) > max exactly when the pod was created at least max + 1 s ago: comparing
        # timestamps rules most pods out without the arithmetic (criteria_reason does the rest).
        newest = None
        if max_age is not None:
            with contextlib.suppress(OverflowError):  # before year 1: criteria_reason decides
                newest = now - timedelta(seconds=max_age + 1)
        # Created at or before `newest`: int(age) > max holds, nothing else to meet.
        aged_enough = newest is not None and self._age_only
        # The profile evictor's checks, bound once (Handle.filter and pre_eviction_filter,
        # minus a call per pod each).
        evictor, plugin = handle.evictor, handle.plugin
        evictor_filter, pre_eviction_filter = evictor.filter, evictor.pre_eviction_filter
        candidates: list[tuple[datetime, Pod]] = []
        for node in nodes:
            for pod in snapshot.pods_on_node(node.name, include_terminal=True):
                if newest is not None:
                    created = pod.metadata.creation_timestamp
                    if created is None or created > newest:
                        continue
                if namespaces is not None and not namespace_allowed(namespaces, pod.namespace):
                    continue
                if labels is not None and not labels(pod.metadata.labels):
                    continue
                if not aged_enough and self.criteria_reason(pod, now, describe=False) is None:
                    continue
                if not evictor_filter(pod, plugin) or not pre_eviction_filter(pod, plugin):
                    continue
                created = pod.metadata.creation_timestamp or now
                candidates.append((created, pod))
        # Oldest first, across the whole cluster. The reason is written only for the pods the
        # run gets to (the criteria read the pod and the clock alone: the same answer).
        candidates.sort(key=lambda c: c[0])
        for _, pod in candidates:
            reason = self.criteria_reason(pod, now)
            assert reason is not None
            try:
                handle.evict(pod, reason)
            except EvictionLimitError as err:
                if err.scope == "total":
                    return
                # A node or namespace limit only skips this pod.


SPEC = PluginSpec(
    name="PodLifeTime",
    extension_points=frozenset({"deschedule"}),
    args_type=PodLifeTimeArgs,
    factory=PodLifeTime,
    validate=validate,
    # A fresh pod is the point, wherever it lands.
    purpose="replace",
    scope=lambda args: Scope(namespaces=namespace_scope("namespaces", args.namespaces)),
)

"""RemoveFailedPods (deschedule): evicts pods in phase Failed that are at least
`minPodLifetimeSeconds` old (default 3600), not owned by an excluded kind, and, when configured,
with a matching reason or exit code; per node, in list order."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from desched.framework.registry import PluginSpec, Scope
from desched.framework.types import Handle
from desched.framework.verdicts import (
    criteria_verdict,
    excluded_owner,
    listing_scope,
    no_exit_code,
)
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

DEFAULT_MIN_POD_LIFETIME_SECONDS = 3600


class RemoveFailedPodsArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    exclude_owner_kinds: list[str] = []
    # *uint upstream: a negative value is a decoding error.
    min_pod_lifetime_seconds: Annotated[int, msgspec.Meta(ge=0)] | None = None
    reasons: list[str] = []
    exit_codes: list[int] = []
    including_init_containers: bool = False


def validate(args: RemoveFailedPodsArgs) -> list[str]:
    # Upstream returns the first error only.
    return validate_namespaces(args.namespaces) or validate_label_selector(args.label_selector)


def default(args: RemoveFailedPodsArgs) -> None:
    if args.min_pod_lifetime_seconds is None:
        args.min_pod_lifetime_seconds = DEFAULT_MIN_POD_LIFETIME_SECONDS


class RemoveFailedPods:
    def __init__(self, args: RemoveFailedPodsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.labels = matcher_unless_empty(args.label_selector)
        self.excluded_kinds = frozenset(args.exclude_owner_kinds)
        self.reasons = frozenset(args.reasons)
        self.exit_codes = frozenset(args.exit_codes)

    def _statuses(self, pod: Pod) -> tuple[ContainerStatus, ...]:
        statuses = pod.status.container_statuses
        if self.args.including_init_containers:
            statuses = statuses + pod.status.init_container_statuses
        return statuses

    def _matching_reason(self, pod: Pod) -> str | None:
        """The first reason in `reasons` (see _reasons for the order)."""
        return next((r for r in self._reasons(pod) if r in self.reasons), None)

    def _matching_exit_code(self, pod: Pod) -> int | None:
        for cs in self._statuses(pod):
            term = cs.state.terminated if cs.state is not None else None
            if term is not None and term.exit_code in self.exit_codes:
                return term.exit_code
        return None

    def criteria_reason(self, pod: Pod, now: datetime,
                        misses: list[str] | None = None) -> str | None:
        """Why the failed pod qualifies (validateCanEvict), or None when a criterion fails;
        then, when `misses` is given (explain), which one and why goes there."""
        a = self.args
        parts = ["pod phase is Failed"]
        if a.min_pod_lifetime_seconds is not None:
            created = pod.metadata.creation_timestamp
            if created is not None:
                # uint(seconds): a pod created in the future counts as age 0 here.
                age = max(int((now - created).total_seconds()), 0)
                if age < a.min_pod_lifetime_seconds:
                    if misses is not None:
                        misses.append(f"age {age}s is under minPodLifetimeSeconds "
                                      f"{a.min_pod_lifetime_seconds}")
                    return None
                parts.append(f"age {age}s is at least minPodLifetimeSeconds "
                             f"{a.min_pod_lifetime_seconds}")
        if self.excluded_kinds and any(ref.kind in self.excluded_kinds
                                       for ref in pod.metadata.owner_references):
            if misses is not None:
                misses.append(excluded_owner(pod, self.excluded_kinds) or "")
            return None
        if self.reasons:
            reason = self._matching_reason(pod)
            if reason is None:
                if misses is not None:
                    found = ", ".join(filter(None, self._reasons(pod))) or "none"
                    misses.append(f"its failure reasons ({found}) are not among the reasons "
                                  f"{', '.join(sorted(self.reasons))}")
                return None
            parts.append(f"reason {reason}")
        if self.exit_codes:
            code = self._matching_exit_code(pod)
            if code is None:
                if misses is not None:
                    misses.append(no_exit_code(self.exit_codes))
                return None
            parts.append(f"a container exited with code {code}")
        return "; ".join(parts)

    def _reasons(self, pod: Pod) -> list[str]:
        """The reason of each container's waiting, then terminated state (empty when the state
        has none), in status order, then the pod's status.reason when set."""
        found = [state.reason for cs in self._statuses(pod) if cs.state is not None
                 for state in (cs.state.waiting, cs.state.terminated) if state is not None]
        if pod.status.reason:
            found.append(pod.status.reason)
        return list(dict.fromkeys(found))

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why this run passed the pod over (explain only): its phase, its labels, or the
        first criterion it fails."""
        if pod.status.phase != "Failed":
            return f"pod phase is {pod.status.phase or 'unknown'}, not Failed"
        return criteria_verdict(listing_scope(pod, self.labels), lambda misses:
                                self.criteria_reason(pod, self.handle.now, misses))

    def deschedule(self, nodes: list[Node]) -> None:
        handle, now = self.handle, self.handle.now
        for node in nodes:
            # List and filter the whole node first, as upstream, then evict.
            candidates: list[tuple[Pod, str]] = []
            for pod in handle.snapshot.pods_on_node(node.metadata.name, include_terminal=True):
                if pod.status.phase != "Failed":
                    continue
                if not namespace_allowed(self.args.namespaces, pod.namespace):
                    continue
                if self.labels is not None and not self.labels(pod.metadata.labels):
                    continue
                reason = self.criteria_reason(pod, now)
                if reason is None:
                    continue
                if not handle.filter(pod) or not handle.pre_eviction_filter(pod):
                    continue
                candidates.append((pod, reason))
            if not handle.evict_node_pods(candidates):
                return


SPEC = PluginSpec(
    name="RemoveFailedPods",
    extension_points=frozenset({"deschedule"}),
    args_type=RemoveFailedPodsArgs,
    factory=RemoveFailedPods,
    validate=validate,
    default=default,
    # A fresh pod is the point, wherever it lands.
    purpose="replace",
    scope=lambda args: Scope(namespaces=namespace_scope("namespaces", args.namespaces)),
)

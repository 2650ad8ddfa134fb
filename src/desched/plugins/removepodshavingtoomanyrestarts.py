"""RemovePodsHavingTooManyRestarts (deschedule): evicts pods whose containers restarted at least
`podRestartThreshold` times in total (init containers too with `includingInitContainers`),
optionally only in one of `states`; per node, most restarts first.
Terminal pods are listed too (ListAllPodsOnANode)."""

from __future__ import annotations

import msgspec

from desched.decoding.go import Int32
from desched.framework.registry import PluginSpec, Scope
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED, listing_scope
from desched.model.labels import matcher_unless_empty
from desched.model.meta import LabelSelector
from desched.model.node import Node
from desched.model.pod import Pod
from desched.policy_files.args import (
    Namespaces,
    namespace_allowed,
    namespace_scope,
    validate_label_selector,
    validate_namespaces,
)

# The pod phase and the container waiting reason upstream accepts in `states`.
ALLOWED_STATES = ("CrashLoopBackOff", "Running")


class RemovePodsHavingTooManyRestartsArgs(msgspec.Struct, rename="camel",
                                          forbid_unknown_fields=True):
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    pod_restart_threshold: Int32 = 0
    including_init_containers: bool = False
    states: list[str] = []


def validate(args: RemovePodsHavingTooManyRestartsArgs) -> list[str]:
    errs = validate_namespaces(args.namespaces) + validate_label_selector(args.label_selector)
    if args.pod_restart_threshold < 1:
        errs.append("invalid PodsHavingTooManyRestarts threshold")
    if not set(args.states) <= set(ALLOWED_STATES):
        errs.append(f"states must be one of [{' '.join(sorted(ALLOWED_STATES))}]")
    return errs


class RemovePodsHavingTooManyRestarts:
    def __init__(self, args: RemovePodsHavingTooManyRestartsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.labels = matcher_unless_empty(args.label_selector)
        self.states = frozenset(args.states)

    def restarts(self, pod: Pod) -> int:
        status = pod.status
        total = 0
        for cs in status.container_statuses:
            total += cs.restart_count
        if self.args.including_init_containers:
            for cs in status.init_container_statuses:
                total += cs.restart_count
        return total

    def matching_state(self, pod: Pod) -> str | None:
        """The phase or container waiting reason that is one of `states`, or None."""
        states = self.states
        if pod.status.phase in states:
            return pod.status.phase
        statuses = pod.status.container_statuses
        if self.args.including_init_containers:
            statuses = statuses + pod.status.init_container_statuses
        for cs in statuses:
            waiting = cs.state.waiting if cs.state is not None else None
            if waiting is not None and waiting.reason in states:
                return waiting.reason
        return None

    def _reason(self, pod: Pod, restarts: int) -> str | None:
        """Why the pod qualifies, or None when it does not."""
        if restarts < self.args.pod_restart_threshold:
            return None
        scope = "containers and init containers" if self.args.including_init_containers \
            else "containers"
        reason = (f"{scope} restarted {restarts} times, at least the podRestartThreshold "
                  f"{self.args.pod_restart_threshold}")
        if self.states:
            state = self.matching_state(pod)
            if state is None:
                return None
            reason += f"; pod is in state {state}"
        return reason

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why this run passed the pod over (explain only): its restarts, its labels, or its
        state."""
        restarts, threshold = self.restarts(pod), self.args.pod_restart_threshold
        if restarts < threshold:
            return f"{restarts} restart(s), under the podRestartThreshold {threshold}"
        scope = listing_scope(pod, self.labels)
        if scope is not None:
            return scope
        if self._reason(pod, restarts) is None:
            return (f"{restarts} restart(s), but the pod is in none of the states "
                    f"{', '.join(sorted(self.states))}")
        return RUN_ENDED

    def deschedule(self, nodes: list[Node]) -> None:
        handle = self.handle
        snapshot = handle.snapshot
        namespaces, labels = self.args.namespaces, self.labels
        threshold, restarts_of = self.args.pod_restart_threshold, self.restarts
        for node in nodes:
            # List and filter the whole node first, as upstream, then evict.
            candidates: list[tuple[int, Pod, str]] = []
            for pod in snapshot.pods_on_node(node.metadata.name, include_terminal=True):
                # The restart count first: it rules out most pods, and every check here but
                # the Filter and PreEvictionFilter (kept last) is free of side effects.
                restarts = restarts_of(pod)
                if restarts < threshold:
                    continue
                if namespaces is not None and not namespace_allowed(namespaces, pod.namespace):
                    continue
                if labels is not None and not labels(pod.metadata.labels):
                    continue
                reason = self._reason(pod, restarts)
                if reason is None:
                    continue
                if not handle.filter(pod) or not handle.pre_eviction_filter(pod):
                    continue
                candidates.append((restarts, pod, reason))
            candidates.sort(key=lambda c: -c[0])  # most restarts first; stable on ties
            if not handle.evict_node_pods((pod, reason) for _, pod, reason in candidates):
                return


SPEC = PluginSpec(
    name="RemovePodsHavingTooManyRestarts",
    extension_points=frozenset({"deschedule"}),
    args_type=RemovePodsHavingTooManyRestartsArgs,
    factory=RemovePodsHavingTooManyRestarts,
    validate=validate,
    # A fresh pod is the point, wherever it lands.
    purpose="replace",
    scope=lambda args: Scope(namespaces=namespace_scope("namespaces", args.namespaces)),
)

"""RemovePodsViolatingNodeTaints (deschedule): evicts pods that do not tolerate a taint their node
carries.

A node taint is considered when its effect is NoSchedule (or PreferNoSchedule with
`includePreferNoSchedule`), it is not excluded (`excludedTaints` lists its key, or `key=value`
when the value is non-empty) and it is included (`includedTaints` absent includes every taint;
otherwise it must list the key or `key=value`, so an explicit empty list includes none). NoExecute
taints are never considered: the taint manager evicts for them. Per node, non-terminal pods are
listed with every check before the first eviction, then evicted in list order; a node limit moves
on to the next node, the total limit ends the run.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from desched.framework.registry import PluginSpec, Scope
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED, listing_scope
from desched.model.labels import matcher_unless_empty
from desched.model.meta import LabelSelector
from desched.model.node import Node, Taint
from desched.model.pod import Pod
from desched.policy_files.args import (
    Namespaces,
    namespace_allowed,
    namespace_scope,
    validate_label_selector,
    validate_namespaces,
)
from desched.predicates.taints import describe_taint, tolerates_taint

PLUGIN = "RemovePodsViolatingNodeTaints"


class RemovePodsViolatingNodeTaintsArgs(msgspec.Struct, rename="camel",
                                        forbid_unknown_fields=True):
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    include_prefer_no_schedule: bool = False
    excluded_taints: list[str] = []
    # None (absent or null) includes every taint; an explicit [] includes none.
    included_taints: list[str] | None = None


def validate(args: RemovePodsViolatingNodeTaintsArgs) -> list[str]:
    """Upstream returns the first problem only, in this order."""
    errs = validate_namespaces(args.namespaces) + validate_label_selector(args.label_selector)
    if args.excluded_taints and args.included_taints:
        errs.append("either includedTaints or excludedTaints can be set, but not both")
    return errs[:1]


def _listed(names: frozenset[str], taint: Taint) -> bool:
    """A taint is named by its key, or by `key=value` when its value is non-empty."""
    return taint.key in names or (bool(taint.value) and f"{taint.key}={taint.value}" in names)


def taint_filter(args: RemovePodsViolatingNodeTaintsArgs) -> Callable[[Taint], bool]:
    """Whether the plugin considers a node taint."""
    effects = frozenset({"NoSchedule", "PreferNoSchedule"} if args.include_prefer_no_schedule
                        else {"NoSchedule"})
    excluded = frozenset(args.excluded_taints)
    included = None if args.included_taints is None else frozenset(args.included_taints)

    def considered(taint: Taint) -> bool:
        if taint.effect not in effects:
            return False
        if excluded and _listed(excluded, taint):
            return False
        return included is None or _listed(included, taint)

    return considered


class RemovePodsViolatingNodeTaints:
    def __init__(self, args: RemovePodsViolatingNodeTaintsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.considered = taint_filter(args)
        self.labels = matcher_unless_empty(args.label_selector)

    def _candidates(self, node: Node, taints: list[Taint]) -> list[tuple[Pod, str]]:
        handle = self.handle
        out: list[tuple[Pod, str]] = []
        for pod in handle.snapshot.pods_on_node(node.name):
            if not namespace_allowed(self.args.namespaces, pod.namespace):
                continue
            if self.labels is not None and not self.labels(pod.metadata.labels):
                continue
            tolerations = pod.spec.tolerations
            untolerated = next((t for t in taints if not tolerates_taint(tolerations, t)), None)
            if untolerated is None:
                continue
            if not handle.filter(pod) or not handle.pre_eviction_filter(pod):
                continue
            out.append((pod, f"pod does not tolerate taint {describe_taint(untolerated)} on node "
                             f"{node.name}"))
        return out

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why this run passed the pod over (explain only): its labels, or the taints of its
        node that the plugin considers and the pod tolerates."""
        scope = listing_scope(pod, self.labels, terminal=False)
        if scope is not None:
            return scope
        node = self.handle.snapshot.nodes[pod.node_name]
        if not node.spec.taints:
            return f"node {node.name} has no taints"
        taints = [t for t in node.spec.taints if self.considered(t)]
        if not taints:
            ignored = ", ".join(describe_taint(t) for t in node.spec.taints)
            return (f"node {node.name} has no taint the plugin considers ({ignored}: excluded, "
                    f"not included, or of an effect it ignores)")
        if all(tolerates_taint(pod.spec.tolerations, t) for t in taints):
            return (f"pod tolerates every taint of node {node.name} the plugin considers: "
                    f"{', '.join(describe_taint(t) for t in taints)}")
        return RUN_ENDED

    def deschedule(self, nodes: list[Node]) -> None:
        for node in nodes:
            taints = [t for t in node.spec.taints if self.considered(t)]
            if not taints:
                continue  # every pod tolerates what the plugin does not consider
            if not self.handle.evict_node_pods(self._candidates(node, taints)):
                return


SPEC = PluginSpec(
    name=PLUGIN,
    extension_points=frozenset({"deschedule"}),
    args_type=RemovePodsViolatingNodeTaintsArgs,
    factory=RemovePodsViolatingNodeTaints,
    validate=validate,
    scope=lambda args: Scope(namespaces=namespace_scope("namespaces", args.namespaces)),
)

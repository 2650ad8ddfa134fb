"""RemovePodsViolatingNodeAffinity (deschedule): evicts pods whose node affinity the node they run
on no longer satisfies — required affinity (with nodeSelector) that stopped matching, or preferred
affinity that some other node now satisfies better.

`nodeAffinityType` entries are processed in list order, each over every node; a pod evicted for
one type is not looked at again by a later one. Per node the candidates are listed first (every
check, the DefaultEvictor's Filter and PreEvictionFilter included, runs before the first eviction
on that node), then evicted in list order. A violating pod is evicted only if it fits some node,
its own included (upstream PodFitsAnyNode); one that fits nowhere is recorded as skipped. A node
limit moves on to the next node, the total limit ends the run. An unknown type is not a validation
error; it is reported (once per plugin instance) and skipped, as upstream logs and skips it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec

from desched.framework.evictor import EvictionLimitError
from desched.framework.registry import PluginSpec, Scope
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED, listing_scope
from desched.model.labels import matcher_unless_empty
from desched.model.meta import LabelSelector, json_encoder
from desched.model.node import Node
from desched.model.pod import Pod
from desched.policy_files.args import (
    Namespaces,
    namespace_allowed,
    namespace_scope,
    validate_label_selector,
    validate_namespaces,
)
from desched.predicates.nodeaffinity import (
    NodeMatcher,
    preferred_weigher,
    required_affinity_matcher,
)
from desched.predicates.nodefit import pod_fits_any_node

PLUGIN = "RemovePodsViolatingNodeAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_TERMINAL = ("Succeeded", "Failed")  # Pod.terminal
# Recorded (and counted) for a violating pod that fits no node; the same text for every pod.
FITS_NO_NODE = ("pod violates its {kind} node affinity but does not fit any node (nodeSelector, "
                "affinity, taints, anti-affinity or resources)")

log = logging.getLogger(__name__)


class RemovePodsViolatingNodeAffinityArgs(msgspec.Struct, rename="camel",
                                          forbid_unknown_fields=True):
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    node_affinity_type: list[str] = []


def validate(args: RemovePodsViolatingNodeAffinityArgs) -> list[str]:
    """Upstream returns the first problem only, in this order."""
    if not args.node_affinity_type:
        return ["nodeAffinityType needs to be set"]
    errs = validate_namespaces(args.namespaces) or validate_label_selector(args.label_selector)
    return errs[:1]


# A pod-and-its-node check: the eviction reason when the pod violates, else None.
Violation = Callable[[Pod, Node], str | None]


def required_checker() -> Violation:
    """Required affinity present and the pod's nodeSelector + required affinity no longer match
    its node. Matchers are compiled once per distinct (nodeSelector, required affinity)."""
    matchers: dict[bytes, NodeMatcher] = {}
    # Owner UID -> the fields of the last of its pods and their matcher: a workload's pods
    # share them, and comparing is cheaper than encoding.
    by_owner: dict[str, tuple[tuple[object, object], NodeMatcher]] = {}
    # (matcher, node name) -> whether it matches: a node's pods share a few matchers.
    matches: dict[tuple[int, str], bool] = {}

    def check(pod: Pod, node: Node) -> str | None:
        affinity = pod.spec.affinity
        node_affinity = affinity.node_affinity if affinity is not None else None
        if (node_affinity is None
                or node_affinity.required_during_scheduling_ignored_during_execution is None):
            return None
        required = node_affinity.required_during_scheduling_ignored_during_execution
        selector = pod.spec.node_selector
        fields = (selector, required)
        refs = pod.metadata.owner_references
        owner = refs[0].uid if refs else ""
        last = by_owner.get(owner)
        if last is not None and last[0] == fields:
            matcher = last[1]
        else:
            signature = json_encoder.encode((tuple(selector.items()), required) if selector
                                            else required)
            compiled = matchers.get(signature)
            if compiled is None:
                compiled = matchers[signature] = required_affinity_matcher(pod)
            matcher = compiled
            by_owner[owner] = (fields, matcher)
        key = (id(matcher), node.metadata.name)  # `matchers` keeps every matcher alive
        matched = matches.get(key)
        if matched is None:
            matched = matches[key] = matcher(node)
        if matched:
            return None
        return (f"pod's nodeSelector/requiredDuringSchedulingIgnoredDuringExecution node "
                f"affinity no longer matches node {node.name}")

    return check


def preferred_checker(nodes: list[Node]) -> Violation:
    """Preferred terms present and the best weight over all the nodes (whether the pod fits them
    or not, as upstream) beats the weight of its own node. The best weight is computed once per
    distinct set of terms, and a scan stops at the highest reachable sum."""
    best_by_terms: dict[bytes, int] = {}

    def check(pod: Pod, node: Node) -> str | None:
        affinity = pod.spec.affinity
        node_affinity = affinity.node_affinity if affinity is not None else None
        if node_affinity is None:
            return None
        terms = node_affinity.preferred_during_scheduling_ignored_during_execution
        if not terms:
            return None
        weigh = preferred_weigher(pod)
        current = weigh(node)
        ceiling = sum(t.weight for t in terms if t.weight > 0)
        if current >= ceiling:
            return None  # no node can score more
        signature = json_encoder.encode(terms)
        best = best_by_terms.get(signature)
        if best is None:
            best = 0  # upstream starts from 0, whatever the nodes score
            for other in nodes:
                weight = weigh(other)
                if weight > best:
                    best = weight
                    if best >= ceiling:
                        break
            best_by_terms[signature] = best
        if best <= current:
            return None
        return (f"node {node.name} scores {current} for the pod's preferred node affinity, "
                f"another node scores {best}")

    return check


class RemovePodsViolatingNodeAffinity:
    def __init__(self, args: RemovePodsViolatingNodeAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.labels = matcher_unless_empty(args.label_selector)
        self._reported_unknown = False

    def _listed(self, nodes: list[Node]) -> dict[str, list[Pod]]:
        """Per node, the listed pods (non-terminal, namespaces, labelSelector) that have node
        affinity at all: the only pods either type can evict. Gathered once per run."""
        pods_by_node = self.handle.snapshot.pods_by_node
        namespaces, labels = self.args.namespaces, self.labels
        out: dict[str, list[Pod]] = {}
        for node in nodes:
            name = node.metadata.name
            # Fields read directly, not through Pod's properties: this sees every pod.
            for pod in (pods_by_node.get(name) or {}).values():
                affinity = pod.spec.affinity
                if affinity is None or affinity.node_affinity is None:
                    continue
                if pod.status.phase in _TERMINAL or (
                        namespaces is not None
                        and not namespace_allowed(namespaces, pod.metadata.namespace)):
                    continue
                if labels is not None and not labels(pod.metadata.labels):
                    continue
                listed = out.get(name)
                if listed is None:
                    listed = out[name] = []
                listed.append(pod)
        return out

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why this run passed the pod over (explain only): its labels, or, per configured
        type, the node affinity its node still satisfies."""
        scope = listing_scope(pod, self.labels, terminal=False)
        if scope is not None:
            return scope
        affinity = pod.spec.affinity
        node_affinity = affinity.node_affinity if affinity is not None else None
        if node_affinity is None:
            return "pod has no node affinity (a nodeSelector alone is not checked)"
        node = self.handle.snapshot.nodes[pod.node_name]
        found: list[str] = []
        for affinity_type in self.args.node_affinity_type:
            if affinity_type == REQUIRED:
                if required_checker()(pod, node) is not None:
                    return RUN_ENDED
                found.append(
                    "no required node affinity"
                    if node_affinity.required_during_scheduling_ignored_during_execution is None
                    else f"its required node affinity still matches node {node.name}")
            elif affinity_type == PREFERRED:
                if preferred_checker(nodes)(pod, node) is not None:
                    return RUN_ENDED
                if not node_affinity.preferred_during_scheduling_ignored_during_execution:
                    found.append("no preferred node affinity")
                    continue
                score = preferred_weigher(pod)(node)
                found.append(f"node {node.name} scores {score} for its preferred node affinity, "
                             f"no node scores more")
        return "; ".join(found) or None

    def deschedule(self, nodes: list[Node]) -> None:
        listed: dict[str, list[Pod]] | None = None
        evicted: set[str] = set()  # an evicted pod is not looked at again by a later type
        for affinity_type in self.args.node_affinity_type:
            if affinity_type == REQUIRED:
                violation, kind = required_checker(), "required"
            elif affinity_type == PREFERRED:
                violation, kind = preferred_checker(nodes), "preferred"
            else:
                if not self._reported_unknown:
                    log.error("Invalid nodeAffinityType %r (plugin %s, profile %s): ignored",
                              affinity_type, PLUGIN, self.handle.profile)
                    self._reported_unknown = True
                continue
            if listed is None:
                listed = self._listed(nodes)
            if not self._process(nodes, listed, evicted, violation,
                                 FITS_NO_NODE.format(kind=kind)):
                return

    def _candidates(self, node: Node, pods: list[Pod], nodes: list[Node], violation: Violation,
                    fits_nowhere: str) -> list[tuple[Pod, str]]:
        """The node's evictable violators, every check done before any eviction (upstream lists
        them with one filter). Cheap checks first; nodeFit over every node last."""
        handle = self.handle
        snapshot = handle.snapshot
        out: list[tuple[Pod, str]] = []
        for pod in pods:
            reason = violation(pod, node)
            if reason is None:
                continue
            if not handle.filter(pod) or not handle.pre_eviction_filter(pod):
                continue
            # The pod's own node counts (PodFitsAnyNode), as upstream.
            if not pod_fits_any_node(pod, nodes, snapshot):
                handle.skip(pod, fits_nowhere)
                continue
            out.append((pod, reason))
        return out

    def _process(self, nodes: list[Node], listed: dict[str, list[Pod]], evicted: set[str],
                 violation: Violation, fits_nowhere: str) -> bool:
        """One affinity type over every node; False when the total limit ended the run."""
        # The pods earlier types evicted. Those this one evicts were on nodes it is done with
        # (a node's candidates are all found before any of them is evicted): no later node
        # lists them.
        earlier = frozenset(evicted)
        for node in nodes:
            pods = listed.get(node.name)
            if not pods:
                continue
            if earlier:
                pods = [pod for pod in pods if pod.key not in earlier]
            for pod, reason in self._candidates(node, pods, nodes, violation, fits_nowhere):
                try:
                    if self.handle.evict(pod, reason):
                        evicted.add(pod.key)
                except EvictionLimitError as err:
                    if err.scope == "total":
                        return False
                    if err.scope == "node":
                        break
        return True


SPEC = PluginSpec(
    name=PLUGIN,
    extension_points=frozenset({"deschedule"}),
    args_type=RemovePodsViolatingNodeAffinityArgs,
    factory=RemovePodsViolatingNodeAffinity,
    validate=validate,
    scope=lambda args: Scope(namespaces=namespace_scope("namespaces", args.namespaces)),
)

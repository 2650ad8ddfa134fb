"""CustomPriority (balance): Koordinator v1.8.0's plugin that moves pods from expensive node
tiers to cheaper ones (docs/custompriority.md). `evictionOrder` lists the tiers from the most
expensive to the cheapest, each by a nodeSelector; a node belongs to the first tier that
selects it. For each tier that has nodes, in order, the pods on its nodes may go to the nodes of
every later tier:

- BestEffort evicts each pod that fits a cheaper node (with nodeFit; without it, every pod),
  the smallest requests first, giving up on a node after 5 pods in a row fit nowhere;
- DrainNode evicts a node's pods only when every one of them has a place on the cheaper nodes,
  and with autoCordon cordons the node first (and uncordons it if an eviction fails).

Where this differs from Koordinator (docs/custompriority.md lists every difference):
- room on a cheaper node is reserved for each pod sent to it in the run, in both modes and
  across tiers (Koordinator's BestEffort reserves none, so two pods may count on the same room);
- keepThreshold and rejectThreshold, which Koordinator decodes and never reads, are applied:
  a source node whose requests reach its tier's keepThreshold keeps its pods, and a cheaper
  node takes no pod that would take its requests above its tier's rejectThreshold;
- the plugin's dryRun cordons nothing, and an uncordon only undoes desched's own cordon;
- finished pods are not moved, and why a node kept its pods is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from desched.errors import InputError, quote
from desched.framework.evictor import LIMIT_ARGS, EvictionLimitError
from desched.framework.registry import NodeScope, PluginSpec, Scope
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED
from desched.model.labels import Matcher, compile_selector, format_selector
from desched.model.node import Node
from desched.model.pod import Pod
from desched.plugins.custompriority.args import (
    DRAIN_NODE,
    CustomPriorityArgs,
    Tier,
    build_tiers,
    check,
    default,
    warnings,
)
from desched.plugins.koord_pods import PodFilter
from desched.policy_files.args import namespace_scope
from desched.predicates.nodefit import (
    affinity_space,
    insufficient_resource,
    node_fit,
    placement_signature,
)

__all__ = ["CustomPriority", "CustomPriorityArgs"]

PLUGIN = "CustomPriority"
# Koordinator's BestEffort stops looking at a node's pods after this many in a row fit nowhere
# (they are sorted smallest first, so the rest would hardly fit).
MAX_CONSECUTIVE_MISSES = 5
_MAX_REASONS = 3


class _Stop(Exception):
    """The total eviction limit was reached: the plugin stops for this cycle."""


@dataclass(frozen=True)
class _Target:
    node: Node
    tier: Tier


@dataclass
class _Scan:
    """The first-fit search for pods of one placement signature over one list of cheaper nodes.
    A node that refuses such a pod keeps refusing it for the rest of the tier's run (the room
    on a cheaper node only shrinks, and NodeFit's answer does not change), so the search for the
    next such pod starts after the nodes known to refuse it; their first reasons are kept for
    the message. Without it, each pod tried the nodes filled before it again (quadratic)."""

    nodes: Sequence[Node]
    start: int = 0
    reasons: list[str] = field(default_factory=list)


# Per target node: the requests and the number of the pods this run sent there (new dicts on
# every change, so a copy of the map is a snapshot of it).
Sent = dict[str, tuple[Mapping[str, int], int]]


def _share(amount: int, capacity: int) -> float:
    return 100.0 * amount / capacity if capacity else 0.0


def request_order(pod: Pod) -> tuple[int, int, str, str]:
    """Koordinator's order for a node's pods: CPU requests, then memory, ascending, then
    namespace and name."""
    requests = pod.requests
    return (requests.get("cpu", 0), requests.get("memory", 0), pod.namespace, pod.name)


def _summary(failures: list[str], refused: int) -> str:
    more = f"; and {refused - len(failures)} more" if refused > len(failures) else ""
    return f"no cheaper node can take it: {'; '.join(failures)}{more}"


class CustomPriority:
    def __init__(self, args: CustomPriorityArgs, handle: Handle) -> None:
        problem = check(args)
        if problem:
            # Koordinator checks the args when it builds the plugin.
            raise InputError("", f'initializing plugin "{PLUGIN}": {problem}')
        self.args = args
        self.handle = handle
        self.tiers = build_tiers(args)
        self.node_matcher: Matcher | None = (
            compile_selector(args.node_selector) if args.node_selector is not None else None)
        self.pods = PodFilter(handle, args.evictable_namespaces,
                              [ps.selector for ps in args.pod_selectors or []])
        self.node_fit = args.node_fit is not False
        self.drain = args.mode == DRAIN_NODE
        self.dry_run = bool(args.dry_run)
        self.auto_cordon = bool(args.auto_cordon) and self.drain
        # This cycle's findings, for `explain`: each node's tier (index), what happened to a
        # source node, and why the whole run did nothing (when it did nothing).
        self.tier_of: dict[str, int] = {}
        self.outcomes: dict[str, str] = {}
        self.idle = ""
        self.cheapest = -1  # the index of the cheapest tier with nodes
        # The source tier being worked on: its cheaper nodes by name, NodeFit's answers on
        # them, and the pods sent to each (in the whole run).
        self.targets: dict[str, _Target] = {}
        self._fits: dict[tuple[bytes, str], str | None] = {}
        self._scans: dict[bytes, _Scan] = {}
        self.sent: Sent = {}

    # -- thresholds ---------------------------------------------------------------------------

    def kept_by_threshold(self, node: Node, tier: Tier) -> str | None:
        """Why a source node keeps its pods: its requests reach its tier's keepThreshold for
        some resource (percent of allocatable)."""
        if not tier.keep:
            return None
        allocatable = node.allocatable
        used = self.handle.snapshot.node_requested(node.name)
        for name, percent in tier.keep.items():
            capacity = allocatable.get(name, 0)
            share = _share(used.get(name, 0), capacity)
            if capacity and share >= percent:
                return (f"node {node.name} of tier {tier.name} keeps its pods: {name} requests "
                        f"{share:.2f}% >= keepThreshold {percent:g}%")
        return None

    def rejected(self, pod: Pod, target: _Target, sent: Mapping[str, int],
                 sent_pods: int) -> str | None:
        """Why the target's tier rejects the pod: its requests would go above the tier's
        rejectThreshold for some resource."""
        node, reject = target.node, target.tier.reject
        allocatable = node.allocatable
        used = self.handle.snapshot.node_requested(node.name)
        for name, percent in reject.items():
            capacity = allocatable.get(name, 0)
            added = sent_pods + 1 if name == "pods" else sent.get(name, 0) + \
                pod.requests.get(name, 0)
            share = _share(used.get(name, 0) + added, capacity)
            if capacity and share > percent:
                return (f"{name} requests would reach {share:.2f}% > rejectThreshold "
                        f"{percent:g}% of tier {target.tier.name}")
        return None

    # -- placing a pod on a cheaper node --------------------------------------------------------

    def fit(self, pod: Pod, node: Node) -> str | None:
        """NodeFit, memoized per placement class for the source tier being worked on."""
        key = (placement_signature(pod), node.name)
        if key in self._fits:
            return self._fits[key]
        why = self._fits[key] = node_fit(pod, node, self.handle.snapshot)
        return why

    def room(self, pod: Pod, target: _Target, sent: Sent) -> str | None:
        """Why the target has no room for the pod once the pods already sent there this run
        are counted (allocatable, then the tier's rejectThreshold)."""
        requests, pods = sent.get(target.node.name, ({}, 0))
        if pods or not self.node_fit:  # else NodeFit has just checked the bare node
            why = insufficient_resource(pod, target.node, self.handle.snapshot, sent=requests,
                                        sent_pods=pods)
            if why is not None:
                return f"{why} with the {pods} pod(s) already sent there" if pods else why
        if target.tier.reject:
            return self.rejected(pod, target, requests, pods)
        return None

    def place(self, pod: Pod, nodes: Sequence[Node], sent: Sent) -> tuple[_Target | None, str]:
        """The first cheaper node, in tier order, that NodeFit (when on) and the room allow.
        With NodeFit only the nodes the pod's node affinity may match are tried, and the nodes
        known to refuse pods like it (_Scan) are not tried again."""
        candidates = (affinity_space(pod, nodes, self.handle.snapshot) if self.node_fit
                      else nodes)
        key = placement_signature(pod)
        scan = self._scans.get(key)
        if scan is None or scan.nodes is not candidates:
            scan = self._scans[key] = _Scan(candidates)
        failures = list(scan.reasons)
        refused = scan.start
        committed = sent is self.sent
        settled = True  # every node tried so far refuses it whatever this drain's plan sends
        for i in range(scan.start, len(candidates)):
            node = candidates[i]
            target = self.targets[node.name]
            why = self.fit(pod, node) if self.node_fit else None
            if why is None:
                why = self.room(pod, target, sent)
                if why is None:
                    return target, ""
                if not committed and settled and self.room(pod, target, self.sent) is None:
                    settled = False  # refused only for what the plan sent there
            refused += 1
            shown = f"{node.name}: {why}"
            if len(failures) < _MAX_REASONS:
                failures.append(shown)
            if settled:
                scan.start = i + 1
                if len(scan.reasons) < _MAX_REASONS:
                    scan.reasons.append(shown)
        if not refused:
            return None, "no cheaper node matches its node selector and affinity"
        return None, _summary(failures, refused)

    def send(self, sent: Sent, pod: Pod, target: _Target) -> None:
        requests, pods = sent.get(target.node.name, ({}, 0))
        merged = dict(requests)
        for name, amount in pod.requests.items():
            merged[name] = merged.get(name, 0) + amount
        sent[target.node.name] = (merged, pods + 1)

    # -- the run --------------------------------------------------------------------------------

    def note(self, text: str, node: str = "") -> None:
        self.handle.note(text, node)

    def balance(self, nodes: list[Node]) -> None:
        self.tier_of.clear()
        self.outcomes.clear()
        self.sent = {}
        self.cheapest = -1
        self.idle = ""
        if self.args.paused:
            self.idle = "CustomPriority is paused and will do nothing"
            self.note(self.idle)
            return
        selected = nodes if self.node_matcher is None else [
            n for n in nodes if self.node_matcher(n.metadata.labels)]
        if not selected:
            self.idle = "No nodes selected for CustomPriority"
            self.note(self.idle)
            return
        members = self.group_by_tier(selected)
        for tier in self.tiers:
            if tier.matcher is None:
                self.note(f"evictionOrder tier {tier.name} selects no node: its nodeSelector "
                          f"does not compile ({tier.problem})")
        present = [i for i, found in enumerate(members) if found]
        if len(present) < 2:
            found = ", ".join(f"tier {self.tiers[i].name} ({len(members[i])})" for i in present)
            self.idle = (f"CustomPriority requires at least 2 priority levels with nodes; "
                         f"{'only ' + found + ' has' if found else 'no tier has'} nodes among "
                         f"the {len(selected)} selected")
            self.note(self.idle)
            return
        self.cheapest = present[-1]
        try:
            for at, i in enumerate(present[:-1]):
                later = present[at + 1:]
                targets = [_Target(node, self.tiers[j]) for j in later for node in members[j]]
                self._fits.clear()  # an earlier tier's run may have changed these nodes
                self._scans.clear()
                self.targets = {t.node.name: t for t in targets}
                self.run_tier(self.tiers[i], members[i], [t.node for t in targets])
        except _Stop:
            return

    def group_by_tier(self, nodes: list[Node]) -> list[list[Node]]:
        """The nodes of each tier, in evictionOrder: a node belongs to the first tier whose
        nodeSelector matches it (recorded in tier_of), to none when no tier's does."""
        members: list[list[Node]] = [[] for _ in self.tiers]
        for node in nodes:
            labels = node.metadata.labels
            for i, tier in enumerate(self.tiers):
                if tier.matcher is not None and tier.matcher(labels):
                    members[i].append(node)
                    self.tier_of[node.name] = i
                    break
        return members

    def run_tier(self, tier: Tier, sources: list[Node], nodes: list[Node]) -> None:
        for source in sources:
            kept = self.kept_by_threshold(source, tier)
            if kept is not None:
                self.outcomes[source.name] = kept
                self.note(kept, source.name)
                continue
            # The profile's preEvictionFilter keeps a pod as its Filter does: neither mode
            # evicts it, and a drain leaves it where it is.
            pre_eviction_filter = self.handle.pre_eviction_filter
            pods = [pod for pod in self.handle.snapshot.pods_on_node(source.name)
                    if self.pods.passes(pod) and pre_eviction_filter(pod)]
            if not pods:
                continue
            pods.sort(key=request_order)
            if self.drain:
                self.drain_node(tier, source, pods, nodes)
            else:
                self.best_effort(tier, source, pods, nodes)

    def _evict(self, pod: Pod, reason: str) -> bool:
        """Evict (or, with the plugin's dryRun, record that it would); EvictionLimitError as
        the profile's evictor raises it."""
        if self.dry_run:
            self.handle.skip(pod, f"dryRun: would be evicted: {reason}")
            return True
        return self.handle.evict(pod, reason)

    def best_effort(self, tier: Tier, source: Node, pods: list[Pod],
                    nodes: list[Node]) -> None:
        handle = self.handle
        base = f"evicting from {tier.name} priority resource to lower priority resource"
        misses = 0
        for n, pod in enumerate(pods):
            target: _Target | None = None
            if self.node_fit:
                target, why = self.place(pod, nodes, self.sent)
                if target is None:
                    handle.skip(pod, why)
                    misses += 1
                    if misses >= MAX_CONSECUTIVE_MISSES:
                        for rest in pods[n + 1:]:
                            handle.considered(rest, f"not tried: the {misses} pods before it on "
                                                    f"node {source.name} fit no cheaper node")
                        return
                    continue
                misses = 0
            reason = base if target is None else f"{base}; fits now on {target.node.name}"
            try:
                if not self._evict(pod, reason):
                    continue
            except EvictionLimitError as err:
                if err.scope == "total":
                    raise _Stop from None
                if err.scope == "node":
                    return
                continue
            if target is not None:
                self.send(self.sent, pod, target)

    def drain_node(self, tier: Tier, source: Node, pods: list[Pod],
                   nodes: list[Node]) -> None:
        """Every pod placed on paper first (the room each takes counted for the next); the node
        is drained only when all of them have a place."""
        handle = self.handle
        sent = dict(self.sent)
        planned: list[tuple[Pod, _Target]] = []
        for pod in pods:
            target, why = self.place(pod, nodes, sent)
            if target is None:
                handle.skip(pod, why)
                text = (f"node {source.name} of tier {tier.name} is not drained: not all of its "
                        f"{len(pods)} pod(s) can be placed; first: {pod.key}: {why}")
                self.outcomes[source.name] = text
                self.note(text, source.name)
                return
            self.send(sent, pod, target)
            planned.append((pod, target))
        limit = handle.limit_for_all([pod for pod, _ in planned])
        if limit is not None:
            text = (f"node {source.name} of tier {tier.name} is not drained: evicting its "
                    f"{len(planned)} pod(s) would pass {LIMIT_ARGS[limit]}")
            self.outcomes[source.name] = text
            self.note(text, source.name)
            return
        cordoned = False
        if self.auto_cordon and not source.spec.unschedulable:
            why = f"autoCordon: draining its {len(pods)} pod(s) to cheaper tiers"
            if self.dry_run:
                self.note(f"dryRun: would cordon node {source.name} ({why})", source.name)
            else:
                cordoned = handle.set_unschedulable(source.name, True, why)
        base = f"drain node {source.name} (sourcePriority={tier.name})"
        moved = 0
        for pod, target in planned:
            failure = ""
            try:
                if self._evict(pod, f"{base}; fits now on {target.node.name}"):
                    moved += 1
                    self.send(self.sent, pod, target)
                    continue
                failure = f"eviction of {pod.key} failed"
            except EvictionLimitError as err:
                failure = f"eviction of {pod.key} refused: {err}"
                if err.scope == "total":
                    self.stop_drain(source, tier, cordoned, moved, failure)
                    raise _Stop from None
            self.stop_drain(source, tier, cordoned, moved, failure)
            return
        self.outcomes[source.name] = (f"node {source.name} of tier {tier.name} "
                                      f"{'would be ' if self.dry_run else ''}drained "
                                      f"({moved} pod(s))")

    def stop_drain(self, source: Node, tier: Tier, cordoned: bool, moved: int,
                   failure: str) -> None:
        """An eviction failed mid-drain: the node's drain stops there, and a cordon desched
        made is undone (Koordinator uncordons even a node that was cordoned before)."""
        text = (f"node {source.name} of tier {tier.name}: the drain stopped after {moved} "
                f"eviction(s): {failure}")
        self.outcomes[source.name] = text
        self.note(text, source.name)
        if cordoned:
            self.handle.set_unschedulable(source.name, False, f"autoCordon: {failure}")

    # -- PingPongGuard ------------------------------------------------------------------------

    def over_thresholds_after(self, node: str, pod: Pod) -> str | None:
        """Why a replacement of `pod` on `node` would undo this run's move (PingPongGuard asks,
        with the node its scheduler model picks): the node is in a tier no cheaper than the
        pod's, or its tier's rejectThreshold would be crossed. None for a node in no tier."""
        source, landing = self.tier_of.get(pod.node_name), self.tier_of.get(node)
        if source is None or landing is None:
            return None
        if landing <= source:
            return (f"CustomPriority has it in tier {self.tiers[landing].name}, not cheaper than "
                    f"tier {self.tiers[source].name}")
        tier, found = self.tiers[landing], self.handle.snapshot.nodes.get(node)
        if not tier.reject or found is None:
            return None
        requests, pods = self.sent.get(node, ({}, 0))
        why = self.rejected(pod, _Target(found, tier), requests, pods)
        return f"CustomPriority's {why}" if why is not None else None

    # -- explain ----------------------------------------------------------------------------

    def node_role(self, node: str) -> str | None:
        """The node's tier in the last run and what became of it."""
        if self.idle:
            return self.idle
        i = self.tier_of.get(node)
        if i is None:
            return "in no evictionOrder tier"
        tier = self.tiers[i].name
        cheaper = [t.name for j, t in enumerate(self.tiers) if j > i
                   and any(k == j for k in self.tier_of.values())]
        role = (f"tier {tier}: a source for the cheaper tier(s) {', '.join(cheaper)}" if cheaper
                else f"tier {tier}, the cheapest with nodes: a target, never a source")
        outcome = self.outcomes.get(node)
        return f"{role}; {outcome}" if outcome else role

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why the last run left the pod alone, when it recorded nothing about the pod."""
        if self.idle:
            return self.idle
        node = pod.node_name
        i = self.tier_of.get(node)
        if i is None:
            if self.node_matcher is not None and node in self.handle.snapshot.nodes and \
                    not self.node_matcher(self.handle.snapshot.nodes[node].metadata.labels):
                return f"node {node} is outside the plugin's nodeSelector"
            return f"node {node} is in no evictionOrder tier"
        if i == self.cheapest:
            return (f"node {node} is in tier {self.tiers[i].name}, the cheapest with nodes: "
                    f"its pods have nowhere cheaper to go")
        outcome = self.outcomes.get(node)
        return outcome if outcome is not None else RUN_ENDED


def scope(args: CustomPriorityArgs) -> Scope:
    """evictableNamespaces, the plugin's nodeSelector and each tier's."""
    nodes = []
    if check(args) is not None:
        return Scope()  # the plugin refuses these args when it is built
    if args.node_selector is not None:
        nodes.append(NodeScope("nodeSelector", format_selector(args.node_selector),
                               compile_selector(args.node_selector)))
    for tier in build_tiers(args):
        if tier.matcher is not None:  # one that does not compile is warned of (warnings)
            nodes.append(NodeScope(f"evictionOrder {quote(tier.name)} nodeSelector",
                                   tier.selector_text, tier.matcher,
                                   unmatched="the tier has no node"))
    return Scope(namespaces=namespace_scope("evictableNamespaces", args.evictable_namespaces),
                 nodes=tuple(nodes))


SPEC = PluginSpec(
    name=PLUGIN,
    extension_points=frozenset({"balance"}),
    args_type=CustomPriorityArgs,
    factory=CustomPriority,
    default=default,
    warnings=warnings,
    args_kind="CustomPriorityArgs",
    scope=scope,
)

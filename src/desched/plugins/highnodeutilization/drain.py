"""HighNodeUtilization's `drainWhenAllUnderutilized` (desched's own). When every node is
underutilized upstream does nothing, on purpose (kubernetes-sigs/descheduler#725: nothing says
which nodes should take the pods). With the opt-in the emptiest nodes are drained, as many as the
other nodes can take every pod of, so that a scheduler scoring MostAllocated packs the pods onto
the fullest nodes and the emptied ones can be removed.

The plan is made before any eviction:
- candidates, emptiest first: cordoned nodes (they take no pods), then by the mean share of the
  threshold resources as the run measured them (requests, or usage with metricsUtilization);
- a candidate is drained only when it can be emptied: every pod on it but DaemonSet, mirror and
  terminating pods may be evicted (namespace, the evictor's filters) and fits another node
  (NodeFit, by requests as the scheduler decides, counting the pods planned there before it);
  otherwise it is kept, and a note names the pod that stays or fits nowhere;
- destinations are tried fullest first (MostAllocated's order); a node planned to take pods is
  no longer a candidate, and at most one pod of a workload with required pod anti-affinity is
  planned per destination (the plan does not see planned pods' anti-affinity otherwise).

No pod is compared with every node: pods are grouped by placement signature (NodeFit's verdict
depends on nothing else) and each group keeps a cursor over the destinations. Room only shrinks
during the plan, so a destination that refused a group's pod refuses the group's later pods too:
the search costs groups × nodes. A candidate that cannot be emptied gives its planned room back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from desched.framework.evictor import EvictionLimitError
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED
from desched.model.pod import Pod
from desched.plugins.nodeutilization_common import NodeInfo, describe_under
from desched.plugins.ordering import sort_by_priority_low_to_high
from desched.predicates.nodefit import node_fit, placement_signature
from desched.predicates.podaffinity import anti_affinity_terms

ARG = "drainWhenAllUnderutilized"
_MAX_REASONS = 3
_BASIC = frozenset({"cpu", "memory", "pods"})


def stays(pod: Pod) -> bool:
    """A pod that does not keep its node from being empty (cluster-autoscaler's view too):
    DaemonSet and mirror pods, and pods already terminating."""
    return pod.is_daemonset or pod.is_mirror or pod.terminating


def fill(info: NodeInfo) -> float:
    """How full the run found the node: the mean share of its threshold resources."""
    if not info.low:
        return 0.0
    return sum(info.percentages.get(name, 0.0) for name in info.low) / len(info.low)


@dataclass
class _Destination:
    info: NodeInfo
    drained: bool = False  # drained, or the candidate being planned: takes no pods
    planned: dict[str, int] = field(default_factory=dict)  # requests planned here, pods too

    @property
    def name(self) -> str:
        return self.info.name


@dataclass
class DrainFindings:
    """What the drain found per node, for notes, `explain --node` and the pods' verdicts."""

    drained: dict[str, list[str]] = field(default_factory=dict)  # node -> the nodes it fits on
    kept: dict[str, str] = field(default_factory=dict)  # candidate -> why it is not drained
    targets: set[str] = field(default_factory=set)
    placed: dict[str, str] = field(default_factory=dict)  # pod key -> the node it fits on
    after: dict[str, str] = field(default_factory=dict)  # drained node -> empty after or not
    descriptions: dict[str, str] = field(default_factory=dict)  # node -> its figures

    def role(self, node: str) -> str | None:
        figures = self.descriptions.get(node)
        if figures is None:
            return None
        if node in self.drained:
            return f"underutilized ({figures}), drained ({ARG}): {self.after.get(node, '')}"
        if node in self.kept:
            return f"underutilized ({figures}), not drained: {self.kept[node]}"
        return f"underutilized ({figures}), a target: kept to take the drained nodes' pods"

    def verdict(self, pod: Pod) -> str:
        node = pod.node_name
        if node in self.drained:
            return RUN_ENDED
        if node in self.kept:
            return f"node {node} is not drained ({ARG}): {self.kept[node]}"
        return (f"node {node} is kept to take the drained nodes' pods (every node is "
                f"underutilized; {ARG} drains the emptiest)")


class Drain:
    """One run of the opt-in over `infos` (every node, all underutilized)."""

    def __init__(self, handle: Handle, infos: Sequence[NodeInfo],
                 removable: Callable[[Pod], bool], excluded: frozenset[str],
                 source_note: str) -> None:
        self.handle = handle
        self.infos = list(infos)
        self.removable = removable
        self.excluded = excluded
        self.source_note = source_note
        self.findings = DrainFindings(descriptions={i.name: describe_under(i) for i in infos})
        order = {info.name: i for i, info in enumerate(infos)}
        self.dests = [_Destination(info) for info in sorted(
            (i for i in infos if not i.node.spec.unschedulable),
            key=lambda i: (-fill(i), order[i.name]))]
        self._by_name = {d.name: d for d in self.dests}
        self._cursors: dict[bytes, int] = {}
        self._refused: dict[bytes, list[str]] = {}  # signature -> the first refusals met
        self._fits: dict[tuple[bytes, str], str | None] = {}  # NodeFit per signature and node

    def run(self) -> None:
        findings = self.findings
        plans: list[tuple[NodeInfo, list[tuple[Pod, str]]]] = []
        for info in sorted(self.infos, key=lambda i: (not i.node.spec.unschedulable, fill(i))):
            if info.name in findings.targets:
                continue
            plan = self._plan(info)
            if isinstance(plan, str):
                findings.kept[info.name] = plan
                self.handle.note(f"node {info.name} is not drained: {plan}", info.name)
                continue
            findings.drained[info.name] = list(dict.fromkeys(target for _, target in plan))
            own = self._by_name.get(info.name)
            if own is not None:
                own.drained = True
            findings.targets.update(findings.drained[info.name])
            findings.placed.update((pod.key, target) for pod, target in plan)
            plans.append((info, plan))
        if not plans:
            self.handle.note(f"every node is underutilized and no node can be emptied onto the "
                             f"others ({ARG}; the nodes' notes say why)")
            return
        self._evict(plans)
        self._report(plans)

    # -- planning ---------------------------------------------------------------------------------

    def _plan(self, info: NodeInfo) -> list[tuple[Pod, str]] | str:
        """Where each pod of the node that must go fits, or why the node cannot be emptied."""
        movable = [p for p in info.pods if not stays(p)
                   and self.handle.snapshot.pods.get(p.key) is p]
        if not movable:
            return []  # already empty but for pods that do not count
        for pod in movable:
            why = self._blocked(pod)
            if why is not None:
                return f"pod {pod.key} stays: {why}"
        own = self._by_name.get(info.name)
        if own is not None:
            own.drained = True  # not a destination of its own pods
        saved = dict(self._cursors)
        plan: list[tuple[Pod, str]] = []
        for pod in sort_by_priority_low_to_high(movable):
            placed_on = self._place(pod)
            if not isinstance(placed_on, _Destination):
                for placed, name in plan:  # give the room back
                    self._reserve(self._by_name[name], placed, -1)
                self._cursors = saved
                if own is not None:
                    own.drained = False
                return f"pod {pod.key} fits on no other node: {placed_on}"
            plan.append((pod, placed_on.name))
        return plan

    def _blocked(self, pod: Pod) -> str | None:
        """Why the pod may not be evicted (the filters record their own reasons)."""
        if pod.namespace in self.excluded:
            return f"namespace {pod.namespace} is excluded by evictableNamespaces"
        if not self.removable(pod):
            return "the evictor's filters keep it (see the pod's reason)"
        if not self.handle.pre_eviction_filter(pod):
            return "the evictor's preEvictionFilter keeps it (see the pod's reason)"
        return None

    def _place(self, pod: Pod) -> _Destination | str:
        """The destination the pod is planned on (its room reserved), or why none takes it."""
        sig = placement_signature(pod)
        dests = self.dests
        i = self._cursors.get(sig, 0)
        while i < len(dests):
            dest = dests[i]
            if dest.drained:
                i += 1
                continue
            why = self._refusal(pod, sig, dest)
            if why is None:
                self._reserve(dest, pod, +1)
                # A workload avoiding itself would not go twice onto one node: the plan does
                # not see planned pods' anti-affinity otherwise.
                self._cursors[sig] = i + 1 if anti_affinity_terms(pod) else i
                return dest
            refused = self._refused.setdefault(sig, [])
            if len(refused) < _MAX_REASONS:
                refused.append(f"{dest.name}: {why}")
            i += 1
        self._cursors[sig] = i
        refused = self._refused.get(sig, [])
        return "; ".join(refused) if refused else "no schedulable node is left to take it"

    def _refusal(self, pod: Pod, sig: bytes, dest: _Destination) -> str | None:
        """NodeFit on the destination as it is (kept per signature), then its room with the
        pods planned there."""
        key = (sig, dest.name)
        if key not in self._fits:
            self._fits[key] = node_fit(pod, dest.info.node, self.handle.snapshot)
        why = self._fits[key]
        if why is not None or not dest.planned:
            return why
        node = dest.info.node
        allocatable = node.allocatable
        used = self.handle.snapshot.node_requested(node.name)
        planned = dest.planned
        with_planned = f"with the {planned.get('pods', 0)} pod(s) planned there"
        for name, request in pod.requests.items():
            total = allocatable.get(name, 0) if name in _BASIC or name in allocatable else 0
            if request > total - used.get(name, 0) - planned.get(name, 0):
                return f"insufficient {name} {with_planned}"
        if allocatable.get("pods", 0) - used.get("pods", 0) - planned.get("pods", 0) <= 0:
            return f"insufficient pods {with_planned}"
        return None

    @staticmethod
    def _reserve(dest: _Destination, pod: Pod, sign: int) -> None:
        planned = dest.planned
        for name, request in pod.requests.items():
            planned[name] = planned.get(name, 0) + sign * request
        planned["pods"] = planned.get("pods", 0) + sign
        if not planned["pods"]:
            planned.clear()

    # -- evicting and reporting -------------------------------------------------------------------

    def _evict(self, plans: list[tuple[NodeInfo, list[tuple[Pod, str]]]]) -> None:
        handle = self.handle
        evictor, plugin = handle.evictor, handle.plugin
        snapshot = handle.snapshot
        for info, plan in plans:
            targets = name_list_of(self.findings.drained[info.name])
            reason = (f"every node is underutilized and node {info.name} is among the emptiest "
                      f"({describe_under(info)}{self.source_note}); evicting to empty it ({ARG}), "
                      f"its pods fit on {targets}")
            for pod, _ in plan:
                if snapshot.pods.get(pod.key) is not pod:
                    continue
                try:
                    if not evictor.evict(pod, plugin, reason):
                        break  # refused (a budget, say): the node stays, so its others stay too
                except EvictionLimitError as err:
                    if err.scope == "total":
                        return
                    if err.scope == "node":
                        break

    def _report(self, plans: list[tuple[NodeInfo, list[tuple[Pod, str]]]]) -> None:
        findings = self.findings
        snapshot = self.handle.snapshot
        empty, not_empty = [], []
        for info, plan in plans:
            left = [p for p in snapshot.pods_on_node(info.name) if not stays(p)]
            if left:
                shown = ", ".join(p.key for p in left[:3]) + (
                    f" and {len(left) - 3} more" if len(left) > 3 else "")
                text = f"not empty after this run: {len(left)} pod(s) stay ({shown})"
                not_empty.append(info.name)
            elif plan:
                text = (f"empty after this run: its {len(plan)} pod(s) fit on "
                        f"{name_list_of(findings.drained[info.name])}")
                empty.append(info.name)
            else:
                text = "empty already (DaemonSet and mirror pods aside)"
                empty.append(info.name)
            findings.after[info.name] = text
            self.handle.note(f"node {info.name} would be {text}", info.name)
        summary = f"nodes empty after this run: {', '.join(empty) or 'none'}"
        if not_empty:
            summary += f"; drained but not empty: {', '.join(not_empty)}"
        self.handle.note(f"every node is underutilized; {ARG} drains the emptiest whose pods fit "
                         f"on the others: {summary}")


def name_list_of(names: Sequence[str], most: int = 3) -> str:
    shown = list(names[:most])
    if len(names) > most:
        shown.append(f"{len(names) - most} more")
    return ", ".join(shown) or "no other node"


"""`kube-default`: kube-scheduler's default profile, as far as a snapshot can tell.

Filters: NodeUnschedulable, NodeAffinity (nodeSelector + required terms), TaintToleration
(NoSchedule/NoExecute), NodeResourcesFit, InterPodAffinity (the pod's required affinity and
anti-affinity, and running pods' required anti-affinity against it), PodTopologySpread
(DoNotSchedule constraints). Scores, each 0-100 and weighted as the default profile weighs them:
TaintToleration 3 (fewer untolerated PreferNoSchedule taints), NodeAffinity 2 (preferred terms),
PodTopologySpread 2 (ScheduleAnyway constraints: fewer matching pods in the domain),
InterPodAffinity 2 (preferred terms), NodeResourcesFit 1 (LeastAllocated over cpu and memory),
NodeResourcesBalancedAllocation 1. Left out: ImageLocality, volume plugins, minDomains, and
kube-scheduler's random choice among equal scores (ties go to the node name).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime

import msgspec

from desched.model.node import Node
from desched.model.pod import Pod, PodAffinityTerm, WeightedPodAffinityTerm
from desched.predicates.domains import (
    blocked_by_existing_anti_affinity,
    domain_counts,
    domains_of,
    term_domains,
)
from desched.predicates.nodeaffinity import preferred_weigher
from desched.predicates.nodefit import (
    affinity_space,
    fit_prepared,
    node_fit,
    prepare_fit,
)
from desched.predicates.taints import tolerates_taint
from desched.scheduler.model import KUBE_DEFAULT, Placement, best
from desched.scheduler.ranking import Class, Entry, Rankings
from desched.scheduler.profile import DEFAULT_CONFIG, SchedulerConfig
from desched.snapshot.cluster import ClusterSnapshot

_encoder = msgspec.json.Encoder(enc_hook=str)

WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "PodTopologySpread": 2,
           "InterPodAffinity": 2, "NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1}
_RESOURCES = ("cpu", "memory")


def requested_without(pod: Pod, node: Node, snapshot: ClusterSnapshot) -> dict[str, int]:
    """The node's requested resources, less the pod's own when it runs there (it is leaving)."""
    used = dict(snapshot.node_requested(node.name))
    if pod.node_name == node.name:
        for name, amount in pod.requests.items():
            used[name] = used.get(name, 0) - amount
    return used


def _fractions(pod: Pod, node: Node, snapshot: ClusterSnapshot) -> dict[str, float]:
    used = (snapshot.node_requested(node.metadata.name) if pod.spec.node_name != node.metadata.name
            else requested_without(pod, node, snapshot))
    allocatable, requests = node.allocatable, pod.requests
    out: dict[str, float] = {}
    for name in _RESOURCES:
        capacity = allocatable.get(name, 0)
        after = used.get(name, 0) + requests.get(name, 0)
        out[name] = min(1.0, after / capacity) if capacity > 0 else 1.0
    return out


def least_allocated(fractions: dict[str, float]) -> float:
    return sum((1.0 - f) * 100.0 for f in fractions.values()) / len(fractions)


def balanced_allocation(fractions: dict[str, float]) -> float:
    """(1 - standard deviation of the requested fractions) * 100; for two resources the
    deviation is half their difference."""
    values = list(fractions.values())
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return (1.0 - std) * 100.0


def _normalize(raw: dict[str, float], reverse: bool = False) -> dict[str, float]:
    """Min-max to 0-100 (reverse: lower raw is better); all equal scores 100 (nothing to
    prefer)."""
    if not raw:
        return {}
    low, high = min(raw.values()), max(raw.values())
    if high == low:
        return dict.fromkeys(raw, 100.0)
    span = high - low
    return {n: ((high - v) if reverse else (v - low)) * 100.0 / span for n, v in raw.items()}


def simple_key(pod: Pod) -> bytes:
    """What a simple pod's filters and scores depend on besides the node: nodeSelector, node
    affinity, tolerations and requests (not its namespace, name or owner: pods of different
    workloads with these equal share one Ranking)."""
    spec = pod.spec
    return _encoder.encode((spec.node_selector, spec.affinity, spec.tolerations, pod.requests))


def simple(pod: Pod) -> bool:
    """No score or filter of the pod depends on pods of other nodes (no topology spread, no pod
    (anti-)affinity of its own): each node's verdict and score change only with its own pods."""
    affinity = pod.spec.affinity
    return not pod.spec.topology_spread_constraints and (
        affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None))


def _untolerated(pod: Pod, node: Node) -> float:
    return float(sum(1 for t in node.spec.taints if t.effect == "PreferNoSchedule"
                     and not tolerates_taint(pod.spec.tolerations, t)))


# For a pod a Ranking serves: the weights of the node-static scores, and the scores that are 100
# on every node (it has no topology spread or pod affinity terms).
_STATIC = (float(WEIGHTS["TaintToleration"]), float(WEIGHTS["NodeAffinity"]),
           (WEIGHTS["PodTopologySpread"] + WEIGHTS["InterPodAffinity"]) * 100.0)


class KubeDefault:
    name = KUBE_DEFAULT

    def __init__(self, config: SchedulerConfig = DEFAULT_CONFIG) -> None:
        self.config = config
        self._rankings = Rankings()

    def place(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
              now: datetime) -> Placement:
        if simple(pod) and snapshot.finished:
            placed = self._place_ranked(pod, nodes, snapshot)
            if placed is not None:
                return placed
        return self._place(pod, nodes, snapshot)

    def _place_ranked(self, pod: Pod, nodes: Sequence[Node],
                      snapshot: ClusterSnapshot) -> Placement | None:
        found = self._rankings.best(simple_key(pod), pod, nodes, snapshot,
                                    lambda p: self.entry(p, snapshot), weighted=_STATIC)
        if found is None:
            return None  # the exact path says why nothing fits
        chosen, score, count = found
        return Placement(chosen, f"score {score:.1f} of {count} feasible node(s)")

    @staticmethod
    def entry(pod: Pod, snapshot: ClusterSnapshot) -> Entry:
        """A node's ranking entry for `pod`: None when it does not fit, else its class (the
        node-static parts of the score) and its resource score."""
        prepared, weigh = prepare_fit(pod), preferred_weigher(pod)

        def of(node: Node) -> tuple[Class, float] | None:
            if fit_prepared(pod, node, snapshot, prepared) is not None:
                return None
            fractions = _fractions(pod, node, snapshot)
            return ((_untolerated(pod, node), float(weigh(node))),
                    least_allocated(fractions) + balanced_allocation(fractions))
        return of

    def _place(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot) -> Placement:
        feasible, why = self.feasible(pod, nodes, snapshot)
        if not feasible:
            return Placement(None, why)
        scores = self.scores(pod, feasible, snapshot)
        chosen = best(scores)
        return Placement(chosen, f"score {scores[chosen]:.1f} of {len(feasible)} feasible "
                                 f"node(s)")

    # -- filters -------------------------------------------------------------------------------

    def feasible(self, pod: Pod, nodes: Sequence[Node],
                 snapshot: ClusterSnapshot) -> tuple[list[Node], str]:
        candidates = affinity_space(pod, nodes, snapshot)
        reasons: Counter[str] = Counter()
        fits: list[Node] = []
        for node in candidates:
            problem = node_fit(pod, node, snapshot)
            if problem is None:
                fits.append(node)
            else:
                reasons[problem] += 1
        checks: list[tuple[str, Callable[[list[Node]], set[str]]]] = [
            ("running pods' anti-affinity",
             lambda ns: blocked_by_existing_anti_affinity(snapshot, pod, ns, pod)),
            ("pod affinity", lambda ns: self._affinity_misses(pod, ns, nodes, snapshot)),
            ("topology spread", lambda ns: self._spread_misses(pod, ns, nodes, snapshot)),
        ]
        for label, check in checks:
            if not fits:
                break
            out = check(fits)
            if out:
                reasons[label] += sum(1 for n in fits if n.name in out)
                fits = [n for n in fits if n.name not in out]
        if fits:
            return fits, ""
        if not reasons:
            return [], "no node matches the pod's node selector and affinity"
        shown = ", ".join(f"{count} {reason}" for reason, count in reasons.most_common())
        return [], f"0/{len(candidates)} nodes are available: {shown}"

    @staticmethod
    def _affinity_misses(pod: Pod, fits: list[Node], nodes: Sequence[Node],
                         snapshot: ClusterSnapshot) -> set[str]:
        affinity = pod.spec.affinity
        if affinity is None or affinity.pod_affinity is None:
            return set()
        misses: set[str] = set()
        for term in affinity.pod_affinity.required_during_scheduling_ignored_during_execution:
            node_domain, counts = term_domains(snapshot, term, pod, nodes, pod)
            if not counts and _self_matches(pod, term):
                continue  # the first pod of a group that selects itself may go anywhere
            misses.update(n.name for n in fits if counts.get(node_domain.get(n.name, ""), 0) == 0
                          or n.name not in node_domain)
        return misses

    @staticmethod
    def _spread_misses(pod: Pod, fits: list[Node], nodes: Sequence[Node],
                       snapshot: ClusterSnapshot) -> set[str]:
        misses: set[str] = set()
        for c in pod.spec.topology_spread_constraints:
            if c.when_unsatisfiable == "ScheduleAnyway":
                continue
            node_domain = domains_of(nodes, c.topology_key)
            counts = domain_counts(snapshot, frozenset((pod.namespace,)), c.label_selector,
                                   c.topology_key, node_domain, pod)
            eligible = set(node_domain.values())
            lowest = min((counts.get(d, 0) for d in eligible), default=0)
            for n in fits:
                domain = node_domain.get(n.name)
                if domain is None or counts.get(domain, 0) + 1 - lowest > c.max_skew:
                    misses.add(n.name)
        return misses

    # -- scores --------------------------------------------------------------------------------

    def scores(self, pod: Pod, nodes: list[Node], snapshot: ClusterSnapshot) -> dict[str, float]:
        parts: dict[str, dict[str, float]] = {}
        fractions = {n.name: _fractions(pod, n, snapshot) for n in nodes}
        parts["NodeResourcesFit"] = {n: least_allocated(f) for n, f in fractions.items()}
        parts["NodeResourcesBalancedAllocation"] = {
            n: balanced_allocation(f) for n, f in fractions.items()}
        untolerated = {n.name: float(sum(
            1 for t in n.spec.taints
            if t.effect == "PreferNoSchedule" and not tolerates_taint(pod.spec.tolerations, t)))
            for n in nodes}
        parts["TaintToleration"] = _normalize(untolerated, reverse=True)
        weigh = preferred_weigher(pod)
        parts["NodeAffinity"] = _normalize({n.name: float(weigh(n)) for n in nodes})
        parts["PodTopologySpread"] = self._spread_scores(pod, nodes, snapshot)
        parts["InterPodAffinity"] = self._affinity_scores(pod, nodes, snapshot)
        return {n.name: sum(WEIGHTS[p] * parts[p].get(n.name, 0.0) for p in parts)
                for n in nodes}

    @staticmethod
    def _spread_scores(pod: Pod, nodes: list[Node],
                       snapshot: ClusterSnapshot) -> dict[str, float]:
        soft = [c for c in pod.spec.topology_spread_constraints
                if c.when_unsatisfiable == "ScheduleAnyway"]
        if not soft:
            return dict.fromkeys((n.name for n in nodes), 100.0)
        raw = dict.fromkeys((n.name for n in nodes), 0.0)
        for c in soft:
            node_domain = domains_of(nodes, c.topology_key)
            counts = domain_counts(snapshot, frozenset((pod.namespace,)), c.label_selector,
                                   c.topology_key, node_domain, pod)
            for name in raw:
                raw[name] += counts.get(node_domain.get(name, ""), 0)
        return _normalize(raw, reverse=True)

    @staticmethod
    def _affinity_scores(pod: Pod, nodes: list[Node],
                         snapshot: ClusterSnapshot) -> dict[str, float]:
        affinity = pod.spec.affinity
        weighted: list[tuple[WeightedPodAffinityTerm, int]] = []
        if affinity is not None and affinity.pod_affinity is not None:
            weighted += [(t, 1) for t in
                         affinity.pod_affinity.preferred_during_scheduling_ignored_during_execution]
        if affinity is not None and affinity.pod_anti_affinity is not None:
            weighted += [(t, -1) for t in affinity.pod_anti_affinity
                         .preferred_during_scheduling_ignored_during_execution]
        if not weighted:
            return dict.fromkeys((n.name for n in nodes), 100.0)
        raw = dict.fromkeys((n.name for n in nodes), 0.0)
        for term, sign in weighted:
            node_domain, counts = term_domains(snapshot, term.pod_affinity_term, pod, nodes, pod)
            for name in raw:
                matched = counts.get(node_domain.get(name, ""), 0)
                raw[name] += sign * term.weight * matched
        return _normalize(raw)


def _self_matches(pod: Pod, term: PodAffinityTerm) -> bool:
    from desched.predicates.podaffinity import pod_matches_term

    try:
        return pod_matches_term(pod, term, pod)
    except ValueError:
        return False

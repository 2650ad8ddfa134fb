"""RemovePodsViolatingInterPodAntiAffinity's `includeSoftConstraints` (desched's own; the name is
upstream's proposal, kubernetes-sigs/descheduler#1863, the follow-up of #1385, and the arg
RemovePodsViolatingTopologySpreadConstraint has): pods whose *preferred* inter-pod anti-affinity
is violated are moved once a better node exists.

Upstream acts on required terms only: a preferred term is the scheduler's wish, and a pod placed
against it (too few nodes at the time) may find no better node later, or come straight back. So
after upstream's pass over required terms, a listed pod one of whose preferred terms selects
another listed pod in its topology domain is evicted only when a scheduler model (kube-default,
the profile of `schedulerConfig`) places its replacement where that is no longer so. It is kept,
with the reason, when the model puts the replacement
- back on its own node (or on one of two equally scored nodes, its own among them),
- on a node where one of the violated terms still selects a pod: one running there, or the
  replacement of a pod this run evicted, expected there (the model does not see those),
- or nowhere.
The model is asked only about pods that violate a preferred term and pass the evictor's filters,
once per workload, node and state of the cluster; the domains are looked up through the indexes
of the required pass (no pod is compared with every node).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from desched.framework.evictor import EvictionLimitError
from desched.framework.types import Handle
from desched.model.node import Node
from desched.model.pod import Pod
from desched.plugins.ordering import sort_by_priority_low_to_high
from desched.plugins.removepodsviolatinginterpodantiaffinity.index import (
    AntiAffinityIndex,
    Term,
)
from desched.predicates.podaffinity import preferred_anti_affinity_terms
from desched.scheduler.model import SchedulerModel, lands_back

ARG = "includeSoftConstraints"


def has_preferred(pod: Pod) -> bool:
    return bool(preferred_anti_affinity_terms(pod))


def _where(pod: Pod, partner: Pod, term: Term) -> str:
    key = term.compiled.topology_key
    return "on the same node" if partner.node_name == pod.node_name else \
        f"in the same {key} domain (node {partner.node_name})"


def _violation(pod: Pod, partner: Pod, term: Term) -> str:
    return (f"pod's preferred anti-affinity (weight {term.weight}, topologyKey "
            f"{term.compiled.topology_key}) selects pod {partner.key} "
            f"{_where(pod, partner, term)}")


class SoftPass:
    """One run's pass over the preferred terms, after the required pass: `index` holds the
    listed pods (evicted ones removed), `everywhere` is built on first use over every ready
    node and pod, as the scheduler sees them."""

    def __init__(self, handle: Handle, model: SchedulerModel, index: AntiAffinityIndex,
                 pods_of_all: Callable[[str], Iterable[Pod]]) -> None:
        self.handle = handle
        self.model = model
        self.index = index
        self._pods_of_all = pods_of_all
        self._everywhere: AntiAffinityIndex | None = None
        # The replacements of the pods this run evicted, and the node the model expects each on.
        self.expected: list[tuple[Pod, str]] = []
        self._verdicts: dict[tuple[object, ...], tuple[str | None, str]] = {}

    def everywhere(self) -> AntiAffinityIndex:
        if self._everywhere is None:
            self._everywhere = AntiAffinityIndex(self.handle.snapshot.ready_nodes(),
                                                 self._pods_of_all)
        return self._everywhere

    def violated(self, pod: Pod) -> list[tuple[Term, Pod]]:
        """Each preferred term of the pod that selects another listed pod in its domain, with
        the first such pod."""
        index = self.index
        node = index.nodes.get(pod.spec.node_name)
        if node is None:
            return []
        found = []
        for term in index.terms(pod, soft=True):
            partner = index.selected_near(term, node, pod.key)
            if partner is not None:
                found.append((term, partner))
        return found

    def run(self, candidates: Iterator[tuple[Node, list[Pod]]]) -> None:
        handle = self.handle
        current = handle.snapshot.pods
        for _, pods in candidates:
            for pod in sort_by_priority_low_to_high(pods):
                if current.get(pod.key) is not pod:
                    continue  # evicted for its required terms
                violated = self.violated(pod)
                if not violated:
                    continue
                if not handle.filter(pod) or not handle.pre_eviction_filter(pod):
                    continue
                term, partner = violated[0]
                kept, target = self._judge(pod, violated)
                violation = _violation(pod, partner, term)
                if kept is not None:
                    handle.skip(pod, f"{violation}, but {kept} ({ARG})")
                    continue
                reason = (f"{violation}; its replacement would land on {target} "
                          f"({self.model.name}), where no pod it selects runs ({ARG})")
                try:
                    if handle.evict(pod, reason):
                        self.index.remove(pod)
                        self.everywhere().remove(pod)
                        self.expected.append((pod, target))
                except EvictionLimitError as err:
                    if err.scope == "total":
                        return
                    if err.scope == "node":
                        break

    def _judge(self, pod: Pod, violated: list[tuple[Term, Pod]]) -> tuple[str | None, str]:
        """(why the pod is kept, or None; the node the model places its replacement on)."""
        snapshot = self.handle.snapshot
        controller = pod.controller
        key = (controller.uid if controller is not None else pod.key, pod.node_name,
               tuple(t.compiled.topology_key for t, _ in violated), snapshot.additions,
               len(snapshot.pods), len(self.expected))
        known = self._verdicts.get(key)
        if known is None:
            known = self._verdicts[key] = self._ask(pod, violated)
        return known

    def _ask(self, pod: Pod, violated: list[tuple[Term, Pod]]) -> tuple[str | None, str]:
        handle = self.handle
        snapshot = handle.snapshot
        model = self.model
        placement = model.place(pod, snapshot.ready_nodes(), snapshot, handle.now)
        target = placement.node
        if target is None:
            return f"no node would take its replacement ({model.name}: {placement.why})", ""
        back = lands_back(pod, placement, model.name)
        if back is not None:
            return f"its {back}", target
        everywhere = self.everywhere()
        # kube-scheduler picks at random among equal scores: any tied node free of the violation
        # will do (the model's own pick, by name, may be where a replacement is already due).
        first: str | None = None
        for name in dict.fromkeys((target, *placement.tied)):
            why = self._still_violated(pod, violated, snapshot.nodes[name], everywhere)
            if why is None:
                return None, name
            first = first or f"its replacement would land on {name} ({model.name}), where {why}"
        return first, target

    def _still_violated(self, pod: Pod, violated: list[tuple[Term, Pod]], node: Node,
                        everywhere: AntiAffinityIndex) -> str | None:
        """Why a violated term would still be violated with the replacement on `node`."""
        for term, _ in violated:
            other = everywhere.selected_near(term, node, pod.key)
            if other is not None:
                return f"it still selects pod {other.key}"
            expected = self._expected_near(term, node, everywhere)
            if expected is not None:
                return (f"the replacement of pod {expected.key}, evicted this run, is "
                        f"expected")
        return None

    def _expected_near(self, term: Term, node: Node, index: AntiAffinityIndex) -> Pod | None:
        """A pod evicted this run, selected by the term, whose replacement is expected in
        `node`'s domain of the term's topology key."""
        selector = term.compiled.selector
        if selector is None:
            return None
        key = term.compiled.topology_key
        value = node.metadata.labels.get(key)
        for evicted, where in self.expected:
            there = index.nodes.get(where)
            if there is None or evicted.namespace not in term.compiled.namespaces:
                continue
            same = where == node.name if value is None else \
                there.metadata.labels.get(key) == value
            if same and selector(evicted.metadata.labels):
                return evicted
        return None


def soft_verdict(pod: Pod, index: AntiAffinityIndex) -> str:
    """Why the run passed over a pod without required anti-affinity (explain only): it has no
    preferred anti-affinity either, or none of its preferred terms selects a pod in its domain
    once the run ended (a violating pod the run kept says why itself)."""
    terms = index.terms(pod, soft=True)
    if not terms:
        return ("pod has no required or preferred pod anti-affinity (a pod that another pod's "
                "term selects is not evicted for it)")
    keys = ", ".join(dict.fromkeys(term.compiled.topology_key for term in terms))
    after = " once the pods this run evicted are gone" if index.removed else ""
    return (f"no other pod in its topology domain ({keys}) matches its preferred pod "
            f"anti-affinity{after}")

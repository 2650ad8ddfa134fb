"""Required inter-pod anti-affinity, as the descheduler evaluates it (one direction only).

Only the candidate pod's own required terms are checked; the existing pods' anti-affinity toward
it, pod affinity and namespaceSelector are ignored, as upstream does.
"""

from __future__ import annotations

from typing import NamedTuple

from desched.model.labels import Matcher, SelectorError, compile_selector
from desched.model.node import Node
from desched.model.pod import Pod, PodAffinityTerm, WeightedPodAffinityTerm
from desched.snapshot.cluster import ClusterSnapshot


def anti_affinity_terms(pod: Pod) -> tuple[PodAffinityTerm, ...]:
    """The pod's requiredDuringSchedulingIgnoredDuringExecution anti-affinity terms."""
    affinity = pod.spec.affinity
    if affinity is None or affinity.pod_anti_affinity is None:
        return ()
    return affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution


def _preferred_anti_affinity(pod: Pod) -> tuple[WeightedPodAffinityTerm, ...]:
    affinity = pod.spec.affinity
    if affinity is None or affinity.pod_anti_affinity is None:
        return ()
    return affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution


def preferred_anti_affinity_terms(pod: Pod) -> tuple[PodAffinityTerm, ...]:
    """The terms of the pod's preferredDuringSchedulingIgnoredDuringExecution anti-affinity."""
    return tuple(t.pod_affinity_term for t in _preferred_anti_affinity(pod))


def preferred_anti_affinity_weights(pod: Pod) -> tuple[int, ...]:
    """The weights of the pod's preferred anti-affinity terms, in their order."""
    return tuple(t.weight for t in _preferred_anti_affinity(pod))


def term_namespaces(term: PodAffinityTerm, pod: Pod) -> frozenset[str]:
    """term.namespaces, or the pod's own namespace when empty (namespaceSelector is ignored)."""
    return frozenset(term.namespaces) if term.namespaces else frozenset((pod.namespace,))


def _matches(other: Pod, namespaces: frozenset[str], selector: Matcher) -> bool:
    return other.namespace in namespaces and selector(other.metadata.labels)


def _same_pod(a: Pod, b: Pod) -> bool:
    # Upstream compares names only; namespace+name keeps a namesake in another namespace counted.
    return a.metadata.name == b.metadata.name and a.namespace == b.namespace


class AntiAffinityTerm(NamedTuple):
    """A required anti-affinity term prepared for repeated checks. `selector` is None when the
    term's selector is invalid; `error` then says why."""

    selector: Matcher | None
    error: SelectorError | None
    namespaces: frozenset[str]
    topology_key: str


def compile_anti_affinity(pod: Pod, terms: tuple[PodAffinityTerm, ...] | None = None
                          ) -> tuple[AntiAffinityTerm, ...]:
    """The pod's required anti-affinity terms (or `terms` of it), compiled once for checks
    against many nodes."""
    compiled = []
    for term in anti_affinity_terms(pod) if terms is None else terms:
        try:
            selector: Matcher | None = compile_selector(term.label_selector)
            error = None
        except SelectorError as err:
            selector, error = None, err
        compiled.append(AntiAffinityTerm(selector, error, term_namespaces(term, pod),
                                         term.topology_key))
    return tuple(compiled)


def anti_affinity_conflict(pod: Pod, terms: tuple[AntiAffinityTerm, ...], node: Node,
                           snapshot: ClusterSnapshot) -> bool:
    """`violates_anti_affinity_on_node` with the terms compiled by `compile_anti_affinity`."""
    if not terms:
        return False
    on_node = snapshot.pods_by_node.get(node.metadata.name) or {}
    labels = node.metadata.labels
    for term in terms:
        # Upstream converts each term's selector before looking at the node: an invalid one
        # fails the check even on an empty node.
        if term.selector is None:
            raise term.error or SelectorError("invalid label selector")
        if term.topology_key not in labels:
            continue
        selector, namespaces = term.selector, term.namespaces
        for other in on_node.values():
            if (not other.terminal and not _same_pod(other, pod)
                    and _matches(other, namespaces, selector)):
                return True
    return False


def violates_anti_affinity_on_node(pod: Pod, node: Node, snapshot: ClusterSnapshot) -> bool:
    """NodeFit's anti-affinity step: some required anti-affinity term of `pod` selects a
    non-terminal pod already on `node` (other than `pod` itself), and the node carries the term's
    topologyKey. Only the node itself is looked at, not its topology domain.

    An invalid term selector raises labels.SelectorError (upstream NodeFit fails with it).
    """
    return anti_affinity_conflict(pod, compile_anti_affinity(pod), node, snapshot)

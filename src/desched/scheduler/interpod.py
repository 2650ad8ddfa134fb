"""InterPodAffinity as kube-scheduler runs it for one incoming pod: the score (the pod's preferred
terms, and running pods' preferred terms and required affinity toward it) and the filter (the
pod's own required terms, running pods' required anti-affinity toward it). Running pods' terms
are read from their index (scheduler/affinity_index.py), the pods the pod's own terms select
from the snapshot's label index: a placement does not walk the cluster's pods.

A term selects pods by label selector in its namespaces: those it lists, or those its
namespaceSelector matches (an empty one: every namespace), or, with neither, its owner's.
`gone` is the pod being placed again when it has already been deleted: it counts nowhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence

from desched.model.labels import lenient_matcher
from desched.model.node import Node
from desched.model.pod import Pod, PodAffinityTerm
from desched.scheduler.affinity_index import affinity_index
from desched.scheduler.profile import Profile
from desched.snapshot.cluster import ClusterSnapshot


def _preferred(pod: Pod) -> tuple[list[tuple[PodAffinityTerm, int]], bool]:
    """The pod's preferred affinity (+weight) and anti-affinity (-weight) terms, and whether it
    has any."""
    a = pod.spec.affinity
    out: list[tuple[PodAffinityTerm, int]] = []
    if a is not None and a.pod_affinity is not None:
        out += [(t.pod_affinity_term, t.weight)
                for t in a.pod_affinity.preferred_during_scheduling_ignored_during_execution]
    if a is not None and a.pod_anti_affinity is not None:
        out += [(t.pod_affinity_term, -t.weight)
                for t in a.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution]
    return out, bool(out)


def _required_affinity(pod: Pod) -> tuple[PodAffinityTerm, ...]:
    a = pod.spec.affinity
    if a is None or a.pod_affinity is None:
        return ()
    return a.pod_affinity.required_during_scheduling_ignored_during_execution


def required_anti_affinity(pod: Pod) -> tuple[PodAffinityTerm, ...]:
    a = pod.spec.affinity
    if a is None or a.pod_anti_affinity is None:
        return ()
    return a.pod_anti_affinity.required_during_scheduling_ignored_during_execution


def _namespaces(term: PodAffinityTerm, owner: Pod, snapshot: ClusterSnapshot
                ) -> Callable[[str], bool]:
    """Whether a namespace is one the term selects pods in."""
    listed = frozenset(term.namespaces)
    if term.namespace_selector is None:
        if not listed:
            own = owner.namespace
            return lambda namespace: namespace == own
        return listed.__contains__
    match = lenient_matcher(term.namespace_selector)
    return lambda namespace: namespace in listed or (
        match is not None and match(snapshot.namespace_labels(namespace)))


def term_selects(term: PodAffinityTerm, owner: Pod, other: Pod,
                 snapshot: ClusterSnapshot) -> bool:
    """Whether `other` is selected by `owner`'s term (its namespaces and label selector)."""
    if not _namespaces(term, owner, snapshot)(other.namespace):
        return False
    match = lenient_matcher(term.label_selector)
    return match is not None and match(other.metadata.labels)


def _is(pod: Pod, gone: Pod | None) -> bool:
    return gone is not None and pod.key == gone.key


def _in_namespaces(term: PodAffinityTerm, owner: Pod, snapshot: ClusterSnapshot) -> list[str]:
    """The namespaces holding pods that the term may select."""
    if term.namespace_selector is None:
        return list(dict.fromkeys(term.namespaces or (owner.namespace,)))
    selects = _namespaces(term, owner, snapshot)
    return [namespace for namespace in snapshot.pods_by_namespace if selects(namespace)]


def _selected(term: PodAffinityTerm, owner: Pod, snapshot: ClusterSnapshot,
              gone: Pod | None) -> Iterator[Pod]:
    """Bound, not terminal pods `owner`'s term selects, `gone` left out (a terminating pod
    counts), found through the snapshot's label index."""
    match = lenient_matcher(term.label_selector)
    if match is None or term.label_selector is None:
        return
    for namespace in _in_namespaces(term, owner, snapshot):
        for _, other in snapshot.candidates(namespace, term.label_selector):
            if (other.spec.node_name and not other.terminal and not _is(other, gone)
                    and match(other.metadata.labels)):
                yield other


def affinity_raw(pod: Pod, snapshot: ClusterSnapshot, profile: Profile,
                 gone: Pod | None = None) -> dict[str, dict[str, int]] | None:
    """InterPodAffinity's PreScore over every node of the snapshot: topology key -> domain
    value -> score, or None when it skips. Running pods count through the pod's preferred
    terms, and through their own preferred terms and (hardPodAffinityWeight) required affinity
    terms that select the pod (the index's counts per domain: scheduler/affinity_index.py)."""
    own, has_own = _preferred(pod)
    if profile.ignore_preferred_terms_of_existing_pods and not has_own:
        return None
    hard = profile.hard_pod_affinity_weight
    topology: dict[str, dict[str, int]] = {}

    def add(key: str, value: str, weight: int) -> None:
        domain = topology.setdefault(key, {})
        domain[value] = domain.get(value, 0) + weight

    nodes = snapshot.nodes
    for term, weight in own:
        key = term.topology_key
        for other in _selected(term, pod, snapshot, gone):
            node = nodes.get(other.spec.node_name)
            value = node.metadata.labels.get(key) if node is not None else None
            if value is not None:
                add(key, value, weight)
    index = affinity_index(snapshot)
    gone_held = index.held_by(gone)
    for shape in index.selecting(pod):
        if shape.kind == "anti" or (shape.kind == "required" and hard <= 0):
            continue
        weight = hard if shape.kind == "required" else shape.weight
        for value, count in index.domains(shape, gone_held):
            add(shape.topology_key, value, weight * count)
    return topology or None


def affinity_score(topology: Mapping[str, Mapping[str, int]], node: Node) -> int:
    labels = node.metadata.labels
    return sum(values.get(labels[key], 0) for key, values in topology.items() if key in labels)


def affinity_misses(pod: Pod, fits: Sequence[Node], snapshot: ClusterSnapshot,
                    gone: Pod | None = None) -> set[str]:
    """The nodes InterPodAffinity's filter refuses for the pod's own required terms, counting
    pods over every node of the snapshot.

    Affinity: a node must have every term's topology key, and in each term's domain a pod
    matching all the terms; when no pod anywhere matches them all and the pod matches its own
    terms (the first of a group), any node with the keys passes. Anti-affinity: no pod the term
    selects in the node's domain (a node without the key passes)."""
    misses: set[str] = set()
    affinity = _required_affinity(pod)
    if affinity:
        counts: Counter[tuple[str, str]] = Counter()
        nodes = snapshot.nodes
        for other in _selected(affinity[0], pod, snapshot, gone):
            if not all(term_selects(t, pod, other, snapshot) for t in affinity[1:]):
                continue
            node = nodes.get(other.spec.node_name)
            if node is None:
                continue
            for t in affinity:
                value = node.metadata.labels.get(t.topology_key)
                if value is not None:
                    counts[(t.topology_key, value)] += 1
        first = not counts and all(term_selects(t, pod, pod, snapshot) for t in affinity)
        for n in fits:
            labels = n.metadata.labels
            keyless = any(t.topology_key not in labels for t in affinity)
            if keyless or (not first and any(
                    counts[(t.topology_key, labels[t.topology_key])] <= 0 for t in affinity)):
                misses.add(n.metadata.name)
    anti = required_anti_affinity(pod)
    if anti:
        index = affinity_index(snapshot)
        for term in anti:
            node_domain, _ = index.node_domains(term.topology_key)
            taken = {node_domain.get(other.spec.node_name)
                     for other in _selected(term, pod, snapshot, gone)}
            taken.discard(None)
            misses.update(n.metadata.name for n in fits
                          if node_domain.get(n.metadata.name) in taken)
    return misses


def blocked_by_running_anti_affinity(snapshot: ClusterSnapshot, pod: Pod,
                                     gone: Pod | None = None) -> set[str]:
    """Nodes in the domain of a running pod whose required anti-affinity selects `pod` (the
    symmetric half of InterPodAffinity's filter), over every node of the snapshot."""
    blocked: set[str] = set()
    index = affinity_index(snapshot)
    gone_held = index.held_by(gone)
    for shape in index.selecting(pod):
        if shape.kind != "anti":
            continue
        members = index.node_domains(shape.topology_key)[1]
        for value, _ in index.domains(shape, gone_held):
            blocked.update(members.get(value, ()))
    return blocked


def running_terms_select(pod: Pod, snapshot: ClusterSnapshot, profile: Profile,
                         gone: Pod | None = None) -> bool:
    """Whether some running pod's term would score `pod` (InterPodAffinity would not skip)."""
    index = affinity_index(snapshot)
    gone_held = index.held_by(gone)
    hard = profile.hard_pod_affinity_weight
    return any(index.held(shape, gone_held) for shape in index.selecting(pod)
               if shape.kind == "preferred" or (shape.kind == "required" and hard > 0))

"""InterPodAffinity as kube-scheduler runs it for one incoming pod: the score (the pod's preferred
terms, and running pods' preferred terms and required affinity toward it), the filter of the
pod's own required terms, and running pods' scoring terms grouped by shape."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import msgspec

from desched.model.node import Node
from desched.model.pod import Pod, PodAffinityTerm
from desched.predicates.domains import domains_of
from desched.predicates.podaffinity import term_namespaces
from desched.scheduler.profile import Profile
from desched.scheduler.spread import lenient_matcher as _selector
from desched.snapshot.cluster import ClusterSnapshot

_encoder = msgspec.json.Encoder(enc_hook=str)


def _has_pod_affinity(pod: Pod) -> bool:
    a = pod.spec.affinity
    return a is not None and (a.pod_affinity is not None or a.pod_anti_affinity is not None)


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


def _term_matches(term: PodAffinityTerm, owner: Pod, other: Pod) -> bool:
    """Whether `other` is selected by `owner`'s term (its namespaces and label selector)."""
    if other.namespace not in term_namespaces(term, owner):
        return False
    match = _selector(term.label_selector)
    return match is not None and match(other.metadata.labels)


def pods_with_pod_affinity(snapshot: ClusterSnapshot) -> list[Pod]:
    """Running pods with any pod (anti-)affinity term, found once per snapshot state."""
    key = (id(snapshot), snapshot.additions, len(snapshot.pods))
    cached = snapshot.caches.get("pod-affinity-pods")
    if cached is not None and cached[0] == key:
        found: list[Pod] = cached[1]
        return found
    found = [p for p in snapshot.pods.values()
             if p.spec.node_name and not p.terminal and _has_pod_affinity(p)]
    snapshot.caches["pod-affinity-pods"] = (key, found)
    return found


def affinity_raw(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot, profile: Profile
                 ) -> dict[str, dict[str, int]] | None:
    """InterPodAffinity's PreScore: topology key -> domain value -> score, or None when it
    skips. Running pods count through the pod's preferred terms, and through their own
    preferred terms and (hardPodAffinityWeight) required affinity terms that select the pod."""
    own, has_own = _preferred(pod)
    if profile.ignore_preferred_terms_of_existing_pods and not has_own:
        return None
    by_name = {n.metadata.name: n for n in nodes}
    hard = profile.hard_pod_affinity_weight
    topology: dict[str, dict[str, int]] = {}

    def add(term: PodAffinityTerm, weight: int, node: Node) -> None:
        value = node.metadata.labels.get(term.topology_key)
        if value is not None:
            domain = topology.setdefault(term.topology_key, {})
            domain[value] = domain.get(value, 0) + weight

    if has_own:
        for other in snapshot.pods.values():
            node = by_name.get(other.spec.node_name) if other.spec.node_name else None
            if node is None or other.terminal or other.key == pod.key:
                continue
            for term, weight in own:
                if _term_matches(term, pod, other):
                    add(term, weight, node)
    for other in pods_with_pod_affinity(snapshot):
        node = by_name.get(other.spec.node_name)
        if node is None or other.key == pod.key or not node.metadata.labels:
            continue
        if hard > 0:
            for term in _required_affinity(other):
                if _term_matches(term, other, pod):
                    add(term, hard, node)
        for term, weight in _preferred(other)[0]:
            if _term_matches(term, other, pod):
                add(term, weight, node)
    return topology or None


def affinity_score(topology: Mapping[str, Mapping[str, int]], node: Node) -> int:
    labels = node.metadata.labels
    return sum(values.get(labels[key], 0) for key, values in topology.items() if key in labels)


def affinity_misses(pod: Pod, fits: Sequence[Node], nodes: Sequence[Node],
                    snapshot: ClusterSnapshot) -> set[str]:
    """The nodes InterPodAffinity's filter refuses for the pod's own required terms: affinity
    needs a matching pod in the node's domain (unless no pod anywhere matches and the pod
    matches its own term), anti-affinity needs none."""
    a = pod.spec.affinity
    misses: set[str] = set()
    if a is None:
        return misses
    for term in _required_affinity(pod):
        node_domain, counts = _term_counts(pod, term, nodes, snapshot)
        if not counts and _term_matches(term, pod, pod):
            continue  # the first pod of a group that selects itself may go anywhere
        misses.update(n.metadata.name for n in fits
                      if counts.get(node_domain.get(n.metadata.name, "\0"), 0) == 0)
    anti = (a.pod_anti_affinity.required_during_scheduling_ignored_during_execution
            if a.pod_anti_affinity is not None else ())
    for term in anti:
        node_domain, counts = _term_counts(pod, term, nodes, snapshot)
        misses.update(n.metadata.name for n in fits
                      if n.metadata.name in node_domain
                      and counts.get(node_domain[n.metadata.name], 0) > 0)
    return misses


def _term_counts(pod: Pod, term: PodAffinityTerm, nodes: Sequence[Node],
                 snapshot: ClusterSnapshot) -> tuple[dict[str, str], Counter[str]]:
    node_domain = domains_of(nodes, term.topology_key)
    counts: Counter[str] = Counter()
    match = _selector(term.label_selector)
    if match is None:
        return node_domain, counts
    for namespace in term_namespaces(term, pod):
        for other in snapshot.pods_by_namespace.get(namespace, {}).values():
            if other.key == pod.key or other.terminal or not other.spec.node_name:
                continue
            domain = node_domain.get(other.spec.node_name)
            if domain is not None and match(other.metadata.labels):
                counts[domain] += 1
    return node_domain, counts



# -- running pods' terms, grouped --------------------------------------------------------------

# (kind, namespaces, label selector) -> a term of that shape and the running pods holding it.
TermGroups = dict[bytes, tuple[str, PodAffinityTerm, Pod, list[Pod]]]


def _terms_of(pod: Pod) -> list[tuple[str, PodAffinityTerm]]:
    """The pod's terms that can score another pod: preferred (anti-)affinity, required
    affinity (hardPodAffinityWeight)."""
    out = [("preferred", term) for term, _ in _preferred(pod)[0]]
    out += [("required", term) for term in _required_affinity(pod)]
    return out


def _group(groups: TermGroups, pod: Pod) -> None:
    for kind, term in _terms_of(pod):
        key = _encoder.encode((kind, sorted(term_namespaces(term, pod)), term.label_selector))
        group = groups.get(key)
        if group is None:
            groups[key] = (kind, term, pod, [pod])
        else:
            group[3].append(pod)


def term_groups(snapshot: ClusterSnapshot) -> TermGroups:
    """Running pods' scoring terms grouped by shape: built once, then caught up with the pods
    added since; a holder that left is skipped when read."""
    cached = snapshot.caches.get("affinity-term-groups")
    added = snapshot.added_since_finish
    if cached is None or (not snapshot.finished and cached[0] != snapshot.additions):
        groups: TermGroups = {}
        for p in snapshot.pods.values():
            if p.spec.node_name and _has_pod_affinity(p):
                _group(groups, p)
        cached = snapshot.caches["affinity-term-groups"] = [snapshot.additions, groups,
                                                            len(added)]
    elif cached[2] < len(added):
        for p in added[cached[2]:]:
            if p.spec.node_name and _has_pod_affinity(p):
                _group(cached[1], p)
        cached[2] = len(added)
    found: TermGroups = cached[1]
    return found


def running_terms_select(pod: Pod, snapshot: ClusterSnapshot, profile: Profile) -> bool:
    """Whether some running pod's term would score `pod` (InterPodAffinity would not skip)."""
    current = snapshot.pods
    for kind, term, owner, holders in term_groups(snapshot).values():
        if kind == "required" and profile.hard_pod_affinity_weight <= 0:
            continue
        if not _term_matches(term, owner, pod):
            continue
        if any(current.get(h.key) is h and h.key != pod.key and not h.terminal
               for h in holders):
            return True
    return False

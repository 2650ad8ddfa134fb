"""InterPodAffinity as kube-scheduler runs it for one incoming pod: the score (the pod's preferred
terms, and running pods' preferred terms and required affinity toward it), the filter of the
pod's own required terms, and running pods' scoring terms grouped by shape.

A term selects pods by label selector in its namespaces: those it lists, or those its
namespaceSelector matches (an empty one: every namespace), or, with neither, its owner's.
`gone` is the pod being placed again when it has already been deleted: it counts nowhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import msgspec

from desched.model.labels import lenient_matcher
from desched.model.node import Node
from desched.model.pod import Pod, PodAffinityTerm
from desched.predicates.domains import domains_of, with_required_anti_affinity
from desched.scheduler.profile import Profile
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


def _required_anti_affinity(pod: Pod) -> tuple[PodAffinityTerm, ...]:
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


def _term_matches(term: PodAffinityTerm, owner: Pod, other: Pod,
                  snapshot: ClusterSnapshot) -> bool:
    """Whether `other` is selected by `owner`'s term (its namespaces and label selector)."""
    if not _namespaces(term, owner, snapshot)(other.namespace):
        return False
    match = lenient_matcher(term.label_selector)
    return match is not None and match(other.metadata.labels)


def _is(pod: Pod, gone: Pod | None) -> bool:
    return gone is not None and pod.key == gone.key


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


def affinity_raw(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot, profile: Profile,
                 gone: Pod | None = None) -> dict[str, dict[str, int]] | None:
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
            if node is None or other.terminal or _is(other, gone) or not node.metadata.labels:
                continue
            for term, weight in own:
                if _term_matches(term, pod, other, snapshot):
                    add(term, weight, node)
    for other in pods_with_pod_affinity(snapshot):
        node = by_name.get(other.spec.node_name)
        if node is None or _is(other, gone) or not node.metadata.labels:
            continue
        if hard > 0:
            for term in _required_affinity(other):
                if _term_matches(term, other, pod, snapshot):
                    add(term, hard, node)
        for term, weight in _preferred(other)[0]:
            if _term_matches(term, other, pod, snapshot):
                add(term, weight, node)
    return topology or None


def affinity_score(topology: Mapping[str, Mapping[str, int]], node: Node) -> int:
    labels = node.metadata.labels
    return sum(values.get(labels[key], 0) for key, values in topology.items() if key in labels)


def _running(snapshot: ClusterSnapshot, pod: Pod, terms: Sequence[PodAffinityTerm],
             gone: Pod | None) -> list[Pod]:
    """Bound, not terminal pods in the namespaces of any of the terms (the candidates to match
    them), `gone` left out (a terminating pod counts)."""
    if not terms:
        return []
    selectors = [_namespaces(t, pod, snapshot) for t in terms]
    if all(t.namespace_selector is None for t in terms):
        spaces: set[str] = set()
        for t in terms:
            spaces.update(t.namespaces or (pod.namespace,))
    else:
        spaces = set(snapshot.pods_by_namespace)
    out = []
    for namespace in spaces:
        if not any(s(namespace) for s in selectors):
            continue
        for other in snapshot.pods_by_namespace.get(namespace, {}).values():
            if other.spec.node_name and not other.terminal and not _is(other, gone):
                out.append(other)
    return out


def affinity_misses(pod: Pod, fits: Sequence[Node], nodes: Sequence[Node],
                    snapshot: ClusterSnapshot, gone: Pod | None = None) -> set[str]:
    """The nodes InterPodAffinity's filter refuses for the pod's own required terms.

    Affinity: a node must have every term's topology key, and in each term's domain a pod
    matching all the terms; when no pod anywhere matches them all and the pod matches its own
    terms (the first of a group), any node with the keys passes. Anti-affinity: no pod the term
    selects in the node's domain (a node without the key passes)."""
    misses: set[str] = set()
    affinity = _required_affinity(pod)
    if affinity:
        counts: Counter[tuple[str, str]] = Counter()
        by_name = {n.metadata.name: n for n in nodes}
        for other in _running(snapshot, pod, affinity, gone):
            if not all(_term_matches(t, pod, other, snapshot) for t in affinity):
                continue
            node = by_name.get(other.spec.node_name)
            if node is None:
                continue
            for t in affinity:
                value = node.metadata.labels.get(t.topology_key)
                if value is not None:
                    counts[(t.topology_key, value)] += 1
        first = not counts and all(_term_matches(t, pod, pod, snapshot) for t in affinity)
        for n in fits:
            labels = n.metadata.labels
            keyless = any(t.topology_key not in labels for t in affinity)
            if keyless or (not first and any(
                    counts[(t.topology_key, labels[t.topology_key])] <= 0 for t in affinity)):
                misses.add(n.metadata.name)
    for term in _required_anti_affinity(pod):
        node_domain = domains_of(nodes, term.topology_key)
        taken: set[str] = set()
        for other in _running(snapshot, pod, (term,), gone):
            domain = node_domain.get(other.spec.node_name)
            if domain is not None and _term_matches(term, pod, other, snapshot):
                taken.add(domain)
        misses.update(n.metadata.name for n in fits
                      if node_domain.get(n.metadata.name) in taken)
    return misses


def blocked_by_running_anti_affinity(snapshot: ClusterSnapshot, pod: Pod, nodes: Sequence[Node],
                                     gone: Pod | None = None) -> set[str]:
    """Nodes in the domain of a running pod whose required anti-affinity selects `pod` (the
    symmetric half of InterPodAffinity's filter), over every node the holders run on."""
    blocked: set[str] = set()
    domains_by_key: dict[str, dict[str, str]] = {}
    for other in with_required_anti_affinity(snapshot):
        if not other.spec.node_name or other.terminal or _is(other, gone):
            continue
        for term in _required_anti_affinity(other):
            if not _term_matches(term, other, pod, snapshot):
                continue
            key = term.topology_key
            node_domain = domains_by_key.setdefault(key, domains_of(nodes, key))
            domain = node_domain.get(other.spec.node_name)
            if domain is not None:
                blocked.update(n for n, d in node_domain.items() if d == domain)
    return blocked


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
        own = pod.namespace if not term.namespaces and term.namespace_selector is None else ""
        key = _encoder.encode((kind, sorted(term.namespaces), own, term.namespace_selector,
                               term.label_selector))
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


def running_terms_select(pod: Pod, snapshot: ClusterSnapshot, profile: Profile,
                         gone: Pod | None = None) -> bool:
    """Whether some running pod's term would score `pod` (InterPodAffinity would not skip)."""
    current = snapshot.pods
    for kind, term, owner, holders in term_groups(snapshot).values():
        if kind == "required" and profile.hard_pod_affinity_weight <= 0:
            continue
        if not _term_matches(term, owner, pod, snapshot):
            continue
        if any(current.get(h.key) is h and not _is(h, gone) and not h.terminal
               for h in holders):
            return True
    return False

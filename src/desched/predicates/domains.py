"""Topology domains for placement: which pods match a term or constraint per domain value, for
PodTopologySpread and InterPodAffinity as the scheduler models apply them to one incoming pod.

Each function walks the candidate pods of one namespace set once and groups them by the domain
their node is in: no pod × node loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from desched.model.labels import lenient_matcher
from desched.model.meta import LabelSelector
from desched.model.node import Node
from desched.model.pod import Pod, PodAffinityTerm
from desched.predicates.podaffinity import anti_affinity_terms, term_namespaces
from desched.snapshot.cluster import ClusterSnapshot


def domain_counts(snapshot: ClusterSnapshot, namespaces: frozenset[str],
                  selector: LabelSelector | None, key: str, node_domain: Mapping[str, str],
                  leaving: Pod | None) -> Counter[str]:
    """Matching pods per domain value of `key` (nodes without the key are in no domain). The
    pod `leaving` is not counted: its replacement is the one being placed."""
    match = lenient_matcher(selector)
    counts: Counter[str] = Counter()
    if match is None:
        return counts
    for namespace in namespaces:
        for pod in snapshot.pods_by_namespace.get(namespace, {}).values():
            if pod is leaving or pod.terminal or not pod.node_name:
                continue
            domain = node_domain.get(pod.node_name)
            if domain is not None and match(pod.metadata.labels):
                counts[domain] += 1
    return counts


def domains_of(nodes: Sequence[Node], key: str) -> dict[str, str]:
    """Node name -> its value of label `key`, for the nodes that have it."""
    return {n.name: n.metadata.labels[key] for n in nodes if key in n.metadata.labels}


def term_domains(snapshot: ClusterSnapshot, term: PodAffinityTerm, pod: Pod,
                 nodes: Sequence[Node], leaving: Pod | None) -> tuple[dict[str, str],
                                                                      Counter[str]]:
    """For one (anti-)affinity term of `pod`: node -> domain, and matching pods per domain."""
    node_domain = domains_of(nodes, term.topology_key)
    return node_domain, domain_counts(snapshot, term_namespaces(term, pod), term.label_selector,
                                      term.topology_key, node_domain, leaving)


def blocked_by_existing_anti_affinity(snapshot: ClusterSnapshot, pod: Pod,
                                      nodes: Sequence[Node], leaving: Pod | None) -> set[str]:
    """Nodes where a pod already running has a required anti-affinity term selecting `pod` in
    the same domain (the symmetric half of InterPodAffinity's filter)."""
    blocked: set[str] = set()
    domains_by_key: dict[str, dict[str, str]] = {}
    for other in with_required_anti_affinity(snapshot):
        if other is leaving or not other.node_name or other.terminal:
            continue
        for term in anti_affinity_terms(other):
            if pod.namespace not in term_namespaces(term, other):
                continue
            match = lenient_matcher(term.label_selector)
            if match is None or not match(pod.metadata.labels):
                continue
            key = term.topology_key
            node_domain = domains_by_key.setdefault(key, domains_of(nodes, key))
            domain = node_domain.get(other.node_name)
            if domain is not None:
                blocked.update(n for n, d in node_domain.items() if d == domain)
    return blocked


def with_required_anti_affinity(snapshot: ClusterSnapshot) -> list[Pod]:
    """The pods with required anti-affinity terms (few, in most clusters): found once, then
    caught up with the pods added since; removed pods are dropped as they are read."""
    cached = snapshot.caches.get("required-anti-affinity")
    added = snapshot.added_since_finish
    if cached is None or (not snapshot.finished and cached[0] != snapshot.additions):
        found = [p for p in snapshot.pods.values() if anti_affinity_terms(p)]
        cached = snapshot.caches["required-anti-affinity"] = [snapshot.additions, found,
                                                               len(added)]
    elif cached[2] < len(added):
        cached[1].extend(p for p in added[cached[2]:] if anti_affinity_terms(p))
        cached[2] = len(added)
    current = snapshot.pods
    pods: list[Pod] = cached[1]
    return [p for p in pods if current.get(p.key) is p]

"""The pods required or preferred anti-affinity terms can select, indexed (the plugin's search,
and includeSoftConstraints' lookups of a node's domain)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from desched.model.meta import LabelSelector, json_encoder
from desched.model.node import Node
from desched.model.pod import Pod
from desched.predicates.podaffinity import (
    AntiAffinityTerm,
    anti_affinity_terms,
    compile_anti_affinity,
    preferred_anti_affinity_terms,
    preferred_anti_affinity_weights,
)

# A term's anchor: one label every pod it selects must carry, with the values allowed.
Anchor = tuple[str, tuple[str, ...]]
PodsByNode = dict[str, dict[str, Pod]]  # node -> pod key -> pod


class Term(NamedTuple):
    compiled: AntiAffinityTerm
    anchor: Anchor | None
    namespaces: tuple[str, ...]  # compiled.namespaces, sorted: a deterministic search order
    weight: int = 0  # a preferred term's (0: required)


def _anchor(selector: LabelSelector | None) -> Anchor | None:
    """A matchLabels pair, or a matchExpressions `In`, of a selector: the pods it selects are
    among the pods carrying that label with one of those values."""
    if selector is None:
        return None
    for key, value in (selector.match_labels or {}).items():
        return key, (value,)
    for req in selector.match_expressions or ():
        if req.operator == "In":
            return req.key, tuple(sorted(set(req.values)))
    return None


class AntiAffinityIndex:
    """The pods a term can select, indexed on demand: per namespace by node and, for the label a
    term anchors on, by that label's value; and the nodes of each topology domain.

    `pods_of(namespace)` yields the listed pods of a namespace; only pods on `nodes` are kept.
    Each namespace (or namespace and anchor label) is indexed once, on first use, so a run pays
    only for the namespaces the terms name. `remove` forgets an evicted pod everywhere.

    `partner(pod)` answers what utils.CheckPodsWithAntiAffinityExist answers over the same pods
    and nodes, and also says which pod and term: the first term (in order) that selects another
    pod in the candidate's topology domain, or None. A term with an invalid selector met before
    any match makes the answer None, as upstream. A term with an anchor is looked up through it,
    so a check costs the pods carrying the anchor label in the domain, not the whole namespace.
    """

    def __init__(self, nodes: Iterable[Node], pods_of: Callable[[str], Iterable[Pod]]) -> None:
        self.nodes = {node.name: node for node in nodes}
        self._pods_of = pods_of
        self._removed: set[str] = set()
        self._by_namespace: dict[str, PodsByNode] = {}
        self._by_label: dict[tuple[str, str], dict[str, PodsByNode]] = {}
        # topology key -> value -> the names of its nodes, in node order
        self._domains: dict[str, dict[str, dict[str, None]]] = {}
        self._terms: dict[tuple[str, bool, bytes], tuple[Term, ...]] = {}

    def _listed(self, namespace: str) -> Iterator[Pod]:
        nodes, removed = self.nodes, self._removed
        for pod in self._pods_of(namespace):
            if pod.spec.node_name in nodes and (not removed or pod.key not in removed):
                yield pod

    @staticmethod
    def _put(by_node: PodsByNode, pod: Pod) -> None:
        on_node = by_node.get(pod.spec.node_name)
        if on_node is None:
            on_node = by_node[pod.spec.node_name] = {}
        on_node[pod.key] = pod

    def _namespace(self, namespace: str) -> PodsByNode:
        index = self._by_namespace.get(namespace)
        if index is None:
            index = self._by_namespace[namespace] = {}
            for pod in self._listed(namespace):
                self._put(index, pod)
        return index

    def _labelled(self, namespace: str, key: str) -> dict[str, PodsByNode]:
        index = self._by_label.get((namespace, key))
        if index is None:
            index = self._by_label[(namespace, key)] = {}
            for pod in self._listed(namespace):
                value = pod.metadata.labels.get(key)
                if value is not None:
                    by_node = index.get(value)
                    if by_node is None:
                        by_node = index[value] = {}
                    self._put(by_node, pod)
        return index

    @property
    def removed(self) -> bool:
        """Whether a pod was removed (evicted) since the index was made."""
        return bool(self._removed)

    def remove(self, pod: Pod) -> None:
        """Forget an evicted pod: it no longer counts against anyone."""
        key, namespace, node = pod.key, pod.namespace, pod.spec.node_name
        self._removed.add(key)
        on_node = self._by_namespace.get(namespace, {}).get(node)
        if on_node is not None:
            on_node.pop(key, None)
        for label, value in pod.metadata.labels.items():
            by_value = self._by_label.get((namespace, label))
            if by_value is not None:
                on_node = by_value.get(value, {}).get(node)
                if on_node is not None:
                    on_node.pop(key, None)

    def terms(self, pod: Pod, soft: bool = False) -> tuple[Term, ...]:
        """The pod's required (`soft`: preferred) anti-affinity terms, compiled once per
        distinct affinity (term namespaces default to the pod's own, so the namespace is part
        of the key)."""
        raw = preferred_anti_affinity_terms(pod) if soft else anti_affinity_terms(pod)
        if not raw:
            return ()
        key = (pod.namespace, soft, json_encoder.encode(raw))
        terms = self._terms.get(key)
        if terms is None:
            weights = preferred_anti_affinity_weights(pod) if soft else (0,) * len(raw)
            terms = self._terms[key] = tuple(
                Term(compiled, _anchor(term.label_selector) if compiled.selector else None,
                      tuple(sorted(compiled.namespaces)), weight)
                for compiled, term, weight in zip(compile_anti_affinity(pod, raw), raw, weights,
                                                  strict=True))
        return terms

    def _domain(self, node: Node, topology_key: str) -> dict[str, None]:
        """The nodes sharing `node`'s value of the key (just the node when it lacks the key), as
        an ordered set of names."""
        value = node.metadata.labels.get(topology_key)
        if value is None:
            return {node.name: None}
        by_value = self._domains.get(topology_key)
        if by_value is None:
            by_value = self._domains[topology_key] = {}
            for name, other in self.nodes.items():
                other_value = other.metadata.labels.get(topology_key)
                if other_value is not None:
                    by_value.setdefault(other_value, {})[name] = None
        return by_value[value]

    def _groups(self, term: Term, domain: dict[str, None]) -> Iterator[dict[str, Pod]]:
        """The pods on the domain's nodes that the term may select, grouped by node."""
        for namespace in term.namespaces:
            if term.anchor is None:
                sources = [self._namespace(namespace)]
            else:
                key, values = term.anchor
                labelled = self._labelled(namespace, key)
                sources = [labelled[v] for v in values if v in labelled]
            for by_node in sources:
                if len(domain) <= len(by_node):
                    for name in domain:
                        pods = by_node.get(name)
                        if pods:
                            yield pods
                else:
                    for name, pods in by_node.items():
                        if pods and name in domain:
                            yield pods

    def partner(self, pod: Pod) -> tuple[Pod, AntiAffinityTerm] | None:
        terms = self.terms(pod)
        if not terms:
            return None
        node = self.nodes.get(pod.spec.node_name)
        if node is None:
            return None
        for term in terms:
            if term.compiled.selector is None:
                return None  # an invalid selector makes the whole check false
            other = self.selected_near(term, node, pod.key)
            if other is not None:
                return other, term.compiled
        return None

    def selected_near(self, term: Term, node: Node, own_key: str) -> Pod | None:
        """The first pod (but `own_key`) the term selects in `node`'s domain of its topology
        key, or None (an invalid selector selects nothing)."""
        selector = term.compiled.selector
        if selector is None:
            return None
        for pods in self._groups(term, self._domain(node, term.compiled.topology_key)):
            for key, other in pods.items():
                if key != own_key and selector(other.metadata.labels):
                    return other
        return None

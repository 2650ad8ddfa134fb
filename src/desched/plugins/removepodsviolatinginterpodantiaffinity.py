"""RemovePodsViolatingInterPodAntiAffinity (deschedule): evicts pods whose required pod
anti-affinity is violated by a pod running in the same topology domain
.

The pods considered — both as candidates and as the pods a term can select — are the non-terminal
pods on the input nodes that pass `namespaces` and `labelSelector`. Each node's candidates (pods
with required anti-affinity terms) are visited lowest priority first
(`ordering.sort_by_priority_low_to_high`). A pod is evicted when one of its own required
anti-affinity terms selects another listed pod on the same node, or on a node with the same value
of the term's topologyKey (utils.CheckPodsWithAntiAffinityExist; namespaceSelector and preferred
terms are ignored, and the pod merely selected by a term is not evicted for it), and it passes
the DefaultEvictor's Filter and PreEvictionFilter. An evicted pod is dropped from the index, so it
no longer counts against its partners; a pod whose eviction was refused (PDB) still counts. A
node limit moves on to the next node, the total limit ends the run.

The search answers what upstream's walk over every pod of the term's namespaces answers (a
property test holds it to that walk, tests/oracles/anti_affinity.py), indexed: terms are
compiled with `compile_anti_affinity` once per distinct affinity; the pods of a namespace are
indexed once per run, by node and by the label a term's selector requires; and only the nodes of
the candidate's topology domain are looked at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import msgspec

from desched.framework.evictor import EvictionLimitError
from desched.framework.registry import PluginSpec, Scope
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED, listing_scope
from desched.model.labels import compile_selector, selector_is_empty
from desched.model.meta import LabelSelector, json_encoder
from desched.model.node import Node
from desched.model.pod import Pod
from desched.plugins.ordering import sort_by_priority_low_to_high
from desched.policy_files.args import (
    Namespaces,
    namespace_allowed,
    namespace_scope,
    validate_label_selector,
    validate_namespaces,
)
from desched.predicates.podaffinity import (
    AntiAffinityTerm,
    anti_affinity_terms,
    compile_anti_affinity,
)

PLUGIN = "RemovePodsViolatingInterPodAntiAffinity"


class RemovePodsViolatingInterPodAntiAffinityArgs(msgspec.Struct, rename="camel",
                                                  forbid_unknown_fields=True):
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None


def validate(args: RemovePodsViolatingInterPodAntiAffinityArgs) -> list[str]:
    """Upstream returns the first problem only, in this order."""
    return (validate_namespaces(args.namespaces)
            or validate_label_selector(args.label_selector))[:1]


# A term's anchor: one label every pod it selects must carry, with the values allowed.
Anchor = tuple[str, tuple[str, ...]]
PodsByNode = dict[str, dict[str, Pod]]  # node -> pod key -> pod


class _Term(NamedTuple):
    compiled: AntiAffinityTerm
    anchor: Anchor | None
    namespaces: tuple[str, ...]  # compiled.namespaces, sorted: a deterministic search order


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
        self._terms: dict[tuple[str, bytes], tuple[_Term, ...]] = {}

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

    def terms(self, pod: Pod) -> tuple[_Term, ...]:
        """The pod's required anti-affinity terms, compiled once per distinct affinity (term
        namespaces default to the pod's own, so the namespace is part of the key)."""
        raw = anti_affinity_terms(pod)
        if not raw:
            return ()
        key = (pod.namespace, json_encoder.encode(raw))
        terms = self._terms.get(key)
        if terms is None:
            terms = self._terms[key] = tuple(
                _Term(compiled, _anchor(term.label_selector) if compiled.selector else None,
                      tuple(sorted(compiled.namespaces)))
                for compiled, term in zip(compile_anti_affinity(pod), raw, strict=True))
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

    def _groups(self, term: _Term, domain: dict[str, None]) -> Iterator[dict[str, Pod]]:
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
        own_key = pod.key
        for term in terms:
            selector = term.compiled.selector
            if selector is None:
                return None  # an invalid selector makes the whole check false
            for pods in self._groups(term, self._domain(node, term.compiled.topology_key)):
                for key, other in pods.items():
                    if key != own_key and selector(other.metadata.labels):
                        return other, term.compiled
        return None


def _reason(pod: Pod, partner: Pod, term: AntiAffinityTerm) -> str:
    where = "on the same node" if partner.node_name == pod.node_name else \
        f"in the same {term.topology_key} domain (node {partner.node_name})"
    return (f"pod's required anti-affinity (topologyKey {term.topology_key}) selects pod "
            f"{partner.namespace}/{partner.name} {where}")


class RemovePodsViolatingInterPodAntiAffinity:
    def __init__(self, args: RemovePodsViolatingInterPodAntiAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.labels = None if selector_is_empty(args.label_selector) \
            else compile_selector(args.label_selector)
        # Under explain only: the last run's index, evicted pods removed, for `verdict`.
        self._index: AntiAffinityIndex | None = None

    def _listed(self, pod: Pod) -> bool:
        """Upstream's listing: non-terminal, and passing namespaces and labelSelector. Fields
        read directly, not through Pod's properties: asked of every pod of the namespaces the
        terms name."""
        if pod.status.phase in ("Succeeded", "Failed"):
            return False
        namespaces = self.args.namespaces
        if namespaces is not None and not namespace_allowed(namespaces, pod.metadata.namespace):
            return False
        return self.labels is None or self.labels(pod.metadata.labels)

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why this run passed the pod over (explain only): its labels, no required
        anti-affinity, or no pod its terms select in their domains once the run ended."""
        scope = listing_scope(pod, self.labels, terminal=False)
        if scope is not None:
            return scope
        index = self._index
        terms = index.terms(pod) if index is not None else ()
        if not terms:
            return ("pod has no required pod anti-affinity (a pod that another pod's term "
                    "selects is not evicted for it)" if not anti_affinity_terms(pod) else None)
        if any(term.compiled.selector is None for term in terms):
            return "a term of its required pod anti-affinity has an invalid labelSelector"
        assert index is not None
        if index.partner(pod) is not None:
            return RUN_ENDED
        keys = ", ".join(dict.fromkeys(term.compiled.topology_key for term in terms))
        # Evicted pods no longer count against it (the pod it clashed with may be one).
        after = " once the pods this run evicted are gone" if index._removed else ""
        return (f"no other pod in its topology domain ({keys}) matches its required pod "
                f"anti-affinity{after}")

    def deschedule(self, nodes: list[Node]) -> None:
        handle = self.handle
        snapshot = handle.snapshot
        listed = self._listed

        def pods_of(namespace: str) -> Iterator[Pod]:
            for pod in (snapshot.pods_by_namespace.get(namespace) or {}).values():
                if listed(pod):
                    yield pod

        index = AntiAffinityIndex(nodes, pods_of)
        self._index = index if handle.log.explaining else None
        # Only listed pods carrying required anti-affinity terms can be evicted: find them first
        # (sorting them alone keeps their relative order among all the node's pods).
        candidates: dict[str, list[Pod]] = {}
        for node in nodes:
            for pod in (snapshot.pods_by_node.get(node.name) or {}).values():
                affinity = pod.spec.affinity  # inline anti_affinity_terms: this sees every pod
                anti = affinity.pod_anti_affinity if affinity is not None else None
                if (anti is not None and anti.required_during_scheduling_ignored_during_execution
                        and listed(pod)):
                    candidates.setdefault(node.name, []).append(pod)
        for node in nodes:
            pods = candidates.get(node.name)
            if not pods:
                continue
            for pod in sort_by_priority_low_to_high(pods):
                found = index.partner(pod)
                if found is None:
                    continue
                if not handle.filter(pod) or not handle.pre_eviction_filter(pod):
                    continue
                try:
                    if handle.evict(pod, _reason(pod, *found)):
                        index.remove(pod)
                except EvictionLimitError as err:
                    if err.scope == "total":
                        return
                    if err.scope == "node":
                        break


SPEC = PluginSpec(
    name=PLUGIN,
    extension_points=frozenset({"deschedule"}),
    args_type=RemovePodsViolatingInterPodAntiAffinityArgs,
    factory=RemovePodsViolatingInterPodAntiAffinity,
    validate=validate,
    scope=lambda args: Scope(namespaces=namespace_scope("namespaces", args.namespaces)),
)

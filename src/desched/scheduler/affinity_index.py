"""Running pods' pod (anti-)affinity terms, indexed by selector and counted per topology domain.

kube-scheduler keeps, per node of its snapshot, the pods that carry (anti-)affinity terms, and
InterPodAffinity counts their terms per topology domain; desched keeps those counts whole. Equal
terms of the replicas of one workload collapse into one Shape (what the term is, whose namespace
it means, its weight and topology key) with how many bound pods carry it (`holders`) and how many
of them run in each domain of its topology key (`domains`). Shapes are filed under a namespace
and one label pair their selector requires, so the shapes that may select a pod are found from
the pod's own labels, not by walking every pod that carries terms.

Kept current node by node, as kube-scheduler's NodeInfo is: the nodes pods came to or left since
the last question (the snapshot's logs of added pods and of the nodes pods left) are counted
again. A snapshot whose nodes changed, or whose logs restarted, is indexed anew.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import msgspec

from desched.model.labels import Matcher, lenient_matcher
from desched.model.pod import Affinity, Pod, PodAffinityTerm
from desched.snapshot.cluster import ClusterSnapshot

# preferred: a preferred affinity (+weight) or anti-affinity (-weight) term, scoring the pods it
# selects; required: a required affinity term, scoring them by hardPodAffinityWeight;
# anti: a required anti-affinity term, keeping them out of its domain.
Kind = Literal["preferred", "required", "anti"]

_encoder = msgspec.json.Encoder(enc_hook=str)
_CACHE = "affinity-index"


class Shape:
    """Equal terms of running pods, with how many bound pods hold one and where they run."""

    __slots__ = ("domains", "holders", "kind", "listed", "match", "namespace_match", "term",
                 "topology_key", "weight")

    def __init__(self, kind: Kind, weight: int, term: PodAffinityTerm, owner: str) -> None:
        self.kind = kind
        self.weight = weight
        self.term = term
        self.topology_key = str(term.topology_key)
        self.match: Matcher | None = lenient_matcher(term.label_selector)
        # The namespaces the term selects pods in: those it lists, or its owner's when it names
        # neither; a namespaceSelector adds the namespaces whose labels it matches.
        listed: frozenset[str] = frozenset(term.namespaces)
        if term.namespace_selector is None and not listed:
            listed = frozenset((owner,))
        self.listed = listed
        self.namespace_match: Matcher | None = (
            lenient_matcher(term.namespace_selector) if term.namespace_selector is not None
            else None)
        self.holders = 0  # bound, not terminal pods holding the term, on any node
        self.domains: dict[str, int] = {}  # domain value -> holders on nodes of that value

    def selects(self, pod: Pod, snapshot: ClusterSnapshot) -> bool:
        """Whether the term selects `pod`: its namespace, then its labels."""
        namespace = pod.namespace
        if namespace not in self.listed and (
                self.namespace_match is None
                or not self.namespace_match(snapshot.namespace_labels(namespace))):
            return False
        return self.match is not None and self.match(pod.metadata.labels)


def _terms(affinity: Affinity) -> list[tuple[Kind, int, PodAffinityTerm]]:
    out: list[tuple[Kind, int, PodAffinityTerm]] = []
    if affinity.pod_affinity is not None:
        out += [("preferred", t.weight, t.pod_affinity_term) for t in
                affinity.pod_affinity.preferred_during_scheduling_ignored_during_execution]
        out += [("required", 1, t) for t in
                affinity.pod_affinity.required_during_scheduling_ignored_during_execution]
    if affinity.pod_anti_affinity is not None:
        out += [("preferred", -t.weight, t.pod_affinity_term) for t in
                affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution]
        out += [("anti", 1, t) for t in
                affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution]
    return out


def _filing(term: PodAffinityTerm) -> list[tuple[str, str]] | None:
    """The label pairs a shape is filed under: one pair its selector requires (a matchLabels
    entry, else an `In` expression's values, one pair each), or None (filed apart: any pod of
    its namespaces may match)."""
    selector = term.label_selector
    if selector is None:
        return []  # selects nothing: not filed
    if selector.match_labels:
        key, value = next(iter(selector.match_labels.items()))
        return [(key, value)]
    for req in selector.match_expressions or ():
        if req.operator == "In" and req.values:
            return [(req.key, v) for v in dict.fromkeys(req.values)]
    return None


class AffinityIndex:
    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.nodes = snapshot.all_nodes()  # the node list indexed (its identity: unchanged)
        self._shapes: dict[bytes, Shape] = {}
        # namespace -> label pair (None: filed apart) -> shapes; shapes with a namespaceSelector
        # are asked about every pod.
        self._filed: dict[str, dict[tuple[str, str] | None, list[Shape]]] = {}
        self._by_namespace_selector: list[Shape] = []
        # (id of a pod's affinity, its namespace) -> (the affinity, its shapes): replicas share
        # their affinity, so a pod's shapes are worked out once per workload.
        self._of_affinity: dict[tuple[int, str], tuple[Affinity, list[Shape]]] = {}
        # What each node's pods hold, and each pod's part: its node, (shape, domain or None).
        self._on_node: dict[str, list[tuple[str, Shape, str | None]]] = {}
        self._by_pod: dict[str, tuple[str, list[tuple[Shape, str | None]]]] = {}
        # Topology key -> (node -> its value, value -> its nodes), over `nodes`.
        self._domains: dict[str, tuple[dict[str, str], dict[str, list[str]]]] = {}
        self._mark()
        for name in snapshot.pods_by_node:
            self._count(name)

    def _mark(self) -> None:
        snapshot = self.snapshot
        self.additions = snapshot.additions
        self.added = len(snapshot.added_since_finish)
        self.removed = snapshot.removed_from
        self.removed_seen = len(self.removed)

    def current(self, snapshot: ClusterSnapshot) -> bool:
        """Catch up with the pods added and removed since; False when that cannot be told from
        the snapshot's logs (its nodes changed, its removal log restarted, or pods were added
        before it was finished): the index must be built again."""
        if (snapshot is not self.snapshot or snapshot.all_nodes() is not self.nodes
                or snapshot.removed_from is not self.removed):
            return False
        added = snapshot.added_since_finish
        if snapshot.additions - self.additions != len(added) - self.added:
            return False
        if len(added) == self.added and len(self.removed) == self.removed_seen:
            return True
        touched: set[str] = {p.spec.node_name for p in added[self.added:]}
        touched.update(self.removed[self.removed_seen:])
        self._mark()
        for name in touched:
            if name:
                self._count(name)
        return True

    # -- counting --------------------------------------------------------------------------------

    def _shapes_of(self, pod: Pod, affinity: Affinity) -> list[Shape]:
        found = self._of_affinity.get((id(affinity), pod.namespace))
        if found is not None and found[0] is affinity:
            return found[1]
        shapes = []
        for kind, weight, term in _terms(affinity):
            own = pod.namespace if not term.namespaces and term.namespace_selector is None \
                else ""
            key = _encoder.encode((kind, weight, term.topology_key, sorted(term.namespaces), own,
                                   term.namespace_selector, term.label_selector))
            shape = self._shapes.get(key)
            if shape is None:
                shape = self._shapes[key] = Shape(kind, weight, term, pod.namespace)
                self._file(shape)
            shapes.append(shape)
        self._of_affinity[(id(affinity), pod.namespace)] = (affinity, shapes)
        return shapes

    def _file(self, shape: Shape) -> None:
        pairs = _filing(shape.term)
        if pairs == [] or shape.match is None:
            return  # selects no pod
        if shape.namespace_match is not None:
            self._by_namespace_selector.append(shape)
            return
        for namespace in shape.listed:
            filed = self._filed.setdefault(namespace, {})
            for pair in pairs if pairs is not None else (None,):
                filed.setdefault(pair, []).append(shape)

    def _count(self, node_name: str) -> None:
        """Count the node's pods again: take out what they held, add what they hold now."""
        by_pod = self._by_pod
        for key, shape, domain in self._on_node.pop(node_name, ()):
            shape.holders -= 1
            if domain is not None:
                left = shape.domains[domain] - 1
                if left:
                    shape.domains[domain] = left
                else:
                    del shape.domains[domain]
            was = by_pod.get(key)
            if was is not None and was[0] == node_name:  # not since counted on another node
                del by_pod[key]
        pods = self.snapshot.pods_by_node.get(node_name)
        if not pods:
            return
        node = self.snapshot.nodes.get(node_name)
        labels = node.metadata.labels if node is not None else {}
        entries: list[tuple[str, Shape, str | None]] = []
        for key, pod in pods.items():
            affinity = pod.spec.affinity
            if affinity is None or (affinity.pod_affinity is None
                                    and affinity.pod_anti_affinity is None) or pod.terminal:
                continue
            held: list[tuple[Shape, str | None]] = []
            by_pod[key] = (node_name, held)
            for shape in self._shapes_of(pod, affinity):
                domain = labels.get(shape.topology_key)
                shape.holders += 1
                if domain is not None:
                    shape.domains[domain] = shape.domains.get(domain, 0) + 1
                entries.append((key, shape, domain))
                held.append((shape, domain))
        if entries:
            self._on_node[node_name] = entries

    # -- questions -------------------------------------------------------------------------------

    def selecting(self, pod: Pod) -> Iterator[Shape]:
        """The shapes whose terms select `pod` (holders or not)."""
        snapshot = self.snapshot
        labels = pod.metadata.labels
        filed = self._filed.get(pod.namespace)
        if filed:
            apart = filed.get(None)
            if apart:
                yield from (s for s in apart if s.selects(pod, snapshot))
            for pair in labels.items():
                shapes = filed.get(pair)
                if shapes:
                    yield from (s for s in shapes if s.selects(pod, snapshot))
        for shape in self._by_namespace_selector:
            if shape.selects(pod, snapshot):
                yield shape

    def held_by(self, pod: Pod | None) -> dict[Shape, list[str | None]]:
        """What the running pod with `pod`'s key holds: shape -> the domain of each term of it
        (a pod deleted at once counts nowhere)."""
        out: dict[Shape, list[str | None]] = {}
        if pod is not None:
            for shape, domain in self._by_pod.get(pod.key, ("", []))[1]:
                out.setdefault(shape, []).append(domain)
        return out

    def domains(self, shape: Shape, gone: dict[Shape, list[str | None]]
                ) -> Iterator[tuple[str, int]]:
        """(domain value, holders there) for the shape, without the terms in `gone`."""
        less = gone.get(shape)
        if not less:
            yield from shape.domains.items()
            return
        for domain, count in shape.domains.items():
            count -= less.count(domain)
            if count > 0:
                yield domain, count

    def held(self, shape: Shape, gone: dict[Shape, list[str | None]]) -> bool:
        """Whether a bound pod other than `gone` holds the shape."""
        return shape.holders > len(gone.get(shape, ()))

    def node_domains(self, key: str) -> tuple[dict[str, str], dict[str, list[str]]]:
        """Node name -> its value of label `key`, and value -> its nodes (nodes without the
        label are in no domain)."""
        found = self._domains.get(key)
        if found is None:
            of: dict[str, str] = {}
            members: dict[str, list[str]] = {}
            for node in self.nodes:
                value = node.metadata.labels.get(key)
                if value is not None:
                    of[node.name] = value
                    members.setdefault(value, []).append(node.name)
            found = self._domains[key] = (of, members)
        return found


def affinity_index(snapshot: ClusterSnapshot) -> AffinityIndex:
    """The snapshot's index, brought up to date."""
    index: AffinityIndex | None = snapshot.caches.get(_CACHE)
    if index is None or not index.current(snapshot):
        index = snapshot.caches[_CACHE] = AffinityIndex(snapshot)
    return index

"""The nodes of a list a pod's nodeSelector and required node affinity can match, found through
label indices instead of testing every node.

In production clusters most workloads are pinned to a node pool (5 to 50 of 5,000 nodes), so a
search over all nodes for each pod is mostly wasted. The index narrows to a superset of the
matching nodes (`In` and `Exists` expressions, nodeSelector pairs, `matchFields` on the node's
name); callers still run the full matcher on each candidate, so the verdicts are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from desched.model.node import Node
from desched.model.pod import NodeSelectorTerm, Pod
from desched.snapshot.cluster import ClusterSnapshot

_NAME_FIELD = "metadata.name"


class Candidates(NamedTuple):
    """The nodes of the cluster a pod may match, in the snapshot's order, and their names."""

    nodes: Sequence[Node]
    names: frozenset[str]


# Narrowed to more than this share of the cluster, a search is better off walking its own list.
_NARROW_SHARE = 0.5


class NodeIndex:
    """Label indices over every node of a snapshot (nodes do not change once it is read)."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self.position: dict[str, int] = {}
        self.by_label: dict[tuple[str, str], list[int]] = {}
        self.by_key: dict[str, list[int]] = {}
        for i, node in enumerate(nodes):
            self.position[node.metadata.name] = i
            for key, value in node.metadata.labels.items():
                self.by_label.setdefault((key, value), []).append(i)
                self.by_key.setdefault(key, []).append(i)
        # Upstream skips matchFields for a node without a name: such a node matches any.
        self._nameless = "" in self.position
        # Affinity key (an encoding of nodeSelector and required affinity) -> candidates.
        self._memo: dict[bytes, Candidates | None] = {}

    def candidates(self, pod: Pod, key: bytes) -> Candidates | None:
        """A superset of the nodes `pod`'s nodeSelector and required node affinity match, or
        None when they match (or may match) most of the cluster. `key` identifies those two
        fields: pods with equal keys get the same answer."""
        if key in self._memo:
            return self._memo[key]
        positions = self._narrow(pod)
        found = None
        if positions is not None and len(positions) <= _NARROW_SHARE * len(self.nodes):
            nodes = [self.nodes[i] for i in sorted(positions)]
            found = Candidates(nodes, frozenset(n.metadata.name for n in nodes))
        self._memo[key] = found
        return found

    def _narrow(self, pod: Pod) -> set[int] | None:
        result: set[int] | None = None
        for key, value in pod.spec.node_selector.items():
            result = _meet(result, set(self.by_label.get((key, value), ())))
        affinity = pod.spec.affinity
        node_affinity = affinity.node_affinity if affinity is not None else None
        required = (node_affinity.required_during_scheduling_ignored_during_execution
                    if node_affinity is not None else None)
        if required is not None:
            union: set[int] = set()
            for term in required.node_selector_terms:
                narrowed = self._term(term)
                if narrowed is None:
                    return result  # a term that any node may match: no narrowing from terms
                union |= narrowed
            result = _meet(result, union)
        return result

    def _term(self, term: NodeSelectorTerm) -> set[int] | None:
        """A superset of the nodes the term matches, or None when it cannot be narrowed."""
        if not term.match_expressions and not term.match_fields:
            return set()  # an empty term matches nothing
        result: set[int] | None = None
        for req in term.match_expressions:
            if req.operator == "In":
                found: set[int] = set()
                for value in req.values:
                    found.update(self.by_label.get((req.key, value), ()))
                result = _meet(result, found)
            elif req.operator == "Exists":
                result = _meet(result, set(self.by_key.get(req.key, ())))
        if not self._nameless:
            for field in term.match_fields:
                if field.key == _NAME_FIELD and field.operator == "In" and len(field.values) == 1:
                    at = self.position.get(field.values[0])
                    result = _meet(result, set() if at is None else {at})
        return result


def _meet(current: set[int] | None, more: set[int]) -> set[int]:
    return more if current is None else current & more


def node_index(snapshot: ClusterSnapshot) -> NodeIndex:
    """The snapshot's node index, built on first use."""
    index: NodeIndex | None = snapshot.caches.get("nodeindex")
    if index is None or len(index.nodes) != len(snapshot.nodes):
        index = snapshot.caches["nodeindex"] = NodeIndex(list(snapshot.nodes.values()))
    return index

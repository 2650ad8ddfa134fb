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

    def node_replaced(self, old: Node, new: Node) -> None:
        """A node changed other than in its labels (a cordon, ClusterSnapshot.set_unschedulable):
        the new struct takes the old one's place; the candidate lists, which hold nodes, are
        built again as asked."""
        at = self.position.get(old.metadata.name)
        if at is not None and isinstance(self.nodes, list) and self.nodes[at] is old:
            self.nodes[at] = new
        self._memo.clear()

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
        """A superset of the positions of the nodes the pod's affinity matches, from the
        narrowest single index entry of each part (intersecting more would only cost: every
        candidate is matched in full afterwards)."""
        best: list[Sequence[int]] | None = None
        for pair in pod.spec.node_selector.items():
            found = self.by_label.get(pair, ())
            if best is None or len(found) < _size(best):
                best = [found]
        affinity = pod.spec.affinity
        node_affinity = affinity.node_affinity if affinity is not None else None
        required = (node_affinity.required_during_scheduling_ignored_during_execution
                    if node_affinity is not None else None)
        if required is not None:
            union: list[Sequence[int]] = []
            for term in required.node_selector_terms:
                narrowed = self._term(term)
                if narrowed is None:
                    break  # a term that any node may match
                union.extend(narrowed)
            else:
                if best is None or _size(union) < _size(best):
                    best = union
        if best is None:
            return None
        positions: set[int] = set()
        for entry in best:
            positions.update(entry)
        return positions

    def _term(self, term: NodeSelectorTerm) -> list[Sequence[int]] | None:
        """The narrowest index entries covering what the term matches, or None when it cannot
        be narrowed."""
        if not term.match_expressions and not term.match_fields:
            return []  # an empty term matches nothing
        best: list[Sequence[int]] | None = None
        for req in term.match_expressions:
            found: list[Sequence[int]]
            if req.operator == "In":
                found = [self.by_label.get((req.key, value), ()) for value in req.values]
            elif req.operator == "Exists":
                found = [self.by_key.get(req.key, ())]
            else:
                continue
            if best is None or _size(found) < _size(best):
                best = found
        if not self._nameless:
            for field in term.match_fields:
                if field.key == _NAME_FIELD and field.operator == "In" and len(field.values) == 1:
                    at = self.position.get(field.values[0])
                    best = [() if at is None else (at,)]
        return best


def _size(entries: list[Sequence[int]]) -> int:
    return sum(len(entry) for entry in entries)


def node_index(snapshot: ClusterSnapshot) -> NodeIndex:
    """The snapshot's node index, built on first use."""
    index: NodeIndex | None = snapshot.caches.get("nodeindex")
    if index is None or len(index.nodes) != len(snapshot.nodes):
        index = snapshot.caches["nodeindex"] = NodeIndex(list(snapshot.nodes.values()))
    return index

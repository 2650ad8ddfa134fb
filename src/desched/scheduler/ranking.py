"""Incremental node ranking for the scheduler models.

Replacements are placed one after the other, and a workload's replacements share a placement
signature. For a pod whose filters and scores on a node depend on that node alone (no topology
spread, no pod (anti-)affinity), a node's verdict changes only when its own pods change. A Ranking
keeps every feasible node's score for one signature and re-checks only the nodes pods were added
to or removed from since its last use: a placement costs the changed nodes, not every node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from desched.model.node import Node
from desched.snapshot.cluster import ClusterSnapshot

Class = tuple[float, float]  # the node-static score parts: (untolerated soft taints, weight)
Entry = Callable[[Node], "tuple[Class, float] | None"]  # None: the node does not fit

# The weights of the node-static score parts (soft taints, preferred affinity) and a constant.
Weights = tuple[float, float, float]


def _normalized(values: dict[Class, float], reverse: bool) -> dict[Class, float]:
    low, high = min(values.values()), max(values.values())
    if high == low:
        return dict.fromkeys(values, 100.0)
    return {c: ((high - v) if reverse else (v - low)) * 100.0 / (high - low)
            for c, v in values.items()}


class Ranking:
    def __init__(self, source: Sequence[Node], candidates: Sequence[Node],
                 snapshot: ClusterSnapshot, entry: Entry) -> None:
        self.source = source  # the node list asked about (its identity is the cache key)
        self.entry = entry
        self.nodes = {n.metadata.name: n for n in candidates}
        self.classes: dict[Class, dict[str, tuple[float, str]]] = {}
        self.where: dict[str, Class] = {}
        self._mark(snapshot)
        for node in candidates:
            self.update(node)

    def _mark(self, snapshot: ClusterSnapshot) -> None:
        self.added, self.removed = len(snapshot.added_since_finish), snapshot.removed_from
        self.removed_seen = len(self.removed)

    def current(self, snapshot: ClusterSnapshot) -> bool:
        """Catch up with the pods added and removed since; False when the removal log
        restarted (the ranking must be rebuilt)."""
        if snapshot.removed_from is not self.removed:
            return False
        touched = {p.node_name for p in snapshot.added_since_finish[self.added:]}
        touched.update(self.removed[self.removed_seen:])
        self._mark(snapshot)
        for name in touched:
            node = self.nodes.get(name)
            if node is not None:
                self.update(node)
        return True

    def update(self, node: Node) -> None:
        name = node.metadata.name
        old = self.where.pop(name, None)
        if old is not None:
            self.classes[old].pop(name, None)
        found = self.entry(node)
        if found is not None:
            cls, score = found
            self.classes.setdefault(cls, {})[name] = (score, name)
            self.where[name] = cls

    def best(self, exclude: set[str], extra: tuple[Class, float] | None, name: str = "",
             weighted: Weights | None = None) -> tuple[str, float, int] | None:
        """(node, score, feasible count) over the feasible nodes not in `exclude`, plus
        `extra` for node `name` (one judged apart: the node the pod leaves). `weighted` adds
        the node-static scores, normalized over the classes present, so weighted."""
        tops: dict[Class, tuple[float, str]] = {}
        count = 0
        for cls, members in self.classes.items():
            hidden = {n: members.pop(n) for n in exclude if n in members}
            if members:
                tops[cls] = max(members.values())
                count += len(members)
            members.update(hidden)
        if extra is not None:
            cls, score = extra
            tops[cls] = max(tops.get(cls, (score, name)), (score, name))
            count += 1
        if not tops:
            return None
        if weighted is None:
            score, chosen = max(tops.values())
            return chosen, score, count
        taint_weight, affinity_weight, constant = weighted
        taints = _normalized({c: c[0] for c in tops}, reverse=True)
        weights = _normalized({c: c[1] for c in tops}, reverse=False)
        score, chosen = max((top[0] + taint_weight * taints[c] + affinity_weight * weights[c]
                             + constant, top[1]) for c, top in tops.items())
        return chosen, score, count

"""Incremental node ranking for the scheduler models.

Replacements are placed one after the other, and a workload's replacements share a placement
signature. For a pod whose filters and scores on a node depend on that node alone (no topology
spread, no pod (anti-)affinity), a node's verdict changes only when its own pods change. A Ranking
keeps every feasible node's score for one signature and re-checks only the nodes pods were added
to or removed from since its last use: a placement costs the changed nodes, not every node.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import msgspec

from desched.model.node import Node
from desched.model.pod import Pod
from desched.predicates.domains import blocked_by_existing_anti_affinity
from desched.predicates.nodefit import affinity_space
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
        # Each class's best entry, while no member of it changed (most questions ask again
        # before anything moved: the guard asks about every candidate pod).
        self._tops: dict[Class, tuple[float, str]] = {}
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
            self._tops.pop(old, None)
        found = self.entry(node)
        if found is not None:
            cls, score = found
            self.classes.setdefault(cls, {})[name] = (score, name)
            self.where[name] = cls
            self._tops.pop(cls, None)

    def best(self, exclude: set[str], extra: tuple[Class, float] | None, name: str = "",
             weighted: Weights | None = None) -> tuple[str, float, int] | None:
        """(node, score, feasible count) over the feasible nodes not in `exclude`, plus
        `extra` for node `name` (one judged apart: the node the pod leaves). `weighted` adds
        the node-static scores, normalized over the classes present, so weighted."""
        tops: dict[Class, tuple[float, str]] = {}
        count = 0
        for cls, members in self.classes.items():
            top = self._tops.get(cls)
            if top is None and members:
                top = self._tops[cls] = max(members.values())
            if top is not None and top[1] not in exclude:
                tops[cls] = top
                count += len(members) - sum(1 for n in exclude if n in members)
                continue
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


def stranger(pod: Pod) -> Pod:
    """The pod as a replacement not yet bound: a Ranking is shared by the pods of a signature,
    and the node a pod leaves is judged apart."""
    if not pod.node_name:
        return pod
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=""))


class Rankings:
    """A model's Rankings by key (what the entries depend on besides the nodes' pods)."""

    MAX = 256  # placement signatures kept; a run meeting more starts over

    def __init__(self) -> None:
        self._by_key: dict[Hashable, Ranking] = {}

    def best(self, key: Hashable, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
             entry_for: Callable[[Pod], Entry], weighted: Weights | None = None
             ) -> tuple[str, float, int] | None:
        """Where `pod` goes among `nodes`: the Ranking for `key` brought up to date, less the
        nodes running pods' anti-affinity keeps it from; the node the pod leaves (if any) is
        judged with the pod itself, its own requests and usage no longer counted there."""
        full_key = (key, id(snapshot), id(nodes))
        ranking = self._by_key.get(full_key)
        if ranking is None or ranking.source is not nodes or not ranking.current(snapshot):
            if len(self._by_key) >= self.MAX:
                self._by_key.clear()
            ranking = self._by_key[full_key] = Ranking(
                nodes, affinity_space(pod, nodes, snapshot), snapshot, entry_for(stranger(pod)))
        exclude = blocked_by_existing_anti_affinity(snapshot, pod, nodes, pod)
        own = ranking.nodes.get(pod.node_name) if pod.node_name else None
        extra: tuple[Class, float] | None = None
        if pod.node_name:
            exclude.add(pod.node_name)
        if own is not None and own.name not in blocked_by_existing_anti_affinity(
                snapshot, pod, [own], pod):
            extra = entry_for(pod)(own)
        return ranking.best(exclude, extra, pod.node_name, weighted)

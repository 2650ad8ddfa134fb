"""Incremental node ranking for the scheduler models.

Replacements are placed one after the other, and a workload's replacements share a placement
signature. For a pod whose filters and scores on a node depend on that node alone (no topology
spread, no pod (anti-)affinity), a node's verdict changes only when its own pods change. A Ranking
keeps every feasible node's score for one signature and re-checks only the nodes pods were added
to or removed from since its last use: a placement costs the changed nodes, not every node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import msgspec

from desched.model.node import Node
from desched.model.pod import Pod
from desched.predicates.domains import blocked_by_existing_anti_affinity
from desched.predicates.nodefit import affinity_space
from desched.snapshot.cluster import ClusterSnapshot

# A simple pod's Ranking is shared by the pods with its simple_key.
_encoder = msgspec.json.Encoder(enc_hook=str)


def simple_key(pod: Pod) -> bytes:
    """What a simple pod's filters and node-local scores depend on besides the node:
    nodeSelector, node affinity, tolerations, requests (not its namespace, name, owner or
    images: pods of different workloads with these equal share one Ranking)."""
    spec = pod.spec
    return _encoder.encode((spec.node_selector, spec.affinity, spec.tolerations, pod.requests,
                            pod.non_zero_requests))


def static_key(pod: Pod) -> bytes:
    """What a simple pod's node-static filters and score classes read of it: simple_key less
    the requests."""
    spec = pod.spec
    return _encoder.encode((spec.node_selector, spec.affinity, spec.tolerations))


def simple(pod: Pod) -> bool:
    """No filter of the pod depends on pods of other nodes (no topology spread, no pod
    (anti-)affinity of its own)."""
    affinity = pod.spec.affinity
    return not pod.spec.topology_spread_constraints and (
        affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None))


# The node-static score parts a model groups nodes by (e.g. untolerated soft taints, preferred
# affinity weight, topology domains).
Class = tuple[Any, ...]
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
        # Each class's members per score: how many share its top (equal scores: a tie).
        self.score_counts: dict[Class, Counter[float]] = {}
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
            gone = self.classes[old].pop(name, None)
            if gone is not None:
                self.score_counts[old][gone[0]] -= 1
            self._tops.pop(old, None)
        found = self.entry(node)
        if found is not None:
            cls, score = found
            self.classes.setdefault(cls, {})[name] = (score, name)
            counts = self.score_counts.get(cls)
            if counts is None:
                counts = self.score_counts[cls] = Counter()
            counts[score] += 1
            self.where[name] = cls
            self._tops.pop(cls, None)

    def member(self, name: str) -> tuple[Class, float] | None:
        """A feasible node's (class, score), or None when it does not fit."""
        cls = self.where.get(name)
        if cls is None:
            return None
        return cls, self.classes[cls][name][0]

    def tops(self, exclude: set[str]) -> dict[Class, tuple[float, str, int, int]]:
        """Per class, over its members not in `exclude`: (top score, the last node by name
        with it, how many members have it, how many members there are)."""
        out: dict[Class, tuple[float, str, int, int]] = {}
        for cls, members in self.classes.items():
            if not members:
                continue
            top = self._tops.get(cls)
            if top is None:
                top = self._tops[cls] = max(members.values())
            hidden = [n for n in exclude if n in members]
            if not hidden:
                out[cls] = (top[0], top[1], self.score_counts[cls][top[0]], len(members))
                continue
            kept = {n: v for n, v in members.items() if n not in exclude} \
                if top[1] in exclude else None
            if kept is None:
                at_top = self.score_counts[cls][top[0]] - sum(
                    1 for n in hidden if members[n][0] == top[0])
                out[cls] = (top[0], top[1], at_top, len(members) - len(hidden))
            elif kept:
                best = max(kept.values())
                at_top = sum(1 for v in kept.values() if v[0] == best[0])
                out[cls] = (best[0], best[1], at_top, len(kept))
        return out

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

    MAX = 256  # placement signatures kept

    def __init__(self) -> None:
        self._by_key: dict[Hashable, Ranking] = {}

    def get(self, key: Hashable, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
            entry_for: Callable[[Pod], Entry], candidates: Sequence[Node] | None = None
            ) -> Ranking:
        """The Ranking for `key` over `nodes`, brought up to date (built over `candidates`,
        the pod's affinity space unless given, the first time)."""
        full_key = (key, id(snapshot), id(nodes))
        ranking = self._by_key.pop(full_key, None)  # put back last: the most recently used
        if ranking is None or ranking.source is not nodes or not ranking.current(snapshot):
            if len(self._by_key) >= self.MAX:  # the least recently used goes
                del self._by_key[next(iter(self._by_key))]
            space = affinity_space(pod, nodes, snapshot) if candidates is None else candidates
            ranking = Ranking(nodes, space, snapshot, entry_for(stranger(pod)))
        self._by_key[full_key] = ranking
        return ranking

    def best(self, key: Hashable, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
             entry_for: Callable[[Pod], Entry], weighted: Weights | None = None
             ) -> tuple[str, float, int] | None:
        """Where `pod` goes among `nodes`: the Ranking for `key` brought up to date, less the
        nodes running pods' anti-affinity keeps it from; the node the pod leaves (if any) is
        judged with the pod itself, its own requests and usage no longer counted there."""
        ranking = self.get(key, pod, nodes, snapshot, entry_for)
        exclude = blocked_by_existing_anti_affinity(snapshot, pod, nodes, pod)
        own = ranking.nodes.get(pod.node_name) if pod.node_name else None
        extra: tuple[Class, float] | None = None
        if pod.node_name:
            exclude.add(pod.node_name)
        if own is not None and own.name not in blocked_by_existing_anti_affinity(
                snapshot, pod, [own], pod):
            extra = entry_for(pod)(own)
        return ranking.best(exclude, extra, pod.node_name, weighted)

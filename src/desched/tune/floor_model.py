"""The floor's rules that do not depend on the goals (tune/floor.py): a node's amount after
the moves as terms of the model's columns, capacity and required anti-affinity."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from desched.model.node import Node
from desched.tune.floor_cluster import HOSTNAME, Cluster, PodType
from desched.tune.milp import Model

Terms = dict[int, float]


def add(terms: Terms, column: int, coef: float) -> None:
    terms[column] = terms.get(column, 0.0) + coef


@dataclass
class Built:
    model: Model
    # node -> the columns of the pods of each type leaving it.
    out: dict[str, list[tuple[PodType, int]]] = field(default_factory=dict)
    arrive: dict[str, list[tuple[PodType, int]]] = field(default_factory=dict)
    # aggregated: group id -> (its nodes, arrivals into it)
    groups: list[tuple[list[Node], list[tuple[PodType, int]]]] = field(default_factory=list)
    # aggregated: group id -> what leaves its pooled nodes, per type
    pooled: dict[int, list[tuple[PodType, int]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def node_terms(built: Built, name: str, amount: Callable[[PodType], int]) -> Terms:
    terms: Terms = {}
    for kind, column in built.out.get(name, ()):
        a = amount(kind)
        if a:
            add(terms, column, -a)
    for kind, column in built.arrive.get(name, ()):
        a = amount(kind)
        if a:
            add(terms, column, a)
    return terms


def pooled_terms(built: Built, index: int, amount: Callable[[PodType], int]) -> Terms:
    """What leaves the group's pooled nodes (the ones no rule of their own binds), counted
    together."""
    terms: Terms = {}
    for kind, column in built.pooled.get(index, ()):
        a = amount(kind)
        if a:
            add(terms, column, -a)
    return terms


def group_terms(built: Built, index: int, amount: Callable[[PodType], int]) -> Terms:
    """A group's amount after the moves, less its amount now: every member's leaving pods
    and the arrivals into it."""
    members, arrivals = built.groups[index]
    terms = pooled_terms(built, index, amount)
    for node in members:
        terms.update(node_terms(built, node.name, amount))
    for kind, column in arrivals:
        a = amount(kind)
        if a:
            add(terms, column, a)
    return terms


def capacity(cluster: Cluster, built: Built, allocatable: dict[str, dict[str, int]],
              exact: bool) -> None:
    """A node receiving pods ends within its allocatable, every resource a type requests."""
    model = built.model
    resources = sorted({r for k in cluster.types if k.movable for r in k.requests})
    for resource in resources:
        def amount(k: PodType, r: str = resource) -> int:
            return k.requests.get(r, 0)
        if exact:
            for node in cluster.nodes:
                name = node.name
                if not built.arrive.get(name):
                    continue
                have = cluster.load[name].get(resource, 0)
                cap = allocatable[name].get(resource, 0)
                terms = node_terms(built, name, amount)
                if not any(c > 0 for c in terms.values()):
                    continue
                if have <= cap:
                    model.row(terms, upper=cap - have, family="capacity")
                    continue
                # Already over: a pod may arrive only once enough have left.
                landing = model.var(0, 1)
                high = model.bounds_of(terms)[1]
                landed = {c: 1.0 for _, c in built.arrive[name]}
                landed[landing] = -float(sum(model.upper[c] for c in landed))
                model.row(landed, upper=0.0, family="capacity")
                terms[landing] = high + have - cap
                model.row(terms, upper=high, family="capacity")
        else:
            for index, (members, into) in enumerate(built.groups):
                if not any(amount(k) for k, _ in into):
                    continue
                # A member over its allocatable already takes at most what leaves it: its
                # room is left out, what leaves it stays in (a relaxation).
                room = sum(max(0, allocatable[n.name].get(resource, 0)
                               - cluster.load[n.name].get(resource, 0)) for n in members)
                model.row(group_terms(built, index, amount), upper=room, family="capacity")


def anti_affinity(cluster: Cluster, built: Built) -> None:
    """Required anti-affinity, both ways: a pod arriving at a node ends with no pod there that
    its terms select, nor one whose terms select it (other pods of its own type included)."""
    selects: list[tuple[PodType, PodType, str]] = []
    for a in cluster.types:
        for term in a.anti:
            if term.selector is None:
                continue
            for b in cluster.types:
                if b.pod.namespace in term.namespaces and term.selector(b.pod.metadata.labels):
                    selects.append((a, b, term.topology_key))
            if term.topology_key != HOSTNAME:
                built.notes.append(f"anti-affinity over {term.topology_key} checked per node "
                                   f"(a relaxation)")
    if not selects:
        return
    for node in cluster.nodes:
        if built.arrive.get(node.name):
            _NodeAntiAffinity(built, node).state(selects)


class _NodeAntiAffinity:
    """One receiving node's anti-affinity rows: a flag per type arriving, set by its arrivals."""

    def __init__(self, built: Built, node: Node) -> None:
        self.model = built.model
        self.name = node.name
        self.labels = node.metadata.labels
        self.arriving = {id(k): c for k, c in built.arrive.get(node.name, ())}
        self.leaving = {id(k): c for k, c in built.out.get(node.name, ())}
        self.landed: dict[int, int] = {}

    def lands(self, kind: PodType) -> int | None:
        column = self.arriving.get(id(kind))
        if column is None:
            return None
        flag = self.landed.get(id(kind))
        if flag is None:
            model = self.model
            flag = self.landed[id(kind)] = model.var(0, 1)
            model.row({column: 1.0, flag: -model.upper[column]}, upper=0.0,
                      family="anti-affinity")
        return flag

    def count(self, kind: PodType) -> Terms:
        terms: Terms = {}
        if id(kind) in self.leaving:
            terms[self.leaving[id(kind)]] = -1.0
        if id(kind) in self.arriving:
            terms[self.arriving[id(kind)]] = 1.0
        return terms

    def state(self, selects: list[tuple[PodType, PodType, str]]) -> None:
        model = self.model
        for a, b, key in selects:
            if key not in self.labels:
                continue
            for mover, other in ((a, b), (b, a)):
                flag = self.lands(mover)
                if flag is None:
                    continue
                terms = self.count(other)
                now = other.counts.get(self.name, 0)
                keep = 1 if mover is other else 0  # the arriving pod itself
                high = now + model.bounds_of(terms)[1]
                if high <= keep:
                    continue
                # Landed: the other type's count ends at most `keep`.
                terms[flag] = high - keep
                model.row(terms, upper=high - now, family="anti-affinity")

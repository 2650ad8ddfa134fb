"""The goals as rows of the floor's model (tune/floor.py): per node where arrivals are counted
per node (exact), per group of alike nodes where they are aggregated (a relaxation).

Percent thresholds become whole amounts per node (millicores, bytes, pods) as Goal.met reads
them, so max, min, nodes over a level and mean are exact; std is cut by tangents."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction

from desched.tune.floor_cluster import Cluster, PodType
from desched.tune.floor_model import Built, Terms, add, node_terms, pooled_terms
from desched.tune.goals import EPSILON, Goal
from desched.tune.milp import INF, Model

REQUESTS = {"cpu requests": "cpu", "memory requests": "memory", "pods": "pods"}
USAGE = {"cpu usage": "cpu", "memory usage": "memory"}
_EPS = Fraction(EPSILON)

def series_amounts(cluster: Cluster, goal: Goal) -> tuple[dict[str, int], Callable[
        [PodType], int], dict[str, int]]:
    """(node -> amount now, a type's amount, node -> capacity) of the goal's series, over the
    nodes the frame has a value for."""
    if goal.usage:
        resource = USAGE[goal.series]
        now = {n: u.get(resource, 0) for n, u in cluster.usage.items()}
        return now, lambda k: k.usage.get(resource, 0), {
            n.name: n.allocatable.get(resource, 0) for n in cluster.nodes if n.name in now}
    resource = REQUESTS[goal.series]
    return ({n.name: cluster.load[n.name].get(resource, 0) for n in cluster.nodes},
            lambda k: k.requests.get(resource, 0),
            {n.name: n.allocatable.get(resource, 0) for n in cluster.nodes})


def _at_most(percent: float, cap: int, strict: bool) -> int:
    """The greatest amount whose percent of `cap` is <= (or <) `percent`, as Goal.met reads it."""
    if strict:
        return math.ceil(Fraction(percent) * cap / 100) - 1
    return math.floor((Fraction(percent) + _EPS) * cap / 100)


def _at_least(percent: float, cap: int, strict: bool) -> int:
    if strict:
        return math.floor(Fraction(percent) * cap / 100) + 1
    return math.ceil((Fraction(percent) - _EPS) * cap / 100)


def individual_nodes(cluster: Cluster, goals: list[Goal]) -> set[str]:
    """The nodes a goal caps that are above its cap now: with aggregated arrivals these keep
    their leaving pods counted apart (a rule of their own binds them); the others' are pooled
    per group, which only their group's sums read."""
    out: set[str] = set()
    for goal in goals:
        if not ((goal.stat == "max" and goal.op in ("<=", "<", "=="))
                or (goal.stat == "over" and goal.op in ("<=", "<"))):
            continue
        now, _, caps = series_amounts(cluster, goal)
        strict = goal.op == "<"
        for n, amount in now.items():
            cap = caps[n]
            if cap <= 0:
                continue
            level = (_at_most(goal.bound, cap, strict) if goal.stat == "max"
                     else _at_most(goal.level, cap, False))
            if amount > level:
                out.add(n)
    return out


def goal_rows(cluster: Cluster, built: Built, goal: Goal, exact: bool) -> None:
    now, amount, caps = series_amounts(cluster, goal)
    model = built.model
    names = list(now)
    if not exact:
        _goal_relaxed(cluster, built, goal, now, amount, caps)
        return
    exprs = {n: node_terms(built, n, amount) for n in names}
    op, bound, stat = goal.op, goal.bound, goal.stat
    if stat in ("max", "min"):
        # max <= b: every node at most b; max >= b: some node at least b; == both. The min
        # the other way round.
        caps_every = (stat == "max") == (op in ("<=", "<", "=="))
        every = op == "==" or caps_every
        if every:
            strict = op in ("<", ">")
            for n in names:
                cap = caps[n]
                if cap <= 0:
                    # The frame reads 0% whatever the node holds.
                    if not goal.met(0.0) and op != "==":
                        model.row({}, lower=1.0, family="goal")
                    continue
                if stat == "max":
                    model.row(exprs[n], upper=_at_most(bound, cap, strict) - now[n],
                              family="goal")
                else:
                    model.row(exprs[n], lower=_at_least(bound, cap, strict) - now[n],
                              family="goal")
        if op == "==" or not caps_every:
            _some(built, names, exprs, now, caps, bound, op in ("<", ">"), stat == "min")
        return
    if stat == "over":
        _over(built, names, exprs, now, caps, goal)
        return
    if stat == "mean":
        terms: Terms = {}
        constant = 0.0
        for n in names:
            if caps[n] <= 0:
                continue
            scale = 100.0 / caps[n] / len(names)
            constant += now[n] * scale
            for column, coef in exprs[n].items():
                add(terms, column, coef * scale)
        low, high = _interval(op, bound)
        model.row(terms, low - constant, high - constant, family="goal")
        return
    _std(built, names, exprs, now, caps, goal)


def _interval(op: str, bound: float) -> tuple[float, float]:
    slack = EPSILON
    return {"<=": (-INF, bound + slack), "<": (-INF, bound - slack),
            ">=": (bound - slack, INF), ">": (bound + slack, INF),
            "==": (bound - slack, bound + slack)}[op]


def _some(built: Built, names: list[str], exprs: dict[str, Terms], now: dict[str, int],
          caps: dict[str, int], bound: float, strict: bool, under: bool) -> None:
    """At least one node's amount is at most (`under`) or at least the bound."""
    model = built.model
    flags: Terms = {}
    for n in names:
        cap = caps[n]
        low, high = model.bounds_of(exprs[n])
        low, high = low + now[n], high + now[n]
        if cap <= 0:
            ok = goal_met_at_zero(bound, under)
            if ok:
                return  # met whatever moves
            continue
        if under:
            level = _at_most(bound, cap, strict)
            if high <= level:
                return
            if low > level:
                continue
            flag = model.var(0, 1)
            terms = dict(exprs[n])
            terms[flag] = high - level
            model.row(terms, upper=high - now[n], family="goal")
        else:
            level = _at_least(bound, cap, strict)
            if low >= level:
                return
            if high < level:
                continue
            flag = model.var(0, 1)
            terms = dict(exprs[n])
            terms[flag] = -(level - low)
            model.row(terms, lower=low - now[n], family="goal")
        flags[flag] = 1.0
    model.row(flags, lower=1.0, family="goal")


def goal_met_at_zero(bound: float, under: bool) -> bool:
    """Whether a node the frame reads as 0% (no allocatable) is at most (`under`) or at least
    the bound."""
    return bound + EPSILON >= 0 if under else bound - EPSILON <= 0


def _over(built: Built, names: list[str], exprs: dict[str, Terms], now: dict[str, int],
          caps: dict[str, int], goal: Goal) -> None:
    """Nodes above the level: a flag per node that can be either, fixed by the amount."""
    model = built.model
    flags: Terms = {}
    fixed = 0
    for n in names:
        cap = caps[n]
        if cap <= 0:
            fixed += goal.level + EPSILON < 0
            continue
        level = _at_most(goal.level, cap, False)  # above it: over
        low, high = model.bounds_of(exprs[n])
        low, high = low + now[n], high + now[n]
        if high <= level or low > level:
            fixed += low > level
            continue
        flag = model.var(0, 1)
        flags[flag] = 1.0
        # flag 0: amount <= level; flag 1: amount >= level + 1.
        terms = dict(exprs[n])
        terms[flag] = -(high - level)
        model.row(terms, upper=level - now[n], family="goal")
        terms = dict(exprs[n])
        terms[flag] = -(level + 1 - low)
        model.row(terms, lower=low - now[n], family="goal")
    low, high = _count_interval(goal.op, goal.bound)
    model.row(flags, low - fixed, high - fixed, family="goal")


def _count_interval(op: str, bound: float) -> tuple[float, float]:
    return {"<=": (-INF, math.floor(bound)), "<": (-INF, math.ceil(bound) - 1),
            ">=": (math.ceil(bound), INF), ">": (math.floor(bound) + 1, INF),
            "==": (bound, bound) if bound == int(bound) else (1.0, 0.0)}[op]


# Points (as multiples of the bound) where the square is cut by its tangent.
_TANGENTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0)


def _std(built: Built, names: list[str], exprs: dict[str, Terms], now: dict[str, int],
         caps: dict[str, int], goal: Goal) -> None:
    """std <= b over every node's own percent (see _std_rows)."""
    def percents() -> Iterator[tuple[int, int]]:
        for n in names:
            scale = 100.0 / caps[n] if caps[n] > 0 else 0.0
            yield 1, _percent_of(built.model, exprs[n], scale, scale * now[n])
    _std_rows(built, goal, "squares cut by tangents (a relaxation, a lower bound)", percents(),
              len(names))


def _std_rows(built: Built, goal: Goal, note: str, percents: Iterable[tuple[int, int]],
              count: int) -> None:
    """std <= b: the variance is at most b², and the variance is the least mean square distance
    to any centre c (the mean minimizes it), so: some c with the sum of (v - c)² over the
    `count` nodes <= count b². `percents` gives (nodes, column of their percent): a node, or a
    group whose squares sum to at least its size times its mean's (convexity). Each square is
    bounded below by tangent lines (under-estimators): a relaxation. Columns are made as
    `percents` is drawn, after the centre's."""
    model = built.model
    if goal.op not in ("<=", "<"):
        built.notes.append(f"{goal.text}: a lower limit on std is not modelled (left out: a "
                           f"relaxation)")
        return
    built.notes.append(f"{goal.text}: {note}")
    centre = model.var(-INF, INF, integer=False)
    spread: Terms = {}
    b = goal.bound
    points = sorted({p * b for p in _TANGENTS} | {-p * b for p in _TANGENTS} | {100.0})
    for size, value in percents:
        square = model.var(0, INF, integer=False)
        spread[square] = 1.0
        for point in points:
            # square >= size (2a (v - c) - a²)
            model.row({square: 1.0, centre: 2 * point * size, value: -2 * point * size},
                      lower=-size * point * point, family="std")
    model.row(spread, upper=count * b * b + EPSILON, family="goal")


def _percent_of(model: Model, expr: Terms, scale: float, constant: float) -> int:
    """A continuous column equal to constant + scale * expr (a node's or group's percent): the
    tangent rows name it instead of repeating the expression, which at 5,000 nodes made
    millions of terms (docs/tune.md)."""
    value = model.var(-INF, INF, integer=False)
    terms: Terms = {value: 1.0}
    for column, coef in expr.items():
        add(terms, column, -scale * coef)
    model.row(terms, lower=constant, upper=constant, family="std")
    return value


def _goal_relaxed(cluster: Cluster, built: Built, goal: Goal, now: dict[str, int],
                  amount: Callable[[PodType], int], caps: dict[str, int]) -> None:
    """The goal over aggregated arrivals: a node's own rule without arrivals where that can
    only relax it, and every rule summed over its group."""
    model = built.model
    op, stat = goal.op, goal.stat
    caps_ok = {n: c for n, c in caps.items() if c > 0}
    cap_rule = (stat == "max" and op in ("<=", "<", "==")) or (stat == "over" and op in ("<=",
                                                                                         "<"))
    floor_rule = stat == "min" and op in (">=", ">", "==")
    if stat == "mean":
        terms: Terms = {}
        constant = 0.0
        for index, (members, arrivals) in enumerate(built.groups):
            seen = [m for m in members if m.name in caps_ok]
            if seen and len(seen) < len([m for m in members if m.name in now]):
                built.notes.append(f"{goal.text}: left out (a relaxation)")
                return
            for node in seen:
                n = node.name
                scale = 100.0 / caps_ok[n] / len(now)
                constant += now[n] * scale
                for column, coef in node_terms(built, n, amount).items():
                    add(terms, column, coef * scale)
            if seen and len(seen) == len(members):
                # One allocatable per group: the arrivals' share of the mean is known.
                scale = 100.0 / caps_ok[seen[0].name] / len(now)
                for kind, column in arrivals:
                    add(terms, column, amount(kind) * scale)
                for column, coef in pooled_terms(built, index, amount).items():
                    add(terms, column, coef * scale)
            elif seen:
                built.notes.append(f"{goal.text}: left out (a relaxation)")
                return
        low, high = _interval(op, goal.bound)
        model.row(terms, low - constant, high - constant, family="goal")
        return
    if not (cap_rule or floor_rule) and stat != "std":
        built.notes.append(f"{goal.text}: left out with aggregated nodes (a relaxation)")
        return
    if stat == "std":
        _std_relaxed(cluster, built, goal, now, amount, caps)
        return
    strict = op in ("<", ">")
    flags: Terms = {}
    for index, (members, arrivals) in enumerate(built.groups):
        limit_sum = 0
        group: Terms = {}
        constant = 0
        seen = [m for m in members if m.name in now]
        if not seen:
            continue
        for node in seen:
            n = node.name
            cap = caps[n]
            terms = node_terms(built, n, amount)
            if cap_rule and stat == "max":
                level = _at_most(goal.bound, cap, strict) if cap > 0 else 0
                model.row(terms, upper=level - now[n], family="goal")
                limit_sum += level
            elif cap_rule:  # over, counted down: flag per node lets it exceed the level
                level = _at_most(goal.level, cap, False) if cap > 0 else 0
                high = now[n] + model.bounds_of(terms)[1] + sum(
                    model.upper[c] * amount(k) for k, c in arrivals)
                flag = model.var(0, 1)
                flags[flag] = 1.0
                one = dict(terms)
                one[flag] = -(high - level)
                model.row(one, upper=level - now[n], family="goal")
                add(group, flag, -(high - level))
                limit_sum += level
            else:
                limit_sum += _at_least(goal.bound, cap, strict) if cap > 0 else 0
            constant += now[n]
            for column, coef in terms.items():
                add(group, column, coef)
        if len(seen) == len(members):
            for kind, column in arrivals:
                add(group, column, amount(kind))
            for column, coef in pooled_terms(built, index, amount).items():
                add(group, column, coef)
        if cap_rule:
            model.row(group, upper=limit_sum - constant, family="goal")
        elif len(seen) == len(members):
            model.row(group, lower=limit_sum - constant, family="goal")
    if stat == "over":
        low, high = _count_interval(op, goal.bound)
        model.row(flags, low, high, family="goal")


def _std_relaxed(cluster: Cluster, built: Built, goal: Goal, now: dict[str, int],
                 amount: Callable[[PodType], int], caps: dict[str, int]) -> None:
    """std <= b over aggregated arrivals: by convexity a group's squares sum to at least its
    size times the square of its mean distance (see _std_rows)."""
    def percents() -> Iterator[tuple[int, int]]:
        for index, (members, arrivals) in enumerate(built.groups):
            seen = [m for m in members if m.name in now]
            if not seen or caps[seen[0].name] <= 0:
                continue
            size = len(seen)
            scale = 100.0 / caps[seen[0].name] / size  # the group's mean percent per unit
            mean_terms: Terms = {}
            constant = 0.0
            for node in seen:
                constant += now[node.name]
                for column, coef in node_terms(built, node.name, amount).items():
                    add(mean_terms, column, coef)
            if size == len(members):
                for kind, column in arrivals:
                    add(mean_terms, column, amount(kind))
                for column, coef in pooled_terms(built, index, amount).items():
                    add(mean_terms, column, coef)
            yield size, _percent_of(built.model, mean_terms, scale, scale * constant)
    _std_rows(built, goal, "squares cut by tangents per node group (a relaxation)", percents(),
              len(now))



"""The search over the knobs' values: which candidates to run, how they rank, the Pareto front,
and why the recommended one beat its neighbours.

A knob's values are indexed 0..n-1 (low to high by its step). When the whole grid is small it is
run whole. Otherwise a coarse grid (a few evenly spaced values per knob, both ends included) is
run, then a pattern search walks from the best candidate: each knob one spacing up and down,
moving while a neighbour ranks better, halving the spacing down to one step. Thresholds act
monotonically on which nodes are sources and targets and how much moves, so the boundary where
the goal starts to hold is found with a fraction of the grid (bench/README.md compares it with
the full grid). At one step the recommended candidate's neighbours have all been run: they are
what the explanation compares it with.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Protocol

from desched.tune.evaluate import Measured
from desched.tune.goals import Goal
from desched.tune.knobs import Value

Point = tuple[int, ...]  # one value index per knob


class Varied(Protocol):
    """A knob as the search sees it (tune/knobs.Knob)."""

    @property
    def text(self) -> str: ...

    def values(self) -> list[Value]: ...


@dataclass(frozen=True)
class Candidate:
    point: Point
    values: tuple[Value, ...]
    measured: Measured | None  # None: the candidate is no valid policy (`invalid` says why)
    invalid: str | None = None


# Runs the candidates at these points (in parallel where it can) and gives them in order.
Runner = Callable[[list[Point]], list[Candidate]]
Check = Callable[[Point], str | None]


def rank(goals: list[Goal], max_evictions: int | None,
         start: Point | None = None) -> Callable[[Candidate], tuple[float, ...]]:
    """The order candidates are recommended in: those meeting every goal (within
    --max-evictions a cycle) first, without churn before with it, fewest evictions, then fewest
    refusals; the others by how far they fall short, then fewest evictions. Ties go to the
    candidate nearest `start` (the user's own values): fewest settings changed, least moved."""
    def key(c: Candidate) -> tuple[float, ...]:
        m = c.measured
        away = _distance(c.point, start)
        if m is None:
            return (3.0, math.inf, math.inf, *away)
        if meets(m, max_evictions):
            return (0.0 if m.churn == 0 else 1.0, float(m.evictions), float(m.refused), *away)
        over = (max(m.per_cycle, default=0) - max_evictions) if max_evictions is not None else 0
        return (2.0, m.shortfall(goals) + max(over, 0), float(m.evictions), *away)
    return key


def _distance(point: Point, start: Point | None) -> tuple[float, float]:
    if start is None:
        return (0.0, 0.0)
    return (float(sum(1 for a, b in zip(point, start, strict=True) if a != b)),
            float(sum(abs(a - b) for a, b in zip(point, start, strict=True))))


def meets(m: Measured, max_evictions: int | None) -> bool:
    return m.meets and (max_evictions is None or max(m.per_cycle, default=0) <= max_evictions)


@dataclass
class Search:
    knobs: Sequence[Varied]
    grid: int  # candidates in the full grid
    candidates: dict[Point, Candidate] = field(default_factory=dict)
    exhaustive: bool = False
    best: Candidate | None = None
    start: Point | None = None  # the user's own values, when on the grid

    @property
    def valid(self) -> list[Candidate]:
        return [c for c in self.candidates.values() if c.measured is not None]


def _levels(sizes: list[int], budget: int) -> list[list[int]]:
    """Per knob, the indices of its coarse grid: as many evenly spaced values (ends included)
    as keep the product within `budget`, the same count for every knob that has them."""
    count = 2
    while count < max(sizes) and math.prod(min(count + 1, n) for n in sizes) <= budget:
        count += 1
    out = []
    for n in sizes:
        k = min(count, n)
        out.append(sorted({round(i * (n - 1) / (k - 1)) for i in range(k)}) if k > 1 else [0])
    return out


def search(knobs: Sequence[Varied], run: Runner, goals: list[Goal], *,
           max_evictions: int | None = None, budget: int = 60,
           start: Point | None = None, check: Check | None = None) -> Search:
    """Run candidates until the best is found or `budget` candidates have run. `start`: the
    point of the user's own values when they lie on the grid (run first, and compared with).
    `check`: why a point is no valid policy (None when it is), asked before running it; such
    points are recorded as invalid without a run and do not count against the budget."""
    sizes = [len(k.values()) for k in knobs]
    found = Search(knobs, math.prod(sizes))
    key = rank(goals, max_evictions, start)
    values = [k.values() for k in knobs]

    def run_points(points: list[Point]) -> list[Candidate]:
        fresh = []
        for p in dict.fromkeys(points):
            if p in found.candidates:
                continue
            problem = check(p) if check is not None else None
            if problem is not None:
                found.candidates[p] = Candidate(
                    p, tuple(v[i] for v, i in zip(values, p, strict=True)), None, problem)
            else:
                fresh.append(p)
        ran = sum(1 for c in found.candidates.values() if c.measured is not None)
        fresh = fresh[:max(budget - ran, 0)]
        for c in run(fresh) if fresh else []:
            found.candidates[c.point] = c
        return [found.candidates[p] for p in points if p in found.candidates]

    if found.grid <= budget:
        found.exhaustive = True
        run_points([*([start] if start is not None else []),
                    *product(*(range(n) for n in sizes))])
    else:
        levels = _levels(sizes, max(budget // 2, 2 ** len(sizes)))
        run_points([*([start] if start is not None else []), *product(*levels)])
        spacing = [max((lv[1] - lv[0]) if len(lv) > 1 else 1, 1) for lv in levels]
        _walk(found, run_points, key, sizes, spacing)
    valid = found.valid
    found.best = min(valid, key=key) if valid else None
    found.start = start
    return found


def _walk(found: Search, run_points: Callable[[list[Point]], list[Candidate]],
          key: Callable[[Candidate], tuple[float, ...]], sizes: list[int],
          spacing: list[int]) -> None:
    """Pattern search from the best candidate so far, down to one step on every knob."""
    while True:
        valid = found.valid
        if not valid:
            return
        best = min(valid, key=key)
        moved = False
        for c in run_points(neighbours(best.point, sizes, spacing)):
            if c.measured is not None and key(c) < key(best):
                moved = True
        if moved:
            continue
        if all(s == 1 for s in spacing):
            return
        spacing = [max(s // 2, 1) for s in spacing]


def neighbours(point: Point, sizes: list[int], spacing: list[int]) -> list[Point]:
    """`point` moved one spacing up and down along each knob, within its values."""
    out = []
    for i, (n, step) in enumerate(zip(sizes, spacing, strict=True)):
        for delta in (-step, step):
            j = point[i] + delta
            if 0 <= j < n:
                out.append((*point[:i], j, *point[i + 1:]))
    return out


def pareto(candidates: list[Candidate], goals: list[Goal],
           key: Callable[[Candidate], tuple[float, ...]] | None = None) -> list[Candidate]:
    """The candidates no other beats on evictions and every goal's figure at once (each figure
    oriented so that lower is better), by evictions; of equal ones, the first by `key` (the
    search's ranking: the one nearest the user's values)."""
    def objectives(c: Candidate) -> tuple[float, ...]:
        m = c.measured
        assert m is not None
        return (float(m.evictions), *(_oriented(g, v) for g, v in zip(goals, m.figures,
                                                                     strict=True)))
    scored = [(objectives(c), c) for c in candidates if c.measured is not None]
    front = []
    for o, c in scored:
        if not any(all(x <= y for x, y in zip(p, o, strict=True)) and p != o for p, _ in scored):
            front.append((o, c))
    seen: set[tuple[float, ...]] = set()
    out = []
    order = key or (lambda c: ())
    for o, c in sorted(front, key=lambda oc: (oc[0], order(oc[1]))):
        if o not in seen:  # equal figures: the first (fewest evictions, then grid order) stands
            seen.add(o)
            out.append(c)
    return out


def _oriented(goal: Goal, value: float | None) -> float:
    if value is None:
        return math.inf
    if goal.op in (">", ">="):
        return -value
    if goal.op == "==":
        return abs(value - goal.bound)
    return value


@dataclass(frozen=True)
class Contrast:
    """The recommended candidate against a neighbour one step away on one knob."""

    knob: str
    value: Value  # the recommended candidate's
    other: Value  # the neighbour's
    verdict: str  # what the neighbour does instead, for a line of the explanation


def contrasts(found: Search, goals: list[Goal], max_evictions: int | None) -> list[Contrast]:
    """Why the best candidate beat its neighbours: each knob one step down and up, where run."""
    best = found.best
    if best is None or best.measured is None:
        return []
    sizes = [len(k.values()) for k in found.knobs]
    out = []
    for point in neighbours(best.point, sizes, [1] * len(sizes)):
        other = found.candidates.get(point)
        if other is None:
            continue
        i = next(j for j, (a, b) in enumerate(zip(point, best.point, strict=True)) if a != b)
        out.append(Contrast(found.knobs[i].text, best.values[i], other.values[i],
                            _verdict(other, best.measured, goals, max_evictions)))
    return out


def _verdict(other: Candidate, best: Measured, goals: list[Goal],
             max_evictions: int | None) -> str:
    m = other.measured
    if m is None:
        return f"is no valid policy: {other.invalid}"
    for goal, value, met in zip(goals, m.figures, m.met, strict=True):
        if not met:
            shown = "not measured" if value is None else goal.shown(value)
            return f"misses {goal.text} ({shown})"
    if max_evictions is not None and max(m.per_cycle, default=0) > max_evictions:
        return (f"evicts {max(m.per_cycle)} pods in a cycle, over --max-evictions "
                f"{max_evictions}")
    if m.churn and not best.churn:
        return f"meets the goals but churns ({churn_text(m)})"
    delta = m.evictions - best.evictions
    if delta:
        return f"meets the goals with {m.evictions} evictions ({delta:+d})"
    if m.refused != best.refused:
        return (f"meets the goals with as many evictions and {m.refused} refused pods "
                f"({m.refused - best.refused:+d})")
    return "does as well; the recommendation stays nearer your policy's values"


def churn_text(m: Measured) -> str:
    parts = []
    if m.back_on_source:
        parts.append(f"{m.back_on_source} replacements back on the node their pod left")
    if m.repeated:
        parts.append(f"{m.repeated} workloads evicted again after being replaced")
    if m.idle_cycles:
        parts.append(f"{m.idle_cycles} cycles whose evictions changed no balance figure")
    return ", ".join(parts) or "none"

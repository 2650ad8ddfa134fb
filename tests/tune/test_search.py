"""The search runs candidates within the knobs' bounds and its budget, and finds what the whole
grid finds on the landscapes thresholds make (monotone in each knob)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from desched.simulate.frames import Balance
from desched.tune.evaluate import Measured
from desched.tune.goals import parse_goal
from desched.tune.search import Candidate, Point, contrasts, pareto, rank, search

GOAL = parse_goal("max cpu requests <= 70%")


@dataclass(frozen=True)
class Steps:
    """A knob of `n` values 0, 5, 10, ..."""

    text: str
    n: int

    def values(self) -> list[float | int | bool]:
        return [5 * i for i in range(self.n)]


def measured(evictions: int, figure: float, churn: int = 0) -> Measured:
    return Measured(evictions=evictions, per_cycle=(evictions,), refused=0, held_by={},
                    back_on_source=churn, repeated=0, idle_cycles=0, figures=(figure,),
                    met=(GOAL.met(figure),), after=[Balance("cpu requests", 3, 0, 0, figure, 0)])


class Landscape:
    """Low knob i (more targets: a little more moves, a little lower max), high knob j (fewer
    sources: fewer moves, higher max); low must stay under high."""

    def __init__(self, cost_j: int = 10, cost_i: int = 1, rise_j: float = 4.0,
                 fall_i: float = 0.5) -> None:
        self.cost_j, self.cost_i, self.rise_j, self.fall_i = cost_j, cost_i, rise_j, fall_i
        self.ran: list[Point] = []

    @staticmethod
    def check(point: Point) -> str | None:
        return "thresholds over targetThresholds" if point[0] >= point[1] else None

    def __call__(self, points: list[Point]) -> list[Candidate]:
        self.ran.extend(points)
        out = []
        for p in points:
            i, j = p
            if i >= j:
                out.append(Candidate(p, (5 * i, 5 * j), None, "thresholds over targetThresholds"))
                continue
            out.append(Candidate(p, (5 * i, 5 * j), measured(
                self.cost_j * (20 - j) + self.cost_i * i, 40 + self.rise_j * j - self.fall_i * i)))
        return out


KNOBS = [Steps("LowNodeUtilization.thresholds.cpu", 9), Steps(
    "LowNodeUtilization.targetThresholds.cpu", 17)]


def grid_best(landscape: Landscape) -> Candidate:
    every = landscape([(i, j) for i, j in product(range(9), range(17))])
    return min((c for c in every if c.measured), key=rank([GOAL], None))


def test_a_small_grid_runs_whole() -> None:
    landscape = Landscape()
    found = search(KNOBS, landscape, [GOAL], budget=200)
    assert found.exhaustive and len(landscape.ran) == 9 * 17 == found.grid
    assert found.best is not None and found.best.point == grid_best(Landscape()).point


def test_pattern_search_finds_the_grid_answer_with_fewer_candidates() -> None:
    landscape = Landscape()
    found = search(KNOBS, landscape, [GOAL], budget=60)
    assert not found.exhaustive and len(set(landscape.ran)) <= 60 < 9 * 17
    best = grid_best(Landscape())
    assert found.best is not None and found.best.point == best.point
    assert found.best.measured is not None and found.best.measured.meets


@settings(max_examples=60, deadline=None)
@given(cost_j=st.integers(1, 20), cost_i=st.integers(0, 5), rise_j=st.floats(0.5, 6),
       fall_i=st.floats(0, 2), budget=st.integers(4, 80))
def test_search_stays_within_bounds_and_budget(cost_j: int, cost_i: int, rise_j: float,
                                               fall_i: float, budget: int) -> None:
    landscape = Landscape(cost_j, cost_i, rise_j, fall_i)
    found = search(KNOBS, landscape, [GOAL], budget=budget, check=landscape.check)
    assert len(landscape.ran) == len(set(landscape.ran)) <= budget  # none run twice
    assert all(i < j for i, j in landscape.ran)  # no invalid one run
    assert all(0 <= i < 9 and 0 <= j < 17 for i, j in landscape.ran)
    if found.best is not None and found.best.measured is not None:
        key = rank([GOAL], None)
        assert all(key(found.best) <= key(c) for c in found.candidates.values())


def test_ranking_prefers_met_then_no_churn_then_fewest_evictions() -> None:
    key = rank([GOAL], max_evictions=10)
    met_few = Candidate((0,), (0,), measured(3, 60))
    met_churn = Candidate((1,), (1,), measured(1, 60, churn=1))
    met_many = Candidate((2,), (2,), measured(12, 60))  # over --max-evictions
    missed = Candidate((3,), (3,), measured(0, 75))
    invalid = Candidate((4,), (4,), None, "no")
    order = sorted([invalid, missed, met_many, met_churn, met_few], key=key)
    assert order[:2] == [met_few, met_churn] and order[-1] == invalid
    # Over --max-evictions counts as falling short by the excess: 2 pods against 5 points.
    assert order[2:4] == [met_many, missed]


def test_pareto_front_keeps_the_undominated() -> None:
    a = Candidate((0,), (0,), measured(1, 80))
    b = Candidate((1,), (1,), measured(5, 70))
    c = Candidate((2,), (2,), measured(6, 75))  # dominated by b
    d = Candidate((3,), (3,), measured(9, 50))
    assert pareto([c, d, b, a], [GOAL]) == [a, b, d]


def test_contrasts_say_what_each_neighbour_does() -> None:
    found = search(KNOBS, Landscape(), [GOAL], budget=200)
    lines = {(c.knob, c.other): c.verdict for c in contrasts(found, [GOAL], None)}
    # max = 40 + 4 j - 0.5 i <= 70 with the fewest evictions 10 (20 - j) + i: i = 4, j = 8.
    assert found.best is not None and found.best.point == (4, 8)
    assert lines == {
        ("LowNodeUtilization.thresholds.cpu", 15): "misses max cpu requests <= 70% (70.5%)",
        ("LowNodeUtilization.thresholds.cpu", 25): "meets the goals with 125 evictions (+1)",
        ("LowNodeUtilization.targetThresholds.cpu", 35): "meets the goals with 134 evictions "
                                                         "(+10)",
        ("LowNodeUtilization.targetThresholds.cpu", 45): "misses max cpu requests <= 70% (74.0%)",
    }
    beside = search(KNOBS, Landscape(), [GOAL], budget=200, start=(4, 4))
    assert beside.candidates[(4, 4)].invalid == "thresholds over targetThresholds"

"""`--goal` reads the user's words into a figure of a frame, or names what does not read."""

from __future__ import annotations

import pytest

from desched.errors import InputError
from desched.simulate.frames import Frame
from desched.tune.goals import parse_goal, parse_goals


def frame(**series: dict[str, float]) -> Frame:
    return Frame("after cycle 1", {name.replace("_", " "): values
                                   for name, values in series.items()})


CPU = {"a": 80.0, "b": 40.0, "c": 60.0}


@pytest.mark.parametrize(("text", "figure", "met"), [
    ("max cpu requests <= 70%", 80.0, False),
    ("max cpu requests <= 80", 80.0, True),
    ("max cpu requests < 80", 80.0, False),
    ("min cpu requests >= 40%", 40.0, True),
    ("mean cpu requests == 60", 60.0, True),
    ("std cpu requests <= 16.33", 16.329931618554522, True),
    ("std cpu requests < 16.3", 16.329931618554522, False),
    ("nodes over 50% cpu requests == 0", 2.0, False),
    ("nodes over 79.5% cpu requests <= 1", 1.0, True),
    ("nodes over 80% cpu requests == 0", 0.0, True),  # at the level is not over it
])
def test_figures_and_whether_met(text: str, figure: float, met: bool) -> None:
    goal = parse_goal(text)
    value = goal.figure(frame(cpu_requests=CPU))
    assert value == pytest.approx(figure)
    assert goal.met(value) is met
    assert (goal.shortfall(value) == 0) is met


def test_spelling_is_forgiving_and_normalized() -> None:
    goal = parse_goal("  MAX   Memory  Requests<=60 %")
    assert (goal.stat, goal.series, goal.op, goal.bound) == ("max", "memory requests", "<=", 60)
    assert goal.text == "max memory requests<=60 %"
    assert parse_goal("max pods < 90").series == "pods"
    assert parse_goal("max pods requests < 90").series == "pods"
    over = parse_goal("nodes over 80% cpu usage == 0")
    assert (over.stat, over.level, over.bound, over.usage) == ("over", 80.0, 0.0, True)


def test_a_series_the_frame_lacks_has_no_figure() -> None:
    assert parse_goal("max cpu usage <= 70").figure(frame(cpu_requests=CPU)) is None


@pytest.mark.parametrize(("text", "message"), [
    ("max cpu <= 70", 'say which cpu figure, `cpu requests` or `cpu usage`'),
    ("avg cpu requests <= 70", "does not read as a goal: expected"),
    ("max pods usage <= 70", "pods have no usage"),
    ("max cpu requests => 70", "does not read as a goal"),
    ("nodes over 80% cpu usage == 1.5", "does not read as a goal"),
])
def test_what_does_not_read_is_named(text: str, message: str) -> None:
    with pytest.raises(InputError, match=r"^--goal: ") as err:
        parse_goal(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_at_least_one_goal() -> None:
    with pytest.raises(InputError, match="at least one goal"):
        parse_goals([])

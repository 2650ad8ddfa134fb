"""`desched tune --goal`: what the user wants the cluster to look like after the run, in their
words, read into figures a frame (simulate/frames.py) answers.

Grammar (case-insensitive, spaces between words):

    STAT SERIES OP NUMBER[%]             max cpu requests <= 70%    std memory usage < 8
    nodes over NUMBER% SERIES OP COUNT   nodes over 80% cpu usage == 0

STAT is max, min, mean or std; SERIES is `cpu|memory requests|usage` or `pods` (pods running as
a share of allocatable pods, `pods requests` also accepted); OP is <=, <, ==, >= or >. Every
figure is a percentage of allocatable (std in percentage points), so `%` after the number is
optional; a count of nodes takes none.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from desched.errors import InputError, quote
from desched.simulate.frames import Frame

STATS = ("max", "min", "mean", "std")
RESOURCES = ("cpu", "memory", "pods")
KINDS = ("requests", "usage")
OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, "==": operator.eq, ">=": operator.ge, ">": operator.gt}
# Figures are compared with this much slack: a percentage computed two ways (a frame, a solver)
# differs in the last bits.
EPSILON = 1e-9

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
_SERIES = r"(cpu|memory|pods)(?:\s+(requests|usage))?"
_OP = r"(<=|<|==|>=|>)"
_STAT_GOAL = re.compile(rf"(max|min|mean|std)\s+{_SERIES}\s*{_OP}\s*{_NUMBER}\s*(%?)")
_OVER_GOAL = re.compile(rf"nodes\s+over\s+{_NUMBER}\s*%?\s+{_SERIES}\s*{_OP}\s*([0-9]+)")
_GRAMMAR = ("expected `max|min|mean|std <cpu|memory> <requests|usage> OP NUMBER[%]`, "
            "`max|min|mean|std pods OP NUMBER[%]` or `nodes over NUMBER% <series> OP COUNT`, "
            "OP one of <=, <, ==, >=, >")


@dataclass(frozen=True)
class Goal:
    """One goal: `stat` of `series` (a frame's series name, e.g. "cpu requests") compared by
    `op` with `bound`; for stat "over", the number of nodes whose series is above `level`."""

    text: str  # as the user wrote it, spaces normalized
    stat: str  # max, min, mean, std or over
    series: str
    op: str
    bound: float
    level: float = 0.0  # stat "over": the percent a node must exceed to count

    @property
    def resource(self) -> str:
        return self.series.split()[0]

    @property
    def usage(self) -> bool:
        return self.series.endswith("usage")

    @property
    def upper(self) -> bool:
        """The goal caps its figure (<, <=): lower is better."""
        return self.op in ("<", "<=")

    def figure(self, frame: Frame) -> float | None:
        """The goal's figure in `frame`, None when the frame has no value of its series (usage
        the snapshot does not measure)."""
        values = list(frame.values.get(self.series, {}).values())
        if not values:
            return None
        return figure_of(self.stat, values, self.level)

    def met(self, value: float) -> bool:
        if self.op == "==":
            return abs(value - self.bound) <= EPSILON
        if self.op in ("<=", ">="):
            return OPS[self.op](value, self.bound + (EPSILON if self.op == "<=" else -EPSILON))
        return OPS[self.op](value, self.bound)

    def shortfall(self, value: float) -> float:
        """How far `value` is from meeting the goal, in the goal's unit: 0 when met."""
        return 0.0 if self.met(value) else max(abs(value - self.bound), EPSILON)

    def shown(self, value: float) -> str:
        """`value` as the goal's figure reads: 71.3% (a percentage), 4.2 (std, points), 3 nodes."""
        if self.stat == "over":
            return f"{int(value)} node{'s' if int(value) != 1 else ''}"
        if self.stat == "std":
            return f"{value:.1f}"
        return f"{value:.1f}%"


def figure_of(stat: str, values: list[float], level: float = 0.0) -> float:
    if stat == "max":
        return max(values)
    if stat == "min":
        return min(values)
    mean = math.fsum(values) / len(values)
    if stat == "mean":
        return mean
    if stat == "std":
        return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    return float(sum(1 for v in values if v > level + EPSILON))


def _series(resource: str, kind: str | None, text: str) -> str:
    if resource == "pods":
        if kind == "usage":
            raise InputError("--goal", f"{quote(text)}: pods have no usage; write `pods` for "
                                       f"the pods running as a share of allocatable pods")
        return "pods"
    if kind is None:
        raise InputError("--goal", f"{quote(text)}: say which {resource} figure, "
                                   f"`{resource} requests` or `{resource} usage`")
    return f"{resource} {kind}"


def parse_goal(text: str) -> Goal:
    """The goal `text` says; InputError (flag --goal) naming what does not read."""
    words = " ".join(text.split()).lower()
    match = _STAT_GOAL.fullmatch(words)
    if match is not None:
        stat, resource, kind, op, number, _ = match.groups()
        series = _series(resource, kind, text)
        goal = Goal(words, stat, series, op, float(number))
    else:
        match = _OVER_GOAL.fullmatch(words)
        if match is None:
            raise InputError("--goal", f"{quote(text)} does not read as a goal: {_GRAMMAR}")
        level, resource, kind, op, count = match.groups()
        goal = Goal(words, "over", _series(resource, kind, text), op, float(count),
                    float(level))
    return goal


def parse_goals(texts: Iterable[str]) -> list[Goal]:
    goals = [parse_goal(t) for t in texts]
    if not goals:
        raise InputError("--goal", "at least one goal is needed, e.g. --goal \"max cpu requests "
                                   "<= 70%\"")
    return goals

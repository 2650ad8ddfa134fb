"""One candidate policy's run over the snapshot, measured as `simulate` measures it: evictions,
refusals, churn and the balance after the last cycle, and each goal's figure in it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from desched.simulate import whatif
from desched.simulate.frames import Balance, balance, thresholds
from desched.simulate.simulation import SimulationResult
from desched.tune.goals import Goal


@dataclass(frozen=True)
class GroupFigures:
    """The balance after the run in one --group-by group."""

    value: str
    nodes: int
    after: list[Balance]


@dataclass(frozen=True)
class Measured:
    """What a run did and left: small and plain, so a worker process can send it back."""

    evictions: int
    per_cycle: tuple[int, ...]
    refused: int  # pods a budget, a limit or an error held back in every attempt
    held_by: dict[str, int]  # what held pods back ("PodDisruptionBudget ns/x", a limit) -> pods
    back_on_source: int  # replacements the scheduler put back on the node their pod left
    repeated: int  # workloads whose replacements were evicted again
    idle_cycles: int  # cycles whose balance evictions changed no balance figure
    figures: tuple[float | None, ...]  # each goal's figure after the last cycle
    met: tuple[bool, ...]  # each goal met (a figure the snapshot cannot give is not met)
    after: list[Balance]  # per series, after the last cycle
    groups: list[GroupFigures] = field(default_factory=list)
    # What the plugins said in the last cycle about work they did not do (first few): why a
    # candidate evicts nothing (a threshold no node crosses, LowNodeLoad's anomaly count).
    notes: tuple[str, ...] = ()

    @property
    def churn(self) -> int:
        return self.back_on_source + self.repeated + self.idle_cycles

    @property
    def meets(self) -> bool:
        return all(self.met)

    def shortfall(self, goals: list[Goal]) -> float:
        """How far the run is from the goals, each in its own unit, summed (0 when all met;
        a figure the snapshot cannot give counts as far as can be)."""
        total = 0.0
        for goal, value in zip(goals, self.figures, strict=True):
            total += float("inf") if value is None else goal.shortfall(value)
        return total


def measure(result: SimulationResult, goals: list[Goal]) -> Measured:
    """`result` (a run with frames) measured against `goals`."""
    per_cycle = tuple(len(s.evicted) for s in result.summaries)
    churn = whatif.churn(result)
    story = whatif.story(result)
    held_by: Counter[str] = Counter()
    for summary in result.summaries:
        for held in summary.held.values():
            held_by[held.by] += 1
    last = result.frames[-1]
    figures = tuple(goal.figure(last) for goal in goals)
    met = tuple(value is not None and goal.met(value) for goal, value in zip(goals, figures,
                                                                             strict=True))
    return Measured(
        evictions=len(result.evictions), per_cycle=per_cycle, refused=story.refused_pods,
        held_by=dict(held_by), back_on_source=len(churn.back_on_source),
        repeated=len(churn.repeated), idle_cycles=len(churn.idle), figures=figures, met=met,
        after=balance(last, thresholds(result.policy)),
        groups=[GroupFigures(g.value, g.nodes, g.after) for g in whatif.group_balance(result)],
        notes=_last_notes(result))


_NOTES = 3


def _last_notes(result: SimulationResult) -> tuple[str, ...]:
    last = result.cycles
    texts = dict.fromkeys(f"{n.plugin}: {n.text}" for n in result.log.notes if n.cycle == last)
    return tuple(texts)[:_NOTES]

"""`desched tune`: the snapshot loaded once, the user's policy run as it is, candidates run over
copies of the snapshot (in worker processes forked after the load, which share it), the best
one written in the input's own format, and the floor beside it."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from desched.decoding.document import one_document
from desched.errors import InputError, warn
from desched.framework.policy import Policy
from desched.policy_files.loader import read_policy
from desched.scheduler.model import KUBE_DEFAULT
from desched.scheduler.profile import DEFAULT_CONFIG, SchedulerConfig
from desched.simulate.frames import MeasuredUsage, take_frame
from desched.simulate.simulation import Simulation
from desched.snapshot.loader import Warn
from desched.tune.evaluate import Measured, measure
from desched.tune.floor import Floor, floor
from desched.tune.goals import Goal
from desched.tune.knobs import Knob, Value, candidate, default_knobs, parse_varies
from desched.tune.knobs import current as current_value
from desched.tune.search import (
    Candidate,
    Contrast,
    Point,
    Search,
    contrasts,
    meets,
    pareto,
    rank,
    search,
)
from desched.tune.write import write_policy

BASELINE = "baseline"  # the user's own policy among reports' keys
# Candidates of the Pareto front that get their simulate report on the page (those nearest the
# recommendation in evictions): each is one more run.
FRONT_REPORTS = 12
Report = Point | str  # a candidate's point, or BASELINE


@dataclass(frozen=True)
class Settings:
    """How `tune` runs each candidate, and how long it may search."""

    cycles: int = 3
    reschedule: bool = True
    scheduler: str = KUBE_DEFAULT
    scheduler_config: SchedulerConfig = DEFAULT_CONFIG
    scheduler_config_path: str | None = None  # where it came from, for the report
    now: datetime | None = None
    group_by: str | None = None
    max_evictions: int | None = None  # per cycle
    budget: int = 60  # candidates at most
    jobs: int = 1
    floor_time_limit: float = 60.0  # seconds; 0: no floor


@dataclass
class TuneResult:
    policy_path: str
    snapshot_paths: list[str]
    nodes: int
    pods: int
    clock: str  # the clock the runs used, and where it came from
    settings: Settings
    goals: list[Goal]
    knobs: list[Knob]
    baseline: Measured  # the user's policy as it is
    baseline_values: tuple[Value | None, ...]  # its value of each knob (None: unset)
    now: tuple[float | None, ...]  # each goal's figure on the cluster as it is, before any move
    found: Search
    front: list[Candidate]
    contrasts: list[Contrast]
    floor: Floor | None
    written: str | None  # the recommended policy, in the input's format
    seconds: float  # the search's wall time
    unreachable: str | None = None  # why no candidate meets the goals
    warnings: list[str] = field(default_factory=list)

    @property
    def met_now(self) -> bool:
        """The cluster as it is meets every goal: no move is needed."""
        return all(v is not None and g.met(v) for g, v in zip(self.goals, self.now, strict=True))

    @property
    def recommended(self) -> Candidate | None:
        best = self.found.best
        if best is None or best.measured is None:
            return None
        return best if meets(best.measured, self.settings.max_evictions) else None


class Tuner:
    """The loaded policy and snapshot, and the candidates' runs over them."""

    def __init__(self, policy_path: str, snapshot_paths: list[str], goals: list[Goal],
                 vary: list[str], settings: Settings, warn: Warn = warn) -> None:
        self.settings = settings
        self.goals = goals
        label, self.text = read_policy(policy_path)
        self.label = label
        self.simulation = Simulation(
            label, snapshot_paths, settings.now, cycles=settings.cycles,
            reschedule=settings.reschedule, scheduler=settings.scheduler,
            scheduler_config=settings.scheduler_config,
            with_frames=True, group_by=settings.group_by, warn=warn,
            policy_text=self.text.encode("utf-8"))
        self.policy: Policy = self.simulation.policy
        self._pool: multiprocessing.pool.Pool | None = None
        self.document = one_document(label, self.text, "policy")
        snapshot = self.simulation.snapshot
        now = self.simulation.clock.now
        before = take_frame(snapshot, "before", now, MeasuredUsage(snapshot, now))
        self.now = tuple(goal.figure(before) for goal in goals)
        self.knobs = (parse_varies(vary, self.policy) if vary
                      else _for_goals(default_knobs(self.policy, before), goals))
        if not self.knobs:
            raise InputError(label, "the policy enables no balance plugin with thresholds to "
                                    "tune (LowNodeUtilization, HighNodeUtilization, "
                                    "LowNodeLoad); name what to vary with --vary")

    def assignment(self, values: tuple[Value, ...]) -> dict[Knob, Value]:
        return dict(zip(self.knobs, values, strict=True))

    def policy_for(self, values: tuple[Value, ...]) -> Policy:
        return candidate(self.label, self.document, self.policy, self.assignment(values))

    def values_at(self, point: Point) -> tuple[Value, ...]:
        return tuple(k.values()[i] for k, i in zip(self.knobs, point, strict=True))

    def check(self, point: Point) -> str | None:
        """Why the candidate at `point` is no valid policy (thresholds above targetThresholds,
        ...); None when it is. Milliseconds: no run."""
        try:
            self.policy_for(self.values_at(point))
        except InputError as err:
            return err.message
        return None

    def run_point(self, point: Point) -> Candidate:
        values = self.values_at(point)
        try:
            policy = self.policy_for(values)
        except InputError as err:
            return Candidate(point, values, None, err.message)
        result = self.simulation.run(again=True, policy=policy)
        return Candidate(point, values, measure(result, self.goals))

    def run_points(self, points: list[Point]) -> list[Candidate]:
        pool = self._pool
        if pool is None or len(points) <= 1:
            return [self.run_point(p) for p in points]
        return list(pool.imap(_run_in_worker, points, chunksize=1))

    def baseline(self) -> Measured:
        return measure(self.simulation.run(again=True), self.goals)

    def report(self, key: Report) -> str:
        """simulate's html report of the candidate at `key` (BASELINE: the user's policy): the
        page `desched simulate -o html` gives for that policy with the same flags."""
        from desched.report.html import render_html

        policy = None if isinstance(key, str) else self.policy_for(self.values_at(key))
        return render_html(self.simulation.run(again=True, policy=policy))

    def reports(self, result: TuneResult) -> dict[Report, str]:
        """The reports the html page embeds: the user's policy, the recommendation and the
        Pareto front's candidates nearest it (FRONT_REPORTS at most). Each is run again, so
        only the page pays for them."""
        best = result.recommended
        target = (best.measured.evictions if best is not None and best.measured is not None
                  else result.baseline.evictions)
        front = sorted((abs(c.measured.evictions - target), c.point)
                       for c in result.front if c.measured is not None)[:FRONT_REPORTS]
        keys: list[Report] = list(dict.fromkeys(
            [BASELINE, *([best.point] if best is not None else []), *(p for _, p in front)]))
        with _workers(self, min(self.settings.jobs, len(keys))) as pool:
            pages = (list(pool.imap(_report_in_worker, keys, chunksize=1)) if pool is not None
                     else [self.report(k) for k in keys])
        return dict(zip(keys, pages, strict=True))

    def tune(self) -> TuneResult:
        started = time.monotonic()
        current = tuple(current_value(self.policy, k) for k in self.knobs)
        start = _point_of(self.knobs, current)
        # Said here, where the command holds its warnings, before the workers are forked.
        self.simulation.preflight()
        with _workers(self, self.settings.jobs) as self._pool:
            # The user's policy runs in a worker too, beside the first candidates: the parent
            # keeps only the loaded snapshot, which the workers share (bench/README.md).
            pending = (self._pool.apply_async(_baseline_in_worker)
                       if self._pool is not None else None)
            found = search(self.knobs, self.run_points, self.goals,
                           max_evictions=self.settings.max_evictions,
                           budget=self.settings.budget, start=start, check=self.check)
            baseline = pending.get() if pending is not None else self.baseline()
        self._pool = None
        seconds = time.monotonic() - started
        settings = self.settings
        lowest = (floor(self.simulation.snapshot, self.policy, self.goals, cycles=settings.cycles,
                        now=self.simulation.clock.now, time_limit=settings.floor_time_limit)
                  if settings.floor_time_limit > 0 else None)
        snapshot = self.simulation.snapshot
        result = TuneResult(
            self.label, self.simulation.snapshot_paths, len(snapshot.nodes), len(snapshot.pods),
            f"{self.simulation.clock.now.isoformat()} ({self.simulation.clock.source})",
            settings, self.goals, self.knobs, baseline, current, self.now, found,
            pareto(found.valid, self.goals,
                   rank(self.goals, settings.max_evictions, found.start)),
            contrasts(found, self.goals, settings.max_evictions),
            lowest, None, seconds)
        best = result.recommended
        if best is not None:
            result.written = write_policy(self.text, self.label, self.policy,
                                          self.assignment(best.values))
        else:
            result.unreachable = unreachable(result)
        return result


def _for_goals(knobs: list[Knob], goals: list[Goal]) -> list[Knob]:
    """The default knobs of the resources the goals name (a cpu goal varies cpu thresholds),
    when there are such; every default knob otherwise."""
    resources = {g.resource for g in goals}
    mine = [k for k in knobs if k.path and k.path[-1] in resources]
    return mine or knobs


def _point_of(knobs: list[Knob], values: tuple[Value | None, ...]) -> Point | None:
    point = []
    for knob, value in zip(knobs, values, strict=True):
        choices = knob.values()
        if value not in choices:
            return None
        point.append(choices.index(value))
    return tuple(point)


def unreachable(result: TuneResult) -> str:
    """Why no candidate meets the goals, in one line: the floor's reason when no move at all
    can meet them, else what held the closest candidate back."""
    lowest = result.floor
    if lowest is not None and lowest.status == "infeasible" and lowest.reason:
        return f"no descheduler can meet the goals on this snapshot: {lowest.reason}"
    best = result.found.best
    if best is None or best.measured is None:
        reasons = {c.invalid for c in result.found.candidates.values() if c.invalid}
        return ("no candidate is a valid policy: " + "; ".join(sorted(reasons))[:300]
                if reasons else "no candidate ran")
    m = best.measured
    missed = [f"{g.text} ({'not measured' if v is None else g.shown(v)})"
              for g, v, ok in zip(result.goals, m.figures, m.met, strict=True) if not ok]
    parts = [f"the closest candidate ({values_text(result.knobs, best.values)}) "
             f"{'misses ' + ', '.join(missed) if missed else 'evicts too many in a cycle'}"]
    if m.evictions == 0 and m.notes:
        parts.append("it evicts nothing; its plugins said in the last cycle: "
                     + " / ".join(m.notes))
    if m.held_by:
        top = sorted(m.held_by.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        parts.append("pods held back by " + ", ".join(f"{by} ({n})" for by, n in top))
    if lowest is not None and lowest.moves is not None:
        parts.append(f"the floor meets them with {lowest.moves} pod moves, so other settings "
                     f"or plugins than those varied could")
    return "; ".join(parts)


def values_text(knobs: list[Knob], values: tuple[Value | None, ...]) -> str:
    return ", ".join(f"{k.text}={shown(v)}" for k, v in zip(knobs, values, strict=True))


def shown(value: Value | None) -> str:
    """A knob's value as the reports write it: 55, 0.5, true, unset."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


# -- worker processes ------------------------------------------------------------------------
# Forked after the load, so each worker shares the loaded snapshot with the parent; a worker
# runs a candidate on its own copy, as the parent would.
_ACTIVE: Tuner | None = None


def _run_in_worker(point: Point) -> Candidate:
    assert _ACTIVE is not None
    return _ACTIVE.run_point(point)


def _baseline_in_worker() -> Measured:
    assert _ACTIVE is not None
    return _ACTIVE.baseline()


def _report_in_worker(key: Report) -> str:
    assert _ACTIVE is not None
    return _ACTIVE.report(key)


@contextmanager
def _workers(tuner: Tuner, count: int) -> Iterator[multiprocessing.pool.Pool | None]:
    """`count` worker processes for the candidates' runs (None: run them here)."""
    global _ACTIVE
    if count <= 1:
        yield None
        return
    _ACTIVE = tuner
    try:
        with multiprocessing.get_context("fork").Pool(count) as pool:
            yield pool
    finally:
        _ACTIVE = None


def default_jobs() -> int:
    return max(1, min(len(os.sched_getaffinity(0)), 4))


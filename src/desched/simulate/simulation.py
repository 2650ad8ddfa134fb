"""`desched simulate` and `explain`: a Simulation loads the policy and the snapshot once, then
runs them with the simulation executor, N cycles a run, as often as asked (`--outcomes`), each
run told to whatever observes it (explain)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from desched.errors import InputError, warn
from desched.executors.simulation import SimulationExecutor
from desched.framework.background import InBackground
from desched.framework.decisions import Decision, DecisionLog
from desched.framework.evictor import LIMIT_ARGS, LIMIT_MESSAGES
from desched.framework.moves import MoveTracker
from desched.framework.moves.inflight import vanished
from desched.framework.policy import Policy
from desched.framework.runner import Descheduler, check_policy
from desched.framework.types import Clock, UsageQueries
from desched.model.objects import PodDisruptionBudget
from desched.model.pod import Pod
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import load_policy, parse_policy
from desched.scheduler.by_name import scheduler_model
from desched.scheduler.model import KUBE_DEFAULT, Placement, SchedulerModel
from desched.scheduler.placement import reschedule
from desched.scheduler.profile import DEFAULT_CONFIG, SchedulerConfig
from desched.simulate.frames import (
    Frame,
    MeasuredUsage,
    QueriedUsage,
    QueriesUsage,
    add_queried,
    take_frame,
)
from desched.simulate.preflight import Unmatched, needs, unmatched
from desched.snapshot.clock import (
    SimulationClock,
    advance_metrics,
    fixed_clock,
    snapshot_clock,
)
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.completeness import LoadWarnings, missing, require_nodes
from desched.snapshot.loader import STDIN, STDIN_LABEL, Warn, load_snapshot
from desched.snapshot.workloads import WorkloadResolver
from desched.util.duration import MAX_SECONDS, format_duration

# Plugins add and subtract policy durations (Go's, at most about 292 years) to and from the
# clock; every cycle's clock must leave that much room inside datetime's years 1 to 9999.
_HEADROOM = timedelta(seconds=MAX_SECONDS)


def _check_clock(now: datetime, interval: float, cycles: int) -> None:
    """InputError when a cycle's clock, one deschedulingInterval after the other, give or take
    the longest duration a policy can hold, is beyond the years datetime represents."""
    try:
        _ = (now - _HEADROOM, now + timedelta(seconds=interval * (cycles - 1)) + _HEADROOM)
    except OverflowError:
        span = (f" and {cycles} cycles {format_duration(interval)} apart" if cycles > 1
                and interval else "")
        raise InputError("--now", f"{now.isoformat()}{span} is too close to the limits of "
                                  f"representable time (years 1 to 9999, less "
                                  f"{_HEADROOM.days // 365} years for policy durations)") from None


@dataclass
class CycleSummary:
    cycle: int
    skipped: str | None = None
    placements: list[tuple[str, str | None]] = field(default_factory=list)
    # Replacement -> the evicted pod it replaces; and its placement where kube-scheduler
    # would choose at random (ties, a sample of the nodes).
    replaces: dict[str, str] = field(default_factory=dict)
    chances: dict[str, Placement] = field(default_factory=dict)
    # Each pod this cycle evicted -> the node it left, its workload ("Deployment ns/name") and
    # the plugin that evicted it, for the churn a report flags (replacements back on their node
    # or evicted again).
    evicted: dict[str, Evicted] = field(default_factory=dict)
    # Each pod whose eviction a plugin wanted and this cycle did not make (a budget, a limit,
    # an error refused it, or `moves` deferred it), for the pacing and refusals a report tells.
    held: dict[str, Held] = field(default_factory=dict)

    def came_back(self, replacement: str, node: str | None) -> str | None:
        """The pod `replacement` replaces, when it was placed on the node that pod left."""
        old = self.replaces.get(replacement)
        source = self.evicted.get(old) if old is not None else None
        return old if source is not None and node is not None and source.node == node else None


@dataclass(frozen=True)
class Evicted:
    node: str
    workload: str
    plugin: str = ""


# What held a pod back, by outcome: a budget, a limit, an error, the policy's `moves`.
HELD_OUTCOMES = frozenset({"pdb-blocked", "limited", "failed", "deferred"})
# The policy fields behind the Evictor's limit messages (framework/evictor.py LIMIT_MESSAGES).
LIMIT_FIELDS = {LIMIT_MESSAGES[scope]: name for scope, name in LIMIT_ARGS.items()}


@dataclass(frozen=True)
class Held:
    """An eviction a plugin wanted in a cycle and did not get: its outcome (pdb-blocked,
    limited, failed, deferred), what held it ("PodDisruptionBudget ns/name", the limit's policy
    field, the error, `moves`) and the pod's workload."""

    outcome: str
    by: str
    workload: str


def held(decided: Iterable[Decision], snapshot: ClusterSnapshot,
         resolver: WorkloadResolver) -> dict[str, Held]:
    """The pods a cycle's decisions held back, each once: its last refusal tells what held
    it."""
    out: dict[str, Held] = {}
    budgets: dict[int, tuple[list[PodDisruptionBudget], str]] = {}  # replicas share theirs
    for d in decided:
        if d.outcome not in HELD_OUTCOMES:
            continue
        key = f"{d.namespace}/{d.pod}"
        before = out.get(key)
        if before is not None and before.outcome == d.outcome:
            continue
        pod = snapshot.pods.get(key)
        workload = (before.workload if before is not None
                    else workload_name(resolver, pod) if pod is not None else f"Pod {key}")
        out[key] = Held(d.outcome, _held_by(d, pod, snapshot, budgets), workload)
    return out


def _held_by(d: Decision, pod: Pod | None, snapshot: ClusterSnapshot,
             named: dict[int, tuple[list[PodDisruptionBudget], str]]) -> str:
    """What held the pod back; `named`: the budgets' text by their list, which pods with
    the same labels share (ClusterSnapshot.pdbs_for_pod), kept with the list."""
    if d.outcome == "pdb-blocked":
        budgets = snapshot.pdbs_for_pod(pod) if pod is not None else []
        known = named.get(id(budgets))
        if known is None or known[0] is not budgets:
            text = ", ".join(f"PodDisruptionBudget {b.metadata.namespace}/{b.metadata.name}"
                             for b in budgets) or "a PodDisruptionBudget"
            known = named[id(budgets)] = (budgets, text)
        return known[1]
    if d.outcome == "limited":
        return LIMIT_FIELDS.get(d.reason, d.reason)
    if d.outcome == "deferred":
        return "the policy's moves"
    return d.reason


def workload_name(resolver: WorkloadResolver, pod: Pod) -> str:
    """The workload a pod belongs to, as a report names it (WorkloadResolver.name_of)."""
    return resolver.name_of(pod)


@dataclass
class SimulationResult:
    policy: Policy
    snapshot_files: list[str]
    nodes: int
    pods: int
    cycles: int
    log: DecisionLog
    summaries: list[CycleSummary]
    clock: SimulationClock
    descheduler: Descheduler | None = None  # its profiles and plugins, for explain
    # Utilization before the first cycle and after each (for the report's plots and balance).
    frames: list[Frame] = field(default_factory=list)
    # With outcomes > 1: the utilization after the last cycle in each other outcome of
    # kube-scheduler's random choices (this result's own is frames[-1]).
    other_outcomes: list[Frame] = field(default_factory=list)
    # Whether evicted pods were recreated and placed (--reschedule): without it every figure
    # after a cycle has them gone and not replaced, an optimistic reading.
    replaced: bool = False
    # --group-by LABEL: the label, and each node's value of it ("" when the node has none).
    group_label: str | None = None
    groups: dict[str, str] = field(default_factory=dict)
    # What the run said on stderr before its first cycle (kinds the snapshot lacks, then the
    # selectors and includes that match nothing), and the latter as found.
    warnings: list[str] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)
    scheduler: str = KUBE_DEFAULT  # the model --reschedule placed replacements with

    @property
    def evictions(self) -> list[Decision]:
        return self.log.evictions()

    @property
    def optimistic(self) -> bool:
        """Pods left their nodes and nothing took their place: every "after" is the best case."""
        return not self.replaced and any(s.evicted for s in self.summaries)


class Observer(Protocol):
    """What watches a run from outside the framework: `explain` follows its pods through it."""

    def started(self, log: DecisionLog) -> None:
        """Before the first cycle: the run records into `log` (explain asks it to record its
        pods in full)."""

    def cycle_starts(self, cycle: int, snapshot: ClusterSnapshot) -> None:
        """Before each cycle, the cluster as the cycles and placements before it left it."""

    def placed(self, cycle: int, placed: list[tuple[Pod, Pod, str | None]]) -> None:
        """A cycle's evicted pods recreated and placed (--reschedule): (evicted pod,
        replacement, its node or None)."""


class Simulation:
    """`desched simulate` and `explain`: the policy and the snapshot, loaded once, and runs of
    `cycles` cycles over them. Each run builds its own Descheduler (plugin state starts
    afresh); each but the last runs on a restored copy of the snapshot as loaded
    (ClusterSnapshot.copy), so `--outcomes N` costs one load and N runs, whatever the snapshot
    was read from (standard input can be read once).

    `now` None: the snapshot's own time (snapshot/clock.py). `reschedule` recreates and places
    the evicted pods between cycles with the model `scheduler` names, running the profiles of
    `scheduler_config` (scheduler/config/). `with_frames`: take utilization frames
    (simulate/frames.py) for a report. `group_by`: a node label whose values group the nodes
    in a report. `warn` says, once, what the snapshot lacks for the runs and what in the policy
    matches nothing in it (also in each result); a snapshot without nodes is an InputError.
    `queries`: answers to the usage sources' Prometheus queries (usage.RecordedQueries); None,
    as `simulate` runs: a plugin run that needs Prometheus ends with a note, since a simulation
    makes no network requests."""

    def __init__(self, policy_path: str, snapshot_paths: list[str], now: datetime | None, *,
                 cycles: int = 1, reschedule: bool = False, scheduler: str = KUBE_DEFAULT,
                 scheduler_config: SchedulerConfig = DEFAULT_CONFIG, with_frames: bool = False,
                 group_by: str | None = None, warn: Warn = warn,
                 queries: UsageQueries | None = None, policy_text: bytes | None = None) -> None:
        self.snapshot_paths = snapshot_paths
        self.queries = queries
        self.cycles = cycles
        self.reschedule = reschedule
        self.scheduler = scheduler
        self.scheduler_config = scheduler_config
        self.with_frames = with_frames
        self.group_by = group_by
        self.warn = warn
        # `policy_text`: the file's bytes, read already (`tune` keeps them to write its answer
        # in; standard input can be read once).
        self.policy = (load_policy(policy_path, PLUGINS) if policy_text is None
                       else parse_policy(policy_path, policy_text, PLUGINS))
        check_policy(self.policy)  # before the snapshot, which can take seconds to load
        interval = self.policy.descheduling_interval
        if now is not None:
            _check_clock(now, interval, cycles)  # before the slow load
        loading = LoadWarnings(warn)
        self.snapshot = load_snapshot(snapshot_paths, loading)
        require_nodes(self.snapshot, [STDIN_LABEL if p == STDIN else p for p in snapshot_paths],
                      loading.ignored)
        loading.release()
        self.clock = fixed_clock(now) if now is not None else snapshot_clock(self.snapshot)
        if now is None:
            _check_clock(self.clock.now, interval, cycles)
        self._used = False  # a run took the loaded snapshot itself: no other may follow
        # What the first run found matching nothing and warned about, told once.
        self._preflight: tuple[list[Unmatched], list[str]] | None = None

    def _descheduler(self, policy: Policy, snapshot: ClusterSnapshot,
                     executor: SimulationExecutor, clock: Clock, log: DecisionLog) -> Descheduler:
        # Pods the snapshot shows with an eviction in background in progress count against the
        # limits and are not evicted again, as in a run with upstream's gate on.
        return Descheduler(policy, snapshot, executor, clock, log,
                           moves=MoveTracker(simulated=True), queries=self.queries,
                           background=InBackground())

    def _said(self, descheduler: Descheduler,
              model: SchedulerModel) -> tuple[list[Unmatched], list[str]]:
        """What matches nothing and the lines warned about it: found and said by the first
        run (or `preflight`), kept for the others."""
        if self._preflight is None:
            self._preflight = _preflight(descheduler, model if self.reschedule else None)
            for line in self._preflight[1]:
                self.warn(line)
        return self._preflight

    def preflight(self) -> None:
        """Say now what the runs would say once before their first cycle: `tune` does, in the
        process that holds the command's warnings, before it forks the workers that run its
        candidates (which inherit it and say nothing again)."""
        if self._preflight is None:
            snapshot = self.snapshot.copy()
            descheduler = self._descheduler(self.policy, snapshot, SimulationExecutor(snapshot),
                                            Clock(self.clock.now), DecisionLog())
            self._said(descheduler, scheduler_model(self.scheduler, self.scheduler_config))

    def outcomes(self, count: int) -> SimulationResult:
        """The run with kube-scheduler's ties broken by node name; with `reschedule` and
        frames, `count` - 1 more with them broken at random (seeds 1, 2, ...), whose last
        frames give the range of the figures after (`other_outcomes`)."""
        more = count - 1 if self.reschedule and self.with_frames else 0
        result = self.run(again=more > 0)
        for seed in range(1, more + 1):
            result.other_outcomes.append(self.run(seed, again=seed < more).frames[-1])
        return result

    def run(self, seed: int | None = None, observer: Observer | None = None, *,
            again: bool = False, policy: Policy | None = None) -> SimulationResult:
        """One run, kube-scheduler's ties broken by node name, or at random from `seed`.
        `again`: another run follows, so this one runs on a copy of the snapshot as loaded;
        without it the run takes the loaded snapshot itself (no copy), and none may follow.
        `policy`: another policy than the one loaded, checked as it was (`tune`'s candidates,
        which differ from it in balance settings and limits only)."""
        if self._used:
            raise RuntimeError("the loaded snapshot was taken by a run made without again=True")
        nodes, pods = len(self.snapshot.nodes), len(self.snapshot.pods)  # as loaded
        if again:
            snapshot = self.snapshot.copy()
        else:
            snapshot, self._used = self.snapshot, True
        if policy is None:
            policy = self.policy
        else:
            check_policy(policy)
        cycles, do_reschedule = self.cycles, self.reschedule
        model = scheduler_model(self.scheduler, self.scheduler_config,
                                random.Random(seed) if seed is not None else None)
        log = DecisionLog()
        if observer is not None:
            observer.started(log)
        now = self.clock.now
        executor = SimulationExecutor(snapshot)
        clock = Clock(now)
        descheduler = self._descheduler(policy, snapshot, executor, clock, log)
        found, warnings = self._said(descheduler, model)
        summaries = []
        resolver = WorkloadResolver(snapshot)
        with_frames = self.with_frames
        measured = MeasuredUsage(snapshot, now) if with_frames else None
        frames = [take_frame(snapshot, "before", now, measured)] if with_frames else []
        for cycle in range(1, cycles + 1):
            # Cycles are a descheduling interval apart when the policy sets one (Koordinator's
            # deschedulingInterval), so timeouts and metric expiry play out as they would live.
            moment = now + timedelta(seconds=policy.descheduling_interval * (cycle - 1))
            advance_metrics(snapshot, moment - clock.now)
            clock.now = moment
            if observer is not None:
                observer.cycle_starts(cycle, snapshot)
            first = len(log.decisions)
            summary = CycleSummary(cycle, descheduler.run_cycle(cycle))
            decided = log.decisions[first:]
            if not policy.dry_run:  # a dry run's next cycle starts from the real cluster again
                by = {f"{d.namespace}/{d.pod}": d.plugin for d in decided
                      if d.outcome in ("evicted", "restarted")}
                summary.evicted = {pod.key: Evicted(pod.node_name, workload_name(resolver, pod),
                                                    by.get(pod.key, ""))
                                   for pod in executor.evicted}
            summary.held = held(decided, snapshot, resolver)
            if policy.dry_run:
                # Koordinator's dryRun evicts nothing: the cycle ran on its own copy of the
                # facts (pods gone, budgets used) as a live dry run does, the next starts from
                # the real cluster again.
                for pod in executor.evicted:
                    snapshot.add_pod(pod)
                executor = SimulationExecutor(snapshot)
                descheduler.use_executor(executor)
            elif not do_reschedule and executor.evicted and policy.plans_moves:
                # Pacing reads a workload's missing pods: gone for good here, they count as
                # replaced and Ready by the next cycle (docs/moves.md).
                vanished(descheduler.moves, executor.evicted, resolver)
            elif do_reschedule and executor.evicted:
                # kube-scheduler places on any node, whatever nodes the policy descheduled.
                placed = reschedule(executor.evicted, snapshot, cycle, snapshot.ready_nodes(),
                                    model, clock.now, summary.chances)
                summary.placements = [(new.key, node) for _, new, node in placed]
                summary.replaces = {new.key: old.key for old, new, _ in placed}
                if observer is not None:
                    observer.placed(cycle, placed)
                for old, _, node in placed:
                    if node is not None:
                        executor.budgets.replaced(old)
            executor.evicted.clear()
            summaries.append(summary)
            if with_frames:
                frame = take_frame(snapshot, f"after cycle {cycle}", clock.now, measured)
                for source in _queried(descheduler):
                    add_queried(frame, source)
                frames.append(frame)
        for source in _queried(descheduler) if with_frames else ():
            add_queried(frames[0], source, first=True)  # before: as the server first answered
        result = SimulationResult(policy, self.snapshot_paths, nodes, pods, cycles, log,
                                  summaries, self.clock, descheduler, frames,
                                  replaced=do_reschedule and not policy.dry_run,
                                  warnings=warnings, unmatched=found, scheduler=self.scheduler)
        if self.group_by is not None:
            result.group_label = self.group_by
            result.groups = {name: node.labels.get(self.group_by, "")
                             for name, node in snapshot.nodes.items()}
        return result


def run_simulation(policy_path: str, snapshot_paths: list[str], now: datetime | None,
                   cycles: int = 1, reschedule: bool = False, *, with_frames: bool = False,
                   warn: Warn = warn, queries: UsageQueries | None = None) -> SimulationResult:
    """One load, one run (Simulation's defaults otherwise): what most tests need."""
    return Simulation(policy_path, snapshot_paths, now, cycles=cycles, reschedule=reschedule,
                      with_frames=with_frames, warn=warn, queries=queries).run()


def _preflight(descheduler: Descheduler,
               model: SchedulerModel | None) -> tuple[list[Unmatched], list[str]]:
    """What matches nothing, and every line to warn: the kinds the snapshot lacks first."""
    placing = [] if model is None or descheduler.policy.dry_run else [
        ("the scheduler model of --reschedule", model)]
    found = unmatched(descheduler)
    return found, [*missing(descheduler.snapshot, needs(descheduler, placing)),
                   *(u.text for u in found)]


def _queried(descheduler: Descheduler) -> list[QueriedUsage]:
    """The usage sources the plugins asked a server the snapshot does not hold."""
    found = []
    for profile in descheduler.profiles:
        for plugin in profile.plugins.values():
            if isinstance(plugin, QueriesUsage):
                source = plugin.queried_usage()
                if source is not None:
                    found.append(source)
    return found

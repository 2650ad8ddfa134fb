"""`desched simulate`: the policy, the snapshot, the simulation executor, N cycles."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from desched.errors import InputError, quote, warn
from desched.executors.simulation import SimulationExecutor
from desched.framework.decisions import Decision, DecisionLog
from desched.framework.evictor import LIMIT_MESSAGES, LimitScope
from desched.framework.moves import MoveTracker
from desched.framework.moves.inflight import vanished
from desched.framework.policy import Policy
from desched.framework.runner import Descheduler, check_policy
from desched.framework.types import Clock, UsageQueries
from desched.model.pod import Pod
from desched.plugins.catalog import PLUGINS
from desched.policy.loader import load_policy
from desched.preflight import Unmatched, needs, unmatched
from desched.scheduler.by_name import scheduler_model
from desched.scheduler.model import KUBE_DEFAULT, Placement, SchedulerModel
from desched.scheduler.placement import reschedule
from desched.scheduler.profile import DEFAULT_CONFIG, SchedulerConfig
from desched.snapshot.clock import (
    SimulationClock,
    advance_metrics,
    fixed_clock,
    snapshot_clock,
)
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.completeness import LoadWarnings, missing, require_nodes
from desched.snapshot.loader import STDIN, STDIN_LABEL, Warn, load_snapshot
from desched.snapshot.workloads import Workload, WorkloadResolver
from desched.util.duration import MAX_SECONDS, format_duration
from desched.util.names import nearest
from desched.utilization import (
    Frame,
    MeasuredUsage,
    QueriedUsage,
    QueriesUsage,
    add_queried,
    take_frame,
)


def _quiet(_: str) -> None:
    """For the simulation run again per outcome: the first run said it all."""


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
_LIMITS: dict[LimitScope, str] = {"total": "maxNoOfPodsToEvictTotal",
                                   "node": "maxNoOfPodsToEvictPerNode",
                                   "namespace": "maxNoOfPodsToEvictPerNamespace"}
LIMIT_FIELDS = {LIMIT_MESSAGES[scope]: name for scope, name in _LIMITS.items()}


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
        out[key] = Held(d.outcome, _held_by(d, pod, snapshot), workload)
    return out


def _held_by(d: Decision, pod: Pod | None, snapshot: ClusterSnapshot) -> str:
    if d.outcome == "pdb-blocked":
        budgets = snapshot.pdbs_for_pod(pod) if pod is not None else []
        return ", ".join(f"PodDisruptionBudget {b.metadata.namespace}/{b.metadata.name}"
                         for b in budgets) or "a PodDisruptionBudget"
    if d.outcome == "limited":
        return LIMIT_FIELDS.get(d.reason, d.reason)
    if d.outcome == "deferred":
        return "the policy's moves"
    return d.reason


def workload_name(resolver: WorkloadResolver, pod: Pod) -> str:
    """The workload a pod belongs to, as a report names it: the Deployment behind its
    ReplicaSet where the snapshot has both, else its controller, else the pod itself."""
    found = resolver.resolve(pod)
    if isinstance(found, Workload):
        return str(found)
    ref = pod.controller
    if ref is not None:
        return f"{ref.kind} {pod.namespace}/{ref.name}"
    return f"Pod {pod.key}"


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


def run_simulation(policy_path: str, snapshot_paths: list[str], now: datetime | None,
                   cycles: int, do_reschedule: bool,
                   log: DecisionLog | None = None, *,
                   scheduler: str = KUBE_DEFAULT,
                   scheduler_config: SchedulerConfig = DEFAULT_CONFIG,
                   with_frames: bool = False, outcomes: int = 1,
                   tie_seed: int | None = None,
                   group_by: str | None = None, warn: Warn = warn,
                   queries: UsageQueries | None = None) -> SimulationResult:
    """`now` None: the snapshot's own time (snapshot/clock.py). `scheduler` names the model
    that places replacements with `do_reschedule`, running the profiles of `scheduler_config`
    (scheduler/config/). `with_frames`: take utilization frames (snapshot/utilization)
    for a report. `outcomes` > 1 (with `do_reschedule` and frames): run the simulation again
    outcomes - 1 times, kube-scheduler's ties broken at random (seeds 1, 2, ...), for the
    range of the figures after; `tie_seed`: this run's seed (None: ties by node name).
    `group_by`: a node label whose values group the nodes in a report. `warn` says, once, what
    the snapshot lacks for this run and what in the policy matches nothing in it (also in the
    result); a snapshot without nodes is an InputError. `queries`: answers to the usage
    sources' Prometheus queries (usage.RecordedQueries); None, as `simulate` runs: a plugin run
    that needs Prometheus ends with a note, since a simulation makes no network requests."""
    model = scheduler_model(scheduler, scheduler_config,
                            random.Random(tie_seed) if tie_seed is not None else None)
    policy = load_policy(policy_path, PLUGINS)
    check_policy(policy)  # before the snapshot, which can take seconds to load
    if now is not None:
        _check_clock(now, policy.descheduling_interval, cycles)  # before the slow load
    loading = LoadWarnings(warn)
    snapshot = load_snapshot(snapshot_paths, loading)
    require_nodes(snapshot, [STDIN_LABEL if p == STDIN else p for p in snapshot_paths],
                  loading.ignored)
    loading.release()
    if log is not None:
        log.subjects = _subjects(log, snapshot, snapshot_paths)
    sim_clock = fixed_clock(now) if now is not None else snapshot_clock(snapshot)
    if now is None:
        now = sim_clock.now
        _check_clock(now, policy.descheduling_interval, cycles)
    nodes, pods = len(snapshot.nodes), len(snapshot.pods)
    executor = SimulationExecutor(snapshot)
    clock = Clock(now)
    descheduler = Descheduler(policy, snapshot, executor, clock, log or DecisionLog(),
                              moves=MoveTracker(simulated=True), queries=queries)
    found, warnings = _preflight(descheduler, model if do_reschedule else None)
    for line in warnings:
        warn(line)
    summaries = []
    resolver = WorkloadResolver(snapshot)
    measured = MeasuredUsage(snapshot, now) if with_frames else None
    frames = [take_frame(snapshot, "before", now, measured)] if with_frames else []
    for cycle in range(1, cycles + 1):
        # Cycles are a descheduling interval apart when the policy sets one (Koordinator's
        # deschedulingInterval), so timeouts and metric expiry play out as they would live.
        moment = now + timedelta(seconds=policy.descheduling_interval * (cycle - 1))
        advance_metrics(snapshot, moment - clock.now)
        clock.now = moment
        first = len(descheduler.log.decisions)
        summary = CycleSummary(cycle, descheduler.run_cycle(cycle))
        decided = descheduler.log.decisions[first:]
        if not policy.dry_run:  # a dry run's next cycle starts from the real cluster again
            by = {f"{d.namespace}/{d.pod}": d.plugin for d in decided
                  if d.outcome in ("evicted", "restarted")}
            summary.evicted = {pod.key: Evicted(pod.node_name, workload_name(resolver, pod),
                                                by.get(pod.key, ""))
                               for pod in executor.evicted}
        summary.held = held(decided, snapshot, resolver)
        if policy.dry_run:
            # Koordinator's dryRun evicts nothing: the cycle ran on its own copy of the facts
            # (pods gone, budgets used) as a live dry run does, the next starts from the real
            # cluster again.
            for pod in executor.evicted:
                snapshot.add_pod(pod)
            executor = descheduler.executor = SimulationExecutor(snapshot)
            descheduler.evictor.executor = executor
        elif not do_reschedule and executor.evicted and policy.plans_moves:
            # Pacing reads a workload's missing pods: gone for good here, they count as
            # replaced and Ready by the next cycle (docs/moves.md).
            vanished(descheduler.moves, executor.evicted, resolver)
        elif do_reschedule and executor.evicted:
            # kube-scheduler places on any node, whatever nodes the policy descheduled.
            placed = reschedule(executor.evicted, snapshot, cycle, snapshot.ready_nodes(), model,
                                clock.now, summary.chances)
            summary.placements = [(new.key, node) for _, new, node in placed]
            summary.replaces = {new.key: old.key for old, new, _ in placed}
            if log is not None and log.explaining:
                _follow(log, placed, cycle)
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
    result = SimulationResult(policy, snapshot_paths, nodes, pods, cycles, descheduler.log,
                              summaries, sim_clock, descheduler, frames,
                              replaced=do_reschedule and not policy.dry_run,
                              warnings=warnings, unmatched=found, scheduler=scheduler)
    if group_by is not None:
        result.group_label = group_by
        result.groups = {name: node.labels.get(group_by, "")
                         for name, node in snapshot.nodes.items()}
    if outcomes > 1 and do_reschedule and with_frames:
        for seed in range(1, outcomes):
            other = run_simulation(policy_path, snapshot_paths, now, cycles, True,
                                   scheduler=scheduler, scheduler_config=scheduler_config,
                                   with_frames=True, tie_seed=seed, warn=_quiet,
                                   queries=queries)
            result.other_outcomes.append(other.frames[-1])
    return result


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


def _follow(log: DecisionLog, placed: list[tuple[Pod, Pod, str | None]], cycle: int) -> None:
    """`explain` follows an explained pod to its replacement."""
    for old, new, node in placed:
        if old.key in log.subjects:
            log.replacements[old.key] = (cycle, new, node)
            if node is not None:
                log.subjects[new.key] = new
                log.explain_pods = log.explain_pods | {new.key}


def _subjects(log: DecisionLog, snapshot: ClusterSnapshot, paths: list[str]) -> dict[str, Pod]:
    """The pods `explain` asks about (named, or on a named node) and their nodes; a name the
    snapshot does not hold is an input error."""
    where = ", ".join(paths)
    subjects: dict[str, Pod] = {}
    for ref in sorted(log.explain_pods):
        if "/" not in ref:  # NAME alone: the one pod of that name, in whichever namespace
            key = _pod_named(ref, snapshot, where)
            log.explain_pods = log.explain_pods - {ref} | {key}
            ref = key
        pod = snapshot.pods.get(ref)
        if pod is None:
            namespace = ref.partition("/")[0]
            # Among the namespace's pods when it exists: a whole cluster's would be slow.
            known = snapshot.pods_by_namespace.get(namespace) or snapshot.pods
            raise InputError("--pod", f"pod {quote(ref)} is not in the snapshot ({where})"
                             f"{_did_you_mean(ref, known)}")
        subjects[ref] = pod
    for name in sorted(log.explain_nodes):
        if name not in snapshot.nodes:
            raise InputError("--node", f"node {quote(name)} is not in the snapshot ({where})"
                             f"{_did_you_mean(name, snapshot.nodes)}")
        for pod in sorted(snapshot.pods_on_node(name, include_terminal=True),
                          key=lambda p: p.key):
            subjects[pod.key] = pod
    return subjects


def _pod_named(name: str, snapshot: ClusterSnapshot, where: str) -> str:
    """The NAMESPACE/NAME of the one pod called `name`; an input error naming the pods it may
    mean when several namespaces hold one, or the nearest name when none does."""
    keys = sorted(key for key, pod in snapshot.pods.items() if pod.name == name)
    if len(keys) == 1:
        return keys[0]
    if keys:
        raise InputError("--pod", f"{len(keys)} pods are named {quote(name)} in the snapshot "
                                  f"({where}): give NAMESPACE/NAME; did you mean "
                                  f"{_either(keys)}?")
    close = nearest(name, {pod.name for pod in snapshot.pods.values()})
    meant = sorted(key for key, pod in snapshot.pods.items() if pod.name == close) if close \
        else []
    hint = f"; did you mean {_either(meant)}?" if meant else ""
    raise InputError("--pod", f"no pod named {quote(name)} is in the snapshot ({where}){hint}")


def _either(keys: list[str], shown: int = 5) -> str:
    """'"a", "b" or "c"', the first `shown` of `keys` and how many more."""
    names = [quote(k) for k in keys[:shown]]
    more = len(keys) - shown
    if more > 0:
        return f"{', '.join(names)} or {more} more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = nearest(name, known)
    return f"; did you mean {quote(close)}?" if close else ""

"""Cycle assembly for `desched run`: one cycle put together from the run's parts and run.

A cycle takes a snapshot of the informer caches, builds a fresh Descheduler on it (plugins
capture the snapshot when they are built, and query Prometheus through the run's
live/prometheus.py) behind the cycle's executor (the Eviction API, the
PodMigrationJob executor for migrating profiles, or the simulation executor in a dry run,
guarded against a shutdown or a lost lease), hands the plugins the state they carry (from
memory, or for a one-cycle run from its ConfigMap), registers the plugin timer, runs the
plugins in a worker thread while the event loop stays free, and reports: log lines, metrics,
events and the cycle's report (live/cycle_facts.py)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from desched.errors import InputError
from desched.executors.simulation import SimulationExecutor
from desched.framework.evictor import Executor
from desched.framework.moves import MoveTracker
from desched.framework.policy import Policy
from desched.framework.runner import Descheduler
from desched.framework.types import Clock, UsageQueries
from desched.live import background
from desched.live import logging as desched_logging
from desched.live.assumed import EvictedPods
from desched.live.carried_state import CarriedState, plugins_of
from desched.live.client import ApiClient
from desched.live.config import RunConfig, default_lease_namespace
from desched.live.cycle import (
    CycleInterrupted,
    CycleReporter,
    GuardedExecutor,
    LiveDecisionLog,
    log_note,
)
from desched.live.cycle_facts import CycleFacts, CycleReport, RecordedEvictions
from desched.live.detector_state import DetectorState, persistent
from desched.live.events import EventRecorder
from desched.live.informer import Informer, build_snapshot
from desched.live.metrics import Metrics
from desched.live.migration_supervisor import MigrationSupervisor
from desched.live.plugin_timing import PluginTimer
from desched.live.tracing import Tracing
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.backoff import Backoff

log = desched_logging.get_logger("desched.run")

Guard = Callable[[], str | None]


class CycleAssembly:
    """Runs the cycles of one `desched run`. `looping`: a loop rather than a one-cycle run
    (which raises a policy its snapshot cannot build, and keeps carried state in a ConfigMap);
    `watch_frames`: take the utilization plots of the /cycles page in the cycle's thread."""

    def __init__(self, config: RunConfig, metrics: Metrics, *, dry_run: bool, looping: bool,
                 stopping: threading.Event, carried: CarriedState,
                 migrations: MigrationSupervisor, evicted_pods: EvictedPods,
                 moves: MoveTracker, watch_frames: bool = False,
                 tracing: Tracing | None = None) -> None:
        self.config = config
        self.metrics = metrics
        self.dry_run = dry_run
        self.looping = looping
        self.stopping = stopping  # read by the cycle's thread
        self.carried = carried
        self.migrations = migrations
        self.evicted_pods = evicted_pods
        self.moves = moves
        self.watch_frames = watch_frames
        self.timer = PluginTimer(metrics)
        # The evictions in background in progress, across cycles (None: the gate is off).
        self.background = background.tracker(config.feature_gates, metrics)
        self.tracing = tracing  # --otel-collector-endpoint (live/tracing.py)
        self.events_failed = 0  # events not posted, all run long

    def event_posted(self, type_: str, ok: bool) -> None:
        """The EventRecorder's report on each event it posted (or could not)."""
        self.metrics.event_posted(type_, ok)
        self.events_failed += not ok

    def executor(self, policy: Policy, snapshot: ClusterSnapshot, facts: CycleFacts,
                 client: ApiClient | None, loop: asyncio.AbstractEventLoop,
                 guard: Guard | None) -> Executor:
        if self.dry_run:
            return SimulationExecutor(snapshot)
        assert client is not None
        config = self.config
        evictions = RecordedEvictions(
            client, loop, snapshot, grace_period_seconds=policy.grace_period_seconds,
            attempts=config.eviction_attempts, timeout=config.eviction_timeout,
            backoff=Backoff(*config.eviction_backoff), facts=facts, fence=guard,
            assumed=self.evicted_pods)
        return self.migrations.executor(evictions, client, loop, snapshot,
                                        attempts=config.eviction_attempts,
                                        timeout=config.eviction_timeout)

    async def run(self, number: int, policy: Policy, *, informers: Sequence[Informer],
                  client: ApiClient | None, loop: asyncio.AbstractEventLoop,
                  events: EventRecorder | None, guard: Guard | None,
                  wake: asyncio.Event, queries: UsageQueries | None = None,
                  cause: str = "schedule") -> CycleReport:
        """Cycle `number` under `policy`; `guard`: why this instance may not evict now (a
        lost lease), when it elects a leader; `wake`: set when a --once run's wait for its
        migration jobs must end; `queries`: how usage sources query Prometheus
        (live/prometheus.py); `cause`: why it runs (live/triggers.py), logged and kept."""
        started = time.monotonic()
        dry_run = self.dry_run
        facts = CycleFacts(datetime.now(UTC), dry_run, policy, cause=cause)
        events_failed = self.events_failed
        snapshot = await build_snapshot(informers, self.evicted_pods)
        facts.nodes, facts.pods = len(snapshot.nodes), len(snapshot.pods)
        self.metrics.snapshot_duration.observe(time.monotonic() - started)
        self.migrations.observe(snapshot)
        reporter = CycleReporter(policy, self.metrics, snapshot, events, dry_run,
                                 self.migrations.profiles)
        decisions = LiveDecisionLog(
            reporter.record,
            lambda profile, plugin, _: self.metrics.usage_unavailable.labels(profile,
                                                                              plugin).inc(),
            log_note, reporter.moved)
        inner = self.executor(policy, snapshot, facts, client, loop, guard)
        executor = (self.tracing.guarded if self.tracing else GuardedExecutor)(
            inner, self.stopping, guard)
        reporter.pods = executor.pods
        clock = Clock(datetime.now(UTC))
        try:
            descheduler = Descheduler(policy, snapshot, executor, clock, decisions,
                                      moves=self.moves, queries=queries,
                                      background=self.background)
        except InputError as err:
            # The cluster lacks what the policy names (a priorityThreshold's PriorityClass):
            # a --once run stops with the error; a loop fails this cycle and tries the next.
            if not self.looping:
                raise
            log.error("cannot build the policy's profiles on this cycle's snapshot",
                      cycle=number, error=str(err))
            self.metrics.cycles.labels("failed").inc()
            decisions.detach()
            facts.why = f"cannot build the policy's profiles on this cycle's snapshot: {err}"
            return CycleReport(number, "failed", 0, 0, decisions, facts)
        self.carried.restore(descheduler)
        persisted = persistent(plugins_of(descheduler))
        state = await self._detector_state(client) if persisted else None
        if state is not None:
            state.restore(persisted, clock.now)
        descheduler.register_hook(self.timer)
        if self.tracing:
            descheduler.register_hook(self.tracing.plugin)
        log.info("descheduling cycle started", cycle=number, cause=cause,
                 nodes=len(snapshot.nodes), pods=len(snapshot.pods), dry_run=dry_run)
        result = "completed"
        cycle: Callable[[], str | None] = functools.partial(descheduler.run_cycle, number)
        if self.tracing:
            cycle = self.tracing.cycle(cycle, number, dry_run)
        try:
            # The page's plots: utilization before and after, taken in the cycle's thread.
            skipped = await asyncio.to_thread(
                facts.watch(snapshot, clock.now, cycle) if self.watch_frames else cycle)
            if skipped:
                result, facts.why = "skipped", skipped
                log.info(skipped, cycle=number)
        except CycleInterrupted as err:
            result, facts.why = "interrupted", f"stopped before its next eviction: {err}"
            log.warning("descheduling cycle stopped before its next eviction", cycle=number,
                        why=str(err))
        except Exception as err:
            result, facts.why = "failed", f"{type(err).__name__}: {err}"
            log.exception("descheduling cycle failed", cycle=number)
        finally:
            self.carried.save(descheduler)
            if state is not None:
                await state.write(persisted, clock.now)
            elapsed = time.monotonic() - started
            self.metrics.loop_duration.observe(elapsed)
            self.metrics.cycles.labels(result).inc()
            self.metrics.last_cycle.set(time.time())
            if events is not None:
                await events.flush()
            facts.seconds = elapsed
            facts.events_failed = self.events_failed - events_failed
        in_background = ({} if self.background is None
                         else {"evictionRequests": self.background.total})
        log.info("descheduling cycle finished", cycle=number, result=result,
                 totalEvicted=reporter.evicted, failed=reporter.failed, **in_background,
                 **reporter.move_counts(), seconds=round(elapsed, 3), dry_run=dry_run)
        await self.migrations.finish(inner, wake)
        decisions.detach()
        facts.settle(decisions, executor.pods, snapshot)
        return CycleReport(number, result, reporter.evicted, reporter.failed, decisions, facts)

    async def _detector_state(self, client: ApiClient | None) -> DetectorState | None:
        """A one-cycle run (a Job's, a CronJob's) keeps LowNodeLoad's detectors in a ConfigMap:
        its process ends with the cycle. A loop keeps them in memory (CarriedState)."""
        if self.looping or client is None:
            return None
        config = self.config
        state = DetectorState(client, config.lease_namespace or default_lease_namespace(),
                              f"{config.lease_name}-state", self.dry_run)
        await state.read()
        return state

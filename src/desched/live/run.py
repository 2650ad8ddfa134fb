"""`desched run`: the descheduling loop against a live API server.

The same framework and plugins as `simulate`, on a snapshot of the informer caches taken at the
start of each cycle; only the executor differs (docs/architecture.md): the Eviction API live, the
simulation executor with `--dry-run` (so a dry run reports exactly what a live run would do,
PodDisruptionBudgets included, without touching the cluster).

Threads: the informers, the HTTP listeners, leader election and the API requests run on one
asyncio loop. A cycle is synchronous CPU work (plugins, the Evictor), so it runs in a worker
thread; each eviction it asks for is handed to the loop and waited for (see
live/eviction_api.py). The loop stays free to apply watch events, answer probes and renew
the lease while a cycle computes.

Plugins capture the snapshot when they are built, so a fresh Descheduler is built for every
cycle. Plugin state that must outlive a cycle (LowNodeLoad's anomaly detectors) is carried from
one cycle's plugin objects to the next (plugins that declare it: framework.types.CarriesState).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from desched.errors import InputError
from desched.executors.simulation import SimulationExecutor
from desched.framework.decisions import DecisionLog
from desched.framework.evictor import Executor
from desched.framework.moves import MoveTracker
from desched.framework.policy import Policy
from desched.framework.runner import Descheduler, check_policy
from desched.framework.types import CarriesState, Clock
from desched.live import logging as desched_logging
from desched.live.allocator import release_free_memory, tune_allocator
from desched.live.assumed import EvictedPods
from desched.live.client import ApiClient, ApiError
from desched.live.config import (
    RunConfig,
    Schedule,
    default_lease_namespace,
    duration,
    informer_kinds,
    resolve_schedule,
)
from desched.live.cycle import (
    CycleInterrupted,
    CycleReporter,
    GuardedExecutor,
    LiveDecisionLog,
    TimedPlugin,
    log_note,
)
from desched.live.cycle_facts import KEPT_CYCLES, CycleFacts, CycleReport, RecordedEvictions
from desched.live.cycles_page import CyclesPage, PageState
from desched.live.detector_state import DetectorState, persistent
from desched.live.events import EventRecorder
from desched.live.health import (
    Address,
    Handler,
    HttpServer,
    Readiness,
    health_routes,
    parse_address,
    start_servers,
)
from desched.live.informer import (
    Informer,
    build_snapshot,
    make_informers,
    start_informers,
    stop_informers,
)
from desched.live.metrics import Metrics
from desched.live.migration import (
    JobTemplate,
    MigrationJobExecutor,
    MigrationProfile,
    MigrationService,
    Verdicts,
    evicts_through_jobs,
    migration_profiles,
)
from desched.live.reload import PendingPolicy, PolicyReloader, policy_digest
from desched.live.serving import SecureServing, check_secure, start_secure
from desched.plugins.catalog import PLUGINS
from desched.policy.loader import load_policy
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.backoff import Backoff

log = desched_logging.get_logger("desched.run")

# The settings live in desched.live.config; the command and its tests import them from here.
__all__ = ["LEASE_LOST", "RunConfig", "Runner", "Schedule", "prepare",
           "resolve_schedule", "run_command"]

T = TypeVar("T")

LEASE_LOST = "leader election lost: this instance no longer holds the lease"


class Elector(Protocol):
    """What the loop needs from leader election (desched.live.leader.LeaseElector)."""

    lost: asyncio.Event

    async def acquire(self) -> None: ...

    def is_leader(self) -> bool: ...

    async def release(self) -> None: ...


ElectorFactory = Callable[[ApiClient, RunConfig, str], Elector]


def default_elector_factory(client: ApiClient, config: RunConfig, identity: str) -> Elector:
    from desched.live.leader import LeaseElector

    elector: Elector = LeaseElector(
        client=client, name=config.lease_name,
        namespace=config.lease_namespace or default_lease_namespace(), identity=identity,
        lease_duration=duration(config.lease_duration, "--leader-elect-lease-duration"),
        renew_deadline=duration(config.renew_deadline, "--leader-elect-renew-deadline"),
        retry_period=duration(config.retry_period, "--leader-elect-retry-period"))
    return elector


# -- the loop ------------------------------------------------------------------------------------

class _Stopped(Exception):
    """A shutdown or a lost lease interrupted a wait."""


class Runner:
    def __init__(self, config: RunConfig, policy: Policy, schedule: Schedule, *,
                 metrics: Metrics | None = None,
                 elector_factory: ElectorFactory | None = None) -> None:
        self.config = config
        self.policy = policy
        self.schedule = schedule
        self.metrics = metrics or Metrics()
        self.elector_factory = elector_factory or default_elector_factory
        self.dry_run = config.dry_run or policy.dry_run
        self.leader_elect = config.leader_elect and not self.dry_run
        self.identity = f"{socket.gethostname()}_{uuid.uuid4()}"
        self.kinds = config.kinds if config.kinds is not None else informer_kinds(policy)
        self.readiness = Readiness()
        self.readiness.checks += [self._lease_check, self._sync_check]
        self.stopping = threading.Event()  # read by the cycle's thread
        self.client: ApiClient | None = None
        self.informers: list[Informer] = []
        self.events: EventRecorder | None = None
        self.elector: Elector | None = None
        self.lease_lost = False
        self.servers: list[HttpServer] = []
        self.reports: list[CycleReport] = []
        # How often the stale-cache guard found the cache not current and waited: a test counts
        # these to know the guard has looked, instead of sleeping and hoping it did.
        self.stale_waits = 0
        # Pods evicted lately, shown terminating until the pods watch says so (live/assumed.py).
        self.evicted_pods = EvictedPods()
        # /cycles and /cycles.json beside /metrics (live/cycles_page.py).
        serves_metrics = config.metrics_address or (config.secure and config.secure.metrics)
        self.page = (CyclesPage(self._page_state)
                     if config.cycles_page and serves_metrics else None)
        self._events_failed = 0
        # What each (profile, plugin) carries to its next instance (CarriesState); everything
        # else a plugin holds is derived from the cycle's snapshot and is rebuilt with it.
        self._carried: dict[tuple[str, str], object] = {}
        # What moves carry from one cycle to the next (framework/moves/tracker.py).
        self.moves = MoveTracker()
        self.migration_args = {} if self.dry_run else migration_profiles(policy)
        self.migrations: dict[str, MigrationService] = {}
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        # The migration services' loops, by profile (one shared Verdicts: each profile's
        # arbitration sees the others' passes).
        self._migration_tasks: dict[str, asyncio.Task[Any]] = {}
        self._verdicts = Verdicts()
        self.reloader: PolicyReloader | None = None
        self._signals = 0
        self._connected = False
        self.addresses: list[tuple[Address, str]] = []
        for flag, text in (("--metrics-address", config.metrics_address),
                           ("--health-address", config.health_address)):
            if text:
                self.addresses.append((parse_address(text, flag), flag))

    # -- readiness --------------------------------------------------------------------------
    def _sync_check(self) -> str | None:
        if not self.informers:
            return "not connected to the API server yet"
        late = [i.resource.label for i in self.informers if not i.synced.is_set()]
        return f"informers not synced: {', '.join(late)}" if late else None

    def _lease_check(self) -> str | None:
        return LEASE_LOST if self.lease_lost else None

    # -- lifecycle --------------------------------------------------------------------------
    async def run(self) -> int:
        """Serve, connect, (lead,) run cycles on the schedule; the exit code."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        if self.stopping.is_set():  # asked to stop before it started
            self._wake.set()
        if self.config.signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(signum, self._on_signal, signum)
        try:
            self._watch_policy()
            await self._serve()
            if self.schedule.looping:  # a --once run says nothing before its outcome
                log.info("desched starting", schedule=str(self.schedule),
                         dry_run=self.dry_run, leader_elect=self.leader_elect,
                         policy=self.config.policy_path)
            await self._connect()
            if self.leader_elect:
                await self._lead()
            self._start_migrations()
            return await self._cycles()
        except _Stopped:
            if self.lease_lost:
                log.error(LEASE_LOST + "; exiting")
                return 1
            return 0
        finally:
            await self._shutdown()

    def request_stop(self, why: str = "stop requested") -> None:
        """Finish the eviction in flight, start no other, and return from run()."""
        if not self.stopping.is_set():
            log.info("stopping: finishing the eviction in flight, starting no other", why=why)
        self.stopping.set()
        if self._wake is not None:
            self._wake.set()

    def _on_signal(self, signum: int) -> None:
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals > 1:
            log.warning("second signal: exiting at once", signal=name)
            os._exit(1)
        self.request_stop(f"received {name}")

    async def _serve(self) -> None:
        listeners: list[tuple[Address, Mapping[str, Handler]]] = []
        for address, flag in self.addresses:
            if flag == "--metrics-address":
                routes = {"/metrics": self.metrics.handle,
                          **(self.page.routes() if self.page is not None else {})}
                listeners.append((address, routes))
            else:
                listeners.append((address, health_routes(self.readiness)))
        self.servers = await start_servers(listeners)
        if self.config.secure is not None:
            self.servers.append(await self._serve_secure(self.config.secure))
        for server in self.servers:
            log.info("listening", address=f"{server.address.host or '0.0.0.0'}:{server.port}")

    async def _serve_secure(self, secure: SecureServing) -> HttpServer:
        routes: dict[str, Handler] = dict(health_routes(self.readiness))
        if secure.metrics:
            routes["/metrics"] = self.metrics.handle
            routes.update(self.page.routes() if self.page is not None else {})
        # (a failure leaves the plain listeners in self.servers, which _shutdown stops)
        return await start_secure(secure, routes, kubeconfig=self.config.kubeconfig,
                                  context=self.config.context)

    async def _unless_stopped(self, aw: Awaitable[T]) -> T:
        """Await `aw`, or cancel it and raise _Stopped on a shutdown or a lost lease."""
        assert self._wake is not None
        task = asyncio.ensure_future(aw)
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({task, waker}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # run() itself was cancelled: leave nothing running behind
            task.cancel()
            raise
        finally:
            waker.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise _Stopped

    async def _sleep(self, seconds: float) -> None:
        await self._unless_stopped(asyncio.sleep(seconds))

    async def _connect(self) -> None:
        """Connect and sync the informers. Errors the user must fix fail a --once run (exit 2);
        a looping run logs them and tries again, so it rides out an API server outage or a
        kubeconfig that is fixed later."""
        backoff = Backoff(*self.config.connect_backoff)
        while True:
            started = time.monotonic()
            try:
                self.client = ApiClient.from_config(self.config.kubeconfig, self.config.context)
                self.informers = make_informers(self.client, self.kinds)
                self.metrics.watch_informers(self.informers)
                await self._unless_stopped(
                    start_informers(self.informers, timeout=self.config.sync_timeout))
                self._check_migration_kinds()
                break
            except (InputError, ApiError) as err:
                await self._disconnect()
                error = err if isinstance(err, InputError) else InputError("", str(err))
                if not self.schedule.looping:
                    raise error from None
                delay = backoff.next()
                log.error("cannot start watching the cluster; retrying", error=str(error),
                          retry_in=round(delay, 1))
                await self._sleep(delay)
        elapsed = time.monotonic() - started
        self.metrics.cache_sync.set(elapsed)
        assert self.client is not None
        self._connected = True
        log.info("caches synced", server=self.client.server, seconds=round(elapsed, 3),
                 schedule=str(self.schedule), dry_run=self.dry_run,
                 objects={i.resource.label: len(i.store) for i in self.informers
                          if not i.skipped})
        if not self.dry_run:
            assert self._loop is not None
            self.events = EventRecorder(self.client, self._loop, self.identity,
                                        on_result=self._event_posted)

    def _event_posted(self, type_: str, ok: bool) -> None:
        self.metrics.event_posted(type_, ok)
        self._events_failed += not ok

    def _check_migration_kinds(self) -> None:
        if not self.migration_args:
            return
        served = {i.resource.kind for i in self.informers if not i.skipped}
        if "PodMigrationJob" not in served:
            profiles = ", ".join(sorted(self.migration_args))
            raise InputError(self.config.policy_path, (
                f"profile(s) {profiles} evict through MigrationController, which needs the "
                "PodMigrationJob CRD (scheduling.koordinator.sh/v1alpha1); the API server does "
                "not serve it: install deploy/crds, or run with --dry-run"))

    def _start_migrations(self) -> None:
        """One MigrationService per MigrationController profile; the first adopts the jobs
        created by hand. A looping run runs them beside the cycles; --once drives them after
        its cycle until the jobs it created finish."""
        for index, (profile, migration) in enumerate(self.migration_args.items()):
            self._start_migration(profile, migration, adopt_unowned=index == 0)
        self.metrics.watch_migrations(lambda: [
            (profile, service.phase_counts(), service.controller.evictions)
            for profile, service in self.migrations.items()])

    def _start_migration(self, profile: str, migration: MigrationProfile,
                         adopt_unowned: bool) -> None:
        assert self.client is not None
        guard = self._guard if self.elector is not None else None
        service = MigrationService(
            profile, migration.args, self.client, self.informers, events=self.events,
            adopt_unowned=adopt_unowned, eviction_attempts=self.config.eviction_attempts,
            guard=guard, verdicts=self._verdicts)
        self.migrations[profile] = service
        # Each cycle's plugin checks and feeds the limiters the service checks and feeds.
        self._carried[(profile, migration.plugin)] = service.limiters
        if self.schedule.looping:
            self._migration_tasks[profile] = asyncio.create_task(
                service.run(), name=f"migrations {profile}")

    async def _stop_migration(self, profile: str) -> None:
        self.migrations.pop(profile, None)
        migration = self.migration_args.get(profile)
        if migration is not None:
            self._carried.pop((profile, migration.plugin), None)
        task = self._migration_tasks.pop(profile, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _finish_migrations(self, executor: MigrationJobExecutor | None) -> None:
        """--once: reconcile the jobs this run created until they finish (or time out)."""
        if executor is None or not executor.created or self.schedule.looping:
            return
        assert self._wake is not None
        wake = self._wake

        async def drain(profile: str, service: MigrationService, mine: list[str]) -> None:
            log.info("waiting for the migration jobs of this run", profile=profile,
                     jobs=len(mine))
            left = await service.drain(mine, wake)
            if left:
                log.warning("migration jobs still in flight at exit", profile=profile,
                            jobs=sorted(left))
            else:
                log.info("migration jobs finished", profile=profile, jobs=len(mine))

        # All profiles at once: one profile's slow jobs must not starve another's.
        await asyncio.gather(*(
            drain(profile, service, mine) for profile, service in self.migrations.items()
            if (mine := [name for name, owner in executor.created if owner == profile])))

    async def _disconnect(self) -> None:
        await stop_informers(self.informers)
        self.informers = []
        self.metrics.watch_informers([])
        if self.client is not None:
            await self.client.close()
            self.client = None

    async def _lead(self) -> None:
        assert self.client is not None
        elector = self.elector = self.elector_factory(self.client, self.config, self.identity)
        log.info("waiting to become the leader", identity=self.identity,
                 lease=self.config.lease_name)
        backoff = Backoff(*self.config.connect_backoff)
        while True:
            try:
                await self._unless_stopped(elector.acquire())
                break
            except (InputError, ApiError) as err:  # RBAC or a refused request: log, retry
                delay = backoff.next()
                log.error("cannot acquire the leader lease; retrying", error=str(err),
                          retry_in=round(delay, 1))
                await self._sleep(delay)
        self.metrics.leader.set(1)
        log.info("became the leader", identity=self.identity)
        self._tasks.append(asyncio.create_task(self._watch_lease(elector)))

    async def _watch_lease(self, elector: Elector) -> None:
        await elector.lost.wait()
        self.lease_lost = True
        for task in self._migration_tasks.values():  # another leads now: stop migrating at once
            task.cancel()
        self.metrics.leader.set(0)
        log.error(LEASE_LOST)
        if self._wake is not None:
            self._wake.set()

    def _page_state(self) -> PageState:
        elector = self.elector
        leading = elector is not None and not self.lease_lost and elector.is_leader()
        return PageState(
            identity=self.identity, leader_election=self.leader_elect, leading=leading,
            # The elector knows the holder it last read, before it took the Lease itself.
            holder=self.identity if leading else str(getattr(elector, "holder", "") or ""),
            lease=f"{self.config.lease_namespace or default_lease_namespace()}/"
                  f"{self.config.lease_name}",
            dry_run=self.dry_run, schedule=str(self.schedule), policy=self.config.policy_path,
            reports=tuple(self.reports))

    def _guard(self) -> str | None:
        if self.elector is not None and (self.lease_lost or not self.elector.is_leader()):
            return LEASE_LOST
        return None

    async def _cycles(self) -> int:
        previous: datetime | None = None
        number = 0
        while not self.stopping.is_set() and not self.lease_lost:
            now = datetime.now(UTC)
            when = self.schedule.next_run(previous, now)
            if when is None:
                return 0
            if when > now:
                log.info("next descheduling cycle", at=when.isoformat())
                await self._sleep((when - now).total_seconds())
            # Cron: the fire time, so a slow cycle skips missed fire times instead of
            # drifting; interval: the real start, measured to the next one.
            previous = when if self.schedule.kind == "cron" else datetime.now(UTC)
            await self._apply_policy_change()
            if self.schedule.looping and not await self._current_cache(self._stale_bound()):
                number += 1
                self._skip_stale(number)
                await self._current_cache(None)  # then a cycle as soon as it is current
            number += 1
            report = await self.run_cycle(number)
            # The cycle's snapshot, indices and memos form reference cycles: collected now,
            # between cycles, rather than piling up until a full collection (resident memory
            # grew every cycle before; measured in bench/README.md).
            gc.collect()
            release_free_memory()
            if report.result == "failed" and not self.schedule.looping:
                return 1
        if self.lease_lost:
            raise _Stopped
        return 0

    # -- the stale-cache guard ------------------------------------------------------------------
    def _stale_bound(self) -> float:
        """How long a cycle waits for a cache that is not current: --stale-cache-timeout, else
        one interval (for cron, the time between its next two fire times)."""
        if self.config.stale_cache_timeout is not None:
            return self.config.stale_cache_timeout
        if self.schedule.kind == "cron":
            now = datetime.now(UTC)
            first = self.schedule.next_run(None, now)
            second = self.schedule.next_run(first, first) if first else None
            if first and second:
                return (second - first).total_seconds()
        return self.schedule.interval

    async def _current_cache(self, bound: float | None) -> bool:
        """Wait until every informer is watching again; False once one has not been current
        for longer than `bound` seconds (None: wait as long as it takes)."""
        while True:
            now = time.monotonic()
            # Polled kinds (metrics.k8s.io) are judged by their samples' age instead: a
            # metrics-server outage must not stop the plugins that do not read it.
            ages = [i.stale_for(now) for i in self.informers
                    if i.stale_since is not None and i.resource.watchable]
            if not ages:
                return True
            stale = max(ages)
            if bound is not None and stale > bound:
                return False
            self.stale_waits += 1
            await self._sleep(0.05 if bound is None else min(0.05, bound - stale + 0.001))

    def _skip_stale(self, number: int) -> None:
        now = time.monotonic()
        stale = {i.resource.label: round(i.stale_for(now), 1) for i in self.informers
                 if i.stale_since is not None and i.resource.watchable}
        log.warning("descheduling cycle skipped: the cluster cache is not current; the next "
                    "cycle runs as soon as it is", cycle=number, stale_seconds=stale)
        self.metrics.cycles.labels("stale").inc()
        facts = CycleFacts(datetime.now(UTC), self.dry_run, self.policy)
        facts.why = "the cluster cache is not current: " + ", ".join(
            f"{label} for {seconds:g}s" for label, seconds in stale.items())
        self._keep(CycleReport(number, "stale", 0, 0, DecisionLog(), facts))

    # -- policy hot reload --------------------------------------------------------------------
    def _watch_policy(self) -> None:
        """A loop reloads its policy file: polled, and checked at once on SIGHUP."""
        path = self.config.policy_path
        if not self.schedule.looping or path == "-":
            return
        try:
            digest = policy_digest(Path(path).read_bytes())
        except OSError:
            digest = ""  # read moments ago by prepare(): the next check reports the problem
        reloader = self.reloader = PolicyReloader(path, digest, self.metrics)

        async def poll() -> None:
            while True:
                await asyncio.sleep(self.config.policy_poll)
                reloader.check()

        self._tasks.append(asyncio.create_task(poll(), name="policy reload"))
        if self.config.signals and self._loop is not None:
            self._loop.add_signal_handler(signal.SIGHUP, self._on_sighup)

    def _on_sighup(self) -> None:
        log.info("SIGHUP: checking the policy file", policy=self.config.policy_path)
        if self.reloader is not None:
            self.reloader.check()

    async def _apply_policy_change(self) -> None:
        """At a cycle boundary: the changed policy, if valid and applicable, replaces the
        running one."""
        if self.reloader is None:
            return
        self.reloader.check()  # a change made since the last poll applies now, not a cycle later
        pending = self.reloader.take()
        if pending is None:
            return
        problem = await self._switch_policy(pending)
        if problem:
            self.reloader.not_applied(pending, problem)
            return
        self.reloader.applied(pending)
        log.info("policy reloaded", policy=self.config.policy_path, hash=pending.digest[:12],
                 schedule=str(self.schedule))

    async def _switch_policy(self, pending: PendingPolicy) -> str | None:
        """Make `pending` the running policy; why not, when it changes how the process runs."""
        policy, config = pending.policy, self.config
        if (config.dry_run or policy.dry_run) != self.dry_run:
            return ("dryRun changed: it decides how the process runs (events, leader election, "
                    "migrations); restart desched to apply it")
        schedule = self.schedule
        if not (config.once or config.interval is not None or config.cron):
            try:
                schedule = resolve_schedule(config, policy)
            except InputError as err:
                return str(err)
            if not schedule.looping:
                return ("the policy no longer sets deschedulingInterval: a running loop cannot "
                        "become a single run; restart desched to apply it")
        migration_args = {} if self.dry_run else migration_profiles(policy)
        problem = await self._watch_kinds(config.kinds or informer_kinds(policy),
                                          bool(migration_args))
        if problem:
            return problem
        # Plugin state survives where the plugin's configuration is unchanged.
        old_args = {(p.name, n): a for p in self.policy.profiles for n, a in p.args.items()}
        new_args = {(p.name, n): a for p in policy.profiles for n, a in p.args.items()}
        for key in [k for k in self._carried if not evicts_through_jobs(policy, k[1])]:
            if key not in new_args or old_args.get(key) != new_args[key]:
                del self._carried[key]
        self.policy, self.schedule = policy, schedule
        for profile in [p for p, a in self.migration_args.items()
                        if migration_args.get(p) != a]:
            await self._stop_migration(profile)
        first = next(iter(migration_args), None)
        for profile, migration in migration_args.items():
            if profile not in self.migrations:
                self._start_migration(profile, migration, adopt_unowned=profile == first)
        self.migration_args = migration_args
        return None

    async def _watch_kinds(self, kinds: tuple[str, ...], migrating: bool) -> str | None:
        """Start informers for the kinds a new policy reads that no informer watches yet."""
        watched = {i.resource.kind for i in self.informers}
        missing = [k for k in kinds if k not in watched]
        if missing and self.client is not None:
            informers = make_informers(self.client, missing)
            try:
                await self._unless_stopped(
                    start_informers(informers, timeout=self.config.sync_timeout))
            except (InputError, ApiError) as err:
                await stop_informers(informers)
                return f"cannot watch what the new policy reads: {err}"
            self.informers += informers
            self.metrics.watch_informers(self.informers)
        if migrating and "PodMigrationJob" not in {
                i.resource.kind for i in self.informers if not i.skipped}:
            return ("MigrationController needs the PodMigrationJob CRD "
                    "(scheduling.koordinator.sh/v1alpha1), which the API server does not serve")
        return None

    async def _shutdown(self) -> None:
        tasks = [*self._migration_tasks.values(), *self._tasks]
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:  # logged; the rest of the shutdown must still happen
                log.exception("background task failed", task=task.get_name())
        if self.events is not None:
            await self.events.flush()
        if self.elector is not None:
            # Hand the lease over at once instead of letting it expire (ReleaseOnCancel).
            await self.elector.release()
        await self._disconnect()
        for server in self.servers:
            await server.stop()
        if self.config.signals and self._loop is not None:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                self._loop.remove_signal_handler(signum)
        if self._connected:
            log.info("desched stopped")

    # -- one cycle --------------------------------------------------------------------------
    def _executor(self, snapshot: ClusterSnapshot, facts: CycleFacts) -> Executor:
        if self.dry_run:
            return SimulationExecutor(snapshot)
        assert self.client is not None and self._loop is not None
        evictions = RecordedEvictions(
            self.client, self._loop, snapshot,
            grace_period_seconds=self.policy.grace_period_seconds,
            attempts=self.config.eviction_attempts, timeout=self.config.eviction_timeout,
            backoff=Backoff(*self.config.eviction_backoff), facts=facts,
            fence=self._guard if self.elector is not None else None,
            assumed=self.evicted_pods)
        if not self.migrations:
            return evictions
        templates = {profile: JobTemplate(service.args, service.creator)
                     for profile, service in self.migrations.items()}
        return MigrationJobExecutor(evictions, self.client, self._loop, snapshot, templates,
                                    attempts=self.config.eviction_attempts,
                                    timeout=self.config.eviction_timeout)

    async def run_cycle(self, number: int) -> CycleReport:
        started = time.monotonic()
        facts = CycleFacts(datetime.now(UTC), self.dry_run, self.policy)
        events_failed = self._events_failed
        snapshot = await build_snapshot(self.informers, self.evicted_pods)
        facts.nodes, facts.pods = len(snapshot.nodes), len(snapshot.pods)
        self.metrics.snapshot_duration.observe(time.monotonic() - started)
        for service in self.migrations.values():
            service.observe(snapshot)
        reporter = CycleReporter(self.policy, self.metrics, snapshot, self.events, self.dry_run,
                                 frozenset(self.migrations))
        decisions = LiveDecisionLog(
            reporter.record,
            lambda profile, plugin, _: self.metrics.usage_unavailable.labels(profile,
                                                                              plugin).inc(),
            log_note, reporter.moved)
        guard = self._guard if self.elector is not None else None
        inner = self._executor(snapshot, facts)
        executor = GuardedExecutor(inner, self.stopping, guard)
        reporter.pods = executor.pods
        clock = Clock(datetime.now(UTC))
        try:
            descheduler = Descheduler(self.policy, snapshot, executor, clock, decisions,
                                      moves=self.moves)
        except InputError as err:
            # The cluster lacks what the policy names (a priorityThreshold's PriorityClass):
            # a --once run stops with the error; a loop fails this cycle and tries the next.
            if not self.schedule.looping:
                raise
            log.error("cannot build the policy's profiles on this cycle's snapshot",
                      cycle=number, error=str(err))
            self.metrics.cycles.labels("failed").inc()
            decisions.detach()
            facts.why = f"cannot build the policy's profiles on this cycle's snapshot: {err}"
            return self._keep(CycleReport(number, "failed", 0, 0, decisions, facts))
        self._restore_state(descheduler)
        persisted = persistent(self._plugins(descheduler))
        state = await self._detector_state() if persisted else None
        if state is not None:
            state.restore(persisted, clock.now)
        self._time_plugins(descheduler)
        log.info("descheduling cycle started", cycle=number, nodes=len(snapshot.nodes),
                 pods=len(snapshot.pods), dry_run=self.dry_run)
        result = "completed"
        cycle = functools.partial(descheduler.run_cycle, number)
        try:
            # The page's plots: utilization before and after, taken in the cycle's thread.
            skipped = await asyncio.to_thread(
                facts.watch(snapshot, clock.now, cycle) if self.page is not None else cycle)
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
            self._save_state(descheduler)
            if state is not None:
                await state.write(persisted, clock.now)
            elapsed = time.monotonic() - started
            self.metrics.loop_duration.observe(elapsed)
            self.metrics.cycles.labels(result).inc()
            self.metrics.last_cycle.set(time.time())
            if self.events is not None:
                await self.events.flush()
            facts.seconds = elapsed
            facts.events_failed = self._events_failed - events_failed
        log.info("descheduling cycle finished", cycle=number, result=result,
                 totalEvicted=reporter.evicted, failed=reporter.failed,
                 **reporter.move_counts(), seconds=round(elapsed, 3), dry_run=self.dry_run)
        if isinstance(inner, MigrationJobExecutor):
            await self._finish_migrations(inner)
        decisions.detach()
        facts.settle(decisions, executor.pods, snapshot)
        return self._keep(CycleReport(number, result, reporter.evicted, reporter.failed,
                                      decisions, facts))

    async def _detector_state(self) -> DetectorState | None:
        """A one-cycle run (a Job's, a CronJob's) keeps LowNodeLoad's detectors in a ConfigMap:
        its process ends with the cycle. A loop keeps them in memory (_carried)."""
        if self.schedule.looping or self.client is None:
            return None
        state = DetectorState(self.client,
                              self.config.lease_namespace or default_lease_namespace(),
                              f"{self.config.lease_name}-state", self.dry_run)
        await state.read()
        return state

    def _keep(self, report: CycleReport) -> CycleReport:
        self.reports.append(report)
        del self.reports[:-KEPT_CYCLES]  # a long-running loop keeps only the recent ones
        return report

    def _plugins(self, descheduler: Descheduler) -> list[tuple[str, str, object]]:
        return [(profile.name, name, plugin) for profile in descheduler.profiles
                for name, plugin in profile.plugins.items()]

    def _restore_state(self, descheduler: Descheduler) -> None:
        for profile, name, plugin in self._plugins(descheduler):
            state = self._carried.get((profile, name))
            if state is not None and isinstance(plugin, CarriesState):
                plugin.adopt_state(state)

    def _save_state(self, descheduler: Descheduler) -> None:
        for profile, name, plugin in self._plugins(descheduler):
            if isinstance(plugin, CarriesState):
                self._carried[(profile, name)] = plugin.carried_state()

    def _time_plugins(self, descheduler: Descheduler) -> None:
        for profile in descheduler.profiles:
            profile.deschedule = [(n, TimedPlugin(p.deschedule, profile.name, n, self.metrics))
                                  for n, p in profile.deschedule]
            profile.balance = [(n, TimedPlugin(p.balance, profile.name, n, self.metrics))
                               for n, p in profile.balance]


# -- the command ---------------------------------------------------------------------------------

def prepare(config: RunConfig) -> tuple[Policy, Schedule]:
    """Everything that can be checked before connecting: the policy (plugins built once on an
    empty snapshot, so their argument errors surface now), the schedule and the flags."""
    policy = load_policy(config.policy_path, PLUGINS)
    schedule = resolve_schedule(config, policy)
    check_policy(policy)
    for warning in policy.warnings:  # ignored keys, nothing enabled
        log.warning(warning)
    if policy.leader_elect and not config.leader_elect:
        # The process's command line owns how it runs (the chart sets the flag for a Deployment).
        log.warning("the policy's leaderElection.leaderElect is not applied: leader election "
                    "is switched on by --leader-elect", policy=config.policy_path)
    if config.leader_elect:
        if config.dry_run or policy.dry_run:
            log.warning("leader election is disabled in dry-run mode")
        elif not schedule.looping:
            raise InputError("--leader-elect", "leaderElection must be used with "
                             "deschedulingInterval (give --interval or --cron)")
        lease = duration(config.lease_duration, "--leader-elect-lease-duration")
        renew = duration(config.renew_deadline, "--leader-elect-renew-deadline")
        retry = duration(config.retry_period, "--leader-elect-retry-period")
        if not 0 < retry < renew < lease:
            raise InputError("--leader-elect", "needs 0 < retry period < renew deadline < lease "
                             f"duration (got {config.retry_period}, {config.renew_deadline}, "
                             f"{config.lease_duration})")
    for flag, address in (("--metrics-address", config.metrics_address),
                          ("--health-address", config.health_address)):
        if address:
            parse_address(address, flag)
    if config.secure is not None:
        check_secure(config.secure, config.metrics_address)
    return policy, schedule


def run_command(config: RunConfig, *, log_format: str = "text", log_level: str = "info",
                elector_factory: ElectorFactory | None = None,
                warnings: Sequence[str] = ()) -> int:
    """`desched run`: the exit code (0 done or stopped by a signal, 1 failure or lost lease).
    Invalid input raises InputError (exit 2): always for the policy and flags, and for
    connection problems in --once mode. `warnings`: about the flags, logged once logging is
    set up."""
    desched_logging.configure(log_format, log_level)
    for warning in warnings:
        log.warning(warning)
    tuned = tune_allocator()
    if tuned:
        log.debug("malloc tuned for a long run", **tuned)
    policy, schedule = prepare(config)
    runner = Runner(config, policy, schedule, elector_factory=elector_factory)
    return asyncio.run(runner.run())

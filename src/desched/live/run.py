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

The Runner orchestrates; each of its jobs is a room of its own:
- live/cycle_assembly.py: one cycle, from the snapshot to its report;
- live/carried_state.py: plugin state carried from one cycle's plugins to the next's;
- live/plugin_timing.py: each plugin run timed, through a framework hook;
- live/prometheus.py: the usage sources' Prometheus queries, on the event loop;
- live/migration_supervisor.py: the MigrationServices beside the cycles;
- live/stale_cache.py: no cycle on a cache that is not current;
- live/reload.py: the policy file watched and a changed policy switched to between cycles;
- live/triggers.py: cycles beside the schedule, on node events and on request
  (live/on_demand.py: POST /cycles/run).
What stays here: the lifecycle (serve, connect, lead, loop, shut down) and the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from desched.decoding.feature_gates import DISABLE_PVC_RESERVATION
from desched.errors import InputError
from desched.framework.moves import MoveTracker
from desched.framework.policy import Policy
from desched.framework.runner import check_policy
from desched.live import logging as desched_logging
from desched.live.allocator import release_free_memory, tune_allocator
from desched.live.assumed import EvictedPods
from desched.live.carried_state import CarriedState
from desched.live.client import AccessDenied, ApiClient, ApiError
from desched.live.config import (
    RunConfig,
    Schedule,
    default_lease_namespace,
    duration,
    informer_kinds,
    resolve_schedule,
)
from desched.live.cycle_assembly import CycleAssembly
from desched.live.cycle_facts import KEPT_CYCLES, CycleReport
from desched.live.cycles_page import CyclesPage, PageState
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
    make_informers,
    start_informers,
    stop_informers,
)
from desched.live.metrics import Metrics
from desched.live.migration import evicts_through_jobs, migration_profiles
from desched.live.migration_supervisor import MigrationSupervisor, serves_jobs
from desched.live.on_demand import OnDemand
from desched.live.process_settings import apply_process_settings
from desched.live.prometheus import PrometheusQueries
from desched.live.prometheus_secret import SecretTokens
from desched.live.rate_limit import TokenBucket, resolve_rate_limit
from desched.live.reload import PolicyReloader, PolicySwitch
from desched.live.serving import SecureServing, check_secure, start_secure
from desched.live.stale_cache import StaleCacheGuard
from desched.live.tracing import Tracing, start_tracing
from desched.live.triggers import SCHEDULED, Cause, Triggers, check_triggers
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import load_policy
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
    """One `desched run`: serves, connects, (leads,) and runs cycles on the schedule; each job
    is a room of its own (see the module's docstring), which it calls in order."""

    def __init__(self, config: RunConfig, policy: Policy, schedule: Schedule, *,
                 metrics: Metrics | None = None,
                 elector_factory: ElectorFactory | None = None,
                 tracing: Tracing | None = None) -> None:
        self.config = config
        self.policy = policy
        self.schedule = schedule
        self.metrics = metrics or Metrics()
        self.elector_factory = elector_factory or default_elector_factory
        self.dry_run = config.dry_run or policy.dry_run
        self.leader_elect = config.leader_elect and not self.dry_run
        self.identity = f"{socket.gethostname()}_{uuid.uuid4()}"
        # One bucket for the run, whichever connection is current (live/rate_limit.py).
        limit = resolve_rate_limit(config.client_qps, config.client_burst)
        self.limiter = TokenBucket(limit) if limit is not None else None
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
        # Pods evicted lately, shown terminating until the pods watch says so (live/assumed.py).
        self.evicted_pods = EvictedPods()
        # /cycles and /cycles.json beside /metrics (live/cycles_page.py).
        serves_metrics = config.metrics_address or (config.secure and config.secure.metrics)
        self.page = (CyclesPage(self._page_state)
                     if config.cycles_page and serves_metrics else None)
        self.triggers = Triggers(config.trigger_on, debounce=config.trigger_debounce,
                                 per_minute=config.trigger_max_per_minute)
        self.on_demand = OnDemand(self.triggers, self._why_no_cycle, page=self.page is not None)
        # The rooms.
        self.carried = CarriedState()
        self.migrations = MigrationSupervisor(
            {} if self.dry_run else migration_profiles(policy), self.carried, self.metrics,
            looping=schedule.looping, eviction_attempts=config.eviction_attempts,
            disable_pvc_reservation=config.feature_gates.enabled(DISABLE_PVC_RESERVATION))
        self.cycles = CycleAssembly(
            config, self.metrics, dry_run=self.dry_run, looping=schedule.looping,
            stopping=self.stopping, carried=self.carried, migrations=self.migrations,
            evicted_pods=self.evicted_pods, moves=MoveTracker(),
            watch_frames=self.page is not None, tracing=tracing)
        self.stale_cache = StaleCacheGuard(lambda: self.informers, self.metrics, self._sleep,
                                           config.stale_cache_timeout)
        self.switch = PolicySwitch(config, self.metrics, policy.process)
        self.queries: PrometheusQueries | None = None  # set by run(): it needs the loop
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._signals = 0
        self._connected = False
        self.addresses: list[tuple[Address, str]] = []
        for flag, text in (("--metrics-address", config.metrics_address),
                           ("--health-address", config.health_address)):
            if text:
                self.addresses.append((parse_address(text, flag), flag))

    @property
    def reloader(self) -> PolicyReloader | None:
        return self.switch.reloader

    @property
    def stale_waits(self) -> int:
        """How often the stale-cache guard has waited (tests count these)."""
        return self.stale_cache.waits

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
        self.queries = PrometheusQueries(self._loop, self.metrics,
                                         secrets=SecretTokens(lambda: self.client))
        if self.stopping.is_set():  # asked to stop before it started
            self._wake.set()
        if self.config.signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(signum, self._on_signal, signum)
        try:
            poll = self.switch.watch(self.schedule.looping, self._loop)
            if poll is not None:
                self._tasks.append(poll)
            await self._serve()
            if self.schedule.looping:  # a --once run says nothing before its outcome
                log.info("desched starting", schedule=str(self.schedule),
                         dry_run=self.dry_run, leader_elect=self.leader_elect,
                         policy=self.config.policy_path)
            await self._connect()
            if self.leader_elect:
                await self._lead()
            assert self.client is not None
            self.migrations.start(self.client, self.informers, self.events, self._fence())
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
                          **(self.page.routes() if self.page is not None else {}),
                          **self.on_demand.routes(authenticated=False)}
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
        routes.update(self.on_demand.routes(authenticated=secure.delegate_auth))
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

    # -- the connection ---------------------------------------------------------------------
    async def _connect(self) -> None:
        """Connect and sync the informers. Errors the user must fix fail a --once run (exit 2);
        a looping run logs them and tries again, so it rides out an API server outage or a
        kubeconfig that is fixed later."""
        backoff = Backoff(*self.config.connect_backoff)
        while True:
            started = time.monotonic()
            try:
                self.client = ApiClient.from_config(self.config.kubeconfig, self.config.context,
                                                    protobuf=self.config.protobuf,
                                                    limiter=self.limiter)
                self.informers = make_informers(self.client, self.kinds)
                self.metrics.watch_informers(self.informers)
                await self._unless_stopped(
                    start_informers(self.informers, timeout=self.config.sync_timeout))
                self.migrations.check_kinds(self.informers, self.config.policy_path)
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
                                        on_result=self.cycles.event_posted)

    async def _disconnect(self) -> None:
        await stop_informers(self.informers)
        self.informers = []
        self.metrics.watch_informers([])
        if self.client is not None:
            await self.client.close()
            self.client = None

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
        if migrating and not serves_jobs(self.informers):
            return ("MigrationController needs the PodMigrationJob CRD "
                    "(scheduling.koordinator.sh/v1alpha1), which the API server does not serve")
        return None

    # -- leader election --------------------------------------------------------------------
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
                if self.config.leader_elect_by_default and (
                        isinstance(err, AccessDenied)
                        or (isinstance(err, ApiError) and err.code == 404)):
                    # Not set up for an election (desched's manifests without one): run as
                    # before, saying so.
                    log.warning("leader election is off: koord-descheduler's default turned "
                                "it on, but this run cannot use the Lease; give "
                                "--leader-elect=false, or set the Lease up for it",
                                lease=self.config.lease_name,
                                namespace=self.config.lease_namespace, error=str(err))
                    self.elector = None
                    self.leader_elect = False
                    return
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
        self.migrations.lease_lost()
        self.metrics.leader.set(0)
        log.error(LEASE_LOST)
        if self._wake is not None:
            self._wake.set()

    def _guard(self) -> str | None:
        if self.elector is not None and (self.lease_lost or not self.elector.is_leader()):
            return LEASE_LOST
        return None

    def _fence(self) -> Callable[[], str | None] | None:
        """What stops a write when this instance may no longer lead (with leader election)."""
        return self._guard if self.elector is not None else None

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

    def _why_no_cycle(self) -> str | None:
        """Why a request gets no cycle now (live/on_demand.py); None when it can."""
        if self.stopping.is_set() or self.lease_lost:
            return "desched is stopping"
        if self.triggers.accepting:
            # A cycle waits for a stale cache up to an interval: its caller would wait as long.
            stale = self.stale_cache.stale(time.monotonic())
            if stale:
                return "the cluster cache is not current: " + ", ".join(
                    f"{label} for {seconds:.0f}s" for label, seconds in stale.items())
            return None
        if not self.schedule.looping:
            return "this run does one cycle and exits"
        page = self._page_state()
        if page.leader_election and not page.leading:
            held = f"held by {page.holder}" if page.holder else "held by another instance"
            return f"this instance does not lead: the Lease {page.lease} is {held}"
        return self.readiness.reason() or "the cycles have not started yet"

    # -- the loop ---------------------------------------------------------------------------
    async def _cycles(self) -> int:
        previous: datetime | None = None
        number = 0
        self.triggers.watch(self.informers)
        self.triggers.accepting = self.schedule.looping
        while not self.stopping.is_set() and not self.lease_lost:
            now = datetime.now(UTC)
            when = self.schedule.next_run(previous, now)
            if when is None:
                return 0
            cause: Cause | None = None
            if when > now:
                log.info("next descheduling cycle", at=when.isoformat())
                # Node events or a request may start a cycle before then (live/triggers.py).
                cause = await self._unless_stopped(
                    self.triggers.wait((when - now).total_seconds()))
            if cause is None:
                cause = SCHEDULED
                # Cron: the fire time, so a slow cycle skips missed fire times instead of
                # drifting; interval: the real start, measured to the next one.
                previous = when if self.schedule.kind == "cron" else datetime.now(UTC)
            await self.switch.at_boundary(self.dry_run, self.schedule, self._switch_policy)
            guard = self.stale_cache
            if self.schedule.looping and not await guard.current(guard.bound(self.schedule)):
                number += 1
                self._keep(guard.skipped(number, self.policy, self.dry_run))
                await guard.current(None)  # then a cycle as soon as it is current
            number += 1
            report = await self.run_cycle(number, cause)
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

    async def run_cycle(self, number: int, cause: Cause = SCHEDULED) -> CycleReport:
        """One cycle under the running policy (live/cycle_assembly.py), kept for /cycles."""
        assert self._loop is not None and self._wake is not None
        self.triggers.started(number, cause, datetime.now(UTC))
        report = self._keep(await self.cycles.run(
            number, self.policy, informers=self.informers, client=self.client,
            loop=self._loop, events=self.events, guard=self._fence(), wake=self._wake,
            queries=self.queries, cause=cause.text))
        self.triggers.finished(report)
        return report

    def _keep(self, report: CycleReport) -> CycleReport:
        self.reports.append(report)
        del self.reports[:-KEPT_CYCLES]  # a long-running loop keeps only the recent ones
        return report

    async def _switch_policy(self, policy: Policy, schedule: Schedule) -> str | None:
        """Make `policy` (checked by live/reload.py) the running policy: why not, when the
        API server does not serve what it reads."""
        migration_args = {} if self.dry_run else migration_profiles(policy)
        problem = await self._watch_kinds(self.config.kinds or informer_kinds(policy),
                                          bool(migration_args))
        if problem:
            return problem
        # Plugin state survives where the plugin's configuration is unchanged.
        self.carried.forget_changed(self.policy, policy,
                                    keep=lambda key: evicts_through_jobs(policy, key[1]))
        self.policy, self.schedule = policy, schedule
        await self.migrations.switch(migration_args)
        return None

    # -- shutdown ---------------------------------------------------------------------------
    async def _shutdown(self) -> None:
        self.triggers.close("desched is stopping")
        tasks = [*self.migrations.tasks.values(), *self._tasks]
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
        if self.queries is not None:
            await self.queries.close()
        for server in self.servers:
            await server.stop()
        if self.config.signals and self._loop is not None:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                self._loop.remove_signal_handler(signum)
        if self._connected:
            log.info("desched stopped")


# -- the command ---------------------------------------------------------------------------------

def prepare(config: RunConfig) -> tuple[Policy, Schedule]:
    """Everything that can be checked before connecting: the policy (plugins built once on an
    empty snapshot, so their argument errors surface now), the schedule and the flags."""
    policy = load_policy(config.policy_path, PLUGINS)
    schedule = resolve_schedule(config, policy)
    check_policy(policy)
    for warning in policy.warnings:  # ignored keys, nothing enabled
        log.warning(warning)
    for note in apply_process_settings(config, policy, looping=schedule.looping):
        if " not applied" in note:
            log.warning(note)
        else:
            log.info(note)
    resolve_rate_limit(config.client_qps, config.client_burst)  # refused before connecting
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
    check_triggers(config.trigger_on, config.trigger_debounce, config.trigger_max_per_minute,
                   looping=schedule.looping)
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
    tracing = start_tracing(config.tracing)
    runner = Runner(config, policy, schedule, elector_factory=elector_factory, tracing=tracing)
    try:
        return asyncio.run(runner.run())
    finally:
        if tracing is not None:
            tracing.shutdown()

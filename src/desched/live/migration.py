"""MigrationController in `desched run` (docs/migration.md): a profile
whose evict plugin is MigrationController does not evict; it creates a PodMigrationJob, and a
controller carries the job out.

- `MigrationJobExecutor` is the cycle's executor for such profiles: where the Eviction API
  executor would evict, it POSTs a PodMigrationJob (Koordinator's createPodMigrationJob). Other
  profiles go to the executor it wraps. Everything before it (plugins, filters, arbitration
  checks, limits) is the same code simulate runs.
- `MigrationService` runs beside the cycles, one per such profile, on the event loop: every
  arbitration interval it arbitrates the waiting jobs over a snapshot of the informer caches and
  writes the verdicts, and it reconciles the jobs in flight (each when the informer shows it
  changed, or every few seconds, as Koordinator requeues).

Jobs are partitioned by the `koordinator.sh/job-created-by` annotation: a profile's service
handles the jobs its cycles created (`desched/<profile>`, stable across restarts, so a restarted
desched resumes them) and, for the first such profile only, jobs created by hand.

Object limiters take their token once per migration, when it is decided: the cycle's plugin
reserves it before the job is created (as in simulation), the controller's gate reserves it just
before it evicts the pod of a job someone else created; either gives it back if the migration
does not happen. Arbitration verdicts are remembered (`Verdicts`) until the informer shows them,
and a service does nothing while the leader guard refuses (a lost lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

import msgspec

from desched.errors import InputError
from desched.framework.evictor import (
    ExecutionResult,
    Executor,
    RestartOrder,
    cordoning,
    moving,
)
from desched.framework.policy import Policy
from desched.live import logging as desched_logging
from desched.live.client import ApiClient, ApiError, ConnectionLost, Unreachable
from desched.live.events import EventRecorder
from desched.live.informer import Informer, build_snapshot
from desched.live.migration_controller import MigrationJobController
from desched.migration.arbitration import (
    PASSED_ARBITRATION_ANNOTATION,
    Arbitrator,
    MigrationLedger,
    Outcome,
    scavenge_deadline,
)
from desched.migration.args import (
    MigrationControllerArgs,
    limiter_configs,
    settings,
)
from desched.migration.jobdoc import (
    ACTIVE_PHASES,
    EVICT_REASON,
    EVICT_TRIGGER,
    GROUP_VERSION,
    JOB_CREATED_BY,
    PMJ_PATH,
)
from desched.migration.limiter import ObjectLimiters
from desched.migration.objectlimits import PodObjectLimits
from desched.model.objects import PodMigrationJob
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.workloads import WorkloadResolver
from desched.util.backoff import Backoff
from desched.util.duration import format_duration, parse_duration

log = desched_logging.get_logger("desched.migration")

REQUEUE_SECONDS = 3.0  # Koordinator's requeue while a job waits
DEFAULT_INTERVAL = 0.5  # arbitrationArgs.interval
NO_TTL_WAIT = 30 * 60.0  # --once waits this long for a job without TTL (the scavenger's age)
SCAVENGE_EVERY = 60.0  # Koordinator's scavenger period


class MigrationProfile(NamedTuple):
    """A profile's evict plugin that evicts through PodMigrationJobs, and its (defaulted) args."""

    plugin: str
    args: MigrationControllerArgs


def migration_profiles(policy: Policy) -> dict[str, MigrationProfile]:
    """The profiles whose evict plugin evicts through PodMigrationJobs, as its spec says
    (PluginSpec.evicts_through_migration_jobs: MigrationController)."""
    found: dict[str, MigrationProfile] = {}
    for profile in policy.profiles:
        evict = profile.enabled.get("evict", [])
        if evict and evicts_through_jobs(policy, evict[0]):
            found[profile.name] = MigrationProfile(evict[0], profile.args[evict[0]])
    return found


def evicts_through_jobs(policy: Policy, plugin: str) -> bool:
    """Whether `plugin` evicts through PodMigrationJobs, as its spec says."""
    spec = policy.plugins.get(plugin)
    return spec is not None and spec.evicts_through_migration_jobs


def creator_identity(profile: str) -> str:
    """The job-created-by value of a profile's jobs: stable, so a restart resumes them."""
    return f"desched/{profile}"


def job_body(pod: Pod, args: MigrationControllerArgs, creator: str, trigger: str,
             reason: str) -> dict[str, Any]:
    """A PodMigrationJob as Koordinator's Evict creates it (docs/migration.md)."""
    spec: dict[str, Any] = {
        "podRef": {"kind": "Pod", "namespace": str(pod.namespace), "name": str(pod.name),
                   "uid": str(pod.metadata.uid)},
        "mode": args.default_job_mode,
    }
    if args.default_job_ttl:
        # metav1.Duration's JSON form: Go's time.Duration.String() ("5m0s").
        spec["ttl"] = format_duration(parse_duration(args.default_job_ttl))
    if args.default_delete_options is not None:
        spec["deleteOptions"] = msgspec.to_builtins(args.default_delete_options)
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "PodMigrationJob",
        "metadata": {"name": str(uuid.uuid4()),
                     "annotations": {EVICT_REASON: reason, EVICT_TRIGGER: trigger,
                                     JOB_CREATED_BY: creator}},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


@dataclass(frozen=True)
class JobTemplate:
    args: MigrationControllerArgs
    creator: str


class MigrationJobExecutor:
    """The executor of a live cycle: PodMigrationJobs for MigrationController profiles, the
    wrapped executor for the others. Called from the cycle's worker thread."""

    def __init__(self, inner: Executor, client: ApiClient, loop: asyncio.AbstractEventLoop,
                 snapshot: ClusterSnapshot, templates: Mapping[str, JobTemplate], *,
                 attempts: int = 3, timeout: float = 10.0) -> None:
        self.inner = inner
        self.client = client
        self.loop = loop
        self.snapshot = snapshot
        self.templates = templates
        self.attempts = max(1, attempts)
        self.timeout = timeout
        self.created: list[tuple[str, str]] = []  # (job name, profile), in order

    def evict(self, pod: Pod, profile: str, plugin: str, reason: str) -> ExecutionResult:
        template = self.templates.get(profile)
        if template is None:
            return self.inner.evict(pod, profile, plugin, reason)
        body = job_body(pod, template.args, template.creator, plugin, reason)
        future = asyncio.run_coroutine_threadsafe(self.create(body), self.loop)
        result = future.result()
        if result.ok:
            self.created.append((str(body["metadata"]["name"]), profile))
            # Migrating: later plugins of this cycle must not pick the pod again.
            self.snapshot.remove_pod(pod)
        return result

    # Moves (framework/moves) go through the wrapped executor: a restart is no PodMigrationJob.
    def check_budget(self, pod: Pod) -> ExecutionResult:
        return moving(self.inner).check_budget(pod)

    def restart(self, order: RestartOrder) -> ExecutionResult:
        return moving(self.inner).restart(order)

    # A cordon is no PodMigrationJob either.
    def set_unschedulable(self, node: str, unschedulable: bool) -> ExecutionResult:
        return cordoning(self.inner).set_unschedulable(node, unschedulable)

    async def create(self, body: dict[str, Any]) -> ExecutionResult:
        """POST the job. The name is fixed before the first attempt, so a retry after a lost
        answer finds its own job (409) instead of creating a second one."""
        name = body["metadata"]["name"]
        what = f"create podmigrationjob {name}"
        error = ""
        backoff = Backoff(initial=0.5, maximum=5.0)
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(backoff.next())
            try:
                # A 409 after a first attempt is that attempt's job: its answer was lost.
                await self.client.call("POST", PMJ_PATH, msgspec.Raw, what=what, body=body,
                                       allow=(409,) if attempt else (), timeout=self.timeout)
            except (Unreachable, ConnectionLost) as err:
                error = str(err)
                continue
            except ApiError as err:
                if err.transient:  # throttled or a server fault: worth retrying
                    error = str(err)
                    continue
                return ExecutionResult(False, "failed", str(err))
            except InputError as err:  # 401/403
                return ExecutionResult(False, "failed", str(err))
            return ExecutionResult(True, "evicted", f"PodMigrationJob {name}")
        if await self._exists(name, what):
            # A request whose answer was lost did create it.
            return ExecutionResult(True, "evicted", f"PodMigrationJob {name}")
        return ExecutionResult(False, "failed",
                               f"{error} (gave up after {self.attempts} attempts)")

    async def _exists(self, name: str, what: str) -> bool:
        """Whether the job is on the server (False when that cannot be told either)."""
        try:
            code, _ = await self.client.call("GET", f"{PMJ_PATH}/{name}", msgspec.Raw,
                                             what=what, allow=(404,), timeout=self.timeout)
        except (Unreachable, ConnectionLost, InputError, ApiError):
            return False
        return code == 200


def _phase(job: PodMigrationJob) -> str:
    return job.status.phase or "Pending"


def _passed(job: PodMigrationJob) -> bool:
    return job.metadata.annotations.get(PASSED_ARBITRATION_ANNOTATION) == "true"


Guard = Callable[[], str | None]  # why this instance must not act now (a lost lease), or None
# API trouble that concerns one request: logged, and the next round tries again.
API_TROUBLE = (ApiError, InputError, ConnectionLost, OSError)


class Verdicts:
    """Arbitration verdicts written but not yet seen in the informer cache (it lags behind the
    writes). Shared by every profile's service: a job one passed counts for all at once.
    An entry lapses when the cache shows the verdict, or after `ttl` seconds (a write that
    was lost to a conflict is then arbitrated again)."""

    def __init__(self, ttl: float = 10.0) -> None:
        self.ttl = ttl
        self._entries: dict[str, tuple[Outcome, float]] = {}

    def record(self, name: str, outcome: Outcome) -> None:
        self._entries[name] = (outcome, time.monotonic())

    def pending(self, store: Mapping[str, PodMigrationJob]) -> dict[str, Outcome]:
        """The verdicts the cache does not show yet (by job name)."""
        now = time.monotonic()
        for name, (outcome, when) in list(self._entries.items()):
            job = store.get(name)
            shown = job is None or job.status.phase not in ACTIVE_PHASES or \
                (outcome == "passed" and _passed(job))
            if shown or now - when > self.ttl:
                del self._entries[name]
        return {name: outcome for name, (outcome, _) in self._entries.items()}


class MigrationService:
    """Arbitrates and reconciles one profile's PodMigrationJobs; also the controller's gate
    (the object limiters for jobs created outside the cycles, and the leader guard)."""

    def __init__(self, profile: str, args: MigrationControllerArgs, client: ApiClient,
                 informers: Iterable[Informer], *, events: EventRecorder | None = None,
                 adopt_unowned: bool = True, eviction_attempts: int = 3,
                 guard: Guard | None = None, verdicts: Verdicts | None = None,
                 disable_pvc_reservation: bool = False) -> None:
        self.profile = profile
        self.args = args
        self.creator = creator_identity(profile)
        self.adopt_unowned = adopt_unowned
        self.settings = settings(args)
        self.informers = list(informers)
        jobs = [i for i in self.informers if i.resource.kind == "PodMigrationJob"]
        if not jobs:
            raise InputError("", f"profile {profile}: MigrationController needs the "
                                 "PodMigrationJob informer")
        self.jobs = jobs[0]
        self.guard = guard
        self.verdicts = verdicts if verdicts is not None else Verdicts()
        self.limiters = ObjectLimiters(limiter_configs(args))
        self.object_limits = PodObjectLimits(self.limiters, args.max_migrating_per_workload)
        interval = (args.arbitration_args.interval if args.arbitration_args else None) or ""
        self.interval = parse_duration(interval) if interval else DEFAULT_INTERVAL
        self.interval = max(self.interval, 0.05)
        # Every job is arbitrated before it runs: with arbitrationArgs.enabled false the
        # pod checks still apply (only the migration limits are off).
        self.controller = MigrationJobController(
            client, args, identity=self.creator, adopt_unowned=adopt_unowned, events=events,
            gate=self, require_arbitration=True, eviction_attempts=eviction_attempts,
            disable_pvc_reservation=disable_pvc_reservation)
        self.snapshot: ClusterSnapshot | None = None
        self._ledger: MigrationLedger | None = None
        # job -> (as last seen, when its next pass is due regardless of changes)
        self._seen: dict[str, tuple[PodMigrationJob, float]] = {}
        self._waiting: dict[str, str] = {}  # job -> why arbitration keeps it waiting
        self._next_arbitration = 0.0
        self._next_scavenge = 0.0
        self._workers = asyncio.Semaphore(max(1, args.max_concurrent_reconciles or 1))
        self.rounds = 0

    # -- which jobs ------------------------------------------------------------------------
    def handles(self, job: PodMigrationJob) -> bool:
        creator = job.metadata.annotations.get(JOB_CREATED_BY)
        return creator == self.creator if creator else self.adopt_unowned

    def _own(self, job: Mapping[str, Any]) -> bool:
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        return bool(annotations.get(JOB_CREATED_BY) == self.creator)

    def _store(self) -> Mapping[str, PodMigrationJob]:
        """The informer's cache: cluster-scoped jobs, keyed by name."""
        store: Mapping[str, PodMigrationJob] = self.jobs.store
        return store

    def _jobs(self) -> list[PodMigrationJob]:
        return [job for job in self._store().values() if self.handles(job)
                and job.status.phase in ACTIVE_PHASES and not job.spec.paused]

    def active(self, names: Iterable[str], seen: set[str] | None = None) -> set[str]:
        """Those of `names` still in flight as the informer shows them. A name the informer
        has not shown yet (just created: its watch event is on the way) counts as in flight,
        unless `seen` says it was shown before (then it is gone: deleted)."""
        store = self._store()
        left = set()
        for name in names:
            job = store.get(name)
            if job is None:
                if seen is None or name not in seen:
                    left.add(name)
                continue
            if seen is not None:
                seen.add(name)
            if job.status.phase in ACTIVE_PHASES:
                left.add(name)
        return left

    def phase_counts(self) -> dict[str, int]:
        """This service's jobs in the informer cache, by phase ("" reads as Pending)."""
        counts: dict[str, int] = {}
        for job in self._store().values():
            if self.handles(job):
                counts[_phase(job)] = counts.get(_phase(job), 0) + 1
        return counts

    # -- snapshots ---------------------------------------------------------------------------
    def observe(self, snapshot: ClusterSnapshot) -> None:
        """The latest snapshot (a cycle's, or one built here): workloads for the limiters."""
        self.snapshot = snapshot
        self._ledger = None

    def ledger(self) -> MigrationLedger:
        if self._ledger is None:
            snapshot = self.snapshot if self.snapshot is not None else ClusterSnapshot()
            self._ledger = MigrationLedger(snapshot, WorkloadResolver(snapshot))
            self._ledger.new_cycle(datetime.now(UTC))
        return self._ledger

    # -- the controller's gate ---------------------------------------------------------------
    def limited(self, pod: Pod, job: dict[str, Any]) -> str | None:
        """Checked just before each eviction: the lease, then (for a job created outside this
        profile's cycles) the object limiters, whose token is taken now."""
        refusal = self.guard() if self.guard is not None else None
        if refusal:
            return refusal
        if self._own(job):
            return None  # its token was taken when the cycle created it
        return self.object_limits.reserve(pod, self.ledger(), time.time())

    def evicted(self, pod: Pod, job: dict[str, Any]) -> None:
        """The token was taken by limited()."""

    def not_evicted(self, pod: Pod, job: dict[str, Any]) -> None:
        if not self._own(job):
            self.object_limits.give_back(pod, self.ledger(), time.time())

    # -- the loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        """Rounds until cancelled. An API problem is logged and the next round tries again;
        so is anything unexpected (with its traceback): the service must outlive one bad
        object."""
        log.info("migration controller started", profile=self.profile,
                 creator=self.creator, arbitration=self.settings.arbitration_enabled,
                 interval=self.interval)
        while True:
            await self._safe_round()
            await asyncio.sleep(self.interval)

    async def _safe_round(self) -> None:
        try:
            await self.round()
        except API_TROUBLE as err:
            log.warning("migration controller round failed", profile=self.profile,
                        error=str(err))
        except Exception:
            log.exception("migration controller round failed unexpectedly",
                          profile=self.profile)

    async def round(self) -> None:
        """Arbitrate the waiting jobs (when due), reconcile the jobs due for a pass, and
        scavenge old jobs once a minute. Nothing while the guard refuses (a lost lease)."""
        if self.guard is not None and self.guard():
            return
        self.rounds += 1
        jobs = self._jobs()
        decided = self.verdicts.pending(self._store())
        waiting = [job for job in jobs if _phase(job) == "Pending" and not _passed(job)
                   and job.metadata.name not in decided]
        if waiting and time.monotonic() >= self._next_arbitration:
            await self.arbitrate({job.metadata.name for job in waiting})
            decided = self.verdicts.pending(self._store())
        now = time.monotonic()
        due: list[str] = []
        for job in jobs:
            name = job.metadata.name
            if _phase(job) == "Pending" and not _passed(job) and decided.get(name) != "passed":
                continue
            seen = self._seen.get(name)
            # The informer replaces a changed object, so an unchanged job is the same object;
            # a job backing off after failed evictions waits whatever changed.
            if seen is not None and now < seen[1] and \
                    (seen[0] is job or self.controller.retry_after(name) > 0):
                continue
            due.append(name)
        if due:
            await asyncio.gather(*(self._reconcile(name) for name in due))
            store = self._store()
            for name in due:
                if name in store:
                    wait = max(REQUEUE_SECONDS, self.controller.retry_after(name))
                    self._seen[name] = (store[name], time.monotonic() + wait)
        live = {job.metadata.name for job in jobs}
        for name in [n for n in self._seen if n not in live]:
            del self._seen[name]
        if time.monotonic() >= self._next_scavenge:
            self._next_scavenge = time.monotonic() + SCAVENGE_EVERY
            await self.scavenge(datetime.now(UTC))

    async def _reconcile(self, name: str) -> None:
        """One pass over one job, at most maxConcurrentReconciles at a time; a problem is the
        job's alone (logged, retried on a later round)."""
        async with self._workers:
            try:
                await self.controller.reconcile(name)
            except API_TROUBLE as err:
                log.warning("migration job reconcile failed", job=name, profile=self.profile,
                            error=str(err))
            except Exception:
                log.exception("migration job reconcile failed unexpectedly", job=name,
                              profile=self.profile)

    async def scavenge(self, now: datetime) -> list[str]:
        """Koordinator's scavenger: delete this service's jobs, in any phase, TTL + 5 minutes
        after their creation (30 minutes without a TTL), their Reservations first. The
        names deleted; a job that cannot be deleted is logged and does not stop the sweep."""
        deleted = []
        for job in list(self._store().values()):
            if not self.handles(job):
                continue
            deadline = scavenge_deadline(job)
            if deadline is None or deadline > now:
                continue
            name = job.metadata.name
            try:
                gone = await self.controller.scavenge(name)
            except API_TROUBLE as err:
                log.warning("cannot scavenge migration job", job=name, profile=self.profile,
                            error=str(err))
                continue
            if gone:
                deleted.append(name)
                log.info("migration job scavenged", job=name, profile=self.profile,
                         phase=_phase(job))
        return deleted

    async def arbitrate(self, waiting: set[str]) -> None:
        """doOnceArbitrate over a fresh snapshot of the caches; this profile's verdicts are
        written. Building a snapshot of a large cluster takes a while, so the next
        arbitration waits at least ten times as long as this build took."""
        started = time.monotonic()
        snapshot = await build_snapshot(self.informers)
        built = time.monotonic() - started
        self._next_arbitration = time.monotonic() + max(self.interval, 10 * built)
        self.observe(snapshot)
        ledger = self.ledger()
        arbitrator = Arbitrator(self.settings, snapshot, ledger.resolver, ledger)
        for verdict in arbitrator.arbitrate(self.verdicts.pending(self._store())):
            if verdict.job not in waiting:
                continue
            if verdict.outcome == "waiting":
                if self._waiting.get(verdict.job) != verdict.reason:
                    log.info("migration job waits for arbitration", job=verdict.job,
                             profile=self.profile, reason=verdict.reason)
                    self._waiting[verdict.job] = verdict.reason
                continue
            if self.guard is not None and self.guard():
                return
            try:
                await self.controller.apply_verdict(verdict)
            except API_TROUBLE as err:  # this job's alone: arbitrated again next round
                log.warning("cannot record the arbitration verdict", job=verdict.job,
                            profile=self.profile, error=str(err))
                continue
            self.verdicts.record(verdict.job, verdict.outcome)
            self._waiting.pop(verdict.job, None)
            log.info("migration job arbitrated", job=verdict.job, profile=self.profile,
                     outcome=verdict.outcome, reason=verdict.reason)

    async def drain(self, names: Iterable[str], stop: asyncio.Event) -> set[str]:
        """Run rounds until the named jobs are finished, their TTL (plus a minute) has passed,
        or `stop` is set; the names still in flight."""
        names = set(names)
        seen: set[str] = set()
        ttl = parse_duration(self.args.default_job_ttl) if self.args.default_job_ttl else 0.0
        deadline = time.monotonic() + (ttl + 60.0 if ttl > 0 else NO_TTL_WAIT)
        while not stop.is_set():
            left = self.active(names, seen)
            if not left or time.monotonic() >= deadline:
                return left
            await self._safe_round()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
        return self.active(names, seen)

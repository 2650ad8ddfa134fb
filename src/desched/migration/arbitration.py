"""MigrationController's arbitrator (docs/migration.md): the filter pipeline a
pod passes before it may migrate, the count of migrations in flight it is checked against, and
the arbitration of PodMigrationJobs waiting in the snapshot (their order and verdicts).

Pipeline, first refusal wins:
1. an active PodMigrationJob for the pod already exists;
2. ReservationFirst: the pod's scheduler must be one of schedulerNames;
3. non-retryable: namespaces, eviction-cost MaxInt32, the koord evictor checks, expected replicas;
4. retryable: maxMigratingGlobally, maxMigratingPerNode, maxMigratingPerNamespace,
   maxMigratingPerWorkload, maxUnavailablePerWorkload.
The `descheduler.alpha.kubernetes.io/evict` annotation skips 3 and 4. With
arbitrationArgs.enabled false, 4 is not applied and waiting jobs pass unsorted (Koordinator
ignores the flag; desched honours it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, Literal

from desched.migration.jobdoc import ACTIVE_PHASES, duration_seconds
from desched.migration.limits import IntOrPercent, get_max_migrating, get_max_unavailable
from desched.model.koord import EVICTION_COST_ANNOTATION, eviction_cost
from desched.model.koord_order import OrderKey, eviction_order_key
from desched.model.labels import Matcher
from desched.model.meta import controller_ref
from desched.model.objects import PodMigrationJob
from desched.model.pod import SYSTEM_CRITICAL_PRIORITY, Pod
from desched.policy_files.args import Namespaces
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.workloads import Unresolved, Workload, WorkloadResolver

EVICT_ANNOTATION: Final = "descheduler.alpha.kubernetes.io/evict"
PASSED_ARBITRATION_ANNOTATION: Final = "descheduler.koordinator.sh/passed-arbitration"
MAX_EVICTION_COST: Final = 2**31 - 1

RESERVATION_FIRST: Final = "ReservationFirst"
EVICT_DIRECTLY: Final = "EvictDirectly"
JOB_MODES = (RESERVATION_FIRST, EVICT_DIRECTLY)
# What the API server writes into an empty spec.schedulerName.
DEFAULT_SCHEDULER: Final = "default-scheduler"

# skipEvictionGates values (case-sensitive).
GATES = ("MaxUnavailablePerWorkload", "MaxMigratingPerWorkload", "MaxMigratingPerNode",
         "MaxMigratingPerNamespace", "MaxMigratingGlobally", "ExpectedReplicas", "PVC",
         "BarePods", "LocalStorage", "SystemCritical", "PriorityThreshold", "LabelSelector",
         "Namespaces", "NodeFit")


@dataclass(frozen=True)
class Settings:
    """What the arbitrator reads from MigrationControllerArgs (defaulted)."""

    job_mode: str = RESERVATION_FIRST
    scheduler_names: frozenset[str] = frozenset({"koord-scheduler"})
    namespaces: Namespaces | None = None
    gates: frozenset[str] = frozenset()
    max_migrating_globally: int | None = None
    max_migrating_per_node: int | None = 2
    max_migrating_per_namespace: int | None = None
    max_migrating_per_workload: IntOrPercent | None = None
    max_unavailable_per_workload: IntOrPercent | None = None
    skip_check_expected_replicas: bool = False
    arbitration_enabled: bool = True
    evict_failed_bare_pods: bool = False
    evict_all_bare_pods: bool = False
    evict_local_storage_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    priority_threshold: int | None = None
    label_selector: Matcher | None = None


@dataclass(frozen=True, slots=True)
class Migration:
    """A pod in flight: a PodMigrationJob of the snapshot, or a migration this run started
    (job "", counted as Running: its pod is already gone)."""

    job: str
    namespace: str
    name: str
    uid: str
    running: bool
    passed: bool  # carries descheduler.koordinator.sh/passed-arbitration: "true"
    pod: Pod | None

    @property
    def arbitrated(self) -> bool:
        """Counted while arbitrating: Running, or Pending that already passed (#1150)."""
        return self.running or self.passed

    def describe(self) -> str:
        if not self.job:
            return "a migration started in this cycle"
        return f"PodMigrationJob {self.job} ({'Running' if self.running else 'Pending'})"


# The scavenger deletes a job without TTL this long after its creation (TTL + 5m with one).
SCAVENGE_AFTER = 30 * 60.0
SCAVENGE_GRACE = 5 * 60.0


def job_deadline(job: PodMigrationJob) -> datetime | None:
    """When the job stops being in flight on its own: its TTL elapsed (the controller fails it
    with Timeout), or, without a TTL, when the scavenger deletes it."""
    created = job.metadata.creation_timestamp
    if created is None:
        return None
    ttl = duration_seconds(job.spec.ttl)
    return created + timedelta(seconds=ttl if ttl > 0 else SCAVENGE_AFTER)


def scavenge_deadline(job: PodMigrationJob) -> datetime | None:
    """When the scavenger deletes the job, whatever its phase: TTL + 5 minutes after its
    creation, or 30 minutes without a TTL."""
    created = job.metadata.creation_timestamp
    if created is None:
        return None
    ttl = duration_seconds(job.spec.ttl)
    return created + timedelta(seconds=ttl + SCAVENGE_GRACE if ttl > 0 else SCAVENGE_AFTER)


def _job_migration(job: PodMigrationJob, snapshot: ClusterSnapshot,
                   now: datetime | None) -> Migration | None:
    ref = job.spec.pod_ref
    if ref is None or job.status.phase not in ACTIVE_PHASES:
        return None
    if now is not None:
        deadline = job_deadline(job)
        if deadline is not None and deadline <= now:
            return None
    # Koordinator gets a job's pod by namespace/name (a recreated pod of the same name counts).
    pod = snapshot.pods.get(f"{ref.namespace}/{ref.name}")
    passed = job.metadata.annotations.get(PASSED_ARBITRATION_ANNOTATION) == "true"
    return Migration(job.metadata.name, ref.namespace, ref.name, ref.uid,
                     job.status.phase == "Running", passed, pod)


@dataclass
class _Index:
    """The in-flight migrations grouped the ways the retryable filters count them."""

    all: list[Migration] = field(default_factory=list)
    by_uid: dict[str, Migration] = field(default_factory=dict)
    by_name: dict[tuple[str, str], Migration] = field(default_factory=dict)
    by_node: dict[str, list[Migration]] = field(default_factory=dict)
    by_namespace: dict[str, list[Migration]] = field(default_factory=dict)
    by_workload: dict[str, list[Migration]] = field(default_factory=dict)


def _others(migrations: Iterable[Migration], uid: str,
            counted: Callable[[Migration], bool] | None) -> list[Migration]:
    """The migrations of pods other than `uid` that count (the pod's own job never does)."""
    return [m for m in migrations
            if (not uid or m.uid != uid) and (counted is None or counted(m))]


class MigrationLedger:
    """The migrations in flight: the snapshot's active PodMigrationJobs (less those arbitration
    fails at once) plus the migrations this run started in the current cycle."""

    def __init__(self, snapshot: ClusterSnapshot, resolver: WorkloadResolver) -> None:
        self.snapshot = snapshot
        self.resolver = resolver
        self.started: list[Migration] = []
        # The run's time, for the snapshot jobs' TTLs (None: jobs never time out).
        self.now: datetime | None = None
        self._jobs: list[Migration] | None = None
        self._failed_jobs: frozenset[str] = frozenset()
        self._index: _Index | None = None

    def jobs(self) -> list[Migration]:
        if self._jobs is None:
            found = (_job_migration(job, self.snapshot, self.now)
                     for job in self.snapshot.migration_jobs.values())
            self._jobs = [m for m in found
                          if m is not None and m.job not in self._failed_jobs]
        return self._jobs

    def drop_jobs(self, names: Iterable[str]) -> None:
        """Jobs the arbitrator fails are Failed right away: no longer in flight."""
        self._failed_jobs = self._failed_jobs | frozenset(names)
        self._jobs = None
        self._index = None

    def active(self) -> list[Migration]:
        return [*self.jobs(), *self.started]

    def start(self, pod: Pod) -> None:
        meta = pod.metadata
        self.started.append(Migration("", meta.namespace, meta.name, meta.uid, True, True, pod))
        self._index = None

    def new_cycle(self, now: datetime | None = None) -> None:
        """This run's migrations completed within their cycle; snapshot jobs past their TTL
        are gone."""
        self.started.clear()
        self.now = now
        self._jobs = None
        self._index = None

    def existing(self, pod: Pod) -> Migration | None:
        """The pod's migration in flight: matched by uid, then by namespace/name."""
        meta = pod.metadata
        index = self.index()
        found = index.by_uid.get(meta.uid) if meta.uid else None
        return found if found is not None else index.by_name.get((meta.namespace, meta.name))

    def workload_key(self, pod: Pod) -> str | None:
        """The key pods of one workload share: the resolved workload, else the controller."""
        found = self.resolver.resolve(pod)
        if found is None:
            return None
        if isinstance(found, Workload):
            return found.key
        ref = controller_ref(pod.metadata)
        return f"controller/{pod.namespace}/{ref.kind}/{ref.name}" if ref else None

    def index(self) -> _Index:
        if self._index is None:
            index = _Index()
            for m in self.active():
                index.all.append(m)
                if m.uid:
                    index.by_uid.setdefault(m.uid, m)
                index.by_name.setdefault((m.namespace, m.name), m)
                index.by_namespace.setdefault(m.namespace, []).append(m)
                if m.pod is not None:
                    if m.pod.spec.node_name:
                        index.by_node.setdefault(m.pod.spec.node_name, []).append(m)
                    key = self.workload_key(m.pod)
                    if key is not None:
                        index.by_workload.setdefault(key, []).append(m)
            self._index = index
        return self._index

    def migrating_of_owner(self, owner_uid: str) -> int:
        """SortJobsByMigratingNum's count: jobs of the owner's pods that passed arbitration or
        run (any phase, as Koordinator counts), plus this run's migrations of its pods."""
        count = 0
        for job in self.snapshot.migration_jobs.values():
            ref = job.spec.pod_ref
            pod = self.snapshot.pods.get(f"{ref.namespace}/{ref.name}") if ref else None
            owner = controller_ref(pod.metadata) if pod is not None else None
            if owner is None or owner.uid != owner_uid:
                continue
            if (job.metadata.annotations.get(PASSED_ARBITRATION_ANNOTATION) == "true"
                    or job.status.phase == "Running"):
                count += 1
        for m in self.started:
            owner = controller_ref(m.pod.metadata) if m.pod is not None else None
            if owner is not None and owner.uid == owner_uid:
                count += 1
        return count


# -- the arbitration order ----------------------------------------------------------------------

_GO_ZERO_TIME_UNIX = -62135596800


def _job_owner(pod: Pod | None) -> str | None:
    """The uid of the pod's controller when it is a batch Job."""
    ref = controller_ref(pod.metadata) if pod is not None else None
    return ref.uid if ref is not None and ref.kind == "Job" else None


def sort_jobs(jobs: Iterable[PodMigrationJob], pod_of_job: Mapping[str, Pod],
              migrating_of_owner: Callable[[str], int]) -> list[PodMigrationJob]:
    """doOnceArbitrate's order: four stable sorts in sequence, so the last is the primary key.
    1. newer jobs first (second granularity);
    2. by pod, LowNodeLoad's pod order without usage (priority class, priority, QoS, koord QoS,
       deletion cost, eviction cost, newer first); jobs without a pod first;
    3. jobs of one batch Job's pods grouped at the first one's position;
    4. jobs of batch Jobs with more migrations in flight first."""
    order = list(jobs)

    def created(job: PodMigrationJob) -> int:
        stamp = job.metadata.creation_timestamp
        return int(stamp.timestamp()) if stamp is not None else _GO_ZERO_TIME_UNIX

    order.sort(key=lambda job: -created(job))

    no_pod: OrderKey = (0, 0, 0, 0, 0, 0, (0, 0.0), 0.0)

    def by_pod(job: PodMigrationJob) -> tuple[int, OrderKey]:
        pod = pod_of_job.get(job.metadata.name)
        return (0, no_pod) if pod is None else (1, eviction_order_key(pod, None))

    order.sort(key=by_pod)

    first_of_owner: dict[str, int] = {}
    rank: dict[int, int] = {}
    for i, job in enumerate(order):
        owner = _job_owner(pod_of_job.get(job.metadata.name))
        rank[id(job)] = i if owner is None else first_of_owner.setdefault(owner, i)
    order.sort(key=lambda job: rank[id(job)])

    counts: dict[str, int] = {}

    def migrating(job: PodMigrationJob) -> int:
        owner = _job_owner(pod_of_job.get(job.metadata.name))
        if owner is None:
            return 0
        if owner not in counts:
            counts[owner] = migrating_of_owner(owner)
        return counts[owner]

    order.sort(key=lambda job: -migrating(job))
    return order


Outcome = Literal["passed", "failed", "waiting"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What arbitration does with a waiting job: passed (annotated, handed to the controller),
    failed (phase Failed, ForbiddenMigratePod) or waiting (retried next interval)."""

    job: str
    outcome: Outcome
    reason: str


# -- the pipeline --------------------------------------------------------------------------------


class Arbitrator:
    def __init__(self, settings: Settings, snapshot: ClusterSnapshot,
                 resolver: WorkloadResolver, ledger: MigrationLedger) -> None:
        self.settings = settings
        self.snapshot = snapshot
        self.resolver = resolver
        self.ledger = ledger
        # Non-retryable verdicts depend only on the pod and the (unchanging) workload objects.
        self._static: dict[int, tuple[Pod, str | None]] = {}
        self._limits: dict[int, tuple[int, int]] = {}  # replicas -> workload limits

    def skipped(self, gate: str) -> bool:
        return gate in self.settings.gates

    # -- Filter ----------------------------------------------------------------------------------
    def filter(self, pod: Pod) -> str | None:
        """Why the pod may not migrate now, or None (arbitrator.Filter)."""
        refusal = self.check(pod)
        return None if refusal is None else refusal[0]

    def check(self, pod: Pod) -> tuple[str, bool] | None:
        """The filter's refusal and whether it is retryable (a migration limit that may lift),
        or None."""
        reason = self.existing_job(pod) or self.reservation(pod)
        if reason is not None:
            return reason, False
        if EVICT_ANNOTATION in pod.metadata.annotations:
            return None
        reason = self.non_retryable(pod)
        if reason is not None:
            return reason, False
        if self.settings.arbitration_enabled:
            reason = self.retryable(pod)
            if reason is not None:
                return reason, True
        return None

    def existing_job(self, pod: Pod) -> str | None:
        found = self.ledger.existing(pod)
        return None if found is None else f"the pod is already migrating: {found.describe()}"

    def reservation(self, pod: Pod) -> str | None:
        settings = self.settings
        if settings.job_mode != RESERVATION_FIRST:
            return None
        name = pod.spec.scheduler_name or DEFAULT_SCHEDULER
        if name in settings.scheduler_names:
            return None
        return (f'spec.schedulerName is "{name}", not one of schedulerNames '
                f"[{' '.join(sorted(settings.scheduler_names))}]: a ReservationFirst migration "
                f"needs a scheduler that honours Reservations")

    def non_retryable(self, pod: Pod) -> str | None:
        """namespaces, eviction-cost, the evictor checks and expected replicas."""
        cached = self._static.get(id(pod))
        if cached is not None and cached[0] is pod:
            return cached[1]
        reason = (self._namespace(pod) or self._eviction_cost(pod) or self.evictor_filter(pod)
                  or self.expected_replicas(pod))
        self._static[id(pod)] = (pod, reason)
        return reason

    def _namespace(self, pod: Pod) -> str | None:
        ns = self.settings.namespaces
        if ns is None or self.skipped("Namespaces"):
            return None
        if ns.include and pod.namespace not in ns.include:
            return f"namespace {pod.namespace} is not in namespaces.include"
        if ns.exclude and pod.namespace in ns.exclude:
            return f"namespace {pod.namespace} is in namespaces.exclude"
        return None

    def _eviction_cost(self, pod: Pod) -> str | None:
        if eviction_cost(pod) == MAX_EVICTION_COST:
            return f"{EVICTION_COST_ANNOTATION} is {MAX_EVICTION_COST}: the pod is never migrated"
        return None

    def evictor_filter(self, pod: Pod) -> str | None:
        """Koordinator's EvictorFilter: DaemonSet, mirror, static and terminating pods never;
        then bare pods, critical priority and the priority threshold, local storage, PVCs and
        the label selector, each skippable by its gate."""
        s = self.settings
        meta = pod.metadata
        if pod.is_daemonset:
            return "the pod belongs to a DaemonSet"
        if pod.is_mirror:
            return "the pod is a mirror pod"
        if pod.is_static:
            return "the pod is a static pod"
        if meta.deletion_timestamp is not None:
            return "the pod is terminating"
        if not meta.owner_references and not s.evict_all_bare_pods \
                and not self.skipped("BarePods"):
            if not s.evict_failed_bare_pods:
                return "the pod has no ownerReferences (a bare pod)"
            if pod.status.phase != "Failed":
                return "the pod has no ownerReferences and is not Failed"
        priority = pod.spec.priority
        if not s.evict_system_critical_pods and priority is not None:
            if priority >= SYSTEM_CRITICAL_PRIORITY and not self.skipped("SystemCritical"):
                return f"the pod has system-critical priority {priority}"
            if (s.priority_threshold is not None and priority >= s.priority_threshold
                    and not self.skipped("PriorityThreshold")):
                return (f"the pod's priority {priority} is not below priorityThreshold "
                        f"{s.priority_threshold}")
        if not s.evict_local_storage_pods and pod.has_local_storage \
                and not self.skipped("LocalStorage"):
            return "the pod has a hostPath or emptyDir volume (evictLocalStoragePods is false)"
        if s.ignore_pvc_pods and pod.pvc_names and not self.skipped("PVC"):
            return "the pod has a PersistentVolumeClaim (ignorePvcPods is true)"
        if s.label_selector is not None and not s.label_selector(meta.labels) \
                and not self.skipped("LabelSelector"):
            return "the pod's labels do not match labelSelector"
        return None

    def workload_limits(self, workload: Workload) -> tuple[int, int]:
        """(maxMigrating, maxUnavailable) for the workload's replicas."""
        limits = self._limits.get(workload.replicas)
        if limits is None:
            s = self.settings
            limits = self._limits[workload.replicas] = (
                get_max_migrating(workload.replicas, s.max_migrating_per_workload),
                get_max_unavailable(workload.replicas, s.max_unavailable_per_workload))
        return limits

    def expected_replicas(self, pod: Pod) -> str | None:
        """filterExpectedReplicas: never migrate the only replica, nor a workload whose
        maxMigrating or maxUnavailable is all of its replicas."""
        if self.settings.skip_check_expected_replicas or self.skipped("ExpectedReplicas"):
            return None
        found = self.resolver.resolve(pod)
        if found is None:
            return None
        if isinstance(found, Unresolved):
            return (f"the pod's workload cannot be resolved: {found.reason} (Koordinator "
                    f"reads it as 0 expected replicas and never migrates the pod)")
        replicas = found.replicas
        if replicas == 1:
            return (f"{found} has 1 replica: a single-replica workload is never migrated "
                    f"(skipCheckExpectedReplicas)")
        max_migrating, max_unavailable = self.workload_limits(found)
        if replicas in (max_migrating, max_unavailable):
            return (f"{found} expects {replicas} replicas and maxMigrating is {max_migrating}, "
                    f"maxUnavailable {max_unavailable}: migrating could take every replica "
                    f"(skipCheckExpectedReplicas)")
        return None

    def retryable(self, pod: Pod,
                  counted: Callable[[Migration], bool] | None = None) -> str | None:
        """The migration limits, against the migrations in flight (those `counted` accepts;
        all of them by default)."""
        index = self.ledger.index()
        s = self.settings
        uid = pod.metadata.uid
        limit = s.max_migrating_globally
        if limit and limit > 0 and not self.skipped("MaxMigratingGlobally"):
            count = len(_others(index.all, uid, counted))
            if count >= limit:
                return (f"maxMigratingGlobally: {count} pods are migrating, the limit is "
                        f"{limit}")
        node = pod.spec.node_name
        limit = s.max_migrating_per_node
        if node and limit and limit > 0 and not self.skipped("MaxMigratingPerNode"):
            count = len(_others(index.by_node.get(node, ()), uid, counted))
            if count >= limit:
                return (f"maxMigratingPerNode: {count} pods on node {node} are migrating, the "
                        f"limit is {limit}")
        limit = s.max_migrating_per_namespace
        if limit and limit > 0 and not self.skipped("MaxMigratingPerNamespace"):
            count = len(_others(index.by_namespace.get(pod.namespace, ()), uid, counted))
            if count >= limit:
                return (f"maxMigratingPerNamespace: {count} pods in namespace {pod.namespace} "
                        f"are migrating, the limit is {limit}")
        return self._workload(pod, index, counted)

    def _workload(self, pod: Pod, index: _Index,
                  counted: Callable[[Migration], bool] | None) -> str | None:
        """filterMaxMigratingOrUnavailablePerWorkload (pods with a controller only)."""
        check_migrating = not self.skipped("MaxMigratingPerWorkload")
        check_unavailable = not self.skipped("MaxUnavailablePerWorkload")
        if not (check_migrating or check_unavailable):
            return None
        found = self.resolver.resolve(pod)
        if found is None:
            return None
        if isinstance(found, Unresolved):
            return f"the pod's workload cannot be resolved: {found.reason}"
        max_migrating, max_unavailable = self.workload_limits(found)
        in_flight = index.by_workload.get(found.key)
        migrating = {(m.namespace, m.name) for m in _others(in_flight, pod.metadata.uid, counted)} \
            if in_flight else set()
        if check_migrating and migrating and len(migrating) >= max_migrating:
            return (f"maxMigratingPerWorkload: {found} has {len(migrating)} migrating pods, the "
                    f"limit is {max_migrating} of {found.replicas} replicas")
        if check_unavailable:
            unavailable = migrating | {(p.namespace, p.name)
                                       for p in self.resolver.unavailable(found)}
            if len(unavailable) >= max_unavailable:
                return (f"maxUnavailablePerWorkload: {found} has {len(unavailable)} unavailable "
                        f"or migrating pods, the limit is {max_unavailable} of {found.replicas} "
                        f"replicas")
        return None

    # -- arbitration of waiting jobs ------------------------------------------------------------
    def waiting_jobs(self) -> list[PodMigrationJob]:
        """Pending jobs that have not passed arbitration yet (nor timed out)."""
        now = self.ledger.now
        return [job for job in self.snapshot.migration_jobs.values()
                if job.status.phase in ("", "Pending") and job.spec.pod_ref is not None
                and job.metadata.annotations.get(PASSED_ARBITRATION_ANNOTATION) != "true"
                and (now is None or (deadline := job_deadline(job)) is None or deadline > now)]

    def arbitrate(self, decided: Mapping[str, Outcome] | None = None) -> list[Verdict]:
        """One doOnceArbitrate over the waiting jobs, in arbitration order. A job whose pod is
        missing fails (Koordinator passes it: issue #3039). With arbitration disabled the jobs
        come unsorted and only the pod checks apply.

        `decided`: jobs already given a verdict that the snapshot does not show yet (a live
        cache lags behind its writes). They are not arbitrated again, and those that passed
        count as passed."""
        decided = decided or {}
        jobs = [job for job in self.waiting_jobs() if job.metadata.name not in decided]
        enabled = self.settings.arbitration_enabled
        pod_of_job: dict[str, Pod] = {}
        for job in jobs:
            ref = job.spec.pod_ref
            pod = self.snapshot.pods.get(f"{ref.namespace}/{ref.name}") if ref else None
            if pod is not None:
                pod_of_job[job.metadata.name] = pod
        verdicts: list[Verdict] = []
        passed = {name for name, outcome in decided.items() if outcome == "passed"}
        order = sort_jobs(jobs, pod_of_job, self.ledger.migrating_of_owner) if enabled else jobs
        for job in order:
            name = job.metadata.name
            pod = pod_of_job.get(name)
            ref = job.spec.pod_ref
            where = f"{ref.namespace}/{ref.name}" if ref else "?"
            if pod is None:
                verdicts.append(Verdict(name, "failed", f'Pod "{where}" is missing'))
                continue
            if EVICT_ANNOTATION not in pod.metadata.annotations:
                reason = self.non_retryable(pod)
                if reason is not None:
                    verdicts.append(Verdict(
                        name, "failed", f'Pod "{where}" is forbidden to migrate because it does '
                                        f"not meet the requirements: {reason}"))
                    continue
                reason = self.retryable(pod, self._counted_while_arbitrating(passed)) \
                    if enabled else None
                if reason is not None:
                    verdicts.append(Verdict(name, "waiting", reason))
                    continue
            passed.add(name)
            verdicts.append(Verdict(name, "passed", "passed arbitration" if enabled else
                                    "passed the pod checks (arbitrationArgs.enabled: false: "
                                    "no migration limits)"))
        return verdicts

    @staticmethod
    def _counted_while_arbitrating(passed: set[str]) -> Callable[[Migration], bool]:
        """Running jobs, and Pending ones that passed (earlier, or earlier in this round)."""
        return lambda m: m.arbitrated or m.job in passed

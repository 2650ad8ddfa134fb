"""The live PodMigrationJob controller (docs/migration.md): one reconcile pass
over one job at a time, all state in the job itself, so a restarted controller resumes every job.

Implemented: the common prelude (paused, final phases, TTL timeout, invalid podRef, missing pod),
the EvictDirectly flow and the ReservationFirst flow up to the bound pod being Ready, the
evictQPS/evictBurst token bucket, hooks for the object limiters and the arbitrator
(`MigrationGate`, `require_arbitration`, `apply_verdict`), the scavenger's delete, and the events
Koordinator records. The job is handled as the API's JSON (`jobdoc`); the pod is removed by
the job's eviction policy (`podremoval`).

Restart safety: before every eviction the pod is read back; it is evicted only when it still
exists with the job's pod UID and is not terminating. An eviction that took effect (pod gone,
replaced or terminating) is never sent again. The condition `Eviction=False/Evicting` is written
before the eviction request, so a pod that disappears afterwards completes the job even when the
controller restarted in between. A SoftEviction leaves its annotation on the pod; with the
Evicting condition that is what tells a later pass not to annotate again.

A PodDisruptionBudget refusal (429) is recorded as `Eviction=False/FailedEvict` (written, with its
Warning event, only when the error changes, so a budget that keeps refusing does not rewrite the
job every pass) and retried on a later pass; `retry_after` tells the caller how long to wait (3 s
doubling per consecutive failure, up to 60 s). When the TTL expires the job fails with reason
Timeout and the last error in its message. Status is written through the status subresource with
the job's resourceVersion; a conflict (409) ends the pass, and the next one starts from the fresh
object. A `ConnectionLost` ends the pass too (the caller logs it); the controller's own counters
(evictQPS, the gate's tokens, failures) are settled before it can escape.

Events are emitted only after the write that records the state they announce succeeded, and only
when that state changes, so a job that waits does not repeat its Normal events every pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from desched.live.client import ApiClient, ApiError, ConnectionLost
from desched.live.events import EventRecorder, ObjectRef, PodRef
from desched.live.eviction_api import ALREADY_GONE
from desched.live.pod_removal import PodRemoval
from desched.migration import jobdoc as doc
from desched.migration import reservation as rsv
from desched.migration.arbitration import (
    EVICT_ANNOTATION,
    EVICT_DIRECTLY,
    PASSED_ARBITRATION_ANNOTATION,
    RESERVATION_FIRST,
    Verdict,
)
from desched.migration.args import (
    DEFAULT_EVICT_BURST,
    DEFAULT_EVICT_QPS,
    MigrationControllerArgs,
    evict_qps,
)
from desched.migration.jobdoc import (
    ACTIVE_PHASES,
    COND_EVICTION,
    EVICT_COMPLETE,
    EVICTING,
    FAILED,
    FAILED_EVICT,
    FORBIDDEN,
    GROUP_VERSION,
    JOB_CREATED_BY,
    MIGRATING_ACTION,
    NORMAL,
    PENDING,
    PMJ_KIND,
    PMJ_PATH,
    RUNNING,
    SUCCEEDED,
    WAIT_FOR_BIND,
    WAIT_FOR_READY,
    WARNING,
)
from desched.migration.limiter import TokenBucket
from desched.migration.policies import (
    SOFT_EVICTION,
    SOFT_EVICTION_ANNOTATION,
    trigger_and_reason,
)
from desched.model.pod import Pod
from desched.util.backoff import Backoff

# The name its log lines carried before the module moved to live/.
log = logging.getLogger("desched.migration.controller")

Clock = Callable[[], datetime]


class MigrationGate(Protocol):
    """The object limiters (docs/migration.md), as seen by the controller.

    For every `limited()` that returns None the controller calls exactly one of `evicted()` or
    `not_evicted()`, so a gate may reserve a token in `limited()` and settle it afterwards."""

    def limited(self, pod: Pod, job: dict[str, Any]) -> str | None:
        """Why the object limiter says wait, or None: go ahead (a token may be taken for it)."""
        ...

    def evicted(self, pod: Pod, job: dict[str, Any]) -> None:
        """The eviction went through (feed the limiters)."""
        ...

    def not_evicted(self, pod: Pod, job: dict[str, Any]) -> None:
        """After `limited()` said go, the eviction did not happen (refused, failed, or the pass
        ended before the request): give the token back."""
        ...


@dataclass(frozen=True, slots=True)
class _Event:
    type: str
    reason: str
    note: str


def _now_utc() -> datetime:
    return datetime.now(UTC)


class _Stop(Exception):
    """Ends the pass: the job was written (or conflicted) and the next pass goes on from there."""


class MigrationJobController:
    """Reconciles PodMigrationJobs through the API server.

    `identity`: when set, jobs annotated `koordinator.sh/job-created-by` with another value are
    skipped (Koordinator's per-instance partitioning); by default every job is handled, so a
    restarted controller resumes the jobs its predecessor created. `adopt_unowned=False` skips
    the jobs without that annotation (made by hand), so that of several controllers only one
    runs them. `events` receives the job's events; `gate` holds the object limiters;
    `require_arbitration` leaves a Pending job alone until the arbitrator passed it."""

    def __init__(self, client: ApiClient, args: MigrationControllerArgs,
                 clock: Clock = _now_utc, *, identity: str | None = None,
                 events: EventRecorder | None = None, gate: MigrationGate | None = None,
                 require_arbitration: bool = False, adopt_unowned: bool = True,
                 eviction_attempts: int = 3, backoff: Backoff | None = None,
                 disable_pvc_reservation: bool = False) -> None:
        self.client = client
        # Koordinator's DisablePVCReservation gate: Reservations without PVC and ephemeral
        # volumes (migration/reservation.py).
        self.disable_pvc_reservation = disable_pvc_reservation
        self.args = args
        self.clock = clock
        self.identity = identity
        self.events = events
        self.gate = gate
        self.require_arbitration = require_arbitration
        self.adopt_unowned = adopt_unowned
        # The controller's clock as it is when a pod is removed (tests move it).
        self.removal = PodRemoval(client, args, lambda: self.clock(),
                                  attempts=eviction_attempts,
                                  backoff=backoff or Backoff(initial=0.5, maximum=5.0))
        self.evictions = 0  # eviction requests this controller got through (2xx)
        qps = evict_qps(args.evict_qps) or DEFAULT_EVICT_QPS
        burst = args.evict_burst if args.evict_burst else DEFAULT_EVICT_BURST
        # On the injected clock, so that tests (and a simulated run) drive the refill.
        self.bucket = TokenBucket(qps, burst, self.clock().timestamp())
        # Consecutive failed eviction attempts per job, for retry_after (reset on success or
        # when the job is no longer active).
        self.failures: dict[str, int] = {}
        self._seen: dict[str, dict[str, Any]] = {}  # each job's latest version in this pass

    def retry_after(self, name: str) -> float:
        """Seconds the caller should wait before the next pass of the job: 0, or after failed
        evictions (a PDB refusal) 3 s doubling per failure up to 60 s, so a blocked job does
        not hammer the API server."""
        failures = self.failures.get(name, 0)
        return 0.0 if failures <= 0 else float(min(3 * 2 ** (failures - 1), 60))

    # -- passes ------------------------------------------------------------------------------------
    async def reconcile_all(self) -> list[str]:
        """One pass over every job the API server lists. Returns the names of the jobs this
        controller handles that are still active afterwards (phase "", Pending or Running, not
        paused), so a caller can wait for the jobs it created."""
        _, listing = await self._call("GET", PMJ_PATH, None, "list podmigrationjobs")
        active: list[str] = []
        for item in (listing or {}).get("items") or []:
            name = ((item or {}).get("metadata") or {}).get("name")
            if not name:
                continue
            try:
                still = await self.reconcile(str(name))
            except (ApiError, OSError, ConnectionLost) as err:
                log.warning("podmigrationjob %s: %s", name, err)
                still = self._active(item)  # unknown: as it was before the pass
            if still:
                active.append(str(name))
        return active

    async def reconcile(self, name: str) -> bool:
        """One pass over one job; True if it is still active and handled by this controller."""
        code, job = await self._call("GET", f"{PMJ_PATH}/{name}", None,
                                     f"get podmigrationjob {name}", allow=(404,))
        if code == 404 or job is None:
            self.failures.pop(name, None)
            return False
        self._seen[name] = job
        try:
            await self._reconcile(job)
        except _Stop:
            pass
        finally:
            latest = self._seen.pop(name, job)
        active = self._active(latest)
        if not active:
            self.failures.pop(name, None)
        return active

    def _handles(self, job: dict[str, Any]) -> bool:
        creator = doc.annotations_of(job).get(JOB_CREATED_BY)
        if not creator:
            return self.adopt_unowned
        return self.identity is None or creator == self.identity

    def _active(self, job: dict[str, Any]) -> bool:
        return self._handles(job) and not (job.get("spec") or {}).get("paused") and \
            ((job.get("status") or {}).get("phase") or "") in ACTIVE_PHASES

    def _awaits_arbitration(self, job: dict[str, Any]) -> bool:
        phase = (job.get("status") or {}).get("phase") or ""
        return self.require_arbitration and phase in ("", PENDING) and \
            doc.annotations_of(job).get(PASSED_ARBITRATION_ANNOTATION) != "true"

    async def _reconcile(self, job: dict[str, Any]) -> None:
        meta = job.get("metadata") or {}
        spec = job.get("spec") or {}
        if not self._active(job):
            return
        if self._awaits_arbitration(job):
            return  # apply_verdict passes it; a job never passed is the scavenger's
        phase = (job.get("status") or {}).get("phase") or ""
        mode = spec.get("mode") or self.args.default_job_mode or RESERVATION_FIRST
        ttl = doc.ttl_seconds(job)
        created = doc.parse_time(meta.get("creationTimestamp"))
        if ttl > 0 and created is not None and \
                (self.clock() - created).total_seconds() >= ttl:
            await self._time_out(job, mode)
            return
        if phase in ("", PENDING):
            job = await self._prepare_pending(job)
        if mode == EVICT_DIRECTLY:
            await self._evict_directly(job)
        else:
            await self._reservation_first(job)

    async def _time_out(self, job: dict[str, Any], mode: str) -> None:
        note = "Abort job caused by timeout"
        message = note
        last = doc.condition(job, COND_EVICTION)
        if last is not None and last.get("reason") == FAILED_EVICT and last.get("message"):
            message += f"; last eviction attempt: {last['message']}"
        if mode != EVICT_DIRECTLY:
            await self._delete_own_reservation(job)
        await self._finish(job, FAILED, "Timeout", message,
                           event=_Event(WARNING, "Timeout", note))

    # -- arbitration -----------------------------------------------------------------------------
    async def apply_verdict(self, verdict: Verdict) -> None:
        """Records the arbitrator's verdict on a job that is still Pending: passed → the
        passed-arbitration annotation (so the reconcile takes the job on), failed → Failed with
        ForbiddenMigratePod, waiting → nothing. A conflict or a deleted job just ends it; the
        arbitrator tries again next round."""
        if verdict.outcome not in ("passed", "failed"):
            return
        code, job = await self._call("GET", f"{PMJ_PATH}/{verdict.job}", None,
                                     f"get podmigrationjob {verdict.job}", allow=(404,))
        if code == 404 or job is None:
            return
        if ((job.get("status") or {}).get("phase") or "") not in ("", PENDING):
            return
        if doc.annotations_of(job).get(PASSED_ARBITRATION_ANNOTATION) == "true":
            # Passed already: a "failed" verdict is stale (computed from a lagging cache) and
            # must not fail a job the reconcile may be running; "passed" has nothing to add.
            return
        try:
            if verdict.outcome == "failed":
                await self._finish(job, FAILED, FORBIDDEN, verdict.reason,
                                   event=_Event(WARNING, FORBIDDEN, verdict.reason))
            else:
                meta = job.setdefault("metadata", {})
                meta["annotations"] = {**(meta.get("annotations") or {}),
                                       PASSED_ARBITRATION_ANNOTATION: "true"}
                await self._write(job, status=False)
        except _Stop:
            return

    # -- Pending -> Running --------------------------------------------------------------------
    async def _prepare_pending(self, job: dict[str, Any]) -> dict[str, Any]:
        ref = (job.get("spec") or {}).get("podRef") or {}
        namespace, name = ref.get("namespace") or "", ref.get("name") or ""
        if not namespace or not name:
            note = "Abort job caused by invalid PodRef"
            await self._finish(job, FAILED, "InvalidPodRef", note,
                               event=_Event(WARNING, "InvalidPodRef", note))
            raise _Stop
        pod = await self._get_pod(namespace, name)
        if pod is None:
            await self._fail_missing_pod(job)
            raise _Stop
        uid = (pod.get("metadata") or {}).get("uid") or ""
        if ref.get("uid") and uid != ref["uid"]:
            # The job was made for another pod of that name (a StatefulSet recreated it while
            # the job waited): never evict the new one.
            await self._fail_missing_pod(job)
            raise _Stop
        if uid and not ref.get("uid"):
            job["spec"]["podRef"] = {**ref, "uid": uid}
            job = await self._write(job, status=False)
        job.setdefault("status", {})["phase"] = RUNNING
        return await self._write(job, status=True)

    async def _fail_missing_pod(self, job: dict[str, Any]) -> None:
        note = f'Abort job caused by missing Pod "{doc.pod_key(job)}"'
        await self._finish(job, FAILED, "MissingPod", note,
                           event=_Event(WARNING, "MissingPod", note))

    # -- EvictDirectly -------------------------------------------------------------------------
    async def _evict_directly(self, job: dict[str, Any]) -> None:
        evicted = await self._evict_pod(job, None)
        if evicted is not None:
            # No event on EvictDirectly success, as Koordinator.
            await self._finish(evicted, SUCCEEDED, "", f'Pod "{doc.pod_key(job)}" has been evicted',
                               complete=True)

    async def _evict_pod(self, job: dict[str, Any],
                         reservation: dict[str, Any] | None) -> dict[str, Any] | None:
        """evictPod: the job once its pod is evicted (condition Eviction=True), or None when the
        pass ends here (waiting, refused, or the job failed)."""
        if doc.is_true(job, COND_EVICTION):
            return job
        ref = (job.get("spec") or {}).get("podRef") or {}
        key = doc.pod_key(job)
        read = await self.client.read_pod(*doc.pod_ns_name(job))
        pod_meta = (read.raw.get("metadata") or {}) if read is not None else {}
        replaced = bool(ref.get("uid")) and pod_meta.get("uid") != ref.get("uid")
        if read is None or replaced:
            if (job.get("status") or {}).get("status") != COND_EVICTION:
                await self._fail_missing_pod(job)
                return None
            return await self._evict_complete(job, key)
        if pod_meta.get("deletionTimestamp"):
            return None  # terminating: an eviction took effect; wait for the pod to go
        pod, raw = read.pod, read.raw
        if self.removal.policy(pod, job) == SOFT_EVICTION and doc.evicting(job) and \
                SOFT_EVICTION_ANNOTATION in pod.metadata.annotations:
            return None  # soft-evicted: another agent removes the pod, or the TTL ends the job
        if reservation is not None and rsv.is_succeeded(reservation):
            note = "Reservation is already bound by another Pod"
            await self._finish(job, FAILED, FORBIDDEN, note, event=_Event(WARNING, FORBIDDEN, note))
            return None
        job = await self._evict(job, pod, raw)
        return job if doc.is_true(job, COND_EVICTION) else None

    async def _evict_complete(self, job: dict[str, Any], key: str) -> dict[str, Any]:
        note = f'Pod "{key}" has been evicted'
        return await self._set_condition(job, COND_EVICTION, "True", EVICT_COMPLETE, note,
                                         event=_Event(NORMAL, EVICT_COMPLETE, note))

    # -- ReservationFirst ----------------------------------------------------------------------
    async def _reservation_first(self, job: dict[str, Any]) -> None:
        spec = job.get("spec") or {}
        ref = (spec.get("reservationOptions") or {}).get("reservationRef") or {}
        if not ref.get("name"):
            await self._create_reservation(job)
            return
        name = str(ref["name"])
        if not doc.is_true(job, "ReservationCreated"):
            job = await self._set_condition(job, "ReservationCreated", "True", "", "")
        reservation = await self._get_reservation(name)
        if reservation is None:
            note = f'Abort job caused by missing Reservation "{name}"'
            await self._finish(job, FAILED, "MissingReservation", note,
                               event=_Event(WARNING, "MissingReservation", note))
            return
        job = await self._sync_unschedulable(job, reservation)
        if rsv.is_pending(reservation):
            return  # wait; an unschedulable Reservation ends by the job's TTL
        if rsv.is_expired(reservation):
            await self._finish(job, FAILED, "ReservationExpired", "Reservation expired")
            return
        # Stricter than Koordinator, which only checks nodeName + Scheduled=True: a pod is
        # never evicted unless its Reservation holds the room (Available). Succeeded goes on:
        # bound to the evicted pod's successor, or (not evicted yet) taken by another pod.
        if not rsv.is_available(reservation) and not rsv.is_succeeded(reservation):
            message = rsv.unschedulable_message(reservation)
            if not message:
                message = f"Reservation is not available (phase {rsv.phase(reservation)})"
            await self._finish(job, FAILED, "Unschedulable", message)
            return
        if not doc.is_true(job, "ReservationScheduled"):
            job = await self._reservation_scheduled(job, name, rsv.node_name(reservation))
        if rsv.owned_by_pod_object(reservation):
            await self._wait_pending_pod_scheduled(job, reservation)
            return
        evicted = await self._evict_pod(job, reservation)
        if evicted is None:
            return
        bound = rsv.bound_pod(reservation)
        if bound is None:
            if doc.reason_of(evicted, "PodBoundReservation") != WAIT_FOR_BIND:
                note = "Waiting for Pod bind Reservation"
                await self._set_condition(evicted, "PodBoundReservation", "False", WAIT_FOR_BIND,
                                          note, event=_Event(NORMAL, WAIT_FOR_BIND, note))
            return
        await self._bound(evicted, name, bound)

    async def _wait_pending_pod_scheduled(self, job: dict[str, Any],
                                          reservation: dict[str, Any]) -> None:
        """Step i: the job's pod was Pending (unschedulable), so its Reservation names the pod
        itself as owner and nothing is evicted: the job waits until the scheduler places the
        pod (in the reserved room), then succeeds."""
        namespace, name = doc.pod_ns_name(job)
        key = f"{namespace}/{name}"
        pod = await self._get_pod(namespace, name)
        if pod is None:
            note = f'Abort job caused by missing Pod "{key}"'
            await self._finish(job, FAILED, "MissingPod", note,
                               event=_Event(WARNING, "MissingPod", note))
            return
        scheduled = doc.pod_condition(pod, "PodScheduled")
        if (scheduled or {}).get("status") != "True":
            if rsv.is_succeeded(reservation):
                note = "Reservation is already bound by another Pod"
                await self._finish(job, FAILED, FORBIDDEN, note,
                                   event=_Event(WARNING, FORBIDDEN, note))
                return
            message = str((scheduled or {}).get("message") or "")
            current = doc.condition(job, "PodScheduled") or {}
            if current.get("reason") != "Unschedulable" or current.get("message") != message:
                await self._set_condition(job, "PodScheduled", "False", "Unschedulable", message)
            return
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        message = f'Assign Pod "{key}" to node "{node}"'
        doc.put_condition(job, "PodScheduled", "True", "", "", self.clock())
        await self._finish(job, SUCCEEDED, "", message, complete=True,
                           event=_Event(NORMAL, "Complete", message))

    async def _sync_unschedulable(self, job: dict[str, Any],
                                  reservation: dict[str, Any]) -> dict[str, Any]:
        """syncReservationScheduleFailed, written (and announced) once per unschedulable spell."""
        scheduled = doc.condition(job, "ReservationScheduled") or {}
        message = rsv.unschedulable_message(reservation)
        if scheduled.get("status") == "True" or message is None or \
                scheduled.get("reason") == "Unschedulable":
            return job
        return await self._set_condition(job, "ReservationScheduled", "False", "Unschedulable",
                                         message, event=_Event(WARNING, "Unschedulable", message))

    async def _reservation_scheduled(self, job: dict[str, Any], name: str,
                                     node: str) -> dict[str, Any]:
        """prepareJobWithReservationScheduleSuccess: refuses a Reservation on the pod's own
        node, else records the node."""
        pod = await self._get_pod(*doc.pod_ns_name(job))
        if pod is not None and ((pod.get("spec") or {}).get("nodeName") or "") == node:
            note = f'Scheduler assignes the Reservation "{name}" on the same node as the Pod'
            await self._finish(job, FAILED, FORBIDDEN, note, event=_Event(WARNING, FORBIDDEN, note))
            raise _Stop
        job.setdefault("status", {})["nodeName"] = node
        note = f'Assigned Reservation "{name}" to node "{node}"'
        return await self._set_condition(job, "ReservationScheduled", "True", "", note,
                                         event=_Event(NORMAL, "ReservationScheduled", note))

    async def _bound(self, job: dict[str, Any], name: str, bound: dict[str, Any]) -> None:
        """Steps l-o: record the bound pod, wait for it to be Ready, then succeed."""
        key = f"{bound.get('namespace', '')}/{bound.get('name', '')}"
        pod_ref = {k: bound[k] for k in ("kind", "namespace", "name", "uid") if bound.get(k)}
        if not doc.is_true(job, "ReservationBound"):
            job.setdefault("status", {})["podRef"] = pod_ref
            note = f'Reservation bound by pod "{key}"'
            doc.put_condition(job, "ReservationBound", "True", "", "", self.clock())
            job = await self._write(job, status=True)
            self._emit(job, _Event(NORMAL, "PodBoundReservation", note))
        events: list[_Event] = []
        if not doc.is_true(job, "BoundPodReady"):
            pod = await self._get_pod(str(bound.get("namespace") or ""),
                                      str(bound.get("name") or ""), uid=bound.get("uid"))
            # A bound pod that is gone counts as ready, as Koordinator's waitForPodReady does:
            # the migration itself is done, and nothing is left to wait for.
            if pod is not None and not doc.pod_ready(pod):
                if doc.reason_of(job, "BoundPodReady") != WAIT_FOR_READY:
                    note = f"Waiting for Bound Pod {key} Ready"
                    await self._set_condition(job, "BoundPodReady", "False", WAIT_FOR_READY, note,
                                              event=_Event(NORMAL, WAIT_FOR_READY, note))
                return
            note = f'Bind pod "{key}" is ready'
            doc.put_condition(job, "BoundPodReady", "True", "", note, self.clock())
            events.append(_Event(NORMAL, "BoundPodReady", note))
        message = f'Bind Pod "{key}" in Reservation "{name}"'
        job.setdefault("status", {})["podRef"] = pod_ref
        doc.put_condition(job, "PodBoundReservation", "True", "", "", self.clock())
        events.append(_Event(NORMAL, "Complete", message))
        await self._finish(job, SUCCEEDED, "", message, complete=True, event=events)

    async def _create_reservation(self, job: dict[str, Any]) -> None:
        meta = job.get("metadata") or {}
        namespace, name = doc.pod_ns_name(job)
        uid = ((job.get("spec") or {}).get("podRef") or {}).get("uid")
        pod = await self._get_pod(namespace, name, uid=uid)  # never for a replacement
        if pod is None:
            await self._fail_missing_pod(job)
            return
        try:
            body = rsv.build(job, pod, int(self.clock().timestamp() * 1000),
                             disable_pvc_reservation=self.disable_pvc_reservation)
        except rsv.BuildError as err:
            await self._fail_creation(job, str(err))
            return
        r_name = str(body["metadata"]["name"])
        code, created = await self._call("POST", rsv.RESERVATION_PATH, body,
                                         f"create reservation {r_name}", allow=(409,))
        if code == 409:
            created = await self._get_reservation(r_name)
            if created is None:
                return  # deleted meanwhile: the next pass creates it again
            if not rsv.owned_by(created, str(meta.get("uid") or "")):
                await self._fail_creation(
                    job, f'Reservation "{r_name}" already exists and is owned by something else')
                return
        assert created is not None
        r_meta = created.get("metadata") or {}
        options = job.setdefault("spec", {}).setdefault("reservationOptions", {}) or {}
        job["spec"]["reservationOptions"] = options
        options["reservationRef"] = {"kind": "Reservation", "apiVersion": "v1alpha1",
                                     "name": r_name, "uid": r_meta.get("uid", "")}
        job = await self._write(job, status=False)
        note = f'Successfully create Reservation "{r_name}"'
        await self._set_condition(job, "ReservationCreated", "True", "", note,
                                  event=_Event(NORMAL, "ReservationCreated", note))

    async def _fail_creation(self, job: dict[str, Any], why: str) -> None:
        message = f"Failed to create Reservation caused by {why}"
        doc.put_condition(job, "ReservationCreated", "False", "FailedCreateReservation", message,
                       self.clock())
        await self._finish(job, FAILED, "FailedCreateReservation", message,
                           event=_Event(WARNING, "FailedCreateReservation", message))

    async def _get_reservation(self, name: str) -> dict[str, Any] | None:
        code, found = await self._call("GET", f"{rsv.RESERVATION_PATH}/{name}", None,
                                       f"get reservation {name}", allow=(404,))
        return None if code == 404 else found

    async def scavenge(self, name: str) -> bool:
        """The scavenger's delete: the job's own Reservation, then the job (with a UID
        precondition, so a job recreated under the name is kept). Whether the job went."""
        code, job = await self._call("GET", f"{PMJ_PATH}/{name}", None,
                                     f"get podmigrationjob {name}", allow=(404,))
        if code == 404 or job is None:
            return True
        await self._delete_own_reservation(job)
        uid = (job.get("metadata") or {}).get("uid")
        body = {"kind": "DeleteOptions", "apiVersion": "v1",
                "preconditions": {"uid": uid}} if uid else None
        code, _ = await self._call("DELETE", f"{PMJ_PATH}/{name}", body,
                                   f"delete podmigrationjob {name}", allow=(404, 409))
        return code != 409

    async def _delete_own_reservation(self, job: dict[str, Any]) -> None:
        """Deletes the job's Reservation if this controller created it (never another's)."""
        uid = str((job.get("metadata") or {}).get("uid") or "")
        ref = ((job.get("spec") or {}).get("reservationOptions") or {}).get("reservationRef") \
            or {}
        name = ref.get("name") or uid
        if not name:
            return
        found = await self._get_reservation(str(name))
        if found is None or not rsv.owned_by(found, uid):
            return
        r_uid = (found.get("metadata") or {}).get("uid")
        body = {"kind": "DeleteOptions", "apiVersion": "v1",
                "preconditions": {"uid": r_uid}} if r_uid else None
        await self._call("DELETE", f"{rsv.RESERVATION_PATH}/{name}", body,
                         f"delete reservation {name}", allow=(404, 409))

    # -- eviction --------------------------------------------------------------------------------
    def _admit(self, pod: Pod, job: dict[str, Any]) -> tuple[str | None, bool]:
        """(why no eviction may be sent now, or None; whether the gate said go). evictQPS is
        checked first, so its refusal leaves the gate untouched; the QPS token is taken only
        once the gate said go. All synchronous: no other pass runs in between."""
        now = self.clock().timestamp()
        if self.bucket.tokens(now) < 1:
            return f"too many evictions: evictQPS {self.bucket.limit:g}, evictBurst " \
                   f"{self.bucket.burst}", False
        gated = False
        if self.gate is not None and EVICT_ANNOTATION not in doc.annotations_of(job):
            limited = self.gate.limited(pod, job)
            if limited is not None:
                return limited, False
            gated = True
        taken = self.bucket.allow(now)
        assert taken, "a whole token was there a moment ago"
        return None, gated

    async def _evict(self, job: dict[str, Any], pod: Pod, raw: dict[str, Any]) -> dict[str, Any]:
        """Evicts the pod (known to exist, unchanged and not terminating) by the job's policy.
        Returns the job as written: Eviction=True when the pod is gone at once, else
        Eviction=False (Evicting, or FailedEvict with the error).

        A refused pass writes nothing: the job is simply retried on the next pass. Whatever
        ends the pass (a conflict, a ConnectionLost), the gate hears `evicted` or `not_evicted`
        exactly once, and a QPS token taken for a request never sent is given back."""
        name = str((job.get("metadata") or {}).get("name") or "")
        refusal, gated = self._admit(pod, job)
        if refusal is not None:
            log.debug("podmigrationjob %s: not evicting %s yet: %s", name, pod.key, refusal)
            raise _Stop
        _, reason = trigger_and_reason(doc.annotations_of(job))
        evicting = f'Pod "{pod.key}" evicted from node "{pod.node_name}" by the reason ' \
                   f'"{reason}"'
        policy = self.removal.policy(pod, job)
        sent = done = False
        try:
            # Recorded before the request, so a pod that goes afterwards completes the job even
            # across a restart. An earlier attempt (FailedEvict) recorded that already: not
            # rewriting it keeps a refused retry from changing the job.
            if not doc.evicting(job):
                job = await self._set_condition(job, COND_EVICTION, "False", EVICTING, evicting)
            sent = True
            error = await self.removal.remove(policy, job, pod, raw, reason)
            done = error is None
        finally:
            if not sent:
                self.bucket.give_back(self.clock().timestamp())
            if gated and not done and self.gate is not None:
                self.gate.not_evicted(pod, job)
        if error is not None and not error.startswith(ALREADY_GONE):
            self.failures[name] = self.failures.get(name, 0) + 1
            return await self._failed_evict(job, f'Failed evict Pod "{pod.key}" caused by {error}')
        self.failures.pop(name, None)
        if error is None:
            self._evicted(job, pod, reason)
            if doc.reason_of(job, COND_EVICTION) != EVICTING:  # after a FailedEvict
                job = await self._set_condition(job, COND_EVICTION, "False", EVICTING, evicting)
            self._emit(job, _Event(NORMAL, EVICTING, evicting))
            if policy == SOFT_EVICTION:
                return job  # the pod stays until another agent acts on the annotation
        if await self._get_pod(pod.namespace, pod.name, uid=pod.metadata.uid):
            return job  # still there (terminating): the next pass completes the job
        return await self._evict_complete(job, pod.key)

    async def _failed_evict(self, job: dict[str, Any], note: str) -> dict[str, Any]:
        """Eviction=False/FailedEvict with a Warning event, unless the job records that very
        failure already: a PDB that keeps refusing then changes nothing (no new lastProbeTime
        that would wake the caller again at once, no event storm)."""
        last = doc.condition(job, COND_EVICTION) or {}
        if (job.get("status") or {}).get("status") == COND_EVICTION and \
                last.get("reason") == FAILED_EVICT and last.get("message") == note:
            return job
        return await self._set_condition(job, COND_EVICTION, "False", FAILED_EVICT, note,
                                         event=_Event(WARNING, EVICTING, note))

    def _evicted(self, job: dict[str, Any], pod: Pod, reason: str) -> None:
        """After a successful eviction call, before anything else can fail: count, feed the
        limiters, announce on the pod."""
        self.evictions += 1
        if self.gate is not None:
            self.gate.evicted(pod, job)
        if self.events is not None:
            ref = PodRef(str(pod.namespace), str(pod.name), str(pod.metadata.uid),
                         str(pod.node_name))
            self.events.emit(ref, NORMAL, "Descheduled",
                             f'Pod evicted from node "{pod.node_name}" by the reason "{reason}"',
                             action=MIGRATING_ACTION)

    # -- status ----------------------------------------------------------------------------------
    async def _set_condition(self, job: dict[str, Any], kind: str, value: str, reason: str,
                             message: str, *, event: _Event | None = None) -> dict[str, Any]:
        """updateCondition, written: the condition, and status.status/reason/message."""
        doc.put_condition(job, kind, value, reason, message, self.clock())
        written = await self._write(job, status=True)
        if event is not None:
            self._emit(written, event)
        return written

    async def _finish(self, job: dict[str, Any], phase: str, reason: str, message: str, *,
                      complete: bool = False,
                      event: _Event | list[_Event] | None = None) -> None:
        status = job.setdefault("status", {})
        status["phase"] = phase
        status["reason"] = reason
        status["message"] = message
        if complete:
            status["status"] = "Complete"
        written = await self._write(job, status=True)
        self.failures.pop(str((job.get("metadata") or {}).get("name") or ""), None)
        for each in [event] if isinstance(event, _Event) else event or []:
            self._emit(written, each)

    def _emit(self, job: dict[str, Any], event: _Event) -> None:
        if self.events is None:
            return
        meta = job.get("metadata") or {}
        ref = ObjectRef(GROUP_VERSION, PMJ_KIND, "", str(meta.get("name") or ""),
                        str(meta.get("uid") or ""))
        self.events.emit(ref, event.type, event.reason, event.note)

    async def _write(self, job: dict[str, Any], *, status: bool) -> dict[str, Any]:
        """PUT the job (or its status) with its resourceVersion; a conflict ends the pass."""
        name = (job.get("metadata") or {}).get("name")
        path = f"{PMJ_PATH}/{name}" + ("/status" if status else "")
        what = f"update podmigrationjob {name}" + (" status" if status else "")
        job.setdefault("apiVersion", GROUP_VERSION)
        job.setdefault("kind", PMJ_KIND)
        code, written = await self._call("PUT", path, job, what, allow=(404, 409))
        if code in (404, 409) or written is None:
            raise _Stop
        if name in self._seen:  # a reconcile pass is tracking this job
            self._seen[str(name)] = written
        return written

    # -- requests --------------------------------------------------------------------------------
    async def _get_pod(self, namespace: str, name: str,
                       uid: str | None = None) -> dict[str, Any] | None:
        read = await self.client.read_pod(namespace, name, uid)
        return read.raw if read is not None else None

    async def _call(self, method: str, path: str, body: dict[str, Any] | None, what: str,
                    allow: tuple[int, ...] = ()) -> tuple[int, dict[str, Any] | None]:
        return await self.client.call(method, path, dict[str, Any], what=what, body=body,
                                      allow=allow)

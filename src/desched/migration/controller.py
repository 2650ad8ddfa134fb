"""The live PodMigrationJob controller (reference/koordinator.md §6.8, §6.10): one reconcile pass
over one job at a time, all state in the job itself, so a restarted controller resumes every job.

Implemented: the common prelude (paused, final phases, TTL timeout, invalid podRef, missing pod)
and the EvictDirectly flow. Jobs in ReservationFirst mode are left untouched for now.

Restart safety: before every eviction the pod is read back; it is evicted only when it still
exists with the job's pod UID and is not terminating. An eviction that took effect (pod gone,
replaced or terminating) is never sent again. The condition `Eviction=False/Evicting` is written
before the eviction request, so a pod that disappears afterwards completes the job even when the
controller restarted in between.

A PodDisruptionBudget refusal (429) is recorded as `Eviction=False/FailedEvict` and retried on the
next reconcile; when the TTL expires the job fails with reason Timeout and the last error in its
message. Status is written through the status subresource with the job's resourceVersion; a
conflict (409) ends the pass, and the next one starts from the fresh object.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from desched.executors.eviction_api import ALREADY_GONE, EvictionApiExecutor
from desched.live.client import ApiClient, ApiError
from desched.live.informer import Backoff
from desched.migration import reservation as rsv
from desched.migration.arbitration import EVICT_DIRECTLY, RESERVATION_FIRST
from desched.model.kinds import JSON_DECODERS
from desched.model.pod import Pod
from desched.plugins.migrationcontroller_args import MigrationControllerArgs
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.duration import parse_duration

log = logging.getLogger(__name__)

GROUP_VERSION = "scheduling.koordinator.sh/v1alpha1"
PMJ_PATH = f"/apis/{GROUP_VERSION}/podmigrationjobs"
JOB_CREATED_BY = "koordinator.sh/job-created-by"
EVICT_REASON = "koordinator.sh/evict-reason"
EVICT_TRIGGER = "koordinator.sh/evict-trigger"

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
COND_EVICTION = "Eviction"
EVICTING, EVICT_COMPLETE, FAILED_EVICT = "Evicting", "EvictComplete", "FailedEvict"

Clock = Callable[[], datetime]


def _now_utc() -> datetime:
    return datetime.now(UTC)


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _ttl_seconds(job: dict[str, Any]) -> float:
    ttl = (job.get("spec") or {}).get("ttl")
    if not isinstance(ttl, str) or not ttl:
        return 0.0
    try:
        return parse_duration(ttl)
    except ValueError:
        return 0.0


def _condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def _pod_ns_name(job: dict[str, Any]) -> tuple[str, str]:
    ref = (job.get("spec") or {}).get("podRef") or {}
    return str(ref.get("namespace") or ""), str(ref.get("name") or "")


def _pod_key(job: dict[str, Any]) -> str:
    return "/".join(_pod_ns_name(job))


def _put_condition(job: dict[str, Any], kind: str, value: str, reason: str, message: str,
                   now: datetime) -> None:
    """updateCondition in memory: sets the condition, and status.status/reason/message."""
    status = job.setdefault("status", {})
    stamp = _stamp(now)
    old = _condition(job, kind) or {}
    conditions = [c for c in status.get("conditions") or []
                  if not (isinstance(c, dict) and c.get("type") == kind)]
    changed = old.get("status") != value
    conditions.append({
        "type": kind, "status": value, "reason": reason, "message": message,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp if changed else old.get("lastTransitionTime", stamp)})
    status.update(conditions=conditions, status=kind, reason=reason, message=message)


class _Stop(Exception):
    """Ends the pass: the job was written (or conflicted) and the next pass goes on from there."""


class MigrationJobController:
    """Reconciles PodMigrationJobs through the API server.

    `identity`: when set, jobs annotated `koordinator.sh/job-created-by` with another value are
    skipped (Koordinator's per-instance partitioning); by default every job is handled, so a
    restarted controller resumes the jobs its predecessor created."""

    def __init__(self, client: ApiClient, args: MigrationControllerArgs,
                 clock: Clock = _now_utc, *, identity: str | None = None,
                 eviction_attempts: int = 3, backoff: Backoff | None = None) -> None:
        self.client = client
        self.args = args
        self.clock = clock
        self.identity = identity
        self.eviction_attempts = eviction_attempts
        self.backoff = backoff or Backoff(initial=0.5, maximum=5.0)
        self.evictions = 0  # eviction requests this controller got through (2xx)

    # -- passes ------------------------------------------------------------------------------------
    async def reconcile_all(self) -> None:
        """One pass over every job the API server lists."""
        _, listing = await self._call("GET", PMJ_PATH, None, "list podmigrationjobs")
        for item in (listing or {}).get("items") or []:
            name = ((item or {}).get("metadata") or {}).get("name")
            if not name:
                continue
            try:
                await self.reconcile(str(name))
            except (ApiError, OSError) as err:
                log.warning("podmigrationjob %s: %s", name, err)

    async def reconcile(self, name: str) -> None:
        """One pass over one job."""
        code, job = await self._call("GET", f"{PMJ_PATH}/{name}", None,
                                     f"get podmigrationjob {name}", allow=(404,))
        if code == 404 or job is None:
            return
        try:
            await self._reconcile(job)
        except _Stop:
            return

    async def _reconcile(self, job: dict[str, Any]) -> None:
        meta = job.get("metadata") or {}
        spec = job.get("spec") or {}
        status = job.get("status") or {}
        creator = (meta.get("annotations") or {}).get(JOB_CREATED_BY)
        if self.identity is not None and creator and creator != self.identity:
            return
        if spec.get("paused"):
            return
        phase = status.get("phase") or ""
        if phase not in ("", PENDING, RUNNING):
            return
        mode = spec.get("mode") or self.args.default_job_mode or RESERVATION_FIRST
        ttl = _ttl_seconds(job)
        created = _parse_time(meta.get("creationTimestamp"))
        if ttl > 0 and created is not None and \
                (self.clock() - created).total_seconds() >= ttl:
            message = "Abort job caused by timeout"
            last = _condition(job, COND_EVICTION)
            if last is not None and last.get("reason") == FAILED_EVICT and last.get("message"):
                message += f"; last eviction attempt: {last['message']}"
            if mode != EVICT_DIRECTLY:
                await self._delete_own_reservation(job)
            await self._finish(job, FAILED, "Timeout", message)
            return
        if phase in ("", PENDING):
            job = await self._prepare_pending(job)
        if mode == EVICT_DIRECTLY:
            await self._evict_directly(job)
        else:
            await self._reservation_first(job)

    # -- Pending -> Running --------------------------------------------------------------------
    async def _prepare_pending(self, job: dict[str, Any]) -> dict[str, Any]:
        ref = (job.get("spec") or {}).get("podRef") or {}
        namespace, name = ref.get("namespace") or "", ref.get("name") or ""
        if not namespace or not name:
            await self._finish(job, FAILED, "InvalidPodRef", "Abort job caused by invalid PodRef")
            raise _Stop
        pod = await self._get_pod(namespace, name)
        if pod is None:
            await self._finish(job, FAILED, "MissingPod",
                               f'Abort job caused by missing Pod "{namespace}/{name}"')
            raise _Stop
        uid = (pod.get("metadata") or {}).get("uid") or ""
        if uid and ref.get("uid") != uid:
            job["spec"]["podRef"] = {**ref, "uid": uid}
            job = await self._write(job, status=False)
        job.setdefault("status", {})["phase"] = RUNNING
        return await self._write(job, status=True)

    # -- EvictDirectly -------------------------------------------------------------------------
    async def _evict_directly(self, job: dict[str, Any]) -> None:
        evicted = await self._evict_pod(job, None)
        if evicted is not None:
            await self._finish(evicted, SUCCEEDED, "", f'Pod "{_pod_key(job)}" has been evicted',
                               complete=True)

    async def _evict_pod(self, job: dict[str, Any],
                         reservation: dict[str, Any] | None) -> dict[str, Any] | None:
        """evictPod: the job once its pod is evicted (condition Eviction=True), or None when the
        pass ends here (waiting, refused, or the job failed)."""
        if (_condition(job, COND_EVICTION) or {}).get("status") == "True":
            return job
        ref = (job.get("spec") or {}).get("podRef") or {}
        namespace, name = ref.get("namespace") or "", ref.get("name") or ""
        key = f"{namespace}/{name}"
        pod = await self._get_pod(namespace, name)
        pod_meta = (pod or {}).get("metadata") or {}
        replaced = bool(ref.get("uid")) and pod_meta.get("uid") != ref.get("uid")
        if pod is None or replaced:
            if (job.get("status") or {}).get("status") != COND_EVICTION:
                await self._finish(job, FAILED, "MissingPod",
                                   f'Abort job caused by missing Pod "{key}"')
                return None
            return await self._set_condition(job, COND_EVICTION, "True", EVICT_COMPLETE,
                                             f'Pod "{key}" has been evicted')
        if pod_meta.get("deletionTimestamp"):
            return None  # terminating: an eviction took effect; wait for the pod to go
        if reservation is not None and rsv.is_succeeded(reservation):
            await self._finish(job, FAILED, "ForbiddenMigratePod",
                               "Reservation is already bound by another Pod")
            return None
        job = await self._evict(job, pod)
        if (_condition(job, COND_EVICTION) or {}).get("status") != "True":
            return None
        return job

    # -- ReservationFirst ----------------------------------------------------------------------
    async def _reservation_first(self, job: dict[str, Any]) -> None:
        spec = job.get("spec") or {}
        ref = (spec.get("reservationOptions") or {}).get("reservationRef") or {}
        if not ref.get("name"):
            await self._create_reservation(job)
            return
        name = str(ref["name"])
        if (_condition(job, "ReservationCreated") or {}).get("status") != "True":
            job = await self._set_condition(job, "ReservationCreated", "True", "", "")
        reservation = await self._get_reservation(name)
        if reservation is None:
            await self._finish(job, FAILED, "MissingReservation",
                               f'Abort job caused by missing Reservation "{name}"')
            return
        scheduled = _condition(job, "ReservationScheduled") or {}
        unschedulable = rsv.unschedulable_message(reservation)
        if scheduled.get("status") != "True" and unschedulable is not None and \
                scheduled.get("reason") != "Unschedulable":
            job = await self._set_condition(job, "ReservationScheduled", "False", "Unschedulable",
                                            unschedulable)
        if rsv.is_pending(reservation):
            return  # wait; an unschedulable Reservation ends by the job's TTL
        if rsv.is_expired(reservation):
            await self._finish(job, FAILED, "ReservationExpired", "Reservation expired")
            return
        if not rsv.is_scheduled(reservation) and not rsv.is_succeeded(reservation):
            await self._finish(job, FAILED, "Unschedulable", unschedulable or "")
            return
        node = rsv.node_name(reservation)
        if (_condition(job, "ReservationScheduled") or {}).get("status") != "True":
            pod = await self._get_pod(*_pod_ns_name(job))
            if pod is not None and ((pod.get("spec") or {}).get("nodeName") or "") == node:
                await self._finish(
                    job, FAILED, "ForbiddenMigratePod",
                    f'Scheduler assignes the Reservation "{name}" on the same node as the Pod')
                return
            job.setdefault("status", {})["nodeName"] = node
            job = await self._set_condition(job, "ReservationScheduled", "True", "",
                                            f'Assigned Reservation "{name}" to node "{node}"')
        evicted = await self._evict_pod(job, reservation)
        if evicted is None:
            return
        job = evicted
        bound = rsv.bound_pod(reservation)
        if bound is None:
            if (_condition(job, "PodBoundReservation") or {}).get("reason") != \
                    "WaitForPodBindReservation":
                await self._set_condition(job, "PodBoundReservation", "False",
                                          "WaitForPodBindReservation",
                                          "Waiting for Pod bind Reservation")
            return
        new_key = f"{bound.get('namespace', '')}/{bound.get('name', '')}"
        status = job.setdefault("status", {})
        status["podRef"] = {k: bound[k] for k in ("kind", "namespace", "name", "uid")
                            if bound.get(k)}
        _put_condition(job, "ReservationBound", "True", "", "", self.clock())
        _put_condition(job, "PodBoundReservation", "True", "", "", self.clock())
        await self._finish(job, SUCCEEDED, "", f'Bind Pod "{new_key}" in Reservation "{name}"',
                           complete=True)

    async def _create_reservation(self, job: dict[str, Any]) -> None:
        meta = job.get("metadata") or {}
        namespace, name = _pod_ns_name(job)
        pod = await self._get_pod(namespace, name)
        if pod is None:
            await self._finish(job, FAILED, "MissingPod",
                               f'Abort job caused by missing Pod "{namespace}/{name}"')
            return
        try:
            body = rsv.build(job, pod, int(self.clock().timestamp() * 1000))
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
        await self._set_condition(job, "ReservationCreated", "True", "",
                                  f'Successfully create Reservation "{r_name}"')

    async def _fail_creation(self, job: dict[str, Any], why: str) -> None:
        message = f"Failed to create Reservation caused by {why}"
        _put_condition(job, "ReservationCreated", "False", "FailedCreateReservation", message,
                       self.clock())
        await self._finish(job, FAILED, "FailedCreateReservation", message)

    async def _get_reservation(self, name: str) -> dict[str, Any] | None:
        code, found = await self._call("GET", f"{rsv.RESERVATION_PATH}/{name}", None,
                                       f"get reservation {name}", allow=(404,))
        return None if code == 404 else found

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

    async def _evict(self, job: dict[str, Any], raw_pod: dict[str, Any]) -> dict[str, Any]:
        """Evicts the pod (known to exist, unchanged and not terminating). Returns the job as
        written: Eviction=True when the pod is gone at once, else Eviction=False (Evicting, or
        FailedEvict with the error)."""
        pod: Pod = JSON_DECODERS["Pod"].decode(msgspec.json.encode(raw_pod))
        key = f"{pod.namespace}/{pod.name}"
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        reason = annotations.get(EVICT_REASON) or "PodMigrationJob"
        trigger = annotations.get(EVICT_TRIGGER) or "MigrationController"
        node = pod.node_name
        job = await self._set_condition(
            job, COND_EVICTION, "False", EVICTING,
            f'Pod "{key}" evicted from node "{node}" by the reason "{reason}"')
        executor = EvictionApiExecutor(
            self.client, asyncio.get_running_loop(), ClusterSnapshot(),
            grace_period_seconds=self._grace_period(job), attempts=self.eviction_attempts,
            backoff=self.backoff)
        result = await executor.evict_async(pod, "MigrationController", trigger, reason)
        if result.ok or result.message.startswith(ALREADY_GONE):
            if result.ok:
                self.evictions += 1
            if await self._get_pod(str(pod.namespace), str(pod.name), uid=pod.metadata.uid):
                return job  # still there (terminating): the next pass completes the job
            return await self._set_condition(job, COND_EVICTION, "True", EVICT_COMPLETE,
                                             f'Pod "{key}" has been evicted')
        return await self._set_condition(
            job, COND_EVICTION, "False", FAILED_EVICT,
            f'Failed evict Pod "{key}" caused by {result.outcome}: {result.message}')

    def _grace_period(self, job: dict[str, Any]) -> int | None:
        options = (job.get("spec") or {}).get("deleteOptions")
        if not isinstance(options, dict):
            default = self.args.default_delete_options
            options = msgspec.to_builtins(default) if default is not None else {}
        value = (options or {}).get("gracePeriodSeconds")
        return int(value) if isinstance(value, int) else None

    # -- status ----------------------------------------------------------------------------------
    async def _set_condition(self, job: dict[str, Any], kind: str, value: str, reason: str,
                             message: str) -> dict[str, Any]:
        """updateCondition, written: the condition, and status.status/reason/message."""
        _put_condition(job, kind, value, reason, message, self.clock())
        return await self._write(job, status=True)

    async def _finish(self, job: dict[str, Any], phase: str, reason: str, message: str, *,
                      complete: bool = False) -> None:
        status = job.setdefault("status", {})
        status["phase"] = phase
        status["reason"] = reason
        status["message"] = message
        if complete:
            status["status"] = "Complete"
        await self._write(job, status=True)

    async def _write(self, job: dict[str, Any], *, status: bool) -> dict[str, Any]:
        """PUT the job (or its status) with its resourceVersion; a conflict ends the pass."""
        name = (job.get("metadata") or {}).get("name")
        path = f"{PMJ_PATH}/{name}" + ("/status" if status else "")
        what = f"update podmigrationjob {name}" + (" status" if status else "")
        job.setdefault("apiVersion", GROUP_VERSION)
        job.setdefault("kind", "PodMigrationJob")
        code, written = await self._call("PUT", path, job, what, allow=(404, 409))
        if code in (404, 409) or written is None:
            raise _Stop
        return written

    # -- requests --------------------------------------------------------------------------------
    async def _get_pod(self, namespace: str, name: str,
                       uid: str | None = None) -> dict[str, Any] | None:
        code, pod = await self._call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}", None,
                                     f"get pod {namespace}/{name}", allow=(404,))
        if code == 404 or pod is None:
            return None
        if uid and (pod.get("metadata") or {}).get("uid") != uid:
            return None
        return pod

    async def _call(self, method: str, path: str, body: dict[str, Any] | None, what: str,
                    allow: tuple[int, ...] = ()) -> tuple[int, dict[str, Any] | None]:
        content = msgspec.json.encode(body) if body is not None else None
        response = await self.client.request(method, path, what=what, body=content)
        code = response.status_code
        if code in allow:
            return code, None
        if code >= 400:
            raise self.client.status_error(response, what)
        try:
            decoded = msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            decoded = None
        if not isinstance(decoded, dict):
            raise ApiError(code, "InvalidResponse", "not a JSON object", what)
        return code, decoded

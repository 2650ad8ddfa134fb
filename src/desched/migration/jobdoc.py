"""A PodMigrationJob as the controller handles it: the API's JSON as a plain dict (the controller
writes back exactly what it read, unknown fields included), Koordinator's names for its phases,
conditions and annotations (docs/migration.md), and helpers to read and update it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from desched.util.duration import parse_duration

GROUP_VERSION = "scheduling.koordinator.sh/v1alpha1"
PMJ_KIND = "PodMigrationJob"
PMJ_PATH = f"/apis/{GROUP_VERSION}/podmigrationjobs"
JOB_CREATED_BY = "koordinator.sh/job-created-by"
EVICT_REASON = "koordinator.sh/evict-reason"
EVICT_TRIGGER = "koordinator.sh/evict-trigger"

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
ACTIVE_PHASES = ("", PENDING, RUNNING)  # a job still in flight ("" reads as Pending)
COND_EVICTION = "Eviction"
EVICTING, EVICT_COMPLETE, FAILED_EVICT = "Evicting", "EvictComplete", "FailedEvict"
FORBIDDEN = "ForbiddenMigratePod"
WAIT_FOR_BIND = "WaitForPodBindReservation"
WAIT_FOR_READY = "WaitForBoundPodReady"
NORMAL, WARNING = "Normal", "Warning"
MIGRATING_ACTION = "Migrating"  # the action of the Pod event on a MigrationController eviction


def rfc3339(moment: datetime) -> str:
    """metav1.Time's JSON form: UTC, second precision (a naive time is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def duration_seconds(text: Any) -> float:
    """A job's duration field (spec.ttl): 0 when absent or unreadable (no timeout)."""
    if not isinstance(text, str) or not text:
        return 0.0
    try:
        return parse_duration(text)
    except ValueError:
        return 0.0


def ttl_seconds(job: dict[str, Any]) -> float:
    return duration_seconds((job.get("spec") or {}).get("ttl"))


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def is_true(job: dict[str, Any], kind: str) -> bool:
    return (condition(job, kind) or {}).get("status") == "True"


def reason_of(job: dict[str, Any], kind: str) -> str:
    return str((condition(job, kind) or {}).get("reason") or "")


def evicting(job: dict[str, Any]) -> bool:
    """An eviction was attempted and is the job's latest state (Evicting or FailedEvict): a pod
    that goes from now on completes the job, and a soft eviction is not annotated again."""
    return (job.get("status") or {}).get("status") == COND_EVICTION and \
        reason_of(job, COND_EVICTION) in (EVICTING, FAILED_EVICT) and \
        not is_true(job, COND_EVICTION)


def pod_ns_name(job: dict[str, Any]) -> tuple[str, str]:
    ref = (job.get("spec") or {}).get("podRef") or {}
    return str(ref.get("namespace") or ""), str(ref.get("name") or "")


def pod_key(job: dict[str, Any]) -> str:
    return "/".join(pod_ns_name(job))


def pod_condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def pod_ready(pod: dict[str, Any]) -> bool:
    return (pod_condition(pod, "Ready") or {}).get("status") == "True"


def put_condition(job: dict[str, Any], kind: str, value: str, reason: str, message: str,
                   now: datetime) -> None:
    """updateCondition in memory: sets the condition, and status.status/reason/message."""
    status = job.setdefault("status", {})
    when = rfc3339(now)
    old = condition(job, kind) or {}
    conditions = [c for c in status.get("conditions") or []
                  if not (isinstance(c, dict) and c.get("type") == kind)]
    changed = old.get("status") != value
    conditions.append({
        "type": kind, "status": value, "reason": reason, "message": message,
        "lastProbeTime": when,
        "lastTransitionTime": when if changed else old.get("lastTransitionTime", when)})
    status.update(conditions=conditions, status=kind, reason=reason, message=message)

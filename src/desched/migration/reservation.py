"""Reservations for ReservationFirst migrations (docs/migration.md): the Reservation
built from the pod to migrate, and how the controller reads a Reservation's state.

The controller marks the Reservations it creates with an ownerReference to the job: that is how
it tells them from a Reservation that someone else owns (which it never deletes or changes)."""

from __future__ import annotations

import copy
from typing import Any

from desched.util.duration import parse_duration

GROUP_VERSION = "scheduling.koordinator.sh/v1alpha1"
RESERVATION_PATH = f"/apis/{GROUP_VERSION}/reservations"
CREATED_BY_LABEL = "app.kubernetes.io/created-by"
CREATED_BY = "koord-descheduler"
ORDER_LABEL = "scheduling.koordinator.sh/reservation-order"


class BuildError(Exception):
    """The pod cannot be given a Reservation (e.g. a bare pod: owners would be empty)."""


def _conditions(reservation: dict[str, Any]) -> list[dict[str, Any]]:
    conds = (reservation.get("status") or {}).get("conditions") or []
    return [c for c in conds if isinstance(c, dict)]


def phase(reservation: dict[str, Any]) -> str:
    return str((reservation.get("status") or {}).get("phase") or "")


PENDING, WAITING, AVAILABLE, SUCCEEDED, FAILED = \
    "Pending", "Waiting", "Available", "Succeeded", "Failed"


def is_pending(reservation: dict[str, Any]) -> bool:
    """Not placed (or not ready) yet: the job waits; its TTL ends a wait that never ends."""
    return phase(reservation) in ("", PENDING, WAITING)


def is_available(reservation: dict[str, Any]) -> bool:
    """Holding room on a node for the pod to migrate: the only state that allows an eviction."""
    return phase(reservation) == AVAILABLE and is_scheduled(reservation)


def is_scheduled(reservation: dict[str, Any]) -> bool:
    if not node_name(reservation):
        return False
    return any(c.get("type") == "Scheduled" and c.get("status") == "True"
               and c.get("reason") == "Scheduled" for c in _conditions(reservation))


def unschedulable_message(reservation: dict[str, Any]) -> str | None:
    for cond in _conditions(reservation):
        if cond.get("type") == "Scheduled" and cond.get("reason") == "Unschedulable":
            return str(cond.get("message") or "")
    return None


def is_succeeded(reservation: dict[str, Any]) -> bool:
    return phase(reservation) == SUCCEEDED


def is_expired(reservation: dict[str, Any]) -> bool:
    return phase(reservation) == FAILED and any(
        c.get("type") == "Ready" and c.get("reason") == "Expired"
        for c in _conditions(reservation))


def node_name(reservation: dict[str, Any]) -> str:
    return str((reservation.get("status") or {}).get("nodeName") or "")


def bound_pod(reservation: dict[str, Any]) -> dict[str, Any] | None:
    owners = (reservation.get("status") or {}).get("currentOwners") or []
    first = owners[0] if owners else None
    return first if isinstance(first, dict) else None


def owned_by_pod_object(reservation: dict[str, Any]) -> bool:
    """The Reservation's owner is one bare object (a Pending pod's own Reservation), not a
    controller: nothing is evicted, the pod itself takes the reserved room."""
    owners = (reservation.get("spec") or {}).get("owners") or []
    return any(isinstance(o, dict) and isinstance(o.get("object"), dict) for o in owners)


def owned_by(reservation: dict[str, Any], job_uid: str) -> bool:
    refs = (reservation.get("metadata") or {}).get("ownerReferences") or []
    return bool(job_uid) and any(isinstance(r, dict) and r.get("uid") == job_uid for r in refs)


def _not_on_node(spec: dict[str, Any], node: str) -> None:
    """Adds `metadata.name NotIn [node]` to every required node-affinity term (or one term)."""
    requirement = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    affinity = spec.setdefault("affinity", {}) or {}
    spec["affinity"] = affinity
    node_affinity = affinity.setdefault("nodeAffinity", {}) or {}
    affinity["nodeAffinity"] = node_affinity
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {}) \
        or {}
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        terms = [{}]
    for term in terms:
        term.setdefault("matchFields", [])
        term["matchFields"] = [*(term["matchFields"] or []), dict(requirement)]
    required["nodeSelectorTerms"] = terms


def _owners(pod: dict[str, Any]) -> list[dict[str, Any]]:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    unscheduled = status.get("phase") == "Pending" and any(
        isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in status.get("conditions") or [])
    if unscheduled:
        return [{"object": {"uid": meta.get("uid", ""), "kind": "Pod",
                            "name": meta.get("name", ""),
                            "namespace": meta.get("namespace", "")}}]
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return [{"controller": {**ref, "namespace": meta.get("namespace", "")}}]
    return []


def _positive(ttl: Any) -> bool:
    if not isinstance(ttl, str) or not ttl:
        return False
    try:
        return parse_duration(ttl) > 0
    except ValueError:
        return False


def build(job: dict[str, Any], pod: dict[str, Any], order_millis: int, *,
          disable_pvc_reservation: bool = False) -> dict[str, Any]:
    """The Reservation for migrating `pod` (CreateOrUpdateReservationOptions).

    The job's `reservationOptions.template` overrides, field by field of the Reservation's
    spec: its `spec.template` stands for the pod's (not merged with it), its non-empty `owners`
    for the pod's controller. Whatever it says, the pod template gets no nodeName and a
    required affinity away from the pod's node, and `allocateOnce` is true. With Koordinator's
    `DisablePVCReservation` gate, the pod template's PVC and ephemeral volumes are dropped."""
    job_meta = job.get("metadata") or {}
    options = (job.get("spec") or {}).get("reservationOptions") or {}
    template = copy.deepcopy(options.get("template") or {})
    t_meta = template.get("metadata") or {}
    t_spec = template.get("spec") or {}
    pod_meta = pod.get("metadata") or {}
    pod_template = t_spec.get("template") or {
        "metadata": {"labels": dict(pod_meta.get("labels") or {}),
                     "annotations": dict(pod_meta.get("annotations") or {})},
        "spec": copy.deepcopy(pod.get("spec") or {})}
    pod_spec = pod_template.setdefault("spec", {}) or {}
    pod_template["spec"] = pod_spec
    pod_spec.pop("nodeName", None)
    current_node = str((pod.get("spec") or {}).get("nodeName") or "")
    if current_node:
        _not_on_node(pod_spec, current_node)
    if disable_pvc_reservation and pod_spec.get("volumes"):
        pod_spec["volumes"] = [v for v in pod_spec["volumes"] if not isinstance(v, dict) or (
            v.get("persistentVolumeClaim") is None and v.get("ephemeral") is None)]
    owners = t_spec.get("owners") or _owners(pod)
    if not owners:
        raise BuildError(f'the pod "{pod_meta.get("namespace")}/{pod_meta.get("name")}" has no '
                         "controller to own the Reservation")
    labels = {**(t_meta.get("labels") or {}), CREATED_BY_LABEL: CREATED_BY,
              ORDER_LABEL: str(order_millis)}
    spec: dict[str, Any] = {**t_spec, "template": pod_template, "owners": owners,
                            "allocateOnce": True}
    ttl = (job.get("spec") or {}).get("ttl")
    if t_spec.get("ttl") is None and t_spec.get("expires") is None and _positive(ttl):
        spec["ttl"] = ttl
    metadata: dict[str, Any] = {
        "name": t_meta.get("name") or job_meta.get("uid") or job_meta.get("name"),
        "labels": labels,
        "ownerReferences": [{"apiVersion": GROUP_VERSION, "kind": "PodMigrationJob",
                             "name": job_meta.get("name", ""), "uid": job_meta.get("uid", "")}],
    }
    if t_meta.get("annotations"):
        metadata["annotations"] = dict(t_meta["annotations"])
    return {"apiVersion": GROUP_VERSION, "kind": "Reservation", "metadata": metadata,
            "spec": spec}

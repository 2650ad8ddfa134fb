"""Koordinator's eviction order of pods: the comparator chain of its descheduler's
SortPodsByUsage, which LowNodeLoad sorts a hot node's pods by and the MigrationController's
arbitration sorts jobs by."""

from __future__ import annotations

from datetime import datetime

from desched.model.koord import (
    PRIORITY_BATCH,
    PRIORITY_FREE,
    PRIORITY_MID,
    PRIORITY_PROD,
    QOS_BE,
    QOS_LS,
    QOS_LSE,
    QOS_LSR,
    QOS_SYSTEM,
    eviction_cost,
    koord_qos_class,
    pod_deletion_cost,
    priority_class,
)
from desched.model.pod import Pod

# Lower ranks are evicted first; anything unknown ranks last.
PRIORITY_CLASS_RANK = {PRIORITY_FREE: 1, PRIORITY_BATCH: 2, PRIORITY_MID: 3, PRIORITY_PROD: 4}
KUBE_QOS_RANK = {"BestEffort": 1, "Burstable": 2, "Guaranteed": 3}
KOORD_QOS_RANK = {QOS_BE: 1, QOS_LS: 2, QOS_LSR: 3, QOS_LSE: 4, QOS_SYSTEM: 4}
_UNRANKED = 5

OrderKey = tuple[int, int, int, int, int, int, tuple[int, float], float]


def _created(pod: Pod) -> float:
    created: datetime | None = pod.metadata.creation_timestamp
    # Newer first; a pod without a timestamp is the oldest possible (Go's zero time).
    return -created.timestamp() if created is not None else float("inf")


def eviction_order_key(pod: Pod, score: float | None) -> OrderKey:
    """The comparator chain of SortPodsByUsage, ascending (first is evicted first): koord
    priority class, priority, Kubernetes QoS, koord QoS, pod-deletion-cost, eviction-cost, then
    pods with a usage metric before those without (higher score first), then newer first."""
    usage_key = (0, -score) if score is not None else (1, 0.0)
    return (
        PRIORITY_CLASS_RANK.get(priority_class(pod), _UNRANKED),
        pod.spec.priority or 0,
        KUBE_QOS_RANK.get(pod.qos_class, _UNRANKED),
        KOORD_QOS_RANK.get(koord_qos_class(pod), _UNRANKED),
        pod_deletion_cost(pod),
        eviction_cost(pod),
        usage_key,
        _created(pod),
    )

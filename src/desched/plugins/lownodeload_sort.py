"""LowNodeLoad's orderings (reference/koordinator.md §4.8): source nodes by weighted usage score,
and the eviction order of the pods on one hot node.

Go sorts both with unstable sorts; these are stable, so full ties keep the input order (node list
order, pod order on the node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def node_score(usage: Mapping[str, int], capacity: Mapping[str, int],
               weights: Mapping[str, int]) -> int:
    """sortNodesByUsage's score: per resource in `usage`, min(used, cap) per mille of the
    capacity (0 when the capacity is 0), weighted; integer arithmetic. A resource without a
    weight counts 0."""
    total = weight_sum = 0
    for name, used in usage.items():
        weight = weights.get(name, 0)
        cap = capacity.get(name, 0)
        share = 0 if cap == 0 else go_div(min(used, cap) * 1000, cap)
        total += share * weight
        weight_sum += weight
    return 0 if weight_sum == 0 else go_div(total, weight_sum)


def sort_nodes_by_score(items: Iterable[tuple[object, int]]) -> list[object]:
    """Highest score first; ties keep their order."""
    return [item for item, _ in sorted(items, key=lambda pair: -pair[1])]


def _closeness(used: int, excess: int) -> float:
    """mostRequestedScorePod: x/cap below 1, then 1/(x/cap) + 1, so the pod whose usage matches
    the excess scores highest, then slightly larger pods, then smaller ones."""
    if excess == 0:
        return 0.0
    ratio = used / excess
    return 1 / ratio + 1 if ratio >= 1 else ratio


def pod_usage_score(usage: Mapping[str, int], excess: Mapping[str, int],
                    weights: Mapping[str, int]) -> float:
    """How well a pod's usage matches what its node has in excess, over the resources that are
    over the threshold (`weights` holds only those)."""
    total = 0.0
    weight_sum = 0
    for name, used in usage.items():
        weight = weights.get(name, 0)
        total += _closeness(used, excess.get(name, 0)) * weight
        weight_sum += weight
    return 0.0 if weight_sum == 0 else total / weight_sum


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


def sort_pods_for_eviction(pods: Iterable[Pod], pod_usage: Mapping[str, Mapping[str, int]],
                           excess: Mapping[str, int], weights: Mapping[str, int]) -> list[Pod]:
    """`excess` = usage minus the high threshold for each resource the node is over; `weights`
    the configured weight of each of those resources."""
    over_weights = {name: weights.get(name, 0) for name in excess}
    keyed = []
    for pod in pods:
        usage = pod_usage.get(pod.key)
        score = pod_usage_score(usage, excess, over_weights) if usage is not None else None
        keyed.append((eviction_order_key(pod, score), pod))
    keyed.sort(key=lambda pair: pair[0])
    return [pod for _, pod in keyed]

"""LowNodeLoad's orderings (docs/lownodeload.md): source nodes by weighted usage score,
and the pods on one hot node in Koordinator's eviction order (model/koord_order.py), scored by
how well their usage matches the node's excess.

Go sorts both with unstable sorts; these are stable, so full ties keep the input order (node list
order, pod order on the node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from desched.model.koord_order import eviction_order_key
from desched.model.pod import Pod


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

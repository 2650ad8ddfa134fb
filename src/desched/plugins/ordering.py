"""Pod orderings shared by several plugins."""

from __future__ import annotations

from desched.model.pod import Pod
from desched.plugins.defaultevictor import PREFER_NO_EVICTION_ANNOTATION

_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


def priority_low_to_high_key(pod: Pod) -> tuple[int, int, int, int]:
    """SortPodsBasedOnPriorityLowToHigh: no priority first, then lower priority; then QoS
    BestEffort < Burstable < Guaranteed; then pods without prefer-no-eviction first.
    Upstream's comparator is unstable; sorting with this key is stable (input order breaks ties)."""
    prio = pod.spec.priority
    annotations = pod.metadata.annotations
    return (
        0 if prio is None else 1,
        prio or 0,
        # The class computed once is kept on the pod (set only when status names none).
        _QOS_RANK.get(pod.cached_qos or pod.qos_class, 1),
        1 if annotations and PREFER_NO_EVICTION_ANNOTATION in annotations else 0,
    )


def sort_by_priority_low_to_high(pods: list[Pod]) -> list[Pod]:
    return sorted(pods, key=priority_low_to_high_key)

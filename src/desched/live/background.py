"""`desched run`'s evictions in background (`--feature-gates EvictionsInBackground=true`): the set
of pods in progress the run keeps across its cycles (framework/background.py), how the API
server's answer is recognised, and how the end of a request of desched's is told (a log line,
and upstream's `descheduler_pods_evicted_total` with result success or error)."""

from __future__ import annotations

from desched.decoding.feature_gates import EVICTIONS_IN_BACKGROUND, FeatureGates
from desched.framework.background import (
    TRIGGERED_EVACUATION,
    Ended,
    InBackground,
    requests_background,
)
from desched.live import logging as desched_logging
from desched.live.metrics import Metrics
from desched.model.pod import Pod

log = desched_logging.get_logger("desched.run")


def tracker(gates: FeatureGates, metrics: Metrics) -> InBackground | None:
    """The run's set of evictions in background, or None with the gate off (upstream's default:
    pods in progress are not counted, and the answer is an error)."""
    if not gates.enabled(EVICTIONS_IN_BACKGROUND):
        return None

    def ended(end: Ended) -> None:
        r = end.request
        log.info("Eviction in background ended", pod=f"{r.namespace}/{r.name}", node=r.node,
                 profile=r.profile, strategy=r.plugin, result=end.how, why=end.why)
        if end.how != "cancelled":  # upstream counts a cancelled request nowhere
            metrics.evicted(end.how, r.plugin, r.profile, r.namespace, r.node)

    return InBackground(on_end=ended)


def answered_in_background(pod: Pod, code: int, message: str) -> bool:
    """Whether the API server's answer to the pod's eviction started an eviction in background:
    a 429 naming the evacuation (KubeVirt's admission webhook) for a pod that asks for one."""
    return code == 429 and TRIGGERED_EVACUATION in message and requests_background(pod)

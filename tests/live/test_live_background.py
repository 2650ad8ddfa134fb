"""desched run's evictions in background: the API server's answer that starts one (KubeVirt's
429 "Eviction triggered evacuation" for a pod annotated request-evict-only) is not retried and
leaves the pod in the cycle; the end of a request of desched's is logged and counted as upstream
counts it; with the gate off there is no tracker."""

from __future__ import annotations

from typing import Any

import pytest
from fake_apiserver import FakeApiServer, pod
from test_executor import Evictions, evict, executor

from builders import decode
from desched.decoding.feature_gates import EVICTIONS_IN_BACKGROUND, FeatureGates
from desched.framework.background import EVICTION_IN_PROGRESS, REQUEST_EVICT_ONLY
from desched.live import background
from desched.live.client import ApiClient
from desched.live.metrics import Metrics
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot

# What KubeVirt's admission webhook answers an eviction it turns into a live migration.
EVACUATION = ('admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the '
              "request: Eviction triggered evacuation of VMI \"vms/vm-a\"")


def setup(api: FakeApiServer, **annotations: str) -> tuple[ClusterSnapshot, Pod]:
    api.serve("Pod")
    obj = pod("vm-a", metadata={"annotations": annotations})
    api.add_now("Pod", obj)
    snap = ClusterSnapshot()
    p = decode("Pod", obj)
    snap.add(p)
    snap.finish()
    return snap, p


@pytest.mark.asyncio
async def test_an_answer_in_background_is_not_retried_and_the_pod_stays(
        api: FakeApiServer, client: ApiClient) -> None:
    snap, p = setup(api, **{REQUEST_EVICT_ONLY: ""})
    evictions = Evictions(api).install()
    evictions.script = [(429, EVACUATION)]
    result = await evict(executor(client, snap), p)
    assert (result.ok, result.outcome) == (False, "background")
    assert "Eviction triggered evacuation" in result.message
    assert len(evictions.bodies) == 1
    assert snap.pods.get(p.key) is p  # in the cycle still: its controller moves it


@pytest.mark.asyncio
async def test_the_answer_for_a_pod_not_asking_for_it_is_throttling(
        api: FakeApiServer, client: ApiClient) -> None:
    """Without request-evict-only a 429 that is no budget's is throttling, retried as before."""
    snap, p = setup(api)
    evictions = Evictions(api).install()
    evictions.script = [(429, EVACUATION)]
    result = await evict(executor(client, snap), p)
    assert result.ok and len(evictions.bodies) == 2


def _evicted(metrics: Metrics, result: str) -> float:
    value = metrics.registry.get_sample_value("descheduler_pods_evicted_total", {
        "result": result, "strategy": "PodLifeTime", "profile": "p", "namespace": "default",
        "node": "n1"})
    return value or 0.0


@pytest.mark.parametrize(("after", "result"), [
    ({}, "success"),  # deleted
    ({"status": {"phase": "Failed"}}, "error"),
])
def test_the_end_of_a_request_is_counted(after: dict[str, Any], result: str) -> None:
    metrics = Metrics()
    tracker = background.tracker(FeatureGates(frozenset({EVICTIONS_IN_BACKGROUND})), metrics)
    assert tracker is not None
    migrating = {REQUEST_EVICT_ONLY: "", EVICTION_IN_PROGRESS: ""}
    p = decode("Pod", pod("vm-a", metadata={"annotations": migrating}))
    tracker.assume(p, "p", "PodLifeTime")
    tracker.observe({p.key: p})
    assert _evicted(metrics, result) == 0
    now = {} if not after else {p.key: decode("Pod", pod(
        "vm-a", metadata={"annotations": migrating}, **after))}
    tracker.observe(now)
    assert _evicted(metrics, result) == 1
    assert tracker.total == 0


def test_the_gate_off_keeps_no_tracker() -> None:
    assert background.tracker(FeatureGates(), Metrics()) is None

"""The metrics.k8s.io usage source: upstream's EWMA collector, NodeMetrics and PodMetrics from a
snapshot, bad metrics (missing, stale, negative, unparsable, a container missing a resource),
and the correction for pods that moved after the metrics were taken."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from builders import NOW, decode, node, pod, snapshot
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage import (
    KubernetesMetricsUsage,
    NodeMetricsCollector,
    PodUsageError,
    UsageUnavailable,
)

GI = 2**30
TAKEN = "2026-11-22T11:59:30Z"


def node_metrics(name: str, cpu: Any = "1", memory: Any = "1Gi",
                 timestamp: str | None = TAKEN, **usage: Any) -> Any:
    body: dict[str, Any] = {"metadata": {"name": name},
                            "usage": {"cpu": cpu, "memory": memory, **usage}}
    if cpu is None:
        del body["usage"]["cpu"]
    if memory is None:
        del body["usage"]["memory"]
    if timestamp is not None:
        body["timestamp"] = timestamp
    return decode("NodeMetrics", body)


def pod_metrics(name: str, *containers: dict[str, Any], namespace: str = "default",
                timestamp: str = TAKEN) -> Any:
    return decode("PodMetrics", {
        "metadata": {"name": name, "namespace": namespace}, "timestamp": timestamp,
        "containers": [{"name": f"c{i}", "usage": usage}
                       for i, usage in enumerate(containers)]})


# -- the collector -----------------------------------------------------------------------------


def test_first_sample_is_the_value_then_ewma() -> None:
    collector = NodeMetricsCollector()
    collector.observe([node_metrics("n1", cpu="1", memory="1Gi")])
    assert collector.read("n1", NOW) == {"cpu": 1000, "memory": GI}
    collector.observe([node_metrics("n1", cpu="2", memory="2Gi")])
    assert collector.read("n1", NOW) == {"cpu": 1100, "memory": round(1.1 * GI)}


def test_ewma_rounds_halves_away_from_zero_like_go() -> None:
    collector = NodeMetricsCollector()
    collector.observe([node_metrics("n1", cpu="5m", memory="15")])
    collector.observe([node_metrics("n1", cpu="0", memory="0")])
    # 0.9 * 5 = 4.5 -> 5 and 0.9 * 15 = 13.5 -> 14 (Python's round would give 4 and 14).
    assert collector.read("n1", NOW) == {"cpu": 5, "memory": 14}


def test_a_refused_sample_keeps_the_previous_value() -> None:
    collector = NodeMetricsCollector()
    collector.observe([node_metrics("n1", cpu="1")])
    collector.observe([node_metrics("n1", cpu="-1")])
    assert collector.read("n1", NOW) == {"cpu": 1000, "memory": GI}


@pytest.mark.parametrize(("sample", "problem"), [
    (node_metrics("n1", memory=None), "its NodeMetrics has no memory usage"),
    (node_metrics("n1", cpu="-250m"), "its NodeMetrics has a negative cpu usage '-250m'"),
    (node_metrics("n1", cpu="lots"), "its NodeMetrics has an invalid cpu usage 'lots'"),
    (node_metrics("n1", memory="NaN"), "its NodeMetrics has an invalid memory usage 'NaN'"),
    (node_metrics("n1", timestamp="2026-11-22T11:50:00Z"),
     "its NodeMetrics is stale: taken at 2026-11-22T11:50:00Z, 10m0s before now (limit 5m0s)"),
], ids=["missing resource", "negative", "unparsable", "NaN", "stale"])
def test_unusable_samples(sample: Any, problem: str) -> None:
    collector = NodeMetricsCollector()
    collector.observe([sample])
    assert collector.read("n1", NOW) == problem


def test_no_sample_and_timestamps_that_cannot_be_judged() -> None:
    collector = NodeMetricsCollector(max_age=timedelta(minutes=1))
    collector.observe([node_metrics("n1", timestamp=None),
                       node_metrics("n2", timestamp="2026-11-22T13:00:00Z")])
    assert collector.read("n0", NOW) == "no NodeMetrics for it"
    assert collector.read("n1", NOW) == {"cpu": 1000, "memory": GI}  # no timestamp
    assert collector.read("n2", NOW) == {"cpu": 1000, "memory": GI}  # from the future
    assert collector.read("n2", NOW + timedelta(hours=2)) == (
        "its NodeMetrics is stale: taken at 2026-11-22T13:00:00Z, 1h0m0s before now "
        "(limit 1m0s)")


# -- the source over a snapshot ----------------------------------------------------------------

NAMES = ["cpu", "memory", "pods"]


def metrics_snapshot(*extra: Any) -> ClusterSnapshot:
    return snapshot(
        node("n1"), node("n2"), node("n3"),
        pod("a", "n1", cpu="1", memory="1Gi"), pod("b", "n1", cpu="1", memory="1Gi"),
        pod("c", "n2", cpu="500m", memory="512Mi"), pod("done", "n2", phase="Succeeded"),
        node_metrics("n1", cpu="3", memory="6Gi"), node_metrics("n2", cpu="250m", memory="1Gi"),
        pod_metrics("a", {"cpu": "1200m", "memory": "2Gi"}),
        pod_metrics("b", {"cpu": "700m", "memory": "1Gi"}, {"cpu": "300m", "memory": "1Gi"}),
        *extra)


def usage_of(snap: ClusterSnapshot, names: list[str] | None = None) -> KubernetesMetricsUsage:
    return KubernetesMetricsUsage(snap, names or NAMES, lambda: NOW)


def test_node_usage_is_the_node_metrics_value_with_the_pod_count() -> None:
    snap = metrics_snapshot()
    usage = usage_of(snap)
    assert usage.sync([snap.nodes["n1"], snap.nodes["n2"], snap.nodes["n3"]]) == {
        "n3": "no NodeMetrics for it"}
    assert usage.node_usage("n1") == {"cpu": 3000, "memory": 6 * GI, "pods": 2}
    assert usage.node_usage("n2") == {"cpu": 250, "memory": GI, "pods": 1}
    assert [p.name for p in usage.pods("n2")] == ["c"]
    assert usage.pod_usage_known


def test_pod_usage_sums_containers() -> None:
    snap = metrics_snapshot()
    usage = usage_of(snap)
    assert usage.pod_usage(snap.pods["default/b"]) == {"cpu": 1000, "memory": 2 * GI}


@pytest.mark.parametrize(("metrics", "message"), [
    (None, "pod usage unknown: no PodMetrics for it"),
    (pod_metrics("c", {"cpu": "1"}, timestamp="2026-11-22T10:00:00Z"),
     "pod usage unknown: its PodMetrics is stale: taken at 2026-11-22T10:00:00Z, 2h0m0s before "
     "now (limit 5m0s)"),
    (pod_metrics("c"), "pod usage unknown: its PodMetrics lists no containers"),
    (pod_metrics("c", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1"}),
     'pod usage unknown: container "c1" has no memory usage in its PodMetrics'),
    (pod_metrics("c", {"cpu": "-1", "memory": "1Gi"}),
     "pod usage unknown: container \"c0\" has a negative cpu usage '-1' in its PodMetrics"),
], ids=["missing", "stale", "no containers", "container missing a resource", "negative"])
def test_pod_usage_problems(metrics: Any, message: str) -> None:
    snap = metrics_snapshot(*([metrics] if metrics is not None else []))
    with pytest.raises(PodUsageError) as info:
        usage_of(snap).pod_usage(snap.pods["default/c"])
    assert str(info.value) == message


def test_extended_threshold_resources_cannot_be_measured() -> None:
    snap = metrics_snapshot()
    usage = usage_of(snap, ["nvidia.com/gpu", *NAMES])
    with pytest.raises(UsageUnavailable) as info:
        usage.sync([snap.nodes["n1"]])
    assert str(info.value) == ('unable to find "nvidia.com/gpu" resource for collected "n1" '
                               "node metric")


def test_a_snapshot_without_node_metrics() -> None:
    snap = snapshot(node("n1"), pod("a", "n1"))
    with pytest.raises(UsageUnavailable, match="the snapshot holds no NodeMetrics"):
        usage_of(snap).sync([snap.nodes["n1"]])


def test_a_live_collector_replaces_the_snapshot_metrics() -> None:
    snap = metrics_snapshot()
    collector = NodeMetricsCollector()
    collector.observe([node_metrics("n3", cpu="2", memory="3Gi")])
    usage = KubernetesMetricsUsage(snap, NAMES, lambda: NOW, collector=collector)
    assert usage.sync([snap.nodes["n1"], snap.nodes["n3"]]) == {"n1": "no NodeMetrics for it"}
    assert usage.node_usage("n3") == {"cpu": 2000, "memory": 3 * GI, "pods": 0}


def test_pods_that_left_or_arrived_after_the_measurement_shift_node_usage() -> None:
    snap = metrics_snapshot()
    usage = usage_of(snap)  # built before any pod moves, as the plugin is
    snap.remove_pod(snap.pods["default/a"])  # its PodMetrics: 1200m, 2Gi
    snap.remove_pod(snap.pods["default/c"])  # no PodMetrics: its requests, 500m, 512Mi
    snap.add_pod(pod("a-r1", "n2", cpu="400m", memory="256Mi"))  # a replacement: requests
    snap.add_pod(pod("e", "n3", cpu="1", memory="1Gi"))
    nodes = [snap.nodes["n1"], snap.nodes["n2"]]
    assert usage.sync(nodes) == {}
    assert usage.node_usage("n1") == {"cpu": 1800, "memory": 4 * GI, "pods": 1}
    # 250m - 500m + 400m; memory clamps at 0 before nothing is below it: 1Gi - 512Mi + 256Mi.
    assert usage.node_usage("n2") == {"cpu": 150, "memory": 768 * 2**20, "pods": 1}


def test_usage_never_goes_below_zero() -> None:
    snap = metrics_snapshot()
    usage = usage_of(snap)
    snap.remove_pod(snap.pods["default/a"])
    snap.remove_pod(snap.pods["default/b"])
    snap.add_pod(pod("x", "n3"))  # unrelated addition on a node without metrics
    usage.sync([snap.nodes["n1"]])
    # 3000m - 1200m - 1000m; memory 6Gi - 2Gi - 2Gi.
    assert usage.node_usage("n1") == {"cpu": 800, "memory": 2 * GI, "pods": 0}
    snap2 = snapshot(node("n1"), pod("big", "n1", cpu="4"), node_metrics("n1", cpu="1"))
    usage2 = usage_of(snap2)
    snap2.remove_pod(snap2.pods["default/big"])
    usage2.sync([snap2.nodes["n1"]])
    assert usage2.node_usage("n1")["cpu"] == 0


def test_a_pod_recreated_under_its_name_on_another_node_moves_its_metrics() -> None:
    snap = metrics_snapshot()
    usage = usage_of(snap)
    moved = pod("a", "n2", cpu="1", memory="1Gi")  # e.g. a StatefulSet pod keeps its name
    snap.add_pod(moved)
    usage.sync([snap.nodes["n1"], snap.nodes["n2"]])
    assert usage.node_usage("n1")["cpu"] == 3000 - 1200
    assert usage.node_usage("n2")["cpu"] == 250 + 1200

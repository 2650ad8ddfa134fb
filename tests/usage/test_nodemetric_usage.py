"""NodeMetricUsage, metricsUtilization's `source: NodeMetric` (desched's own): node usage as
LowNodeLoad reads it with the pod count, each pod's podsMetric entry as its usage, nodes with
unusable NodeMetric left out with the reason, partial figures noted; and LowNodeUtilization
balancing on it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from test_nodemetric import metric

from builders import NOW, args, handle_for, node, pod, snapshot
from desched.plugins.lownodeutilization import LowNodeUtilization, LowNodeUtilizationArgs
from desched.usage import PodUsageError, UsageUnavailable
from desched.usage.nodemetric import NodeMetricUsage


def usage(*objects: Any, now: Any = NOW) -> tuple[NodeMetricUsage, dict[str, str]]:
    snap = snapshot(node("n1"), node("n2"), node("n3"), *objects)
    source = NodeMetricUsage(snap, ["cpu", "memory", "pods"], lambda: now)
    return source, source.sync(snap.ready_nodes())


def test_node_and_pod_usage_from_node_metric() -> None:
    source, left_out = usage(
        pod("a", "n1"), pod("b", "n1"), pod("c", "n2"),
        metric("n1", system={"cpu": "100m", "memory": "1Gi"},
               pods=[("default/a", {"cpu": "200m", "memory": "1Gi"}),
                     ("default/gone", {"cpu": "5", "memory": "1Gi"})]),
        metric("n2", pods=[("default/c", {"cpu": "1", "memory": "2Gi"})], updated=None))
    assert left_out == {"n2": "NodeMetric n2 has no status.updateTime: treated as expired",
                        "n3": "node n3 has no NodeMetric: it is neither a source nor a target"}
    assert source.node_usage("n1") == {"cpu": 300, "memory": 2 * 1024 ** 3, "pods": 2}
    assert [p.name for p in source.pods("n1")] == ["a", "b"]
    assert source.pod_usage(source.pods("n1")[0]) == {"cpu": 200, "memory": 1024 ** 3}
    with pytest.raises(PodUsageError, match="NodeMetric n1 reports no usage for it"):
        source.pod_usage(source.pods("n1")[1])
    assert source.notes["n1"][0].startswith("NodeMetric n1 reports 1 pod(s) no longer running")


def test_expired_node_metric_is_left_out() -> None:
    _, left_out = usage(metric("n1"), now=NOW + timedelta(seconds=180))
    assert left_out["n1"] == ("NodeMetric n1 expired: last updated 3m30s ago, "
                              "nodeMetricExpirationSeconds is 180")


def test_a_snapshot_without_node_metric_has_no_usage() -> None:
    with pytest.raises(UsageUnavailable, match="the snapshot holds no NodeMetric"):
        usage()


def test_low_node_utilization_balances_on_node_metric() -> None:
    """By requests n1 and n2 are alike; NodeMetric shows n1 hot: its pods go to n2."""
    objects = [node("n1", cpu="4"), node("n2", cpu="4"),
               pod("a", "n1", cpu="500m"), pod("b", "n1", cpu="500m"), pod("c", "n2", cpu="500m"),
               pod("d", "n2", cpu="500m"),
               metric("n1", system={"cpu": "200m"}, pods=[("default/a", {"cpu": "1500m"}),
                                                          ("default/b", {"cpu": "1500m"})]),
               metric("n2", pods=[("default/c", {"cpu": "100m"}), ("default/d", {"cpu": "100m"})])]
    snap = snapshot(*objects)
    handle, executor = handle_for(snap, plugin="LowNodeUtilization")
    LowNodeUtilization(args(LowNodeUtilizationArgs, {
        "thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50},
        "metricsUtilization": {"source": "NodeMetric"}}), handle).balance(snap.ready_nodes())
    assert executor.evicted == ["a"]
    assert handle.log.evictions()[0].reason.startswith(
        "node n1 is overutilized (cpu 80% > 50%; actual usage from NodeMetric)")

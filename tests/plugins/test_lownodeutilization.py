"""LowNodeUtilization by pod requests and by actual usage (metrics.k8s.io): classification,
early exits, the aggregate pool, the destination taint check, evictionLimits, ordering, the
metricsUtilization build errors and bad metrics, upstream's validation messages and the shipped
examples (cases
modelled on upstream's lownodeutilization_test.go: TestLowNodeUtilization and
TestLowNodeUtilizationWithTaints, with DefaultEvictor nodeFit on as upstream's tests run it)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from builders import NOW, args, decode, handle_for, snapshot
from desched.errors import InputError
from desched.framework.evictor import Limits
from desched.framework.policy import MetricsProvider, Policy
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.lownodeutilization import LowNodeUtilization, LowNodeUtilizationArgs
from desched.policy_files.errors import DecodeError, PolicyError
from desched.policy_files.loader import policy_from_document
from desched.simulate.simulation import run_simulation
from nodeutilization_builders import (
    GPU,
    HIGH_PRIORITY,
    LOW_PRIORITY,
    critical,
    local_storage,
    mk,
    mk_node,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "LowNodeUtilization"
METRICS_EXAMPLE = EXAMPLE.parent / "LowNodeUtilization-metrics"


def unevictable(**kw: Any) -> list[Any]:
    """p6 (DaemonSet), p7 (mirror pod with local storage) and p8 (system critical) on n1."""
    return [mk("p6", "n1", owner="ds", **kw), local_storage("p7", **kw), critical("p8", **kw)]


def three_nodes(**n2: Any) -> list[Any]:
    return [mk_node("n1", pods=9), mk_node("n2", **n2), mk_node("n3", unschedulable=True)]


CPU_PODS = {"thresholds": {"cpu": 30, "pods": 30}, "targetThresholds": {"cpu": 50, "pods": 50}}
GPU_PODS = {"thresholds": {"pods": 30, GPU: 30}, "targetThresholds": {"pods": 50, GPU: 50}}
WEST = {"datacenter": "west"}
EAST = {"datacenter": "east"}
WEST_AFFINITY = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "datacenter", "operator": "In", "values": ["west"]}]}]}}}}


def run(raw: dict[str, Any], nodes: list[Any], pods: list[Any], limits: Limits | None = None,
        node_fit: bool = True, extra: list[Any] | None = None) -> tuple[list[str], Any]:
    """Balance once over every Ready node; the evicted pod names in order, and the handle."""
    snap = snapshot(*nodes, *pods, *(extra or []))
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, {"nodeFit": node_fit}), setup)
    handle, executor = handle_for(snap, plugin="LowNodeUtilization", limits=limits,
                                  filters=[evictor])
    LowNodeUtilization(args(LowNodeUtilizationArgs, raw), handle).balance(snap.ready_nodes())
    return executor.evicted, handle


def rs_pods(names: str, node_name: str = "n1", **kw: Any) -> list[Any]:
    return [mk(name, node_name, **kw) for name in names.split()]


# (id, args, nodes, pods, evicted pods in order)
CASES: list[tuple[str, dict[str, Any], list[Any], list[Any], list[str]]] = [
    ("no evictable pods", CPU_PODS, three_nodes(),
     [*[mk(f"p{i}", "n1", owner="ds") for i in range(1, 5)], local_storage("p5"),
      critical("p6"), mk("p9", "n2")], []),
    # n1: 8 pods, 3200m = 80% cpu, 89% pods; n2 10%/10% is the only destination (n3 is
    # unschedulable). Pool: cpu 2000-400, pods 5-1. Four evictions exhaust the pods pool.
    ("without priorities", CPU_PODS, three_nodes(),
     [*rs_pods("p1 p2 p3 p4 p5"), *unevictable(), mk("p9", "n2")], ["p1", "p2", "p3", "p4"]),
    ("without priorities, but excluding namespaces", {**CPU_PODS,
                                                      "evictableNamespaces": {
                                                          "exclude": ["namespace1"]}},
     three_nodes(),
     [*rs_pods("p1 p2 p3 p4 p5", owner="pod", namespace="namespace1"), *unevictable(),
      mk("p9", "n2")], []),
    ("bare pods in other namespaces are not removable", CPU_PODS, three_nodes(),
     [*rs_pods("p1 p2"), mk("p3", "n1", owner=None, namespace="namespace3"),
      mk("p4", "n1", owner=None, namespace="namespace4"),
      mk("p5", "n1", owner=None, namespace="namespace5"), *unevictable(), mk("p9", "n2")],
     ["p1", "p2"]),
    # n2 at 30% cpu is still underutilized, but leaves only 800m of cpu below its 50% cap.
    ("without priorities stop when cpu capacity is depleted", CPU_PODS, three_nodes(),
     [*rs_pods("p1 p2 p3 p4 p5"), *unevictable(), mk("p9", "n2", cpu=1200)], ["p1", "p2"]),
    ("with priorities: lowest priority first", CPU_PODS, three_nodes(),
     [*rs_pods("p1 p2 p3 p4", priority=HIGH_PRIORITY), mk("p5", "n1", priority=LOW_PRIORITY),
      mk("p6", "n1", owner="ds", priority=HIGH_PRIORITY),
      local_storage("p7", priority=LOW_PRIORITY), critical("p8"), mk("p9", "n2")],
     ["p5", "p1", "p2", "p3"]),
    # BestEffort pods request nothing: n1 stays at 40% cpu but 8/9 pods, so only pods move.
    ("without priorities evicting best-effort pods first", CPU_PODS, three_nodes(),
     [mk("p1", "n1", best_effort=True), mk("p2", "n1", best_effort=True), mk("p3", "n1"),
      mk("p4", "n1", best_effort=True), mk("p5", "n1", best_effort=True), *unevictable(),
      mk("p9", "n2")], ["p1", "p2", "p4", "p5"]),
    # Pool: pods 5-1 = 4 but gpus int(0.5*8)-1 = 3, so the gpus run out after three pods.
    ("with extended resource", GPU_PODS,
     [mk_node("n1", pods=9, extra={GPU: "8"}), mk_node("n2", extra={GPU: "8"}),
      mk_node("n3", unschedulable=True)],
     [*rs_pods("p1 p2 p3 p4 p5", cpu=0, extended={GPU: "1"}),
      mk("p6", "n1", cpu=0, owner="pod", extended={GPU: "1"}),
      local_storage("p7", cpu=0, extended={GPU: "1"}), critical("p8", cpu=0, extended={GPU: "1"}),
      mk("p9", "n2", cpu=0, extended={GPU: "1"})], ["p1", "p2", "p3"]),
    # n2 has no gpus: its capped gpu capacity is 0, so the pool is empty from the start.
    ("with extended resource in some of nodes", GPU_PODS,
     [mk_node("n1", pods=9, extra={GPU: "8"}), mk_node("n2"), mk_node("n3", unschedulable=True)],
     [*rs_pods("p1 p2 p3 p4 p5", cpu=0, extended={GPU: "1"}), mk("p9", "n2", cpu=0)], []),
    ("without priorities, but only other node is unschedulable", CPU_PODS,
     [mk_node("n1", pods=9), mk_node("n2", unschedulable=True)],
     [*rs_pods("p1 p2 p3 p4 p5"), *unevictable()], []),
    ("only other node doesn't match pod node selector for p4 and p5", CPU_PODS,
     [mk_node("n1", pods=9), mk_node("n2", labels=EAST)],
     [*rs_pods("p1 p2 p3"), *rs_pods("p4 p5", owner="pod", spec={"nodeSelector": WEST}),
      *unevictable(), mk("p9", "n2", cpu=0)], ["p1", "p2", "p3"]),
    ("only other node doesn't match pod node affinity for p4 and p5", CPU_PODS,
     [mk_node("n1", pods=9), mk_node("n2", labels=EAST)],
     [*rs_pods("p1 p2 p3"), *rs_pods("p4 p5", owner="pod", spec=WEST_AFFINITY),
      *unevictable(), mk("p9", "n2", cpu=0)], ["p1", "p2", "p3"]),
    # Mean cpu 30%, pods 32.96%: low = mean-5, high = mean+5. n1's caps are 1400m / 3 pods,
    # n2 brings 1400m-400m and 3-1 pods, so two pods move.
    ("deviation thresholds", {"useDeviationThresholds": True,
                              "thresholds": {"cpu": 5, "pods": 5},
                              "targetThresholds": {"cpu": 5, "pods": 5}},
     three_nodes(), [*rs_pods("p1 p2 p3 p4 p5"), *unevictable(), mk("p9", "n2")], ["p1", "p2"]),
    ("underutilized nodes not more than numberOfNodes", {**CPU_PODS, "numberOfNodes": 1},
     three_nodes(), [*rs_pods("p1 p2 p3 p4 p5"), *unevictable(), mk("p9", "n2")], []),
    ("underutilized nodes more than numberOfNodes", {**CPU_PODS, "numberOfNodes": 1},
     [mk_node("n1", pods=9), mk_node("n2"), mk_node("n3")],
     [*rs_pods("p1 p2 p3 p4 p5"), *unevictable(), mk("p9", "n2")],
     ["p1", "p2", "p3", "p4"]),
    ("evictionLimits.node caps this plugin per source node",
     {**CPU_PODS, "evictionLimits": {"node": 2}}, three_nodes(),
     [*rs_pods("p1 p2 p3 p4 p5"), *unevictable(), mk("p9", "n2")], ["p1", "p2"]),
    ("all nodes underutilized", CPU_PODS,
     [mk_node("n1"), mk_node("n2"), mk_node("n3")],
     [mk("p1", "n1"), mk("p2", "n2"), mk("p3", "n3")], []),
    ("an unschedulable overutilized node is a source", CPU_PODS,
     [mk_node("n1"), mk_node("n2", unschedulable=True)],
     [mk("p1", "n1"), *rs_pods("q1 q2 q3 q4 q5 q6 q7 q8", "n2")], ["q1", "q2", "q3"]),
    # b (3200m) comes before a (3000m); the pool of c (2000m) is shared: b gives three pods
    # (down to its 2000m cap), then a two before the pool runs dry.
    ("sources in descending total usage, one shared pool",
     {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}},
     [mk_node("a"), mk_node("b"), mk_node("c")],
     [*rs_pods("a1 a2 a3 a4 a5 a6", "a", cpu=500), *rs_pods("b1 b2 b3 b4 b5 b6 b7 b8", "b")],
     ["b1", "b2", "b3", "a1", "a2"]),
    # The sort adds millicores, bytes and counts: a (3600m + 99 bytes) has the higher cpu, but
    # b (2400m + 1998 bytes) the higher "total", so b goes first (sorted by cpu, a would give
    # a1 a2 a3 and exhaust the pool).
    ("mixed-unit total usage: memory bytes dominate the order",
     {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}},
     [mk_node("a", memory=10**6), mk_node("b", memory=10**6), mk_node("c", memory=10**6)],
     [*rs_pods("a1 a2 a3 a4 a5 a6 a7 a8 a9", "a", memory=11),
      *rs_pods("b1 b2 b3 b4 b5 b6", "b", memory=333), mk("c1", "c", cpu=800)],
     ["b1", "a1", "a2"]),
]


@pytest.mark.parametrize(("raw", "nodes", "pods", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_low_node_utilization(raw: dict[str, Any], nodes: list[Any], pods: list[Any],
                              expected: list[str]) -> None:
    evicted, _ = run(raw, nodes, pods)
    assert evicted == expected


# TestLowNodeUtilizationWithTaints: thresholds pods 20 -> 70, per-node limit as upstream sets it.
TAINTED = {"key": "key", "value": "value", "effect": "NoSchedule"}
TOLERATES = {"tolerations": [{"key": "key", "value": "value"}]}
PODS_ONLY = {"thresholds": {"pods": 20}, "targetThresholds": {"pods": 70}}


def n1_pods(count: int, tolerating: bool = False) -> list[Any]:
    pods = [mk(f"pod_{i}_n1", "n1", cpu=200) for i in range(1, count + 1)]
    if tolerating:
        pods.append(mk("tolerate_pod", "n1", cpu=200, spec=TOLERATES))
    return pods


TAINT_CASES: list[tuple[str, list[Any], list[Any], Limits, list[str]]] = [
    ("no taints",
     [mk_node("n1", cpu=2000), mk_node("n2", cpu=1000), mk_node("n3", cpu=1000)],
     [*n1_pods(8), mk("pod_9_n2", "n2", cpu=200)], Limits(per_node=1), ["pod_1_n1"]),
    ("no pod tolerates node taint",
     [mk_node("n1", cpu=2000), mk_node("n3", cpu=1000, taints=[TAINTED])],
     [*n1_pods(8), mk("pod_9_n3", "n3", cpu=200)], Limits(per_node=0), []),
    ("pod which tolerates node taint",
     [mk_node("n1", cpu=2000), mk_node("n3", cpu=1000, taints=[TAINTED])],
     [*n1_pods(7, tolerating=True), mk("pod_9_n3", "n3", cpu=200)], Limits(per_node=1),
     ["tolerate_pod"]),
    ("pod which tolerates node taint, total limit 0",
     [mk_node("n1", cpu=2000), mk_node("n3", cpu=1000, taints=[TAINTED])],
     [*n1_pods(7, tolerating=True), mk("pod_9_n3", "n3", cpu=200)],
     Limits(per_node=1, total=0), []),
]


@pytest.mark.parametrize(("nodes", "pods", "limits", "expected"), [c[1:] for c in TAINT_CASES],
                         ids=[c[0] for c in TAINT_CASES])
def test_low_node_utilization_with_taints(nodes: list[Any], pods: list[Any], limits: Limits,
                                          expected: list[str]) -> None:
    evicted, _ = run(PODS_ONLY, nodes, pods, limits=limits)
    assert evicted == expected


def test_taint_count_precheck_rejects_a_wildcard_toleration() -> None:
    # One Exists toleration tolerates both taints, but the node has more taints than the pod
    # has tolerations, so upstream's pre-check treats the node as not tolerated.
    taints = [TAINTED, {"key": "other", "value": "x", "effect": "NoSchedule"}]
    wildcard = {"tolerations": [{"operator": "Exists"}]}
    both = {"tolerations": [{"operator": "Exists"}, {"key": "unused", "operator": "Exists"}]}
    nodes = [mk_node("n1", cpu=2000), mk_node("n3", cpu=1000, taints=taints)]
    pods = [*n1_pods(7), mk("wild", "n1", cpu=200, spec=wildcard),
            mk("two", "n1", cpu=200, spec=both), mk("pod_9_n3", "n3", cpu=200)]
    evicted, handle = run(PODS_ONLY, nodes, pods, node_fit=False)
    assert evicted == ["two"]
    assert handle.log.filtered_counts[("default", "LowNodeUtilization",
                                       "pod does not tolerate all taints of any underutilized "
                                       "node")] == 8


def test_prefer_no_schedule_taints_count_too() -> None:
    soft = {"key": "key", "value": "value", "effect": "PreferNoSchedule"}
    nodes = [mk_node("n1", cpu=2000), mk_node("n3", cpu=1000, taints=[soft])]
    evicted, _ = run(PODS_ONLY, nodes, [*n1_pods(8), mk("pod_9_n3", "n3", cpu=200)],
                     node_fit=False)
    assert evicted == []


def test_destination_without_taints_is_enough() -> None:
    nodes = [mk_node("n1", cpu=2000), mk_node("n2", cpu=1000),
             mk_node("n3", cpu=1000, taints=[TAINTED])]
    pods = [*n1_pods(8), mk("pod_9_n2", "n2", cpu=200), mk("pod_10_n3", "n3", cpu=200)]
    evicted, _ = run(PODS_ONLY, nodes, pods)
    assert evicted == ["pod_1_n1"]


def test_reason_names_the_resources_above_target() -> None:
    _, handle = run(CPU_PODS, three_nodes(),
                    [*rs_pods("p1 p2 p3 p4 p5"), *unevictable(), mk("p9", "n2")])
    reasons = [d.reason for d in handle.log.evictions()]
    assert reasons[0] == ("node n1 is overutilized (cpu 80% > 50%, pods 88.89% > 50%); evicting "
                          "to move usage to underutilized nodes n2")
    # Usage is updated after every eviction; the last one was only above on pods.
    assert reasons[3] == ("node n1 is overutilized (pods 55.56% > 50%); evicting to move usage "
                          "to underutilized nodes n2")


def test_deviation_reason_says_thresholds_are_relative() -> None:
    raw = {"useDeviationThresholds": True, "thresholds": {"cpu": 5, "pods": 5},
           "targetThresholds": {"cpu": 5, "pods": 5}}
    _, handle = run(raw, three_nodes(), [*rs_pods("p1 p2 p3 p4 p5"), *unevictable(),
                                         mk("p9", "n2")])
    assert handle.log.evictions()[0].reason == (
        "node n1 is overutilized (cpu 80% > 35%, pods 88.89% > 37.96%; thresholds relative to "
        "the cluster mean); evicting to move usage to underutilized nodes n2")


def test_excluded_namespace_pods_count_toward_usage_but_stay() -> None:
    pods = [*rs_pods("p1 p2", namespace="keep"), *rs_pods("p3 p4 p5"), *unevictable(),
            mk("p9", "n2")]
    evicted, handle = run({**CPU_PODS, "evictableNamespaces": {"exclude": ["keep"]}},
                          three_nodes(), pods)
    assert evicted == ["p3", "p4", "p5"]
    assert handle.log.filtered_counts[("default", "LowNodeUtilization",
                                       "namespace keep is excluded by evictableNamespaces")] == 2


def test_total_limit_stops_everything() -> None:
    evicted, handle = run(CPU_PODS, three_nodes(),
                          [*rs_pods("p1 p2 p3 p4 p5"), *unevictable(), mk("p9", "n2")],
                          limits=Limits(total=1))
    assert evicted == ["p1"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "limited"] == ["p2"]


def test_global_node_limit_moves_on_to_the_next_source() -> None:
    raw = {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}}
    nodes = [mk_node("a"), mk_node("b"), mk_node("c")]
    pods = [*rs_pods("a1 a2 a3 a4 a5 a6", "a", cpu=500), *rs_pods("b1 b2 b3 b4 b5 b6 b7 b8", "b")]
    evicted, _ = run(raw, nodes, pods, limits=Limits(per_node=1))
    assert evicted == ["b1", "a1"]


def test_plugin_node_limit_is_per_source_node() -> None:
    raw = {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50},
           "evictionLimits": {"node": 1}}
    nodes = [mk_node("a"), mk_node("b"), mk_node("c")]
    pods = [*rs_pods("a1 a2 a3 a4 a5 a6", "a", cpu=500), *rs_pods("b1 b2 b3 b4 b5 b6 b7 b8", "b")]
    evicted, _ = run(raw, nodes, pods)
    assert evicted == ["b1", "a1"]


def test_pdb_blocked_eviction_moves_to_the_next_pod() -> None:
    pdb = decode("PodDisruptionBudget", {
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "guarded"}}},
        "status": {"disruptionsAllowed": 0}})
    pods = [mk("p1", "n1", labels={"app": "guarded"}), *rs_pods("p2 p3 p4 p5"), *unevictable(),
            mk("p9", "n2")]
    evicted, handle = run(CPU_PODS, three_nodes(), pods, extra=[pdb])
    assert evicted == ["p2", "p3", "p4", "p5"]
    assert [d.pod for d in handle.log.decisions if d.outcome == "pdb-blocked"] == ["p1"]


def test_terminal_pods_are_ignored() -> None:
    pods = [*rs_pods("p1 p2 p3"), mk("done", "n1", phase="Succeeded", cpu=3000),
            mk("p9", "n2")]
    evicted, _ = run(CPU_PODS, three_nodes(), pods)
    assert evicted == []  # n1 is at 30% cpu / 33% pods: not above 50%


def test_node_fit_on_destinations_via_default_evictor() -> None:
    # p1 is too big for any other node; nodeFit (PreEvictionFilter) skips it.
    pods = [mk("p1", "n1", cpu=2600), *rs_pods("p2 p3 p4"), mk("p9", "n2", cpu=1500)]
    nodes = [mk_node("n1", pods=9), mk_node("n2")]
    evicted, _ = run({"thresholds": {"cpu": 40}, "targetThresholds": {"cpu": 50}}, nodes, pods)
    assert evicted == ["p2", "p3"]
    evicted, _ = run({"thresholds": {"cpu": 40}, "targetThresholds": {"cpu": 50}}, nodes, pods,
                     node_fit=False)
    assert evicted == ["p1"]


# -- metricsUtilization: build errors (upstream's NewLowNodeUtilization) -------------------------


METRIC_THRESHOLDS = {"thresholds": {"MetricResource": 30},
                     "targetThresholds": {"MetricResource": 50}}


@pytest.mark.parametrize(("metrics", "thresholds", "message"), [
    ({"source": "Prometheus", "prometheus": {"query": "q"}}, CPU_PODS,
     'thresholds are expected to specify a single instance of "MetricResource" resource, got '
     "[cpu pods] instead"),
    ({"source": "Prometheus", "prometheus": {"query": "q"}},
     {"thresholds": {"MetricResource": 30}, "targetThresholds": {"cpu": 50}},
     'targetThresholds are expected to specify a single instance of "MetricResource" resource, '
     "got [cpu] instead"),
    ({"source": "Graphite"}, CPU_PODS, "unrecognized metrics source"),
    ({}, CPU_PODS, "metrics source is empty"),
], ids=["Prometheus thresholds", "Prometheus targetThresholds", "unknown source", "empty"])
def test_metrics_args_upstream_refuses_fail_at_profile_build(
        metrics: dict[str, Any], thresholds: dict[str, Any], message: str) -> None:
    raw = {**thresholds, "metricsUtilization": metrics}
    handle, _ = handle_for(snapshot(mk_node("n1"), mk_node("n2")), plugin="LowNodeUtilization")
    with pytest.raises(InputError) as info:
        LowNodeUtilization(args(LowNodeUtilizationArgs, raw), handle)
    assert str(info.value) == ('unable to create "default" profile: unable to build '
                               f"LowNodeUtilization plugin: {message}")


@pytest.mark.parametrize("metrics", [
    {"source": "KubernetesMetrics"}, {"metricsServer": True},
    {"source": "Prometheus", "prometheus": {"query": "q"}}])
def test_metrics_sources_build(metrics: dict[str, Any]) -> None:
    thresholds = METRIC_THRESHOLDS if metrics.get("source") == "Prometheus" else CPU_PODS
    handle, _ = handle_for(snapshot(mk_node("n1"), mk_node("n2")), plugin="LowNodeUtilization")
    LowNodeUtilization(args(LowNodeUtilizationArgs, {**thresholds,
                                                     "metricsUtilization": metrics}), handle)


# -- metricsUtilization: KubernetesMetrics (NodeMetrics / PodMetrics) ---------------------------
# Prometheus mode is exercised against a real HTTP server in tests/usage/test_prometheus_usage.py.

TAKEN = "2026-11-22T11:59:30Z"
CPU_ONLY = {"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 60}}
KUBERNETES_METRICS = {"metricsUtilization": {"source": "KubernetesMetrics"}}


def node_metrics(name: str, cpu: str, memory: str = "1000", timestamp: str = TAKEN) -> Any:
    return decode("NodeMetrics", {"metadata": {"name": name}, "timestamp": timestamp,
                                  "usage": {"cpu": cpu, "memory": memory}})


def pod_metrics(name: str, cpu: str, memory: str = "10", timestamp: str = TAKEN,
                containers: list[dict[str, Any]] | None = None) -> Any:
    return decode("PodMetrics", {
        "metadata": {"name": name, "namespace": "default"}, "timestamp": timestamp,
        "containers": containers if containers is not None else [
            {"name": "main", "usage": {"cpu": cpu, "memory": memory}}]})


def metrics_cluster() -> tuple[list[Any], list[Any], list[Any]]:
    """By requests n1 is the hot node (4 x 800m = 80%); by usage it is n2, whose four pods
    request 100m each but use 900m each (3800m with the system's 200m = 95%)."""
    nodes = [mk_node("n1"), mk_node("n2"), mk_node("n3")]
    pods = [*rs_pods("a1 a2 a3 a4", "n1", cpu=800), *rs_pods("b1 b2 b3 b4", "n2", cpu=100)]
    metrics = [node_metrics("n1", "400m"), node_metrics("n2", "3800m"),
               node_metrics("n3", "100m"),
               *(pod_metrics(f"a{i}", "100m") for i in range(1, 5)),
               *(pod_metrics(f"b{i}", "900m") for i in range(1, 5))]
    return nodes, pods, metrics


def run_metrics(raw: dict[str, Any], nodes: list[Any], pods: list[Any], extra: list[Any],
                providers: list[MetricsProvider] | None = None,
                collector: bool = False) -> tuple[list[str], Any]:
    snap = snapshot(*nodes, *pods, *extra)
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, {"nodeFit": True}), setup)
    handle, executor = handle_for(snap, plugin="LowNodeUtilization", filters=[evictor])
    handle.policy = Policy("policy.yaml", "v1alpha2", [], metrics_collector_enabled=collector,
                           metrics_providers=[MetricsProvider("KubernetesMetrics")]
                           if providers is None else providers)
    LowNodeUtilization(args(LowNodeUtilizationArgs, raw), handle).balance(snap.ready_nodes())
    return executor.evicted, handle


def kept(handle: Any) -> dict[str, int]:
    """Why pods were kept and what the run noted about nodes, with counts."""
    out = {reason: count for (_, plugin, reason), count in handle.log.filtered_counts.items()
           if plugin == "LowNodeUtilization"}
    for n in handle.log.notes:
        if n.plugin == "LowNodeUtilization":
            out[n.text] = out.get(n.text, 0) + 1
    return out


def test_actual_usage_picks_other_nodes_than_requests() -> None:
    nodes, pods, metrics = metrics_cluster()
    evicted, _ = run(CPU_ONLY, nodes, pods, extra=metrics)
    assert evicted == ["a1"]  # by requests: n1 80% -> 60%
    evicted, handle = run_metrics({**CPU_ONLY, **KUBERNETES_METRICS}, nodes, pods, metrics)
    # By usage: n2 95% -> 72.5% -> 50%, each pod taking its PodMetrics' 900m off.
    assert evicted == ["b1", "b2"]
    assert handle.log.evictions()[0].reason == (
        "node n2 is overutilized (cpu 95% > 60%; actual usage from metrics.k8s.io); evicting to "
        "move usage to underutilized nodes n1, n3")
    assert kept(handle) == {}


@pytest.mark.parametrize("metrics_utilization", [{"metricsServer": True},
                                                 {"source": "KubernetesMetrics"}])
@pytest.mark.parametrize(("providers", "collector"), [
    ([MetricsProvider("KubernetesMetrics")], False), ([], True)],
    ids=["metricsProviders", "metricsCollector"])
def test_either_policy_switch_gives_the_metrics_client(metrics_utilization: dict[str, Any],
                                                       providers: list[MetricsProvider],
                                                       collector: bool) -> None:
    nodes, pods, metrics = metrics_cluster()
    evicted, _ = run_metrics({**CPU_ONLY, "metricsUtilization": metrics_utilization}, nodes,
                             pods, metrics, providers=providers, collector=collector)
    assert evicted == ["b1", "b2"]


def test_without_a_metrics_client_the_run_ends_with_a_reason() -> None:
    nodes, pods, metrics = metrics_cluster()
    evicted, handle = run_metrics({**CPU_ONLY, **KUBERNETES_METRICS}, nodes, pods, metrics,
                                  providers=[MetricsProvider("Prometheus", "http://p:9090")])
    assert evicted == []
    assert kept(handle) == {
        "metrics client not initialized: the policy needs metricsProviders: [{source: "
        "KubernetesMetrics}] (or the deprecated metricsCollector: {enabled: true})": 1}


def test_node_with_bad_metrics_is_left_out_and_the_rest_balance() -> None:
    nodes, pods, metrics = metrics_cluster()
    nodes.append(mk_node("n4"))
    metrics += [node_metrics("n4", "-50m")]
    # n3's metrics are stale: only n1 is left as a destination.
    metrics = [m for m in metrics if m.metadata.name != "n3"]
    metrics.append(node_metrics("n3", "100m", timestamp="2026-11-22T11:00:00Z"))
    evicted, handle = run_metrics({**CPU_ONLY, **KUBERNETES_METRICS}, nodes, pods, metrics)
    assert evicted == ["b1", "b2"]
    assert kept(handle) == {
        "node n3 left out of this run: its NodeMetrics is stale: taken at 2026-11-22T11:00:00Z, "
        "1h0m0s before now (limit 5m0s)": 1,
        "node n4 left out of this run: its NodeMetrics has a negative cpu usage '-50m'": 1}
    assert handle.log.evictions()[0].reason.endswith("to underutilized nodes n1")


def test_node_without_node_metrics_is_left_out() -> None:
    nodes, pods, metrics = metrics_cluster()
    metrics = [m for m in metrics if m.metadata.name != "n1"]
    evicted, handle = run_metrics({**CPU_ONLY, **KUBERNETES_METRICS}, nodes, pods, metrics)
    assert evicted == ["b1", "b2"]
    assert kept(handle) == {"node n1 left out of this run: no NodeMetrics for it": 1}


def test_pods_with_unknown_usage_are_skipped_with_their_reason() -> None:
    nodes, pods, metrics = metrics_cluster()
    metrics = [m for m in metrics if m.metadata.name not in ("b1", "b2")]
    metrics += [pod_metrics("b2", "", containers=[{"name": "main", "usage": {"cpu": "900m"}},
                                                  {"name": "sidecar", "usage": {"cpu": "1m"}}])]
    evicted, handle = run_metrics({**CPU_ONLY, **KUBERNETES_METRICS}, nodes, pods, metrics)
    assert evicted == ["b3", "b4"]
    assert kept(handle) == {
        "pod usage unknown: no PodMetrics for it": 1,
        'pod usage unknown: container "main" has no memory usage in its PodMetrics': 1}


def test_extended_resources_cannot_use_metrics() -> None:
    nodes, pods, metrics = metrics_cluster()
    evicted, handle = run_metrics({**GPU_PODS, **KUBERNETES_METRICS}, nodes, pods, metrics)
    assert evicted == []
    assert kept(handle) == {
        'error getting node usage: unable to find "nvidia.com/gpu" resource for collected "n1" '
        "node metric": 1}


def test_deviation_thresholds_on_actual_usage() -> None:
    nodes, pods, metrics = metrics_cluster()
    raw = {"useDeviationThresholds": True, "thresholds": {"cpu": 10},
           "targetThresholds": {"cpu": 10}, **KUBERNETES_METRICS}
    # Mean cpu (10 + 95 + 2.5) / 3 = 35.83%: n2 sheds pods until at most 45.83%.
    evicted, _ = run_metrics(raw, nodes, pods, metrics)
    assert evicted == ["b1", "b2", "b3"]


def test_metrics_mode_does_not_evict_again_in_the_next_cycle() -> None:
    result = run_simulation(str(METRICS_EXAMPLE / "policy.yaml"),
                            [str(METRICS_EXAMPLE / "cluster.yaml")], NOW, 3, False)
    # The evicted pods' PodMetrics come off worker-2's measured usage after cycle 1.
    assert [(d.cycle, d.pod) for d in result.evictions] == [(1, "batch-0"), (1, "batch-1")]


# -- validation (upstream's exact messages, through the policy loader) ------------------------

PATH = "policy.yaml"


def policy(lnu_args: Any, include_args: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": "LowNodeUtilization"}
    if include_args:
        entry["args"] = lnu_args
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": "p", "pluginConfig": [entry],
                          "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}


def validation_error(lnu_args: Any, include_args: bool = True) -> str:
    with pytest.raises(PolicyError) as info:
        policy_from_document(PATH, policy(lnu_args, include_args), PLUGINS)
    return str(info.value)


EXT = "example.com/foo"
VALIDATION_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("include namespaces", {**CPU_PODS, "evictableNamespaces": {"include": ["default"]}},
     "only Exclude namespaces can be set, inclusion is not supported"),
    ("include checked before thresholds",
     {"thresholds": {}, "evictableNamespaces": {"include": ["a"]}},
     "only Exclude namespaces can be set, inclusion is not supported"),
    ("empty thresholds", {"thresholds": {}, "targetThresholds": {"cpu": 50}},
     "thresholds config is not valid: no resource threshold is configured"),
    ("missing targetThresholds", {"thresholds": {"cpu": 20}},
     "targetThresholds config is not valid: no resource threshold is configured"),
    ("threshold above 100", {"thresholds": {"cpu": 20, "memory": 120},
                             "targetThresholds": {"cpu": 80, "memory": 80}},
     "thresholds config is not valid: memory threshold not in [0, 100] range"),
    ("target threshold below 0", {"thresholds": {"cpu": 20},
                                  "targetThresholds": {"cpu": -1}},
     "targetThresholds config is not valid: cpu threshold not in [0, 100] range"),
    ("different number of resources",
     {"thresholds": {"cpu": 20, "memory": 20},
      "targetThresholds": {"cpu": 80, "memory": 80, "pods": 80}},
     "thresholds and targetThresholds configured different resources"),
    ("different resources", {"thresholds": {"cpu": 20, "memory": 20},
                              "targetThresholds": {"cpu": 80, "pods": 80}},
     "thresholds and targetThresholds configured different resources"),
    ("only thresholds configured extended resource",
     {"thresholds": {"cpu": 20, "memory": 20, EXT: 20},
      "targetThresholds": {"cpu": 80, "memory": 80}},
     "thresholds and targetThresholds configured different resources"),
    ("different extended resources",
     {"thresholds": {"cpu": 20, "memory": 20, EXT: 20},
      "targetThresholds": {"cpu": 80, "memory": 80, "example.com/bar": 80}},
     "thresholds and targetThresholds configured different resources"),
    ("cpu threshold above target", {"thresholds": {"cpu": 90, "memory": 20},
                                    "targetThresholds": {"cpu": 80, "memory": 80}},
     "thresholds' cpu percentage is greater than targetThresholds'"),
    ("extended threshold above target",
     {"thresholds": {"cpu": 20, "memory": 20, EXT: 90},
      "targetThresholds": {"cpu": 80, "memory": 80, EXT: 20}},
     f"thresholds' {EXT} percentage is greater than targetThresholds'"),
    ("KubernetesMetrics source and metricsServer",
     {**CPU_PODS, "metricsUtilization": {"metricsServer": True, "source": "KubernetesMetrics"}},
     'it is not allowed to set both "KubernetesMetrics" source and metricsServer'),
    ("prometheus block with KubernetesMetrics",
     {**CPU_PODS, "metricsUtilization": {"source": "KubernetesMetrics", "prometheus": {}}},
     'prometheus configuration is not allowed to set when source is set to "KubernetesMetrics"'),
    ("Prometheus source without query",
     {**CPU_PODS, "metricsUtilization": {"source": "Prometheus"}},
     'prometheus query is required when metrics source is set to "Prometheus"'),
    ("Prometheus source with an empty query",
     {**CPU_PODS, "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": ""}}},
     'prometheus query is required when metrics source is set to "Prometheus"'),
]


@pytest.mark.parametrize(("raw", "message"), [c[1:] for c in VALIDATION_CASES],
                         ids=[c[0] for c in VALIDATION_CASES])
def test_validation_messages(raw: dict[str, Any], message: str) -> None:
    assert validation_error(raw) == f"{PATH}: in profile p: {message}"


def test_plugin_config_without_args_fails_validation() -> None:
    assert validation_error(None, include_args=False) == (
        f"{PATH}: in profile p: thresholds config is not valid: no resource threshold is "
        f"configured")


@pytest.mark.parametrize("raw", [
    CPU_PODS,
    {"thresholds": {"cpu": 20, "memory": 20, EXT: 20},
     "targetThresholds": {"cpu": 80, "memory": 80, EXT: 80}},
    # Deviations may be larger below the mean than above it.
    {"useDeviationThresholds": True, "thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 10}},
    {**CPU_PODS, "numberOfNodes": 3, "evictionLimits": {"node": 5},
     "evictableNamespaces": {"exclude": ["kube-system"]},
     "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "q"}}},
], ids=["cpu and pods", "extended resource", "deviation", "every field"])
def test_valid_args(raw: dict[str, Any]) -> None:
    loaded = policy_from_document(PATH, policy(raw), PLUGINS)
    assert "LowNodeUtilization" in loaded.profiles[0].args


def test_unknown_arg_is_a_strict_decoding_error() -> None:
    with pytest.raises(DecodeError, match='unknown field "evictionLimit"'):
        policy_from_document(PATH, policy({**CPU_PODS, "evictionLimit": {"node": 1}}), PLUGINS)


def test_negative_node_limit_is_a_decoding_error() -> None:
    with pytest.raises(DecodeError):
        policy_from_document(PATH, policy({**CPU_PODS, "evictionLimits": {"node": -1}}), PLUGINS)


# -- the shipped example ----------------------------------------------------------------------


def test_example_end_to_end() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                            1, False)
    assert [(d.namespace, d.pod, d.node, d.plugin) for d in result.evictions] == [
        ("shop", "web-0", "worker-1", "LowNodeUtilization"),
        ("shop", "web-1", "worker-1", "LowNodeUtilization"),
        ("shop", "web-2", "worker-1", "LowNodeUtilization"),
    ]
    assert result.evictions[0].reason == (
        "node worker-1 is overutilized (cpu 80% > 50%); evicting to move usage to "
        "underutilized nodes worker-2, worker-3")


def test_metrics_example_end_to_end() -> None:
    result = run_simulation(str(METRICS_EXAMPLE / "policy.yaml"),
                            [str(METRICS_EXAMPLE / "cluster.yaml")], NOW, 1, False)
    assert [(d.namespace, d.pod, d.node, d.plugin) for d in result.evictions] == [
        ("shop", "batch-0", "worker-2", "LowNodeUtilization"),
        ("shop", "batch-1", "worker-2", "LowNodeUtilization"),
    ]
    assert [d.reason for d in result.evictions] == [
        "node worker-2 is overutilized (cpu 85% > 60%; actual usage from metrics.k8s.io); "
        "evicting to move usage to underutilized nodes worker-1, worker-3",
        "node worker-2 is overutilized (cpu 65% > 60%; actual usage from metrics.k8s.io); "
        "evicting to move usage to underutilized nodes worker-1, worker-3"]
    assert dict(result.log.filtered_counts) == {}  # no pod left out
    assert result.log.notes == []  # and no node


def test_metrics_example_by_requests_would_evict_elsewhere(tmp_path: Path) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text((METRICS_EXAMPLE / "policy.yaml").read_text().replace(
        "      metricsUtilization:\n        source: KubernetesMetrics\n", ""))
    result = run_simulation(str(policy_file), [str(METRICS_EXAMPLE / "cluster.yaml")], NOW, 1,
                            False)
    assert [(d.pod, d.node) for d in result.evictions] == [("web-0", "worker-1")]


def test_metrics_example_through_the_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate",
         "--policy", str(METRICS_EXAMPLE / "policy.yaml"),
         "--snapshot", str(METRICS_EXAMPLE / "cluster.yaml"),
         "--now", "2026-11-22T12:00:00Z", "--output", "json"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [(e["pod"], e["node"]) for e in out["evictions"]] == [
        ("batch-0", "worker-2"), ("batch-1", "worker-2")]


def test_metrics_example_ten_minutes_later_sees_stale_metrics() -> None:
    later = NOW + timedelta(minutes=10)
    result = run_simulation(str(METRICS_EXAMPLE / "policy.yaml"),
                            [str(METRICS_EXAMPLE / "cluster.yaml")], later, 1, False)
    assert result.evictions == []
    *stale, idle = [n.text for n in result.log.notes]
    assert len(stale) == 3
    assert all("its NodeMetrics is stale: taken at 2026-11-22T11:59:30Z, 10m30s before now"
               in r for r in stale)
    # Every node was left out: the plugin says why it did nothing.
    assert idle == ("No node is underutilized, nothing to do here, you might tune your "
                    "thresholds further")

"""HighNodeUtilization by pod requests: underutilized nodes (unschedulable ones included) are
drained, least used first, while the schedulable nodes' aggregate room lasts; evictionModes;
upstream's validation messages and the shipped example (cases modelled on upstream's
highnodeutilization_test.go: TestHighNodeUtilization and TestHighNodeUtilizationWithTaints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builders import NOW, args, decode, handle_for, snapshot
from desched.framework.evictor import Limits
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.highnodeutilization import HighNodeUtilization, HighNodeUtilizationArgs
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

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "HighNodeUtilization"


def run(raw: dict[str, Any], nodes: list[Any], pods: list[Any], limits: Limits | None = None,
        node_fit: bool = True) -> tuple[list[str], Any]:
    """Balance once over every Ready node; the evicted pod names in order, and the handle."""
    snap = snapshot(*nodes, *pods)
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, {"nodeFit": node_fit}), setup)
    handle, executor = handle_for(snap, plugin="HighNodeUtilization", limits=limits,
                                  filters=[evictor])
    HighNodeUtilization(args(HighNodeUtilizationArgs, raw), handle).balance(snap.ready_nodes())
    return executor.evicted, handle


def on(node_name: str, names: str, **kw: Any) -> list[Any]:
    return [mk(name, node_name, **kw) for name in names.split()]


def t(**thresholds: float) -> dict[str, Any]:
    return {"thresholds": thresholds}


CPU_PODS = t(cpu=30, pods=30)
WEST = {"datacenter": "west"}

# (id, args, nodes, pods, evicted pods in order)
CASES: list[tuple[str, dict[str, Any], list[Any], list[Any], list[str]]] = [
    ("no node below threshold usage", t(cpu=20, pods=20),
     [mk_node("n1"), mk_node("n2"), mk_node("n3")],
     [*on("n1", "p1 p2 p3"), *on("n2", "p4 p5 p6"), *on("n3", "p7 p8 p9")], []),
    ("no evictable pods", t(cpu=40, pods=40),
     [mk_node("n1", pods=9), mk_node("n2"), mk_node("n3")],
     [local_storage("p1", "n1"), critical("p2", "n1"), *on("n2", "p3 p4", owner="ds"),
      *on("n3", "p5 p6 p7 p8")], []),
    # n3 is not underutilized (30%) and unschedulable: nobody can take pods.
    ("no node to schedule evicted pods", t(cpu=20, pods=20),
     [mk_node("n1"), mk_node("n2"), mk_node("n3", unschedulable=True)],
     [mk("p1", "n1"), mk("p2", "n2"), *on("n3", "p3 p4 p5")], []),
    # n3 (unschedulable, 401 total) drains before n1 (802); both into n2.
    ("without priorities", CPU_PODS,
     [mk_node("n1"), mk_node("n2"), mk_node("n3", unschedulable=True)],
     [mk("p1", "n1"), critical("p2", "n1"), *on("n2", "p3 p4 p5 p6"), mk("p7", "n3")],
     ["p7", "p1"]),
    # n2 leaves 400m: p1 takes it all and nothing else moves.
    ("without priorities stop when resource capacity is depleted", CPU_PODS,
     [mk_node("n1", cpu=2000), mk_node("n2", cpu=2000),
      mk_node("n3", cpu=2000, unschedulable=True)],
     [mk("p1", "n1"), *on("n2", "p2 p3 p4 p5"), mk("p6", "n3")], ["p1"]),
    ("with priorities", t(cpu=30),
     [mk_node("n1"), mk_node("n2", cpu=2000), mk_node("n3", cpu=2000, unschedulable=True)],
     [mk("p1", "n1", priority=LOW_PRIORITY), mk("p2", "n1", priority=HIGH_PRIORITY),
      *on("n2", "p5 p6 p7 p8"), mk("p9", "n3", owner="ds")], ["p1"]),
    ("without priorities evicting best-effort pods only", t(cpu=30),
     [mk_node("n1", cpu=3000), mk_node("n2", cpu=3000, pods=5),
      mk_node("n3", cpu=3000, unschedulable=True)],
     [mk("p1", "n1", best_effort=True), mk("p2", "n1"), *on("n2", "p3 p4 p5 p6")], ["p1"]),
    ("with extended resource", {"thresholds": {"cpu": 20, GPU: 40}},
     [mk_node("n1", extra={GPU: "8"}), mk_node("n2", extra={GPU: "8"}),
      mk_node("n3", unschedulable=True)],
     [*on("n1", "p1 p2", cpu=100, extended={GPU: "1"}),
      *on("n2", "p3 p4 p5 p6", cpu=500, extended={GPU: "1"})], ["p1", "p2"]),
    # n2 has no gpus, so the pool has no gpu room at all.
    ("with extended resource in some of nodes", {"thresholds": {"cpu": 40, GPU: 40}},
     [mk_node("n1", extra={GPU: "8"}), mk_node("n2"), mk_node("n3", unschedulable=True)],
     [*on("n1", "p1 p2", cpu=100, extended={GPU: "1"}), *on("n2", "p3 p4 p5 p6", cpu=500)], []),
    ("other node matches pod node selector", CPU_PODS,
     [mk_node("n1", pods=9, labels=WEST), mk_node("n2")],
     [*on("n1", "p1 p2 p3"), mk("p4", "n1", owner="ds"),
      mk("p5", "n2", spec={"nodeSelector": WEST})], ["p5"]),
    ("other node does not match pod node selector", CPU_PODS,
     [mk_node("n1", pods=9), mk_node("n2")],
     [*on("n1", "p1 p2 p3"), mk("p4", "n1", owner="ds"),
      mk("p5", "n2", spec={"nodeSelector": WEST})], []),
    # n1's 200 bytes of memory are fully requested: the pool has no memory left.
    ("other node does not have enough memory", CPU_PODS,
     [mk_node("n1", memory=200, pods=9), mk_node("n2")],
     [*on("n1", "p1 p2 p3", memory=50), mk("p4", "n1", memory=50, owner="ds"),
      mk("p5", "n2", memory=100)], []),
    ("evictionModes OnlyThresholdingResources skips pods without such requests",
     {"thresholds": {GPU: 30}, "evictionModes": ["OnlyThresholdingResources"]},
     [mk_node("n1", extra={GPU: "4"}), mk_node("n2", extra={GPU: "4"})],
     [mk("gpu-a", "n1", extended={GPU: "1"}), mk("plain", "n1"),
      mk("zero", "n1", extended={GPU: "0"}), *on("n2", "q1 q2", extended={GPU: "1"})],
     ["gpu-a", "zero"]),
    ("without evictionModes every removable pod goes", {"thresholds": {GPU: 30}},
     [mk_node("n1", extra={GPU: "4"}), mk_node("n2", extra={GPU: "4"})],
     [mk("gpu-a", "n1", extended={GPU: "1"}), mk("plain", "n1"),
      mk("zero", "n1", extended={GPU: "0"}), *on("n2", "q1 q2", extended={GPU: "1"})],
     ["gpu-a", "plain", "zero"]),
    # Upstream does nothing when every node is underutilized (issue #725).
    ("all nodes underutilized", CPU_PODS,
     [mk_node("n1"), mk_node("n2"), mk_node("n3")],
     [mk("p1", "n1"), mk("p2", "n2"), mk("p3", "n3")], []),
    ("underutilized nodes not more than numberOfNodes", {**CPU_PODS, "numberOfNodes": 2},
     [mk_node("n1"), mk_node("n2"), mk_node("n3", unschedulable=True)],
     [mk("p1", "n1"), *on("n2", "p3 p4 p5 p6"), mk("p7", "n3")], []),
    # n1 and n3 tie on total usage (401): the stable sort keeps node order (upstream: random).
    ("underutilized nodes more than numberOfNodes", {**CPU_PODS, "numberOfNodes": 1},
     [mk_node("n1"), mk_node("n2"), mk_node("n3", unschedulable=True)],
     [mk("p1", "n1"), *on("n2", "p3 p4 p5 p6"), mk("p7", "n3")], ["p1", "p7"]),
    ("evictableNamespaces exclude", {**CPU_PODS, "evictableNamespaces": {"exclude": ["keep"]}},
     [mk_node("n1"), mk_node("n2")],
     [mk("p1", "n1", namespace="keep"), mk("p2", "n1"), *on("n2", "p3 p4 p5 p6")], ["p2"]),
    # The pods pool (n2: 10 - 4) drains n1 completely: no per-source stop as in LNU.
    ("pods resource: a node is emptied while the pool lasts", t(pods=30),
     [mk_node("n1"), mk_node("n2"), mk_node("n3", pods=20)],
     [*on("n1", "a1 a2 a3", cpu=100), *on("n2", "b1 b2 b3 b4", cpu=100),
      *on("n3", "c1 c2", cpu=100)], ["c1", "c2", "a1", "a2", "a3"]),
]


@pytest.mark.parametrize(("raw", "nodes", "pods", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_high_node_utilization(raw: dict[str, Any], nodes: list[Any], pods: list[Any],
                               expected: list[str]) -> None:
    evicted, _ = run(raw, nodes, pods)
    assert evicted == expected


# TestHighNodeUtilizationWithTaints: thresholds cpu 40, no nodeFit, per-node limit as upstream.
TAINTED = {"key": "key", "value": "value", "effect": "NoSchedule"}
TOLERATES = {"tolerations": [{"key": "key", "value": "value"}]}

TAINT_CASES: list[tuple[str, list[Any], list[Any], Limits, list[str]]] = [
    ("no taints", [mk_node("n1", cpu=1000), mk_node("n2", cpu=1000), mk_node("n3", cpu=1000)],
     [*on("n1", "pod_1_n1 pod_2_n1 pod_3_n1", cpu=200), mk("pod_4_n2", "n2", cpu=200)],
     Limits(per_node=1), ["pod_4_n2"]),
    ("no pod tolerates node taint",
     [mk_node("n1", cpu=1000), mk_node("n3", cpu=1000, taints=[TAINTED])],
     [mk("pod_1_n1", "n1", cpu=200), mk("pod_2_n3", "n3", cpu=200)], Limits(per_node=0), []),
    ("pod which tolerates node taint",
     [mk_node("n1", cpu=1000), mk_node("n3", cpu=1000, taints=[TAINTED])],
     [mk("pod_1_n1", "n1", cpu=100), mk("tolerate_pod", "n1", cpu=200, spec=TOLERATES),
      mk("pod_9_n3", "n3", cpu=500)], Limits(per_node=1), ["tolerate_pod"]),
]


@pytest.mark.parametrize(("nodes", "pods", "limits", "expected"), [c[1:] for c in TAINT_CASES],
                         ids=[c[0] for c in TAINT_CASES])
def test_high_node_utilization_with_taints(nodes: list[Any], pods: list[Any], limits: Limits,
                                           expected: list[str]) -> None:
    evicted, _ = run(t(cpu=40), nodes, pods, limits=limits, node_fit=False)
    assert evicted == expected


def test_reason_names_the_underutilized_resources() -> None:
    _, handle = run(CPU_PODS, [mk_node("n1"), mk_node("n2"), mk_node("n3", unschedulable=True)],
                    [mk("p1", "n1"), critical("p2", "n1"), *on("n2", "p3 p4 p5 p6"),
                     mk("p7", "n3")])
    assert [d.reason for d in handle.log.evictions()] == [
        "node n3 (unschedulable) is underutilized (cpu 10% <= 30%, pods 10% <= 30%); evicting "
        "so its pods can be packed onto the 1 schedulable node",
        "node n1 is underutilized (cpu 20% <= 30%, pods 20% <= 30%); evicting so its pods can "
        "be packed onto the 1 schedulable node",
    ]


def test_only_thresholding_resources_skip_is_explained() -> None:
    raw = {"thresholds": {GPU: 30}, "evictionModes": ["OnlyThresholdingResources"]}
    _, handle = run(raw, [mk_node("n1", extra={GPU: "4"}), mk_node("n2", extra={GPU: "4"})],
                    [mk("plain", "n1"), *on("n2", "q1 q2", extended={GPU: "1"})])
    reason = (f"pod requests none of the threshold resources ({GPU}); evictionModes has "
              f"OnlyThresholdingResources")
    assert handle.log.filtered_counts[("default", "HighNodeUtilization", reason)] == 1


def test_total_limit_stops_everything() -> None:
    evicted, _ = run(t(pods=30), [mk_node("n1"), mk_node("n2"), mk_node("n3", pods=20)],
                     [*on("n1", "a1 a2 a3", cpu=100), *on("n2", "b1 b2 b3 b4", cpu=100),
                      *on("n3", "c1 c2", cpu=100)], limits=Limits(total=3))
    assert evicted == ["c1", "c2", "a1"]


def test_global_node_limit_moves_on_to_the_next_node() -> None:
    evicted, _ = run(t(pods=30), [mk_node("n1"), mk_node("n2"), mk_node("n3", pods=20)],
                     [*on("n1", "a1 a2 a3", cpu=100), *on("n2", "b1 b2 b3 b4", cpu=100),
                      *on("n3", "c1 c2", cpu=100)], limits=Limits(per_node=1))
    assert evicted == ["c1", "a1"]


# -- validation (upstream's exact messages, through the policy loader) ------------------------

PATH = "policy.yaml"


def policy(hnu_args: Any, include_args: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": "HighNodeUtilization"}
    if include_args:
        entry["args"] = hnu_args
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": "p", "pluginConfig": [entry],
                          "plugins": {"balance": {"enabled": ["HighNodeUtilization"]}}}]}


VALIDATION_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("include namespaces", {**CPU_PODS, "evictableNamespaces": {"include": ["default"]}},
     "only Exclude namespaces can be set, inclusion is not supported"),
    ("empty thresholds", {"thresholds": {}}, "no resource threshold is configured"),
    ("threshold above 100", {"thresholds": {"cpu": 20, "memory": 120}},
     "memory threshold not in [0, 100] range"),
    ("threshold below 0", {"thresholds": {"nvidia.com/gpu": -5}},
     "nvidia.com/gpu threshold not in [0, 100] range"),
    ("unknown eviction mode", {**CPU_PODS, "evictionModes": ["OnlyThresholdingResources", "All"]},
     "invalid eviction mode All"),
    ("thresholds checked before eviction modes", {"thresholds": {}, "evictionModes": ["All"]},
     "no resource threshold is configured"),
]


@pytest.mark.parametrize(("raw", "message"), [c[1:] for c in VALIDATION_CASES],
                         ids=[c[0] for c in VALIDATION_CASES])
def test_validation_messages(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError) as info:
        policy_from_document(PATH, policy(raw), PLUGINS)
    assert str(info.value) == f"{PATH}: in profile p: {message}"


def test_plugin_config_without_args_fails_validation() -> None:
    with pytest.raises(PolicyError) as info:
        policy_from_document(PATH, policy(None, include_args=False), PLUGINS)
    assert str(info.value) == f"{PATH}: in profile p: no resource threshold is configured"


def test_valid_args() -> None:
    raw = {"thresholds": {"cpu": 20, "memory": 20, GPU: 50}, "numberOfNodes": 2,
           "evictionModes": ["OnlyThresholdingResources"],
           "evictableNamespaces": {"exclude": ["kube-system"]}}
    loaded = policy_from_document(PATH, policy(raw), PLUGINS)
    assert "HighNodeUtilization" in loaded.profiles[0].args


def test_low_node_utilization_keys_are_strict_decoding_errors() -> None:
    with pytest.raises(DecodeError, match='unknown field "targetThresholds"'):
        policy_from_document(PATH, policy({**CPU_PODS, "targetThresholds": {"cpu": 50}}), PLUGINS)


def test_metrics_utilization_is_desched_s_extension() -> None:
    # Upstream's HNU always balances by requests (v0.32's metricsUtilization was removed); desched
    # takes LowNodeUtilization's (tests/plugins/test_highnodeutilization_extensions.py).
    loaded = policy_from_document(PATH, policy({**CPU_PODS, "metricsUtilization": {
        "source": "KubernetesMetrics"}}), PLUGINS)
    assert "HighNodeUtilization" in loaded.profiles[0].args


def test_node_metrics_in_the_snapshot_do_not_change_decisions() -> None:
    nodes = [mk_node("n1"), mk_node("n2")]
    pods = [*on("n1", "p1"), *on("n2", "q1 q2 q3 q4 q5 q6")]
    busy = decode("NodeMetrics", {"metadata": {"name": "n1"},
                                  "usage": {"cpu": "4", "memory": "3000"}})
    evicted, _ = run(CPU_PODS, nodes, pods)
    assert evicted == ["p1"]
    assert run(CPU_PODS, nodes, [*pods, busy])[0] == evicted


# -- the shipped example ----------------------------------------------------------------------


def test_example_end_to_end() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                            1, False)
    assert [(d.namespace, d.pod, d.node, d.plugin) for d in result.evictions] == [
        ("shop", "batch-0", "worker-4", "HighNodeUtilization"),
        ("shop", "api-0", "worker-3", "HighNodeUtilization"),
    ]
    assert result.evictions[1].reason == (
        "node worker-3 is underutilized (cpu 8.75% <= 20%, memory 3.43% <= 20%); evicting so "
        "its pods can be packed onto the 2 schedulable nodes")

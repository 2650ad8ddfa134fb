"""HighNodeUtilization's desched extensions: `metricsUtilization` (LowNodeUtilization's sources,
NodeMetric included) and `drainWhenAllUnderutilized` (every node underutilized: drain the
emptiest nodes whose pods all fit on the others); the plan never overcommits a node; the shipped
example, placed by a MostAllocated scheduler profile."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import NOW, args, decode, handle_for, snapshot
from desched.errors import InputError
from desched.framework.evictor import Limits
from desched.plugins.catalog import PLUGINS
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.highnodeutilization import HighNodeUtilization, HighNodeUtilizationArgs
from desched.policy_files.errors import PolicyError
from desched.policy_files.loader import policy_from_document
from desched.simulate.simulation import run_simulation
from nodeutilization_builders import mk, mk_node

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / \
    "HighNodeUtilization-metrics"
DRAIN = {"thresholds": {"cpu": 50, "pods": 50}, "drainWhenAllUnderutilized": True}
STAMP = "2026-11-22T11:59:30Z"


def run(raw: dict[str, Any], *objects: Any, limits: Limits | None = None,
        metrics: bool = False, node_fit: bool = True) -> tuple[list[str], Any,
                                                              HighNodeUtilization]:
    snap = snapshot(*objects)
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, {"nodeFit": node_fit}), setup)
    handle, executor = handle_for(snap, plugin="HighNodeUtilization", limits=limits,
                                  filters=[evictor])
    if metrics:
        handle.policy = policy_from_document("p.yaml", {
            "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "metricsProviders": [{"source": "KubernetesMetrics"}], "profiles": []}, PLUGINS)
    plugin = HighNodeUtilization(args(HighNodeUtilizationArgs, raw), handle)
    plugin.balance(snap.ready_nodes())
    return executor.evicted, handle, plugin


def notes(handle: Any) -> list[str]:
    return [n.text for n in handle.log.notes]


def node_metrics(name: str, cpu: str, memory: str = "100") -> Any:
    return decode("NodeMetrics", {"metadata": {"name": name}, "timestamp": STAMP,
                                  "window": "20s", "usage": {"cpu": cpu, "memory": memory}})


def pod_metrics(name: str, cpu: str, memory: str = "10") -> Any:
    return decode("PodMetrics", {"metadata": {"name": name, "namespace": "default"},
                                 "timestamp": STAMP, "window": "20s",
                                 "containers": [{"name": "main",
                                                 "usage": {"cpu": cpu, "memory": memory}}]})


def node_metric(name: str, pods: dict[str, str], system: str = "0") -> Any:
    return decode("NodeMetric", {
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": name},
        "status": {"updateTime": STAMP,
                   "nodeMetric": {"systemUsage": {"resources": {"cpu": system, "memory": "0"}}},
                   "podsMetric": [{"namespace": "default", "name": pod,
                                   "podUsage": {"resources": {"cpu": cpu, "memory": "10"}}}
                                  for pod, cpu in pods.items()]}})


# -- metricsUtilization ---------------------------------------------------------------------------

def test_busy_by_requests_idle_by_usage_is_drained_on_usage() -> None:
    """By requests n2 (12.5%) is the underutilized node, drained onto n1 (75%); measured, n1
    uses 5% and n2 75%: with metricsUtilization n1 is the node drained, onto n2."""
    objects = [mk_node("n1"), mk_node("n2"),
               *(mk(f"a{i}", "n1", cpu=1000) for i in range(3)), mk("b1", "n2", cpu=500),
               node_metrics("n1", "200m"), node_metrics("n2", "3"),
               *(pod_metrics(f"a{i}", "60m") for i in range(3)), pod_metrics("b1", "3")]
    raw = {"thresholds": {"cpu": 30}}
    assert run(raw, *objects)[0] == ["b1"]
    evicted, handle, _ = run({**raw, "metricsUtilization": {"source": "KubernetesMetrics"}},
                             *objects, metrics=True)
    assert evicted == ["a0", "a1", "a2"]
    assert handle.log.evictions()[0].reason == (
        "node n1 is underutilized (cpu 5% <= 30%; actual usage from metrics.k8s.io); evicting "
        "so its pods can be packed onto the 1 schedulable node")


def test_without_a_metrics_client_the_run_ends_with_upstreams_reason() -> None:
    _, handle, _ = run({"thresholds": {"cpu": 30},
                        "metricsUtilization": {"source": "KubernetesMetrics"}},
                       mk_node("n1"), mk_node("n2"), mk("a", "n1"))
    assert notes(handle)[0].startswith("metrics client not initialized")


def test_node_metric_source_reads_koordinators_usage() -> None:
    """NodeMetric: systemUsage + the pods' podsMetric, as LowNodeLoad reads it; a node without
    one is left out with the reason."""
    objects = [mk_node("n1"), mk_node("n2"), mk_node("n3"),
               *(mk(f"a{i}", "n1", cpu=1000) for i in range(3)), mk("b1", "n2", cpu=500),
               mk("c1", "n3"),
               node_metric("n1", {f"a{i}": "50m" for i in range(3)}, system="50m"),
               node_metric("n2", {"b1": "3"}, system="200m")]
    evicted, handle, plugin = run({"thresholds": {"cpu": 30},
                                   "metricsUtilization": {"source": "NodeMetric"}}, *objects)
    assert evicted == ["a0", "a1", "a2"]
    assert "actual usage from NodeMetric" in handle.log.evictions()[0].reason
    assert "node n3 left out of this run: node n3 has no NodeMetric" in notes(handle)[0]
    assert plugin.node_role("n1") == ("underutilized (cpu 5% <= 30%), a source of evictions")


def test_a_snapshot_without_node_metric_ends_the_run() -> None:
    _, handle, _ = run({"thresholds": {"cpu": 30}, "metricsUtilization": {"source": "NodeMetric"}},
                       mk_node("n1"), mk_node("n2"), mk("a", "n1"))
    assert notes(handle) == ["error getting node usage: the snapshot holds no NodeMetric "
                             "(slo.koordinator.sh/v1alpha1); add them (kubectl get nodemetrics."
                             "slo.koordinator.sh -o json)"]


def policy(hnu_args: Any) -> dict[str, Any]:
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": "p", "pluginConfig": [{"name": "HighNodeUtilization",
                                                         "args": hnu_args}],
                          "plugins": {"balance": {"enabled": ["HighNodeUtilization"]}}}]}


@pytest.mark.parametrize(("metrics", "message"), [
    ({"source": "KubernetesMetrics", "metricsServer": True},
     'it is not allowed to set both "KubernetesMetrics" source and metricsServer'),
    ({"source": "NodeMetric", "metricsServer": True},
     'it is not allowed to set both "NodeMetric" source and metricsServer'),
    ({"source": "NodeMetric", "prometheus": {"query": "q"}},
     'prometheus configuration is not allowed to set when source is set to "NodeMetric"'),
    ({"source": "Prometheus"},
     'prometheus query is required when metrics source is set to "Prometheus"'),
])
def test_metrics_utilization_validation(metrics: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError) as info:
        policy_from_document("p.yaml", policy({"thresholds": {"cpu": 20},
                                               "metricsUtilization": metrics}), PLUGINS)
    assert str(info.value) == f"p.yaml: in profile p: {message}"


@pytest.mark.parametrize(("raw", "problem"), [
    ({"thresholds": {"cpu": 20}, "metricsUtilization": {"source": "Nope"}},
     "unrecognized metrics source"),
    ({"thresholds": {"cpu": 20}, "metricsUtilization": {"source": "Prometheus",
                                                        "prometheus": {"query": "q"}}},
     'thresholds are expected to specify a single instance of "MetricResource" resource, got '
     '[cpu] instead'),
])
def test_build_problems_are_upstreams(raw: dict[str, Any], problem: str) -> None:
    handle, _ = handle_for(snapshot(mk_node("n1")), plugin="HighNodeUtilization")
    with pytest.raises(InputError, match="unable to build HighNodeUtilization plugin: "
                                         + problem.replace("[", r"\[").replace("]", r"\]")):
        HighNodeUtilization(args(HighNodeUtilizationArgs, raw), handle)


# -- drainWhenAllUnderutilized ---------------------------------------------------------------------

def three_quiet_nodes() -> list[Any]:
    """Every node under 50% of cpu and pods: n1 (3 pods) fullest, n3 (1 pod) emptiest."""
    return [mk_node("n1"), mk_node("n2"), mk_node("n3"),
            *(mk(f"a{i}", "n1") for i in range(3)), *(mk(f"b{i}", "n2") for i in range(2)),
            mk("c0", "n3"), mk("ds3", "n3", cpu=0, owner="ds")]


def test_upstream_does_nothing_when_every_node_is_underutilized() -> None:
    evicted, handle, _ = run({"thresholds": {"cpu": 50, "pods": 50}}, *three_quiet_nodes())
    assert evicted == []
    assert notes(handle) == ["All nodes are underutilized, nothing to do here"]


def test_the_opt_in_drains_the_emptiest_nodes_onto_the_fullest() -> None:
    """n3 then n2 (emptiest first) fit on n1 (fullest first); the DaemonSet pod stays and the
    node still counts as empty; n1 takes the pods and is not drained."""
    evicted, handle, plugin = run(DRAIN, *three_quiet_nodes())
    assert evicted == ["c0", "b0", "b1"]
    assert notes(handle) == [
        "node n3 would be empty after this run: its 1 pod(s) fit on n1",
        "node n2 would be empty after this run: its 2 pod(s) fit on n1",
        "every node is underutilized; drainWhenAllUnderutilized drains the emptiest whose pods "
        "fit on the others: nodes empty after this run: n3, n2"]
    assert handle.log.evictions()[0].reason == (
        "every node is underutilized and node n3 is among the emptiest (cpu 10% <= 50%, pods "
        "20% <= 50%); evicting to empty it (drainWhenAllUnderutilized), its pods fit on n1")
    assert plugin.node_role("n1") == ("underutilized (cpu 30% <= 50%, pods 30% <= 50%), a "
                                      "target: kept to take the drained nodes' pods")
    assert plugin.node_role("n3") == (
        "underutilized (cpu 10% <= 50%, pods 20% <= 50%), drained (drainWhenAllUnderutilized): "
        "empty after this run: its 1 pod(s) fit on n1")


def test_numberOfNodes_still_holds_the_opt_in_back() -> None:
    assert run({**DRAIN, "numberOfNodes": 3}, *three_quiet_nodes())[0] == []


def test_a_pod_that_may_not_go_keeps_its_node() -> None:
    """n3 holds a bare pod: n3 cannot be emptied, so none of its pods moves; n2 is."""
    objects = [*three_quiet_nodes(), mk("keep", "n3", cpu=0, owner=None)]
    evicted, handle, plugin = run(DRAIN, *objects)
    assert evicted == ["b0", "b1"]
    assert notes(handle)[0] == ("node n3 is not drained: pod default/keep stays: the evictor's "
                                "filters keep it (see the pod's reason)")
    c0 = handle.snapshot.pods["default/c0"]
    assert plugin.verdict(c0, []) == ("node n3 is not drained (drainWhenAllUnderutilized): pod "
                                      "default/keep stays: the evictor's filters keep it (see the "
                                      "pod's reason)")


def test_when_no_node_can_be_emptied_the_run_says_why() -> None:
    evicted, handle, plugin = run(DRAIN, mk_node("n1"), mk_node("n2"),
                                  mk("a", "n1", owner=None), mk("b", "n2", owner=None))
    assert evicted == []
    assert notes(handle) == [
        "node n1 is not drained: pod default/a stays: the evictor's filters keep it (see the "
        "pod's reason)",
        "node n2 is not drained: pod default/b stays: the evictor's filters keep it (see the "
        "pod's reason)",
        "every node is underutilized and no node can be emptied onto the others "
        "(drainWhenAllUnderutilized; the nodes' notes say why)"]
    assert plugin.node_role("n2") == (
        "underutilized (cpu 10% <= 50%, pods 10% <= 50%), not drained: pod default/b stays: the "
        "evictor's filters keep it (see the pod's reason)")


def test_a_node_whose_pods_do_not_all_fit_gives_its_room_back() -> None:
    """n3's big pod fits nowhere, so n3 stays and its small pod's planned room on n1 is given
    back: n2's two pods still fit there. (Without DefaultEvictor's nodeFit, which would refuse
    c1 first: the plan's own fit check is what keeps n3.)"""
    objects = [mk_node("n1"), mk_node("n2"), mk_node("n3"), mk("a0", "n1", cpu=2700),
               mk("b0", "n2", cpu=1200), mk("b1", "n2", cpu=1200),
               mk("c0", "n3", cpu=200), mk("c1", "n3", cpu=1700, priority=10)]
    raw = {"thresholds": {"cpu": 80}, "drainWhenAllUnderutilized": True}
    evicted, handle, _ = run(raw, *objects, node_fit=False)
    assert evicted == ["b0", "b1"]
    assert notes(handle)[:2] == [
        "node n3 is not drained: pod default/c1 fits on no other node: n1: insufficient cpu; "
        "n2: insufficient cpu",
        "node n2 would be empty after this run: its 2 pod(s) fit on n1, n3"]


def test_a_workload_with_required_anti_affinity_is_planned_once_per_node() -> None:
    spread = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname",
         "labelSelector": {"matchLabels": {"app": "s"}}}]}}}
    objects = [mk_node("n1", pods=20), mk_node("n2", pods=20), mk_node("n3", pods=20),
               *(mk(f"a{i}", "n1") for i in range(4)), *(mk(f"b{i}", "n2") for i in range(3)),
               mk("s0", "n3", spec=spread, labels={"app": "s"}),
               mk("s1", "n3", spec=spread, labels={"app": "s"})]
    evicted, handle, _ = run({"thresholds": {"cpu": 50}, "drainWhenAllUnderutilized": True},
                             *objects)
    # n3's two replicas would go to n1 and n2: n2 becomes a target, so only n3 is drained.
    assert evicted == ["s0", "s1"]
    assert notes(handle)[0] == "node n3 would be empty after this run: its 2 pod(s) fit on n1, n2"


def test_the_total_limit_leaves_a_drained_node_not_empty() -> None:
    evicted, handle, _ = run(DRAIN, *three_quiet_nodes(), limits=Limits(total=2))
    assert evicted == ["c0", "b0"]  # b1 is refused: the limit is reached
    assert "node n2 would be not empty after this run: 1 pod(s) stay (default/b1)" in notes(handle)
    assert notes(handle)[-1].endswith("nodes empty after this run: n3; drained but not empty: n2")


@settings(max_examples=60, deadline=None)
@given(loads=st.lists(st.lists(st.integers(100, 1000), max_size=4), min_size=2, max_size=5))
def test_the_plan_never_overcommits_a_node(loads: list[list[int]]) -> None:
    """Whatever the cluster: every drained node is emptied (no limits, every pod evictable), and
    no node is planned more cpu than it has free."""
    objects: list[Any] = [mk_node(f"n{i}", cpu=4000, pods=20) for i in range(len(loads))]
    objects += [mk(f"p{i}-{j}", f"n{i}", cpu=cpu) for i, pods in enumerate(loads)
                for j, cpu in enumerate(pods)]
    evicted, handle, plugin = run({"thresholds": {"cpu": 100}, "drainWhenAllUnderutilized": True},
                                  *objects)
    drained = plugin.drained
    assert drained is not None
    requests = {f"p{i}-{j}": cpu for i, pods in enumerate(loads) for j, cpu in enumerate(pods)}
    planned: dict[str, int] = {}
    for pod, target in drained.placed.items():
        planned[target] = planned.get(target, 0) + requests[pod.split("/")[1]]
    for target, cpu in planned.items():
        assert target not in drained.drained
        assert handle.snapshot.node_requested(target).get("cpu", 0) + cpu <= 4000
    assert sorted(evicted) == sorted(key.split("/")[1] for key in drained.placed)
    for node in drained.drained:
        assert handle.snapshot.pods_on_node(node) == []


# -- the shipped example -------------------------------------------------------------------------

def test_example_drains_the_two_emptiest_nodes() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                            1, False)
    assert [(d.pod, d.node) for d in result.evictions] == [
        ("batch-0", "worker-4"), ("api-0", "worker-3"), ("api-1", "worker-3")]


@pytest.mark.process
def test_example_replacements_pack_onto_the_fullest_node() -> None:
    """With the example's MostAllocated profile every replacement lands on worker-1, and
    worker-3 and worker-4 are left empty (their DaemonSet pods aside)."""
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--policy", str(EXAMPLE / "policy.yaml"),
         "--snapshot", str(EXAMPLE / "cluster.yaml"), "--now", "2026-11-22T12:00:00Z",
         "--reschedule", "--scheduler-config", str(EXAMPLE / "scheduler-config.yaml")],
        capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    placed = [line.split()[1:4] for line in proc.stdout.splitlines()
              if line.strip().startswith("placed")]
    assert placed == [["shop/batch-0-r1", "on", "worker-1"], ["shop/api-0-r1", "on", "worker-1"],
                      ["shop/api-1-r1", "on", "worker-1"]]
    assert ("every node is underutilized; drainWhenAllUnderutilized drains the emptiest whose "
            "pods fit on the others: nodes empty after this run: worker-4, worker-3") in proc.stdout


def test_a_refused_eviction_ends_the_nodes_drain() -> None:
    """A node that cannot be emptied this run (a budget refuses one of its pods) keeps its other
    pods: evicting them would disrupt them for no empty node."""
    budget = decode("PodDisruptionBudget", {
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "guarded"}}},
        "status": {"disruptionsAllowed": 0}})
    objects = three_quiet_nodes()
    objects[6] = mk("b0", "n2", labels={"app": "guarded"})
    evicted, handle, _ = run(DRAIN, *objects, budget)
    assert evicted == ["c0"]
    assert "node n2 would be not empty after this run: 2 pod(s) stay (default/b0, default/b1)" \
        in notes(handle)

"""LowNodeLoad end to end (docs/lownodeload.md): thresholds arithmetic, classification,
the pool algorithm, eviction counts on hotspot scenarios, prod thresholds, deviation mode,
node pools, the anomaly detector across cycles, bad metrics, and the ACK walkthrough example.

Unless a test is about the detector, the anomaly condition is bypassed
(consecutiveAbnormalities 1), as Koordinator's own LowNodeLoad tests run it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from builders import NOW, RecordingExecutor, args, decode, handle_for, node, pod, snapshot
from desched.framework.evictor import Limits
from desched.framework.types import Handle
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.lownodeload.args import LowNodeLoadArgs, Pool, default
from desched.plugins.lownodeload.plugin import (
    LowNodeLoad,
    NodeInfo,
    _PoolRun,
    classify,
    fill_thresholds,
    threshold_amount,
)
from desched.simulate.simulation import run_simulation
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage.nodemetric import NodeLoad

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lownodeload-hotspot"
UPDATED = "2026-11-22T11:59:30Z"
BYPASS = {"consecutiveAbnormalities": 1, "consecutiveNormalities": 1}
BASE: dict[str, Any] = {"lowThresholds": {"cpu": 30, "memory": 30},
                        "highThresholds": {"cpu": 50, "memory": 50},
                        "anomalyCondition": BYPASS}
BEST_EFFORT = {"containers": [{"name": "c", "image": "i"}]}


class Cluster:
    """Nodes of 10 cpu / 100Gi by default, pods, and one NodeMetric per node whose pods report
    the cpu (millicores) given here."""

    def __init__(self) -> None:
        self.objects: list[Any] = []
        self.metrics: dict[str, dict[str, Any]] = {}

    def node(self, name: str, system: int = 0, cpu: str = "10", memory: str = "100Gi",
             metric: bool = True, updated: str = UPDATED, system_memory: str = "0",
             **kw: Any) -> Cluster:
        self.objects.append(node(name, cpu=cpu, memory=memory, **kw))
        if metric:
            self.metrics[name] = {"updated": updated, "pods": [],
                                  "system": {"cpu": f"{system}m", "memory": system_memory}}
        return self

    def pod(self, name: str, node_name: str, use: int, use_memory: str = "0",
            metric: bool = True, **kw: Any) -> Cluster:
        """A pod using `use` millicores (and `use_memory`); `kw` goes to the pod builder
        (cpu=/memory= there are requests)."""
        p = pod(name, node_name, **kw)
        self.objects.append(p)
        if metric and node_name in self.metrics:
            self.metrics[node_name]["pods"].append(
                {"namespace": p.namespace, "name": p.name,
                 "podUsage": {"resources": {"cpu": f"{use}m", "memory": use_memory}}})
        return self

    def pods(self, names: str, node_name: str, use: int, **kw: Any) -> Cluster:
        for name in names.split():
            self.pod(name, node_name, use, **kw)
        return self

    def add(self, *objects: Any) -> Cluster:
        self.objects.extend(objects)
        return self

    def build(self) -> ClusterSnapshot:
        metrics = [decode("NodeMetric", {
            "metadata": {"name": name},
            "status": {"updateTime": m["updated"],
                       "nodeMetric": {"systemUsage": {"resources": m["system"]}},
                       "podsMetric": m["pods"]}}) for name, m in self.metrics.items()]
        return snapshot(*self.objects, *metrics)


@dataclass
class Run:
    plugin: LowNodeLoad
    handle: Handle
    executor: RecordingExecutor
    snap: ClusterSnapshot

    def cycle(self, advance: float = 0) -> list[str]:
        """One Balance pass; the pods it evicted."""
        if advance:
            self.handle.clock.now += timedelta(seconds=advance)
        before = len(self.executor.evicted)
        self.handle.evictor.evictor.new_cycle()
        self.handle.log.cycle += 1
        self.plugin.balance(self.snap.ready_nodes())
        return self.executor.evicted[before:]

    def cycles(self, n: int, advance: float = 0) -> dict[int, list[str]]:
        """Cycles 1..n (the clock moves `advance` seconds before every cycle but the first):
        the cycles that evicted, with their pods."""
        out = {}
        for i in range(1, n + 1):
            evicted = self.cycle(advance if i > 1 else 0)
            if evicted:
                out[i] = evicted
        return out

    def kept(self, name: str) -> list[str]:
        """Why this plugin passed over pod `name` (every cycle)."""
        return [d.reason for d in self.handle.log.decisions
                if d.outcome == "filtered" and d.pod == name]

    def notes(self, node_name: str | None = None) -> list[str]:
        """The node-level reasons recorded (optionally for one node)."""
        return [n.text for n in self.handle.log.notes
                if node_name is None or n.node == node_name]

    def reasons(self) -> list[str]:
        return [d.reason for d in self.handle.log.evictions()]


def start(raw: dict[str, Any], cluster: Cluster, limits: Limits | None = None) -> Run:
    snap = cluster.build()
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, {}), setup)
    handle, executor = handle_for(snap, plugin="LowNodeLoad", limits=limits, filters=[evictor])
    handle.log.explain_nodes = frozenset(snap.nodes)  # keep every reason in full
    handle.log.cycle = 0
    ln_args: LowNodeLoadArgs = args(LowNodeLoadArgs, raw)
    default(ln_args)
    return Run(LowNodeLoad(ln_args, handle), handle, executor, snap)


def once(raw: dict[str, Any], cluster: Cluster, limits: Limits | None = None) -> list[str]:
    return start(raw, cluster, limits).cycle()


# -- thresholds ------------------------------------------------------------------------------


def pool(**kw: Any) -> Pool:
    fields: dict[str, Any] = {"name": "p", "node_selector": None, "deviation": False, "low": {},
                              "high": {}, "prod_low": {}, "prod_high": {}, "weights": {},
                              "anomaly": None}
    return Pool(**{**fields, **kw})


@pytest.mark.parametrize(("kw", "names", "low", "high", "prod_low", "prod_high"), [
    # memory is always tracked; a high without its low is overwritten with 100
    ({"low": {"cpu": 20}, "high": {"cpu": 50, "memory": 80}}, ["cpu", "memory"],
     {"cpu": 20, "memory": 100}, {"cpu": 50, "memory": 100},
     {"cpu": 100, "memory": 100}, {"cpu": 100, "memory": 100}),
    # deviation mode fills 0
    ({"deviation": True, "low": {"cpu": 10}, "high": {"cpu": 10}}, ["cpu", "memory"],
     {"cpu": 10, "memory": 0}, {"cpu": 10, "memory": 0}, {"cpu": 0, "memory": 0},
     {"cpu": 0, "memory": 0}),
    # prod keys are tracked too; a low without a high leaves high unset (it reads as 0%)
    ({"low": {"pods": 10}, "prod_low": {"cpu": 5}, "prod_high": {"cpu": 20}},
     ["pods", "cpu", "memory"], {"pods": 10, "cpu": 100, "memory": 100},
     {"cpu": 100, "memory": 100}, {"cpu": 5, "pods": 100, "memory": 100},
     {"cpu": 20, "pods": 100, "memory": 100}),
    ({}, ["memory"], {"memory": 100}, {"memory": 100}, {"memory": 100}, {"memory": 100}),
])
def test_fill_thresholds(kw: dict[str, Any], names: list[str], low: dict[str, float],
                         high: dict[str, float], prod_low: dict[str, float],
                         prod_high: dict[str, float]) -> None:
    p = pool(**kw)
    got = fill_thresholds(p)
    assert got == (names, low, high, prod_low, prod_high)
    assert p.high == kw.get("high", {})  # the pool's own maps are not touched


@pytest.mark.parametrize(("percent", "capacity", "amount"), [
    (30, 9, 2), (50, 9, 4), (100, 9, 9), (45.5, 104000, 47320), (50, 104000, 52000),
    (0, 5000, 0), (150, 1000, 1500), (33.3, 3, 0), (70, 396 * 2**30, 297641233612),
])
def test_threshold_amount_truncates(percent: float, capacity: int, amount: int) -> None:
    assert threshold_amount(percent, capacity) == amount


def test_deviation_thresholds_follow_the_pool_average() -> None:
    # cpu 70%, 10%, 40%: mean 40% -> low 30%, high 60%. memory: a 0 span never triggers.
    cluster = (Cluster().node("n1", system=7000).node("n2", system=1000)
               .node("n3", system=4000))
    run = start({"useDeviationThresholds": True, "lowThresholds": {"cpu": 10},
                 "highThresholds": {"cpu": 20}, "anomalyCondition": BYPASS}, cluster)
    pool_run = _PoolRun(run.plugin, run.plugin.pools[0], run.snap.ready_nodes())
    infos = {i.name: i for i in pool_run.measure()}
    assert {n: (i.low["cpu"], i.high["cpu"]) for n, i in infos.items()} == {
        "n1": (3000, 6000), "n2": (3000, 6000), "n3": (3000, 6000)}
    assert infos["n1"].low["memory"] == infos["n1"].high["memory"] == 100 * 2**30
    classes = classify(list(infos.values()))
    assert ([i.name for i in classes.sources], [i.name for i in classes.both_low]) == (
        ["n1"], ["n2"])


def test_deviation_mode_evicts_down_to_mean_plus_span() -> None:
    cluster = (Cluster().node("n1", system=1000).pods("a b", "n1", 3000)
               .node("n2", system=1000).node("n3", system=4000))
    run = start({"useDeviationThresholds": True, "lowThresholds": {"cpu": 10},
                 "highThresholds": {"cpu": 20}, "anomalyCondition": BYPASS}, cluster)
    assert run.cycle() == ["a"]
    assert run.reasons() == [
        "node is overutilized, node cpu usage(70.00%)>threshold(20.00%); fits now on n2"]


def test_deviation_average_counts_unschedulable_and_capacity_less_nodes() -> None:
    # n3 is cordoned at 100% and still raises the mean: (80 + 0 + 100) / 3 = 60% -> high 70%.
    cluster = (Cluster().node("n1", system=8000).node("n2")
               .node("n3", system=10000, unschedulable=True))
    run = start({"useDeviationThresholds": True, "lowThresholds": {"cpu": 10},
                 "highThresholds": {"cpu": 10}, "anomalyCondition": BYPASS}, cluster)
    pool_run = _PoolRun(run.plugin, run.plugin.pools[0], run.snap.ready_nodes())
    assert {i.name: i.high["cpu"] for i in pool_run.measure()} == {
        "n1": 7000, "n2": 7000, "n3": 7000}


# -- classification ----------------------------------------------------------------------------


def info(cpu: int, prod: int, unschedulable: bool = False,
         thresholds: tuple[int, int, int, int] = (30, 50, 10, 20)) -> NodeInfo:
    n = node(f"n-{cpu}-{prod}", unschedulable=unschedulable)
    load = NodeLoad(n, [], [], {"cpu": cpu, "pods": 0}, {"cpu": prod, "pods": 0}, {})
    low, high, prod_low, prod_high = ({"cpu": t} for t in thresholds)
    return NodeInfo(load, {"cpu": 100}, low, high, prod_low, prod_high)


@pytest.mark.parametrize(("cpu", "prod", "unschedulable", "thresholds", "bucket"), [
    (20, 5, False, (30, 50, 10, 20), "both_low"),
    (30, 10, False, (30, 50, 10, 20), "both_low"),  # "under" is inclusive
    (20, 15, False, (30, 50, 10, 20), "low"),
    (20, 25, False, (30, 50, 10, 20), "prod_high"),  # low for the node, high for prod
    (60, 5, False, (30, 50, 10, 20), "sources"),     # prod is not looked at
    (51, 40, False, (30, 50, 10, 20), "sources"),
    (50, 20, False, (30, 50, 10, 20), None),         # "over" is strict
    (40, 25, False, (30, 50, 10, 20), "prod_high"),
    (40, 5, False, (30, 50, 10, 20), "prod_low"),
    (40, 15, False, (30, 50, 10, 20), None),
    (20, 5, True, (30, 50, 10, 20), None),           # cordoned: never low
    (40, 5, True, (30, 50, 10, 20), None),
    (60, 5, True, (30, 50, 10, 20), "sources"),      # but can be hot
    (40, 25, True, (30, 50, 10, 20), "prod_high"),
    # prod thresholds not configured (100%): low nodes are both-low, middle ones prod-low
    (20, 5, False, (30, 50, 100, 100), "both_low"),
    (40, 35, False, (30, 50, 100, 100), "prod_low"),
])
def test_classification(cpu: int, prod: int, unschedulable: bool,
                        thresholds: tuple[int, int, int, int], bucket: str | None) -> None:
    classes = classify([info(cpu, prod, unschedulable, thresholds)])
    found = [name for name in ("low", "sources", "prod_low", "prod_high", "both_low")
             if getattr(classes, name)]
    assert found == ([bucket] if bucket else [])


# -- hotspot scenarios: eviction counts and order ---------------------------------------------

# (id, args over BASE, cluster, evicted pods in order)
SCENARIOS: list[tuple[str, dict[str, Any], Cluster, list[str]]] = [
    # n1 80%: excess 3000m; p1's usage matches it exactly, so it goes alone.
    ("the pod matching the excess goes first",
     {}, Cluster().node("n1", system=500).pod("p4", "n1", 1000).pod("p3", "n1", 1500)
     .pod("p2", "n1", 2000).pod("p1", "n1", 3000).node("n2", system=1000), ["p1"]),
    ("several pods until the node is under its high threshold",
     {}, Cluster().node("n1", system=1000).pods("a b c d e f", "n1", 1000)
     .node("n2", system=1000), ["a", "b"]),
    ("a node at its high threshold is not hot",
     {}, Cluster().node("n1", system=1000).pods("a b c d", "n1", 1000).node("n2"), []),
    # n2 can take two pods (room 2100m under 50%); the others fit nowhere.
    ("room under the target's high threshold limits the evictions",
     {}, Cluster().node("n1", system=1000).pods("a b c d e f g", "n1", 1000)
     .node("n2", system=2900), ["a", "b"]),
    # room per target: n2 (2000m) takes two 1500m pods, n3 (2500m) one; the least loaded
    # target is chosen each time, so they alternate.
    ("pods are spread over targets with room",
     {}, Cluster().node("n1", system=1000).pods("a b c d e f", "n1", 1500)
     .node("n2", system=2000).node("n3", system=2500), ["a", "b", "c"]),
    # Koordinator would reserve room for `big` first (list order, before sorting) and evict it;
    # here the low-priority pods go, each on the room left.
    ("sorting comes before the room check",
     {}, Cluster().node("n1", system=2500).pod("big", "n1", 2000, priority=100)
     .pods("x y", "n1", 1000).node("n2", system=2500), ["x", "y"]),
    ("best effort and batch pods go before prod pods",
     {}, Cluster().node("n1", system=3800).pod("prod", "n1", 1200)
     .pod("be", "n1", 200, spec=BEST_EFFORT).pod("free", "n1", 300, priority=3500)
     .pod("mid", "n1", 1200, priority=7500).node("n2"), ["free", "be", "mid"]),
    ("evictableNamespaces include",
     {"evictableNamespaces": {"include": ["team"]}},
     Cluster().node("n1", system=1000).pod("a", "n1", 3000).pod("b", "n1", 3000, namespace="team")
     .node("n2"), ["b"]),
    ("podSelectors: any selector matches",
     {"podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}},
                       {"name": "api", "selector": {"matchLabels": {"app": "api"}}}]},
     Cluster().node("n1", system=1000).pod("a", "n1", 2000)
     .pod("w", "n1", 500, labels={"app": "web"}).pod("i", "n1", 500, labels={"app": "api"})
     .pod("z", "n1", 3000, labels={"app": "db"}).node("n2"), ["w", "i"]),
    ("the evict filter applies (DaemonSet, bare pods)",
     {}, Cluster().node("n1", system=1000).pod("ds", "n1", 3000, owner=("DaemonSet", "d"))
     .pod("bare", "n1", 3000, owner=None).pod("rs", "n1", 100).node("n2"), ["rs"]),
    ("an unschedulable hot node is a source",
     {}, Cluster().node("n1", system=6000, unschedulable=True).pod("a", "n1", 1000)
     .node("n2"), ["a"]),
    ("an unschedulable idle node is no target",
     {}, Cluster().node("n1", system=6000).pod("a", "n1", 1000).node("n2", unschedulable=True)
     .node("n3", system=4000), []),
    ("a hot node's pods fit only where the node selector allows",
     {}, Cluster().node("n1", system=4000)
     .pod("a", "n1", 1000, spec={"nodeSelector": {"disk": "ssd"}})
     .pod("b", "n1", 1000).node("n2").node("n3", system=1000, labels={"disk": "ssd"}), ["a"]),
    ("targets' taints are respected",
     {}, Cluster().node("n1", system=5000).pod("a", "n1", 1000)
     .node("n2", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]), []),
    ("requests must fit the target, pods sent there included",
     {}, Cluster().node("n1", system=5000)
     .pods("a b", "n1", 200, cpu="3").node("n2").pod("big", "n2", 0, cpu="6"), ["a"]),
    # nodeFit off: no per-target check; the aggregate room (2100m) allows one 3000m pod.
    ("nodeFit false uses only the aggregate room",
     {"nodeFit": False}, Cluster().node("n1", system=1000).pods("a b", "n1", 3000)
     .node("n2", system=2900), ["a"]),
    ("nodeFit true finds no room for it",
     {}, Cluster().node("n1", system=1000).pods("a b", "n1", 3000)
     .node("n2", system=2900), []),
    # a pod without podsMetric: never moved with nodeFit; without, it is sorted last and its
    # eviction frees nothing in the bookkeeping.
    ("pods without a metric stay with nodeFit",
     {}, Cluster().node("n1", system=5500).pod("m", "n1", 0, metric=False).node("n2"), []),
    ("pods without a metric go last without nodeFit",
     {"nodeFit": False}, Cluster().node("n1", system=6000).pod("m", "n1", 0, metric=False)
     .pod("a", "n1", 500).node("n2"), ["a", "m"]),
    ("numberOfNodes: not more underutilized nodes than that",
     {"numberOfNodes": 1}, Cluster().node("n1", system=8000).pod("a", "n1", 1000).node("n2"),
     []),
    ("numberOfNodes: more underutilized nodes than that",
     {"numberOfNodes": 1}, Cluster().node("n1", system=8000).pod("a", "n1", 1000).node("n2")
     .node("n3"), ["a"]),
    ("no underutilized node", {}, Cluster().node("n1", system=8000).pod("a", "n1", 1000)
     .node("n2", system=4000), []),
    ("paused", {"paused": True}, Cluster().node("n1", system=8000).pod("a", "n1", 1000)
     .node("n2"), []),
    ("memory is always tracked: a node above 100% memory is hot",
     {"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 50}},
     Cluster().node("n1", system_memory="101Gi").pod("a", "n1", 0, use_memory="1Gi")
     .node("n2"),
     ["a"]),
    # thresholds on the pod count: 8 of 10 pods > 50%; pods rank by creation (newer first)
    ("pods thresholds",
     {"lowThresholds": {"pods": 30}, "highThresholds": {"pods": 50}},
     Cluster().node("n1", pods="10")
     .pod("p1", "n1", 10, created="2026-11-01T00:00:00Z")
     .pod("p2", "n1", 10, created="2026-11-02T00:00:00Z")
     .pod("p3", "n1", 10, created="2026-11-03T00:00:00Z")
     .pod("p4", "n1", 10, created="2026-11-04T00:00:00Z")
     .pods("q1 q2 q3 q4", "n1", 10, created="2026-10-01T00:00:00Z")
     .node("n2", pods="10"), ["p4", "p3", "p2"]),
]


@pytest.mark.parametrize(("raw", "cluster", "evicted"), [s[1:] for s in SCENARIOS],
                         ids=[s[0] for s in SCENARIOS])
def test_hotspot_scenarios(raw: dict[str, Any], cluster: Cluster, evicted: list[str]) -> None:
    assert once({**BASE, **raw}, cluster) == evicted


def test_each_pod_lands_on_the_target_with_most_room() -> None:
    run = start(BASE, Cluster().node("n1", system=1000).pods("a b c d e f", "n1", 1500)
                .node("n2", system=2000).node("n3", system=2500))
    assert run.cycle() == ["a", "b", "c"]
    assert [r.rsplit("; ", 1)[1] for r in run.reasons()] == [
        "fits now on n2", "fits now on n3", "fits now on n2"]
    assert run.kept("d") == ["no target node can take it: n3: cpu would reach 55.00% > "
                             "50.00%; n2: cpu would reach 65.00% > 50.00%"]
    assert run.notes("n1") == [
        "node n1 is hot (cpu 55.00% > 50.00%) after 3 eviction(s): no target node can take the "
        "remaining pods; first: default/d: no target node can take it: n3: cpu would reach "
        "55.00% > 50.00%; n2: cpu would reach 65.00% > 50.00%"]


def test_eviction_reason_names_every_resource_over() -> None:
    run = start(BASE, Cluster().node("n1", system=7000, system_memory="60Gi")
                .pod("a", "n1", 3000, use_memory="10Gi").node("n2"))
    assert run.cycle() == ["a"]
    assert run.reasons() == [
        "node is overutilized, node cpu usage(100.00%)>threshold(50.00%), node memory "
        "usage(70.00%)>threshold(50.00%); fits now on n2"]


def test_a_hot_node_whose_pods_fit_nowhere_says_why() -> None:
    run = start(BASE, Cluster().node("n1", system=4000).pods("a b", "n1", 4000)
                .node("n2", system=2000))
    assert run.cycle() == []
    why = "no target node can take it: n2: cpu would reach 60.00% > 50.00%"
    assert run.kept("a") == [why]
    assert run.kept("b") == [why]
    assert run.notes("n1") == [
        f"node n1 is hot (cpu 120.00% > 50.00%) but nothing was evicted: no target node can "
        f"take the remaining pods; first: default/a: {why}"]


def test_a_hot_node_without_evictable_pods_says_so() -> None:
    run = start({**BASE, "evictableNamespaces": {"exclude": ["kube-system"]}},
                Cluster().node("n1", system=5000).pod("k", "n1", 3000, namespace="kube-system")
                .pod("m", "n1", 100, metric=False).node("n2"))
    assert run.cycle() == []
    assert run.kept("k") == ["namespace kube-system is not evictable (evictableNamespaces)"]
    assert run.kept("m") == ["NodeMetric n1 reports no usage for it: nodeFit cannot tell "
                             "whether a target has room"]
    assert run.notes("n1") == [
        "node n1 is hot (cpu 80.00% > 50.00%) but none of its 2 pod(s) may be evicted (see the "
        "pods' reasons)"]


def test_targets_room_used_up_is_a_reason() -> None:
    # nodeFit off: the aggregate room (2000m) is gone after one pod.
    run = start({**BASE, "nodeFit": False},
                Cluster().node("n1", system=4000).pods("a b c", "n1", 2000)
                .node("n2", system=3000))
    assert run.cycle() == ["a"]
    assert run.notes("n1") == [
        "node n1 is hot (cpu 80.00% > 50.00%) after 1 eviction(s): the underutilized nodes "
        "have no room left under their high thresholds for cpu"]


def test_no_underutilized_node_is_a_reason() -> None:
    run = start(BASE, Cluster().node("n1", system=8000).pod("a", "n1", 1000)
                .node("n2", system=6000))
    assert run.cycle() == []
    assert run.notes() == [
        f"node {n} is hot (cpu {pct} > 50.00%) but no node of pool __default_node_pool__ is "
        f"under its lowThresholds: nowhere to move pods to"
        for n, pct in (("n1", "90.00%"), ("n2", "60.00%"))]


def test_a_middle_node_counts_as_prod_low_but_takes_no_pods() -> None:
    # Without prod thresholds a node between low and high is prod-low (Koordinator #2836): the
    # pool goes on, but the node-level pass has no target.
    run = start(BASE, Cluster().node("n1", system=8000).pod("a", "n1", 1000)
                .node("n2", system=4000))
    assert run.cycle() == []
    assert run.notes("n1") == [
        "node n1 is hot (cpu 90.00% > 50.00%) but pool __default_node_pool__ has no "
        "underutilized node to take its pods"]


def test_dry_run_evicts_nothing_but_plans_as_if() -> None:
    run = start({**BASE, "dryRun": True}, Cluster().node("n1", system=1000)
                .pods("a b c d e f", "n1", 1000).node("n2", system=1000))
    assert run.cycle() == []
    assert run.kept("a") == [
        "dryRun: would be evicted: node is overutilized, node cpu usage(70.00%)>threshold(50.00%)"
        "; fits now on n2"]
    assert run.kept("b") == [
        "dryRun: would be evicted: node is overutilized, node cpu usage(60.00%)>threshold(50.00%)"
        "; fits now on n2"]
    assert run.kept("c") == []  # the planned usage fell to 50%: done


def test_pdb_refusal_moves_on_without_bookkeeping() -> None:
    pdb = decode("PodDisruptionBudget", {
        "metadata": {"name": "a", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "maxUnavailable": 0}})
    run = start(BASE, Cluster().node("n1", system=2000).pod("a", "n1", 2000, labels={"app": "a"})
                .pods("b c", "n1", 1500).node("n2").add(pdb))
    assert run.cycle() == ["b", "c"]
    assert [d.pod for d in run.handle.log.decisions if d.outcome == "pdb-blocked"] == ["a"]


@pytest.mark.parametrize(("limits", "evicted"), [
    (Limits(per_node=1), ["h1", "g1"]),
    (Limits(total=1), ["h1"]),
    (Limits(per_namespace=1), ["h1", "g2"]),
])
def test_global_limits(limits: Limits, evicted: list[str]) -> None:
    # n1 (90%) is hotter than n3 (70%), so it is drained first.
    cluster = (Cluster().node("n1", system=6000).pods("h1 h2", "n1", 1500)
               .node("n3", system=4000).pod("g1", "n3", 1500).pod("g2", "n3", 1500,
                                                                   namespace="other")
               .node("n2"))
    assert once(BASE, cluster, limits) == evicted


@pytest.mark.parametrize(("weights", "evicted"), [
    # default weights: n2 (cpu 60%, memory 55%) scores 575 > n1 (cpu 90%, memory 10%) 500
    (None, ["b"]),
    ({"cpu": 10, "memory": 1}, ["a"]),
])
def test_hot_nodes_are_drained_by_weighted_score(weights: dict[str, int] | None,
                                                 evicted: list[str]) -> None:
    raw = {"lowThresholds": {"cpu": 30, "memory": 30}, "highThresholds": {"cpu": 50, "memory": 60},
           "anomalyCondition": BYPASS}
    if weights:
        raw["resourceWeights"] = weights
    cluster = (Cluster().node("n1", system=8000, system_memory="10Gi").pod("a", "n1", 1000)
               .node("n2", system=5000, system_memory="55Gi").pod("b", "n2", 1000)
               .node("n3"))
    assert once(raw, cluster, Limits(total=1)) == evicted


# -- prod thresholds ---------------------------------------------------------------------------

PROD = {"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 80},
        "prodLowThresholds": {"cpu": 10}, "prodHighThresholds": {"cpu": 30},
        "anomalyCondition": BYPASS}


def test_prod_high_node_gives_up_prod_pods_only() -> None:
    # n1: 55% overall (normal) but 35% prod (> 30%). Excess prod 500m: pb (1500m) scores
    # closer than pa (2000m). The batch pod is not a candidate.
    run = start(PROD, Cluster().node("n1", system=500).pod("pa", "n1", 2000)
                .pod("pb", "n1", 1500).pod("bx", "n1", 1500, spec=BEST_EFFORT)
                .node("n2", system=500).pod("small", "n2", 200))
    assert run.cycle() == ["pb"]
    assert run.reasons() == [
        "node is overutilized, prod cpu usage(35.00%)>threshold(30.00%); fits now on n2"]


def test_prod_pass_respects_the_targets_node_level_threshold() -> None:
    # n3 is prod-low (0% prod) but at 75% overall: a 2000m prod pod would take it past 80%.
    run = start(PROD, Cluster().node("n1", system=500).pods("pa pb", "n1", 2000)
                .node("n3", system=7500))
    assert run.cycle() == []
    assert run.kept("pa") == ["no target node can take it: n3: cpu would reach 95.00% > 80.00%"]


def test_prod_and_node_passes_share_both_low_targets() -> None:
    # n1 is node-hot (90%), n4 prod-hot (35% prod, 40% overall); n2 is the only both-low node
    # and can take 2000m under its prod high threshold (30%): the node-level pass sends
    # a (1500m, prod) there first, leaving no prod room for n4's pods.
    run = start(PROD, Cluster().node("n1", system=7500).pod("a", "n1", 1500)
                .node("n4", system=500).pods("p q", "n4", 1750)
                .node("n2", system=100).pod("s", "n2", 900))
    assert run.cycle() == ["a"]
    why = "no target node can take it: n2: prod cpu would reach 41.50% > 30.00%"
    assert run.kept("p") == run.kept("q") == [why]


# -- node pools ----------------------------------------------------------------------------------

GENERAL = {"matchLabels": {"pool": "general"}}
GPU = {"matchLabels": {"pool": "gpu"}}


def pools_cluster() -> Cluster:
    return (Cluster()
            .node("c1", system=5000, labels={"pool": "general"}).pod("c1-a", "c1", 1000)
            .node("c2", labels={"pool": "general"})
            .node("g1", system=5000, labels={"pool": "gpu"}).pod("g1-a", "g1", 1000)
            .node("g2", labels={"pool": "gpu"}))


@pytest.mark.parametrize(("raw", "evicted"), [
    # each pool with its own selector and thresholds: g1 (60%) is fine under the gpu pool's 70%
    ({"nodeSelector": GENERAL, **BASE,
      "nodePools": [{"name": "gpu", "nodeSelector": GPU, "lowThresholds": {"cpu": 30},
                     "highThresholds": {"cpu": 70}}]}, ["c1-a"]),
    # without a top-level selector the default pool covers every node, gpu nodes included
    ({**BASE, "nodePools": [{"name": "gpu", "nodeSelector": GPU, "lowThresholds": {"cpu": 30},
                             "highThresholds": {"cpu": 70}}]}, ["c1-a", "g1-a"]),
    # a default pool without thresholds never finds a hot node; the pools do the work
    ({"anomalyCondition": BYPASS,
      "nodePools": [{"name": "general", "nodeSelector": GENERAL, "lowThresholds": {"cpu": 30},
                     "highThresholds": {"cpu": 50}},
                    {"name": "gpu", "nodeSelector": GPU, "lowThresholds": {"cpu": 30},
                     "highThresholds": {"cpu": 55}}]}, ["c1-a", "g1-a"]),
    # a pool's own anomaly condition: the gpu pool acts at once, the general pool waits
    ({"nodeSelector": GENERAL, "lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 50},
      "nodePools": [{"name": "gpu", "nodeSelector": GPU, "anomalyCondition": BYPASS}]},
     ["g1-a"]),
], ids=["own thresholds", "default pool covers all", "pools only", "own anomaly condition"])
def test_node_pools(raw: dict[str, Any], evicted: list[str]) -> None:
    assert once(raw, pools_cluster()) == evicted


def test_a_node_handled_as_source_is_left_out_of_later_pools() -> None:
    # The default pool drains n1 to 50%; the "strict" pool (40%) would take another pod, but
    # n1 was a source already. Koordinator skips processed nodes only in pools with a selector;
    # the "all" pool has none.
    raw = {**BASE, "nodePools": [{"name": "all", "lowThresholds": {"cpu": 30},
                                  "highThresholds": {"cpu": 40}}]}
    cluster = Cluster().node("n1", system=2000).pods("a b c d e", "n1", 1000).node("n2")
    assert once(raw, cluster) == ["a", "b"]


# -- bad metrics ---------------------------------------------------------------------------------


def test_stale_or_missing_metrics_leave_nodes_out() -> None:
    run = start(BASE, Cluster().node("n1", system=8000, updated="2026-11-22T11:00:00Z")
                .pod("a", "n1", 1000).node("n2", metric=False).node("n3", system=4000))
    assert run.cycle() == []
    assert run.notes() == [
        "NodeMetric n1 expired: last updated 1h0m0s ago, nodeMetricExpirationSeconds is 180",
        "node n2 has no NodeMetric: it is neither a source nor a target",
        # n3 alone was measured, and it is not hot: the plugin says why it did nothing.
        "All nodes are under target utilization, nothing to do here (node pool "
        "__default_node_pool__)"]


def test_corrupt_metric_is_a_reason_not_a_crash() -> None:
    cluster = Cluster().node("n1", system=8000).pod("a", "n1", 1000).node("n2")
    cluster.metrics["n2"]["system"] = {"cpu": "-1"}
    run = start(BASE, cluster)
    assert run.cycle() == []
    assert run.notes("n2") == ["NodeMetric n2: systemUsage cpu is negative (-1)"]
    assert "nowhere to move pods to" in run.notes("n1")[0]


def test_usage_of_pods_gone_is_not_counted() -> None:
    # n1's metric still lists two evicted pods: without them it is at 40%, not hot.
    cluster = Cluster().node("n1", system=2000).pod("a", "n1", 2000).node("n2")
    cluster.metrics["n1"]["pods"] += [
        {"namespace": "default", "name": "gone-1", "podUsage": {"resources": {"cpu": "3"}}},
        {"namespace": "default", "name": "gone-2", "podUsage": {"resources": {"cpu": "3"}}}]
    run = start(BASE, cluster)
    assert run.cycle() == []
    assert run.notes("n1") == [
        "NodeMetric n1 reports 2 pod(s) no longer running on the node (default/gone-1, "
        "default/gone-2): their usage is not counted"]


# -- the anomaly detector across cycles -----------------------------------------------------------


def hot_cluster(pods: int = 12) -> Cluster:
    """n1 at 10% + pods x 800m; n2 idle."""
    return (Cluster().node("n1", system=1000).pods(" ".join(f"p{i:02d}" for i in range(pods)),
                                                    "n1", 800).node("n2", system=1000))


def condition(abnormal: int, normal: int = 3, timeout: str | None = None) -> dict[str, Any]:
    cond: dict[str, Any] = {"consecutiveAbnormalities": abnormal,
                            "consecutiveNormalities": normal}
    if timeout is not None:
        cond["timeout"] = timeout
    return {**BASE, "anomalyCondition": cond}


@pytest.mark.parametrize(("raw", "first_cycle"), [
    ({**BASE, "anomalyCondition": None}, 6),  # the default: more than 5 consecutive passes
    (condition(1), 1),  # bypass
    (condition(2), 3),  # strictly more than 2
    (condition(3), 4),
])
def test_evictions_start_after_more_than_consecutive_abnormalities(raw: dict[str, Any],
                                                                   first_cycle: int) -> None:
    raw = {k: v for k, v in raw.items() if v is not None}
    run = start(raw, hot_cluster(), Limits(per_node=1))
    evicted = run.cycles(first_cycle + 1)
    assert min(evicted) == first_cycle
    waiting = [n for n in run.notes("n1") if "consecutive pass" in n]
    assert len(waiting) == first_cycle - 1
    if waiting:
        assert waiting[0] == (
            "node n1 is hot (cpu 106.00% > 50.00%) on 1 consecutive pass(es); LowNodeLoad acts "
            f"after more than {first_cycle - 1} (anomalyCondition.consecutiveAbnormalities)")


def test_anomaly_lasts_its_timeout_then_needs_a_new_streak() -> None:
    # consecutiveAbnormalities 2, timeout 30s, a pass every 10s, one eviction per pass: abnormal
    # from pass 3 (at +20s, until +50s): passes 3-6 evict; at +60s the anomaly has expired and
    # the counters start again: pass 9 is the next.
    run = start(condition(2, 1, "30s"), hot_cluster(), Limits(per_node=1))
    assert sorted(run.cycles(10, advance=10)) == [3, 4, 5, 6, 9, 10]


def test_mark_normal_after_balancing_keeps_anomaly_while_hot() -> None:
    # consecutiveNormalities 1: one Mark(true) per pass never exceeds it while the node stays
    # hot (every pass also marks it abnormal), so it stays abnormal (the clock does not move).
    run = start(condition(2, 1), hot_cluster(), Limits(per_node=1))
    assert sorted(run.cycles(6)) == [3, 4, 5, 6]
    detector = run.plugin.node_detectors.get("n1", run.handle.now)
    assert detector is not None and detector.normalities == 1


def test_a_node_healed_by_eviction_starts_over() -> None:
    # Evicting one 500m pod heals n1 (5400m, high 5000m): its detector is reset. When the pod
    # comes back (listed after b now; they tie), a new streak of three hot passes is needed.
    run = start(condition(2), Cluster().node("n1", system=4400).pods("a b", "n1", 500)
                .node("n2", system=1000))
    assert run.cycles(3) == {3: ["a"]}
    run.snap.add_pod(pod("a", "n1"))  # rescheduled back
    assert run.cycles(3) == {3: ["b"]}


def test_counts_survive_a_pass_in_the_middle_band() -> None:
    # Reset() of an OK detector keeps its counters and a node in the middle band is not
    # touched at all: hot, normal, hot, hot is 3 consecutive abnormal observations.
    run = start(condition(2), Cluster().node("n1", system=3000).pods("a b c", "n1", 1000)
                .node("n2", system=1000))
    c = run.snap.pods["default/c"]
    assert run.cycle() == []
    run.snap.remove_pod(c)  # 50%: not hot
    assert run.cycle() == []
    run.snap.add_pod(c)
    assert run.cycle() == []
    assert run.cycle() == ["a"]


def test_detector_cache_timeout_shorter_than_the_interval_never_trips() -> None:
    # Koordinator issue #2626: the detector expires between passes.
    raw = {**condition(2), "detectorCacheTimeout": "30s", "nodeMetricExpirationSeconds": 3600}
    run = start(raw, hot_cluster(), Limits(per_node=1))
    assert run.cycles(6, advance=60) == {}
    raw["detectorCacheTimeout"] = "5m"
    run = start(raw, hot_cluster(), Limits(per_node=1))
    assert list(run.cycles(4, advance=60)) == [3, 4]


def test_a_node_is_marked_once_per_cycle_across_pools() -> None:
    # The default pool finds no low node (n2 at 20% > 10%) and stops after marking n1; the
    # second pool marks it again in the same cycle. Counted once, n1 trips on pass 3.
    # n2 (20%, all of it prod) is neither low nor prod-low in the default pool.
    raw = {"lowThresholds": {"cpu": 10}, "highThresholds": {"cpu": 50},
           "prodLowThresholds": {"cpu": 1}, "prodHighThresholds": {"cpu": 50},
           "anomalyCondition": {"consecutiveAbnormalities": 2, "consecutiveNormalities": 1},
           "nodePools": [{"name": "wide", "nodeSelector": {"matchLabels": {"zone": "a"}},
                          "lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 50}}]}
    cluster = (Cluster().node("n1", system=5000, labels={"zone": "a"}).pod("a", "n1", 1000)
               .node("n2", labels={"zone": "a"}).pod("s", "n2", 2000))
    run = start(raw, cluster)
    assert run.cycles(3) == {3: ["a"]}


def test_prod_nodes_have_their_own_detectors() -> None:
    raw = {**PROD, "anomalyCondition": {"consecutiveAbnormalities": 2,
                                        "consecutiveNormalities": 1}}
    run = start(raw, Cluster().node("n1", system=500).pod("pa", "n1", 2000)
                .pod("pb", "n1", 1500).node("n2", system=500))
    assert run.cycles(3) == {3: ["pb"]}
    assert run.plugin.prod_detectors.get("n1", run.handle.now) is not None
    assert run.plugin.node_detectors.get("n1", run.handle.now) is None


# -- the ACK walkthrough example -------------------------------------------------------------------


def test_example_evicts_the_stress_pod_on_the_sixth_pass() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")],
                            NOW, 6, False)
    assert [(d.cycle, d.namespace, d.pod, d.node) for d in result.evictions] == [
        (6, "default", "stress-demo-588f9646cf-s7x2k", "cn-beijing.10.0.0.53")]
    assert result.evictions[0].reason == (
        "node is overutilized, node cpu usage(68.53%)>threshold(50.00%); "
        "fits now on cn-beijing.10.0.0.215")
    waiting = [n.text for n in result.log.notes
               if n.plugin == "LowNodeLoad" and "consecutive pass" in n.text]
    assert len(waiting) == 5
    assert waiting[-1].startswith("node cn-beijing.10.0.0.53 is hot (cpu 68.53% > 50.00%) on 5 "
                                  "consecutive pass(es)")


def test_example_with_five_cycles_evicts_nothing() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")],
                            NOW, 5, False)
    assert result.evictions == []


def test_nodemetrics_without_system_usage_through_the_command_line(tmp_path: Path) -> None:
    """NodeMetrics without systemUsage (older koordlets, Koordinator's own tests): read as zero,
    the hot node is still a source and its pod is evicted, with a note saying so."""
    import subprocess
    import sys

    text = (EXAMPLE / "cluster.yaml").read_text()
    stripped = "\n".join(line for line in text.splitlines() if "systemUsage: {" not in line)
    assert stripped.count("kind: NodeMetric") == 3 and "systemUsage: {" not in stripped
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(stripped)
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--config", str(EXAMPLE / "policy.yaml"),
         "--snapshot", str(cluster), "--now", "2026-11-22T12:00:00Z", "--cycles", "6",
         "--output", "json"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [(e["cycle"], e["pod"], e["node"]) for e in out["evictions"]] == [
        (6, "stress-demo-588f9646cf-s7x2k", "cn-beijing.10.0.0.53")]
    # Without its 3171m of system usage the hot node is at 65.48% (68,100m of 104 cores).
    assert out["evictions"][0]["reason"].startswith(
        "node is overutilized, node cpu usage(65.48%)>threshold(50.00%)")
    notes = [n["note"] for n in out["notes"]]
    assert ("NodeMetric cn-beijing.10.0.0.53 has no status.nodeMetric.systemUsage: read as zero "
            "(as Koordinator does), the node's usage is its pods' alone") in notes


def test_example_through_the_command_line() -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate",
         "--config", str(EXAMPLE / "policy.yaml"), "--snapshot", str(EXAMPLE / "cluster.yaml"),
         "--now", "2026-11-22T12:00:00Z", "--cycles", "6"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line for line in lines if line.startswith("cycle ")] == [
        *(f"cycle {i}: 0 pod(s) evicted" for i in range(1, 6)), "cycle 6: 1 pod(s) evicted"]
    assert ("  evict   default/stress-demo-588f9646cf-s7x2k on cn-beijing.10.0.0.53 "
            "[koord-descheduler/LowNodeLoad]: node is overutilized, node cpu usage(68.53%)>"
            "threshold(50.00%); fits now on cn-beijing.10.0.0.215") in lines
    assert lines[-1] == "total: 1 pod(s) evicted in 6 cycle(s)"


def test_requests_of_pods_already_sent_count() -> None:
    # n2 has 4 cpu unrequested: a (3 cpu) fits, b then does not.
    run = start(BASE, Cluster().node("n1", system=5000).pods("a b", "n1", 200, cpu="3")
                .node("n2").pod("big", "n2", 0, cpu="6"))
    assert run.cycle() == ["a"]
    assert run.kept("b") == ["no target node can take it: n2: insufficient cpu with the 1 pod(s) "
                             "already sent there"]


def test_abnormal_nodes_are_marked_normal_when_a_limit_ends_the_run() -> None:
    run = start(condition(2, 1), hot_cluster(), Limits(total=1))
    assert run.cycles(3) == {3: ["p00"]}
    detector = run.plugin.node_detectors.get("n1", run.handle.now)
    assert detector is not None and detector.normalities == 1


def test_a_detector_cache_shorter_than_the_interval_is_reported() -> None:
    from desched.framework.policy import Policy

    snap = hot_cluster().build()
    handle, _ = handle_for(snap, plugin="LowNodeLoad")
    handle.policy = Policy(path="p", format="koordinator", profiles=[],
                           descheduling_interval=60.0)
    ln_args: LowNodeLoadArgs = args(LowNodeLoadArgs, {**BASE, "detectorCacheTimeout": "30s"})
    default(ln_args)
    plugin = LowNodeLoad(ln_args, handle)
    plugin.balance(snap.ready_nodes())
    assert ("detectorCacheTimeout (30s) is shorter than deschedulingInterval (60s): the anomaly "
            "detectors expire between passes and no node is ever acted on") in [
        n.text for n in handle.log.notes]

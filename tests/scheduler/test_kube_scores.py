"""kube-default's scores against kube-scheduler v1.36's own numbers: each case is a situation
from kube-scheduler's plugin documentation and unit tables (the nodes, pods and expected scores
they state), evaluated through desched's model on a snapshot."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from builders import NOW, decode, node, pod, snapshot
from desched.model.node import ContainerImage, Node
from desched.scheduler import interpod, spread
from desched.scheduler import node_scores as ns
from desched.scheduler import scores as sc
from desched.scheduler.kube_default import KubeDefault
from desched.scheduler.profile import DEFAULT, FitScoring, Profile, ShapePoint

HOST = "kubernetes.io/hostname"


def two_containers(cpu: tuple[str, str] | None, memory: tuple[str, str] | None) -> dict[str, Any]:
    containers = []
    for i in range(2):
        requests = {}
        if cpu is not None:
            requests["cpu"] = cpu[i]
        if memory is not None:
            requests["memory"] = memory[i]
        containers.append({"name": f"c{i}", "image": "app:1",
                           "resources": {"requests": requests}})
    return {"containers": containers}


def fit(profile: Profile, subject: Any, *objects: Any) -> dict[str, int]:
    snap = snapshot(subject, *objects)
    p = snap.pods[subject.key]
    return {n.name: ns.fit_score(p, n, snap, profile) for n in snap.ready_nodes()}


def balanced(subject: Any, *objects: Any) -> dict[str, int]:
    snap = snapshot(subject, *objects)
    p = snap.pods[subject.key]
    return {n.name: ns.balanced_score(p, n, snap, DEFAULT) for n in snap.ready_nodes()}


REQUESTED = pod("p", node_name="", cpu=None, memory=None,
                spec=two_containers(("1", "2"), ("2000", "3000")))


def test_least_allocated_on_differently_sized_nodes() -> None:
    # cpu (4000-3000)*100/4000 = 25, memory 50 -> 37; the 6-cpu node 50 and 50 -> 50.
    scores = fit(DEFAULT, REQUESTED, node("node1", cpu="4", memory="10000"),
                 node("node2", cpu="6", memory="10000"))
    assert scores == {"node1": 37, "node2": 50}


def test_least_allocated_counts_defaults_for_pods_that_request_nothing() -> None:
    # Two running pods that request nothing count 100m and 200Mi each: 1 cpu and 1000Mi of
    # memory in all, with the pod's own defaults, 3 x 100m = 300m of 1 cpu -> 70, memory
    # 600Mi of 1000Mi -> 40: (70 + 40) / 2 = 55.
    bare = [pod(f"b{i}", "node1", cpu=None, memory=None) for i in range(2)]
    scores = fit(DEFAULT, pod("p", node_name="", cpu=None, memory=None),
                 node("node1", cpu="1", memory="1000Mi"), *bare)
    assert scores == {"node1": 55}


def test_most_allocated_and_requested_to_capacity_ratio() -> None:
    most = Profile(fit=FitScoring(type="MostAllocated"))
    # cpu 3000/4000 -> 75, memory 5000/10000 -> 50 -> 62; node2 cpu 50 memory 50 -> 50.
    assert fit(most, REQUESTED, node("node1", cpu="4", memory="10000"),
               node("node2", cpu="6", memory="10000")) == {"node1": 62, "node2": 50}
    # A shape that scores utilization 0 % as 10 (100) and 100 % as 0: the least-allocated
    # curve, rounded: cpu 75 % -> 25, memory 50 % -> 50 -> round(37.5) = 38.
    ratio = Profile(fit=FitScoring(type="RequestedToCapacityRatio",
                                   shape=(ShapePoint(0, 10), ShapePoint(100, 0))))
    assert fit(ratio, REQUESTED, node("node1", cpu="4", memory="10000")) == {"node1": 38}


def test_balanced_allocation_v1_36_scores_the_change_in_balance() -> None:
    # Empty nodes: node1 goes from 100 to 87 balance -> 50 + (50 - 13) / 2 = 68; node2 stays
    # perfectly balanced -> 75.
    assert balanced(REQUESTED, node("node1", cpu="4", memory="10000"),
                    node("node2", cpu="6", memory="10000")) == {"node1": 68, "node2": 75}
    # With pods already there: 85 -> 82 gives 73, 97 -> 95 gives 74.
    cpu_only = pod("e1", "node1", cpu=None, memory=None, spec=two_containers(("1", "2"), None))
    both = pod("e2", "node2", cpu=None, memory=None,
               spec=two_containers(("1", "2"), ("2000", "3000")))
    assert balanced(REQUESTED, node("node1", cpu="10", memory="20000"),
                    node("node2", cpu="10", memory="20000"), cpu_only, both) == {
        "node1": 73, "node2": 74}


def test_go_division_truncates_toward_zero() -> None:
    # A pod that unbalances an empty node fully: 50 + (50 + (50 - 100)) / 2 = 50.
    assert sc.balanced_allocation([10, 0], [0, 0], [10, 10]) == 50
    # Go's -1 / 2 is 0 (Python's -1 // 2 is -1): a balance loss of 51 points scores 50.
    assert sc.go_div(-1, 2) == 0 and sc.go_div(-7, 2) == -3 and sc.go_div(7, 2) == 3


def test_default_normalize_is_relative_to_the_maximum() -> None:
    # NodeAffinity weights 20 and 30 give 66 and 100 (not min-max's 0 and 100).
    assert sc.default_normalize({"a": 20, "b": 30}, reverse=False) == {"a": 66, "b": 100}
    # TaintToleration: 0, 1 and 2 untolerated soft taints -> 100, 50, 0.
    assert sc.default_normalize({"a": 0, "b": 1, "c": 2}, reverse=True) == {
        "a": 100, "b": 50, "c": 0}
    assert sc.default_normalize({"a": 0}, reverse=True) == {"a": 100}
    assert sc.default_normalize({"a": 0}, reverse=False) == {"a": 0}


def _spread(subject: Any, feasible: list[str], nodes: list[Node], *objects: Any,
            profile: Profile = DEFAULT) -> dict[str, int]:
    snap = snapshot(subject, *nodes, *objects)
    p = snap.pods[subject.key]
    ready = snap.ready_nodes()
    found = spread.spread_raw(p, [n for n in ready if n.name in feasible], ready, snap, profile)
    assert found is not None
    return sc.spread_normalize(*found)


FOO = {"labelSelector": {"matchLabels": {"foo": ""}}}


def spread_pod(*constraints: tuple[int, str]) -> Any:
    return pod("p", node_name="", labels={"foo": ""}, spec={"topologySpreadConstraints": [
        {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", **FOO}
        for skew, key in constraints]})


def foo_pods(layout: dict[str, int]) -> list[Any]:
    return [pod(f"{n}-{i}", n, labels={"foo": ""}) for n, count in layout.items()
            for i in range(count)]


def hosts(*names: str, zones: dict[str, str] | None = None) -> list[Node]:
    out = []
    for name in names:
        labels = {HOST: name}
        if zones and name in zones:
            labels["zone"] = zones[name]
        out.append(node(name, labels=labels))
    return out


@pytest.mark.parametrize(("skew", "layout", "expected"), [
    (1, {"node-a": 2, "node-b": 1, "node-d": 3}, [20, 60, 100, 0]),
    (2, {"node-a": 2, "node-b": 1, "node-d": 3}, [33, 66, 100, 16]),
    (3, {"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}, [44, 66, 77, 100]),
])
def test_topology_spread_on_hostname(skew: int, layout: dict[str, int],
                                     expected: list[int]) -> None:
    names = ["node-a", "node-b", "node-c", "node-d"]
    scores = _spread(spread_pod((skew, HOST)), names, hosts(*names), *foo_pods(layout))
    assert [scores[n] for n in names] == expected


def test_system_default_spreading_for_a_pod_a_service_selects() -> None:
    """No constraints of its own: the Service's selector spreads it as {hostname, 3} would;
    the nodes have no zone label, so the zone constraint adds nothing."""
    names = ["node-a", "node-b", "node-c", "node-d"]
    service = decode("Service", {"metadata": {"name": "s", "namespace": "default"},
                                 "spec": {"selector": {"foo": ""}}})
    scores = _spread(pod("p", node_name="", labels={"foo": ""}), names, hosts(*names),
                     *foo_pods({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}), service)
    assert [scores[n] for n in names] == [44, 66, 77, 100]


def test_a_pod_nothing_selects_gets_no_default_spreading() -> None:
    snap = snapshot(pod("p", node_name="", labels={"foo": ""}), *hosts("node-a"))
    p = snap.pods["default/p"]
    assert spread.spread_raw(p, snap.ready_nodes(), snap.ready_nodes(), snap, DEFAULT) is None


def test_topology_spread_over_candidates_only() -> None:
    # node-y is not feasible: its pods do not count for the hostname constraint.
    names = ["node-a", "node-b", "node-x", "node-y"]
    layout = {"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}
    scores = _spread(spread_pod((1, HOST)), names[:3], hosts(*names), *foo_pods(layout))
    assert scores == {"node-a": 33, "node-b": 83, "node-x": 100}
    # A candidate without the topology key is ignored (0) and shrinks the domain count.
    nodes = [*hosts("node-a", "node-x", "node-y"), node("node-b", labels={"n": "node-b"})]
    scores = _spread(spread_pod((1, HOST)), ["node-a", "node-b", "node-x"], nodes,
                     *foo_pods(layout))
    assert scores == {"node-a": 16, "node-b": 0, "node-x": 100}


def test_topology_spread_on_zones_counts_every_node_of_the_zone() -> None:
    zones = {"node-a": "zone1", "node-b": "zone1", "node-x": "zone2", "node-y": "zone2"}
    layout = {"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}
    nodes = hosts("node-a", "node-b", "node-x", "node-y", zones=zones)
    scores = _spread(spread_pod((1, "zone")), ["node-a", "node-b", "node-x"], nodes,
                     *foo_pods(layout))
    assert scores == {"node-a": 75, "node-b": 75, "node-x": 100}
    layout = {"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}
    scores = _spread(spread_pod((1, "zone"), (1, HOST)), ["node-a", "node-x"], nodes,
                     *foo_pods(layout))
    assert scores == {"node-a": 100, "node-x": 63}


def test_image_locality() -> None:
    # Both images (40 MB and 300 MB) on node1, the only node of two that has them:
    # 100 * ((40M + 300M) / 2 - 23M) / (2000M - 23M) = 7; node2 has none: 0.
    mb = 1024 * 1024
    n1 = node("node1")
    n1 = msgspec.structs.replace(n1, status=msgspec.structs.replace(n1.status, images=(
        ContainerImage(names=("gcr.io/40:latest",), size_bytes=40 * mb),
        ContainerImage(names=("gcr.io/300:latest",), size_bytes=300 * mb))))
    subject = pod("p", node_name="", spec={"containers": [
        {"name": "a", "image": "gcr.io/40"}, {"name": "b", "image": "gcr.io/300"}]})
    snap = snapshot(subject, n1, node("node2"))
    assert ns.image_scores(snap.pods["default/p"], snap.ready_nodes(), snap) == {"node1": 7}


def test_inter_pod_affinity_counts_running_pods_preferred_terms() -> None:
    """A running pod's preferred anti-affinity toward the pod pushes it away from its zone;
    its required affinity toward the pod pulls (hardPodAffinityWeight 1)."""
    zones = {"n1": "za", "n2": "zb"}
    nodes = hosts("n1", "n2", zones=zones)
    away = {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "podAffinityTerm": {"topologyKey": "zone",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}}]}}}
    holder = pod("holder", "n1", labels={"app": "cache"}, spec=away)
    subject = pod("p", node_name="", labels={"app": "web"})
    snap = snapshot(subject, *nodes, holder)
    p = snap.pods["default/p"]
    topology = interpod.affinity_raw(p, snap, DEFAULT)
    assert topology == {"zone": {"za": -50}}
    raw = {n.name: interpod.affinity_score(topology, n) for n in snap.ready_nodes()}
    assert sc.min_max_normalize(raw) == {"n1": 0, "n2": 100}
    assert KubeDefault().place(p, snap.ready_nodes(), snap, NOW).node == "n2"


def test_the_issue_s_empty_zone_pulls_replacements() -> None:
    """Two 8-cpu nodes in zones za and zb run a ReplicaSet's pods; an empty 4-cpu node in zone
    zc and an empty 16-cpu node in za. By requests alone the 16-cpu node wins; system default
    spreading (zone maxSkew 5, weighted by log(domains + 2)) sends the pod to zone zc."""
    zones = {"a1": "za", "b1": "zb", "c1": "zc", "big": "za"}
    nodes = [node(n, cpu=cpu, memory="32Gi", labels={HOST: n, "topology.kubernetes.io/zone": z})
             for n, z, cpu in (("a1", "za", "8"), ("b1", "zb", "8"), ("c1", "zc", "4"),
                               ("big", "za", "16"))]
    assert {n.name for n in nodes} == set(zones)
    rs = decode("ReplicaSet", {"metadata": {"name": "rs-1", "namespace": "default"},
                               "spec": {"selector": {"matchLabels": {"app": "web"}}}})
    running = [pod(f"w{i}", "a1" if i % 2 else "b1", cpu="500m", labels={"app": "web"})
               for i in range(12)]
    subject = pod("new", node_name="", cpu="500m", labels={"app": "web"})
    snap = snapshot(subject, *nodes, *running, rs)
    p = snap.pods["default/new"]
    assert KubeDefault().place(p, snap.ready_nodes(), snap, NOW).node == "c1"
    # Without the ReplicaSet nothing selects the pod: requests decide, and the big node wins.
    bare = snapshot(subject, *nodes, *running)
    assert KubeDefault().place(bare.pods["default/new"], bare.ready_nodes(), bare,
                               NOW).node == "big"


def test_filters_as_kube_scheduler_applies_them() -> None:
    """NodeUnschedulable lets a pod onto a cordoned node only if it tolerates the
    unschedulable NoSchedule taint; NodeResourcesFit checks only what a pod requests; a spread
    constraint with matchLabelKeys but no labelSelector selects nothing."""
    cordoned = node("c1", unschedulable=True, labels={HOST: "c1"})
    for tolerations, fits in (
            ([{"operator": "Exists", "effect": "NoExecute"}], False),
            ([{"key": "node.kubernetes.io/unschedulable", "operator": "Equal", "value": "x"}],
             False),
            ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
               "effect": "NoSchedule"}], True),
            ([{"operator": "Exists"}], True)):
        subject = pod("p", node_name="", spec={"tolerations": tolerations})
        snap = snapshot(subject, cordoned)
        placed = KubeDefault().place(snap.pods["default/p"], snap.ready_nodes(), snap, NOW)
        assert (placed.node == "c1") is fits, tolerations
    # An overcommitted node (by cpu) still takes a pod that requests no cpu.
    over = node("o1", cpu="1")
    snap = snapshot(pod("p", node_name="", cpu=None, memory="1Mi"), over,
                    pod("big", "o1", cpu="2", owner=None))
    assert KubeDefault().place(snap.pods["default/p"], snap.ready_nodes(), snap,
                               NOW).node == "o1"
    # matchLabelKeys without a labelSelector: the constraint counts nothing, refuses nothing.
    zones = {"a1": "za", "b1": "zb"}
    hard = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                           "whenUnsatisfiable": "DoNotSchedule",
                                           "matchLabelKeys": ["app"]}]}
    subject = pod("p", node_name="", labels={"app": "web"}, spec=hard)
    crowd = [pod(f"w{i}", "a1", labels={"app": "web"}) for i in range(2)]
    snap = snapshot(subject, *hosts("a1", "b1", zones=zones), *crowd)
    feasible, _ = KubeDefault().feasible(snap.pods["default/p"], snap.ready_nodes(), snap)
    assert sorted(n.name for n in feasible) == ["a1", "b1"]

"""NodeFit at scale: candidate nodes come from a label index and answers (including "fits
nowhere") are remembered per placement signature, so the number of node checks grows with the
pods, not with pods times nodes; and the remembered answers always equal a plain search."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import desched.predicates.nodefit as nodefit
from builders import node, pod, snapshot
from desched.model.pod import Pod
from desched.predicates.nodefit import (
    affinity_space,
    node_fit,
    pod_fits_any_node,
    pod_fits_any_other_node,
)
from desched.snapshot.cluster import ClusterSnapshot

POOL = "node.example.com/pool"


def pinned_pod(name: str, node_name: str, pool: int, how: str, cpu: str) -> Pod:
    spec: dict[str, Any] = {}
    if how == "selector":
        spec["nodeSelector"] = {POOL: f"p{pool}"}
    elif how == "affinity":
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": POOL, "operator": "In", "values": [f"p{pool}"]},
                {"key": "kubernetes.io/os", "operator": "Exists"}]}]}}}
    elif how == "daemonset":
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}}
        spec["tolerations"] = [{"operator": "Exists"}]
    return pod(name, node_name, cpu=cpu, memory=None, spec=spec,
               owner=("ReplicaSet", f"w{pool}-{how}"), labels={"app": f"w{pool}"})


def full_pools(pools: int, per_pool: int = 10, pods_per_node: int = 8) -> ClusterSnapshot:
    """Every workload pinned to its pool, every node full: no pod fits another node."""
    objects: list[Any] = []
    for p in range(pools):
        for n in range(per_pool):
            name = f"p{p}-n{n}"
            objects.append(node(name, cpu="8", labels={
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", POOL: f"p{p}"}))
            for i in range(pods_per_node):
                how = ("selector", "affinity", "daemonset")[i % 3]
                objects.append(pinned_pod(f"{name}-{i}", name, p, how, "1"))
    return snapshot(*objects)


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """NodeFit's node checks from now on, counted in the returned one-item list."""
    calls = [0]
    real = nodefit.fit_prepared

    def counted(*a: Any) -> str | None:
        calls[0] += 1
        return real(*a)

    monkeypatch.setattr(nodefit, "fit_prepared", counted)
    return calls


def count_checks(snap: ClusterSnapshot,
                 monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, int]:
    """(node checks, pods fitting elsewhere before and after a few evictions) when every pod
    asks, as DefaultEvictor does."""
    calls = counting(monkeypatch)
    nodes = snap.ready_nodes()
    before = sum(pod_fits_any_other_node(p, nodes, snap) for p in list(snap.pods.values()))
    # A second pass after evictions from a few nodes: only those nodes are looked at again.
    for p in list(snap.pods.values())[::50]:
        snap.remove_pod(p)
    after = sum(pod_fits_any_other_node(p, nodes, snap) for p in list(snap.pods.values()))
    return calls[0], before, after


def test_node_checks_do_not_grow_with_nodes_times_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    small_calls, small_before, small_after = count_checks(full_pools(10), monkeypatch)
    big_calls, big_before, big_after = count_checks(full_pools(40), monkeypatch)
    assert small_before == big_before == 0  # full pools: nothing fits elsewhere
    assert small_after > 0 and big_after > 0  # until evictions free room
    pods_small, pods_big = 10 * 10 * 8, 40 * 10 * 8
    # Pods x nodes would be 16 times more checks for 4 times the cluster; here about 4 times.
    assert big_calls <= 5 * small_calls
    # And per pod a bounded number of checks, well below the pool size, let alone the cluster.
    assert big_calls <= 3 * pods_big and small_calls <= 3 * pods_small


def test_pod_fits_any_node_tries_only_the_nodes_its_affinity_can_match(
        monkeypatch: pytest.MonkeyPatch) -> None:
    snap = full_pools(30)
    calls = counting(monkeypatch)
    target = snap.pods["default/p7-n3-0"]  # selector-pinned to pool p7 (10 nodes)
    assert pod_fits_any_node(target, snap.ready_nodes(), snap)
    assert calls[0] <= 10


# -- the remembered answers equal a plain search ---------------------------------------------------

LABELS = {"zone": ["a", "b"], "pool": ["x", "y", "z"], "disk": ["ssd"]}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterSnapshot, list[str]]:
    objects: list[Any] = []
    node_names = [f"n{i}" for i in range(draw(st.integers(2, 7)))]
    for name in node_names:
        labels = {"kubernetes.io/hostname": name}
        for key, values in LABELS.items():
            value = draw(st.sampled_from([None, *values]))
            if value is not None:
                labels[key] = value
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] \
            if draw(st.booleans()) and draw(st.booleans()) else []
        objects.append(node(name, cpu=draw(st.sampled_from(["1", "2", "3"])), labels=labels,
                            taints=taints, unschedulable=draw(st.integers(0, 5)) == 0))
    for i in range(draw(st.integers(1, 14))):
        spec: dict[str, Any] = {}
        choice = draw(st.integers(0, 6))
        if choice == 1:
            spec["nodeSelector"] = {"pool": draw(st.sampled_from(LABELS["pool"]))}
        elif choice == 2:
            spec["affinity"] = {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In",
                                           "values": draw(st.lists(st.sampled_from(
                                               LABELS["pool"]), min_size=1, max_size=2))}]},
                    {"matchExpressions": [{"key": draw(st.sampled_from(list(LABELS))),
                                           "operator": draw(st.sampled_from(
                                               ["Exists", "DoesNotExist"]))}]}]}}}
        elif choice == 3:
            spec["affinity"] = {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In",
                                      "values": [draw(st.sampled_from(node_names))]}]}]}}}
        elif choice in (4, 6):
            spec["affinity"] = {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": "a"}},
                    "topologyKey": "kubernetes.io/hostname"}]}}
            if choice == 6:  # a pool's pods with anti-affinity of their own
                spec["nodeSelector"] = {"pool": draw(st.sampled_from(LABELS["pool"]))}
        if draw(st.booleans()):
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        objects.append(pod(f"p{i}", draw(st.sampled_from(node_names)),
                           cpu=draw(st.sampled_from(["500m", "1", "1500m"])), memory=None,
                           spec=spec, labels={"app": draw(st.sampled_from(["a", "b"]))},
                           owner=("ReplicaSet", draw(st.sampled_from(["r1", "r2"])))))
    steps = draw(st.lists(st.sampled_from([f"p{i}" for i in range(14)]), max_size=20))
    return snapshot(*objects), steps


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(clusters(), st.randoms(use_true_random=False))
def test_remembered_answers_equal_a_plain_search(case: tuple[ClusterSnapshot, list[str]],
                                                 rng: Any) -> None:
    snap, steps = case
    nodes = snap.ready_nodes()

    def plain(p: Pod) -> bool:
        return any(node_fit(p, n, snap) is None for n in nodes if n.name != p.node_name)

    def check_all() -> None:
        pods = list(snap.pods.values())
        rng.shuffle(pods)  # any pod may be the first to ask after an eviction
        for p in pods:
            feasible = [n for n in nodes if node_fit(p, n, snap) is None]
            # The indexed search space (what the scheduler models search) loses no fit.
            indexed = [n for n in affinity_space(p, nodes, snap) if node_fit(p, n, snap) is None]
            assert sorted(n.name for n in indexed) == sorted(n.name for n in feasible), p.name
            assert pod_fits_any_other_node(p, nodes, snap) == plain(p), p.name
            assert pod_fits_any_node(p, nodes, snap) == (
                plain(p) or any(node_fit(p, n, snap) is None
                                for n in nodes if n.name == p.node_name)), p.name

    check_all()
    for name in steps:  # evictions between questions, as in a cycle
        gone = snap.pods.get(f"default/{name}")
        if gone is not None:
            snap.remove_pod(gone)
        check_all()


def test_an_eviction_on_the_asking_pods_own_node_is_not_forgotten() -> None:
    """Room freed on the node of the first pod to ask afterwards: that pod may not use its own
    node, but the next pod of the workload, elsewhere, must find it."""
    snap = snapshot(node("n1", cpu="2"), node("n2", cpu="1"),
                    pod("a", "n1", cpu="1", memory=None), pod("x", "n1", cpu="1", memory=None,
                                                              owner=("ReplicaSet", "other")),
                    pod("b", "n2", cpu="1", memory=None))
    nodes = snap.ready_nodes()
    a, b = snap.pods["default/a"], snap.pods["default/b"]
    assert not pod_fits_any_other_node(a, nodes, snap)  # n2 is full
    assert not pod_fits_any_other_node(b, nodes, snap)  # n1 is full
    snap.remove_pod(snap.pods["default/x"])
    assert not pod_fits_any_other_node(a, nodes, snap)  # its own node does not count
    assert pod_fits_any_other_node(b, nodes, snap)  # n1 has room now


def test_namespace_joins_the_signature_only_through_anti_affinity() -> None:
    """Without anti-affinity terms NodeFit never reads the namespace, so workloads of every
    namespace share one remembered search; with them, the namespace the terms default to keeps
    the answers apart."""
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "a"}},
        "topologyKey": "kubernetes.io/hostname"}]}}}
    snap = snapshot(node("n1", labels={"kubernetes.io/hostname": "n1"}),
                    node("n2", labels={"kubernetes.io/hostname": "n2"}),
                    pod("web", "n2", namespace="one", labels={"app": "a"},
                        owner=("ReplicaSet", "web")),
                    pod("plain-1", "n1", namespace="one", owner=("ReplicaSet", "p1")),
                    pod("plain-2", "n1", namespace="two", owner=("ReplicaSet", "p2")),
                    pod("anti-1", "n1", namespace="one", spec=anti, owner=("ReplicaSet", "a1")),
                    pod("anti-2", "n1", namespace="two", spec=anti, owner=("ReplicaSet", "a2")))
    pods = snap.pods
    assert (nodefit.placement_signature(pods["one/plain-1"])
            == nodefit.placement_signature(pods["two/plain-2"]))
    assert (nodefit.placement_signature(pods["one/anti-1"])
            != nodefit.placement_signature(pods["two/anti-2"]))
    nodes = snap.ready_nodes()
    # anti-1's term selects web (its own namespace) on n2; anti-2's looks in "two" only.
    assert not pod_fits_any_other_node(pods["one/anti-1"], nodes, snap)
    assert pod_fits_any_other_node(pods["two/anti-2"], nodes, snap)
    assert pod_fits_any_other_node(pods["one/plain-1"], nodes, snap)
    assert pod_fits_any_other_node(pods["two/plain-2"], nodes, snap)


def test_workloads_of_a_pool_share_its_nodes_whatever_their_anti_affinity() -> None:
    """Two workloads pinned to pool x, each with anti-affinity of its own: their signatures
    differ, the nodes to search are one list, and room freed on one of them is seen by the
    next question of either."""
    def anti(app: str) -> dict[str, Any]:
        return {"nodeSelector": {POOL: "x"}, "affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": app}},
                "topologyKey": "kubernetes.io/hostname"}]}}}

    pool_x = [node(f"x{i}", cpu=str(2 - i), labels={"kubernetes.io/hostname": f"x{i}",
                                                    POOL: "x"}) for i in range(2)]
    others = [node(f"y{i}", labels={"kubernetes.io/hostname": f"y{i}", POOL: "y"})
              for i in range(4)]
    snap = snapshot(*pool_x, *others,
                    pod("a", "x0", cpu="1", memory=None, spec=anti("none-a"),
                        owner=("ReplicaSet", "a")),
                    pod("filler", "x0", cpu="1", memory=None, owner=("ReplicaSet", "f")),
                    pod("b", "x1", cpu="1", memory=None, spec=anti("none-b"),
                        owner=("ReplicaSet", "b")))
    nodes = snap.ready_nodes()
    a, b = snap.pods["default/a"], snap.pods["default/b"]
    assert nodefit.placement_signature(a) != nodefit.placement_signature(b)
    assert affinity_space(a, nodes, snap) is affinity_space(b, nodes, snap)
    assert [n.name for n in affinity_space(a, nodes, snap)] == ["x0", "x1"]
    assert not pod_fits_any_other_node(a, nodes, snap)  # x1 is full
    assert not pod_fits_any_other_node(b, nodes, snap)  # x0 is full
    snap.remove_pod(snap.pods["default/filler"])
    assert pod_fits_any_other_node(b, nodes, snap)  # x0 has room now
    assert not pod_fits_any_other_node(a, nodes, snap)


def test_replicas_share_one_signature_object() -> None:
    """Equal scheduling fields give one signature object (hashed once, found by identity);
    pods that differ in any of them get signatures of their own."""
    tolerate = {"tolerations": [{"key": "dedicated", "operator": "Exists"}]}
    pods = [pod("r1", "n1"), pod("r2", "n1"), pod("big", "n1", cpu="2"),
            pod("tol", "n1", spec=tolerate)]
    r1, r2, big, tol = pods
    assert nodefit.placement_signature(r1) is nodefit.placement_signature(r2)
    assert nodefit.taint_free_signature(r1) is nodefit.taint_free_signature(r2)
    assert nodefit.placement_signature(big) != nodefit.placement_signature(r1)
    assert nodefit.placement_signature(tol) != nodefit.placement_signature(r1)
    assert nodefit.taint_free_signature(tol) is nodefit.taint_free_signature(r1)

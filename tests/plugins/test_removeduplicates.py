"""RemoveDuplicates: duplicates of one owner and image set spread over the feasible nodes, up to
the ceiling of the average (cases modelled on upstream's
removeduplicates_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from builders import args, handle_for, node, pod, snapshot
from desched.framework.evictor import Limits
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.removeduplicates import (
    RemoveDuplicates,
    RemoveDuplicatesArgs,
    _PlacementClasses,
)

RS = ("ReplicaSet", "rs-1")
TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
TOLERATE = {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra",
                             "effect": "NoSchedule"}]}


def run(nodes: list[Any], pods: list[Any], raw: dict[str, Any] | None = None,
        limits: Limits | None = None, protections: dict[str, Any] | None = None
        ) -> tuple[list[str], Any]:
    snap = snapshot(*nodes, *pods)
    filters = []
    if protections is not None:
        setup, _ = handle_for(snap)
        filters.append(DefaultEvictor(args(DefaultEvictorArgs, protections), setup))
    handle, executor = handle_for(snap, plugin="RemoveDuplicates", limits=limits,
                                  filters=filters)
    plugin = RemoveDuplicates(args(RemoveDuplicatesArgs, raw or {}), handle)
    plugin.balance(snap.ready_nodes())
    return executor.evicted, handle


def replicas(n: int, node_name: str = "n1", prefix: str = "p", **kw: Any) -> list[Any]:
    return [pod(f"{prefix}{i}", node_name, **kw) for i in range(n)]


def nodes(*names: str, **kw: Any) -> list[Any]:
    return [node(n, **kw) for n in names]


def containers(*images: str) -> dict[str, Any]:
    return {"containers": [{"name": f"c{i}", "image": image,
                            "resources": {"requests": {"cpu": "10m"}}}
                           for i, image in enumerate(images)]}


# (id, nodes, pods, args, number of evictions)
COUNT_CASES: list[tuple[str, list[Any], list[Any], dict[str, Any], int]] = [
    ("no duplicates: one pod per node", nodes("n1", "n2", "n3"),
     [pod("a", "n1"), pod("b", "n2"), pod("c", "n3")], {}, 0),
    ("three pods of one ReplicaSet on one of two nodes: 1 evicted", nodes("n1", "n2"),
     replicas(3), {}, 1),
    ("six pods on one of three nodes: ceil(6/3)=2 kept, 4 evicted", nodes("n1", "n2", "n3"),
     replicas(6), {}, 4),
    ("five pods on one of three nodes: ceil(5/3)=2 kept, 3 evicted", nodes("n1", "n2", "n3"),
     replicas(5), {}, 3),
    ("already spread evenly", nodes("n1", "n2", "n3"),
     replicas(2, "n1", "a") + replicas(2, "n2", "b") + replicas(2, "n3", "c"), {}, 0),
    ("3 + 1 over two nodes: ceil(4/2)=2, 1 evicted from n1", nodes("n1", "n2"),
     replicas(3, "n1", "a") + replicas(1, "n2", "b"), {}, 1),
    ("two pods, two nodes, same node: ceil(2/2)=1, 1 evicted", nodes("n1", "n2"),
     replicas(2), {}, 1),
    ("same owner, different images are not duplicates", nodes("n1", "n2"),
     [pod("a", image="app:1"), pod("b", image="app:2"), pod("c", image="sidecar:1")], {}, 0),
    ("same owner, each image group duplicated separately", nodes("n1", "n2"),
     replicas(2, prefix="v1-", image="app:1") + replicas(2, prefix="v2-", image="app:2"), {}, 2),
    ("multi-container pods: image order does not matter", nodes("n1", "n2"),
     [pod("a", spec=containers("x:1", "y:1")), pod("b", spec=containers("y:1", "x:1"))], {}, 1),
    ("multi-container pods: one image differs", nodes("n1", "n2"),
     [pod("a", spec=containers("x:1", "y:1")), pod("b", spec=containers("x:1", "z:1"))], {}, 0),
    ("different owners are not duplicates", nodes("n1", "n2"),
     [pod("a", owner=("ReplicaSet", "one")), pod("b", owner=("ReplicaSet", "two"))], {}, 0),
    ("same owner name in different namespaces is not a duplicate", nodes("n1", "n2"),
     [pod("a", namespace="x"), pod("b", namespace="y")], {}, 0),
    ("excludeOwnerKinds ReplicaSet", nodes("n1", "n2"), replicas(3),
     {"excludeOwnerKinds": ["ReplicaSet"]}, 0),
    ("excludeOwnerKinds of another kind", nodes("n1", "n2"), replicas(3),
     {"excludeOwnerKinds": ["Job"]}, 1),
    ("pods without owner are skipped", nodes("n1", "n2"), replicas(3, owner=None), {}, 0),
    ("terminal pods are not listed", nodes("n1", "n2"),
     replicas(3, phase="Succeeded"), {}, 0),
    # Target nodes: taints and nodeSelector / node affinity.
    ("only the pods' node is untainted: fewer than 2 feasible nodes",
     [node("n1"), node("n2", taints=[TAINT])], replicas(3), {}, 0),
    ("the taint is tolerated", [node("n1"), node("n2", taints=[TAINT])],
     replicas(3, spec=TOLERATE), {}, 1),
    ("PreferNoSchedule taints do not limit target nodes",
     [node("n1"), node("n2", taints=[{**TAINT, "effect": "PreferNoSchedule"}])],
     replicas(3), {}, 1),
    ("NoExecute taints limit target nodes",
     [node("n1"), node("n2", taints=[{**TAINT, "effect": "NoExecute"}])], replicas(3), {}, 0),
    ("nodeSelector matches only the pods' node",
     [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "b"})],
     replicas(3, spec={"nodeSelector": {"pool": "a"}}), {}, 0),
    ("nodeSelector matches both nodes",
     [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "a"})],
     replicas(3, spec={"nodeSelector": {"pool": "a"}}), {}, 1),
    ("required node affinity matches only the pods' node",
     [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "b"})],
     replicas(3, spec={"affinity": {"nodeAffinity": {
         "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
             {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}}}}),
     {}, 0),
    ("one of three nodes infeasible: ceil(6/2)=3 kept, 3 evicted",
     [node("n1"), node("n2"), node("n3", taints=[TAINT])], replicas(6), {}, 3),
    ("unschedulable nodes are still target nodes", [node("n1"), node("n2", unschedulable=True)],
     replicas(3), {}, 1),
    ("not Ready nodes are not target nodes", [node("n1"), node("n2", ready=False)],
     replicas(3), {}, 0),
    # Namespaces.
    ("namespaces include: listed", nodes("n1", "n2"), replicas(3, namespace="dev"),
     {"namespaces": {"include": ["dev"]}}, 1),
    ("namespaces include: other", nodes("n1", "n2"), replicas(3, namespace="prod"),
     {"namespaces": {"include": ["dev"]}}, 0),
    ("namespaces exclude: listed", nodes("n1", "n2"), replicas(3, namespace="dev"),
     {"namespaces": {"exclude": ["dev"]}}, 0),
    ("namespaces exclude: other", nodes("n1", "n2"), replicas(3, namespace="prod"),
     {"namespaces": {"exclude": ["dev"]}}, 1),
]


@pytest.mark.parametrize(("node_list", "pods", "raw", "expected"),
                         [c[1:] for c in COUNT_CASES], ids=[c[0] for c in COUNT_CASES])
def test_eviction_count(node_list: list[Any], pods: list[Any], raw: dict[str, Any],
                        expected: int) -> None:
    evicted, _ = run(node_list, pods, raw)
    assert len(evicted) == expected


def test_evicts_the_tail_of_the_duplicate_list() -> None:
    """The first pod on a node is the original; dups[upperAvg-1:] are evicted in list order."""
    evicted, _ = run(nodes("n1", "n2", "n3"), replicas(6))
    assert evicted == ["p2", "p3", "p4", "p5"]


def test_each_image_group_keeps_its_original() -> None:
    evicted, _ = run(nodes("n1", "n2"),
                     replicas(2, prefix="v1-", image="app:1")
                     + replicas(2, prefix="v2-", image="app:2"))
    assert sorted(evicted) == ["v1-1", "v2-1"]


def test_namespaces_pick_which_duplicates_go() -> None:
    pods = replicas(3, prefix="dev-", namespace="dev") + replicas(3, prefix="prod-",
                                                                  namespace="prod")
    evicted, _ = run(nodes("n1", "n2"), pods, {"namespaces": {"include": ["dev"]}})
    assert evicted == ["dev-2"]
    evicted, _ = run(nodes("n1", "n2"), pods, {"namespaces": {"exclude": ["dev"]}})
    assert evicted == ["prod-2"]


def test_terminal_pods_do_not_count_toward_the_average() -> None:
    # Three running pods and two Succeeded on n1 of three nodes: only the running ones count,
    # so ceil(3/3)=1 and two of them go (counting all five would give ceil(5/3)=2 and evict 3).
    pods = replicas(3, prefix="run-") + replicas(2, prefix="done-", phase="Succeeded")
    evicted, _ = run(nodes("n1", "n2", "n3"), pods)
    assert evicted == ["run-1", "run-2"]


def test_default_evictor_protected_pods_are_not_evicted() -> None:
    """Upstream: DaemonSet, local storage, mirror and critical pods - none evicted."""
    pods = (replicas(3, prefix="ds-", owner=("DaemonSet", "ds"))
            + replicas(3, prefix="ls-", owner=("ReplicaSet", "ls"),
                       spec={"volumes": [{"name": "v", "emptyDir": {}}]})
            + replicas(3, prefix="mirror-", owner=("ReplicaSet", "m"),
                       annotations={"kubernetes.io/config.mirror": "x"})
            + replicas(3, prefix="crit-", owner=("ReplicaSet", "c"), priority=2_000_000_000))
    evicted, _ = run(nodes("n1", "n2"), pods, protections={})
    assert evicted == []
    evicted, _ = run(nodes("n1", "n2"), pods, protections={
        "podProtections": {"defaultDisabled": ["DaemonSetPods", "PodsWithLocalStorage",
                                               "SystemCriticalPods"]}})
    # Mirror pods stay protected; the other three groups lose one pod each.
    assert sorted(evicted) == ["crit-2", "ds-2", "ls-2"]


def test_upper_average_counts_evictable_pods_only() -> None:
    # Four pods on n1 of two nodes; two carry local storage and are protected. Only the two
    # evictable ones count: ceil(2/2)=1, so the evictable duplicate goes. (Counting all four
    # would give ceil(4/2)=2 and evict nothing.)
    pods = (replicas(2, prefix="ok-")
            + replicas(2, prefix="ls-", spec={"volumes": [{"name": "v", "emptyDir": {}}]}))
    evicted, _ = run(nodes("n1", "n2"), pods, protections={})
    assert evicted == ["ok-1"]


def test_placement_class_fitting_one_node_adds_no_target() -> None:
    # Same owner and image, two placement classes. Plain pods fit n1 and n2 (n3 is tainted);
    # the pool=a pods tolerate the taint but fit only n3, so they add no target node
    # (upstream adds a class's nodes only when more than one matches). Targets {n1, n2}:
    # ceil(6/2)=3 stay on n1 and 3 go (counting n3 would give ceil(6/3)=2 and evict 4).
    pinned = {"nodeSelector": {"pool": "a"}, **TOLERATE}
    pods = replicas(4, prefix="plain-") + replicas(2, prefix="pinned-", spec=pinned)
    node_list = [node("n1"), node("n2"), node("n3", labels={"pool": "a"}, taints=[TAINT])]
    evicted, _ = run(node_list, pods)
    assert evicted == ["plain-3", "pinned-0", "pinned-1"]


def test_node_fit_pre_eviction_filter_applies() -> None:
    pods = replicas(3, spec={"nodeSelector": {"pool": "a"}})
    node_list = [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "a"})]
    evicted, _ = run(node_list, pods, protections={"nodeFit": True})
    assert evicted == ["p2"]
    node_list = [node("n1", labels={"pool": "a"}),
                 node("n2", labels={"pool": "a"}, unschedulable=True)]
    evicted, _ = run(node_list, pods, protections={"nodeFit": True})
    assert evicted == []


def test_node_limit_moves_to_next_node() -> None:
    # Five pods on each of n1 and n2, four nodes: ceil(10/4)=3, so each node would lose two.
    # With one eviction per node, the plugin moves on to n2 after n1's limit.
    pods = replicas(5, "n1", "a") + replicas(5, "n2", "b")
    evicted, _ = run(nodes("n1", "n2", "n3", "n4"), pods)
    assert sorted(evicted) == ["a3", "a4", "b3", "b4"]
    evicted, handle = run(nodes("n1", "n2", "n3", "n4"), pods, limits=Limits(per_node=1))
    assert sorted(evicted) == ["a3", "b3"]
    # One refusal per node: the rest of a node's duplicates are not tried.
    assert len([d for d in handle.log.decisions if d.outcome == "limited"]) == 2


def test_total_limit_stops() -> None:
    pods = replicas(5, "n1", "a") + replicas(5, "n2", "b")
    evicted, handle = run(nodes("n1", "n2", "n3", "n4"), pods, limits=Limits(total=1))
    assert len(evicted) == 1
    assert len([d for d in handle.log.decisions if d.outcome == "limited"]) == 1


def test_namespace_limit_tries_next_pod() -> None:
    pods = (replicas(3, "n1", "x-", namespace="x") + replicas(3, "n1", "y-", namespace="y"))
    evicted, _ = run(nodes("n1", "n2", "n3"), pods, limits=Limits(per_namespace=1))
    assert sorted(evicted) == ["x-1", "y-1"]


def test_skipped_when_fewer_than_two_target_nodes_is_explained() -> None:
    _, handle = run([node("n1"), node("n2", taints=[TAINT])], replicas(3))
    assert handle.log.evictions() == []
    reasons = [reason for (_, plugin, reason) in handle.log.filtered_counts
               if plugin == "RemoveDuplicates"]
    assert any("fewer than 2 nodes" in r for r in reasons)


def test_placement_classes_share_an_affinity_and_judge_their_own_tolerations() -> None:
    """Two classes pinned to one pool: the pool's nodes are matched once, each class judges the
    taints itself (equal taint lists alike), and the node order is kept."""
    taint = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    pool = {"pool": "x"}
    nodes = [node("a", labels={**pool, "kubernetes.io/hostname": "a"}, taints=taint),
             node("b", labels={**pool, "kubernetes.io/hostname": "b"}),
             node("c", labels={**pool, "kubernetes.io/hostname": "c"}, taints=taint),
             node("d", labels={**pool, "kubernetes.io/hostname": "d"}),
             *(node(f"o{i}") for i in range(6))]
    tolerant = pod("t", "b", spec={"nodeSelector": pool, "tolerations": [
        {"key": "dedicated", "operator": "Exists"}]})
    plain = pod("p", "b", spec={"nodeSelector": pool})
    snap = snapshot(*nodes, tolerant, plain)
    classes = _PlacementClasses(snap.ready_nodes(), snap)
    assert classes.names(tolerant) == ["a", "b", "c", "d"]
    assert classes.names(plain) == ["b", "d"]
    assert classes.names(pod("q", "d", spec={"nodeSelector": pool})) is classes.names(plain)

"""CustomPriority end to end (docs/custompriority.md). First Koordinator v1.8.0's own test table
(custom_priority_test.go), case by case, as desched runs it: its evictor passes every pod, as
the recording evictor there does. Then what desched adds: room reserved on the cheaper nodes,
keepThreshold and rejectThreshold, the cordon modelled in the snapshot and undone on a failed
drain, limits, dryRun, and the reasons `explain` tells."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from builders import RecordingExecutor, args, decode, handle_for, node, pod, snapshot
from desched.errors import InputError
from desched.executors.simulation import SimulationExecutor
from desched.framework.evictor import Limits
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED
from desched.plugins.custompriority.args import CustomPriorityArgs, default
from desched.plugins.custompriority.plugin import CustomPriority, request_order
from desched.predicates.nodefit import insufficient_resource
from desched.snapshot.cluster import ClusterSnapshot


def tier(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "nodeSelector": {"matchLabels": {"tier": name}}, **kw}


GOLD_SILVER = [tier("gold"), tier("silver")]


def tnode(name: str, tier_name: str | None, cpu: str = "1", **kw: Any) -> Any:
    labels = {"kubernetes.io/hostname": name}
    if tier_name is not None:
        labels["tier"] = tier_name
    return node(name, cpu=cpu, memory="1Gi", pods="100", labels=labels, **kw)


@dataclass
class Run:
    plugin: CustomPriority
    handle: Handle
    executor: RecordingExecutor
    snap: ClusterSnapshot

    def cycle(self) -> list[str]:
        before = len(self.executor.evicted)
        self.handle.evictor.evictor.new_cycle()
        self.handle.log.cycle += 1
        self.plugin.balance(self.snap.ready_nodes())
        return self.executor.evicted[before:]

    def kept(self, name: str) -> list[str]:
        return [d.reason for d in self.handle.log.decisions
                if d.outcome in ("filtered", "considered") and d.pod == name]

    def notes(self, node_name: str | None = None) -> list[str]:
        return [n.text for n in self.handle.log.notes
                if node_name is None or n.node == node_name]

    def cordoned(self, name: str) -> bool:
        return self.snap.nodes[name].spec.unschedulable


def start(raw: dict[str, Any], *objects: Any, limits: Limits | None = None) -> Run:
    snap = snapshot(*objects)
    handle, executor = handle_for(snap, plugin="CustomPriority", limits=limits)
    handle.log.explain_nodes = frozenset(snap.nodes)  # keep every reason in full
    handle.log.cycle = 0
    cp_args: CustomPriorityArgs = args(CustomPriorityArgs, raw)
    default(cp_args)
    return Run(CustomPriority(cp_args, handle), handle, executor, snap)


def once(raw: dict[str, Any], *objects: Any, limits: Limits | None = None) -> list[str]:
    return start(raw, *objects, limits=limits).cycle()


# -- Koordinator's table -------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "ok"), [
    # Test_NewCustomPriority_and_Name ("wrong type" has no Python counterpart: args are typed)
    ({"evictionOrder": [tier("p1")]}, False),
    ({"evictionOrder": [tier("p1"), tier("p2")]}, True),
])
def test_new_custom_priority(raw: dict[str, Any], ok: bool) -> None:
    if ok:
        assert isinstance(start(raw).plugin, CustomPriority)
        return
    with pytest.raises(InputError, match='initializing plugin "CustomPriority": CustomPriority '
                                         'requires at least 2 resource priority levels'):
        start(raw)


@pytest.mark.parametrize(("selectors", "labels", "evicted"), [
    # Test_filterPods: no selectors allow all; one matching selector; none matching
    (None, {"x": "y"}, True),
    ([{"name": "s1", "selector": {"matchLabels": {"app": "a"}}}], {"app": "a"}, True),
    ([{"name": "s1", "selector": {"matchLabels": {"app": "a"}}}], {"app": "b"}, False),
])
def test_pod_selectors(selectors: list[dict[str, Any]] | None, labels: dict[str, str],
                       evicted: bool) -> None:
    raw: dict[str, Any] = {"evictionOrder": GOLD_SILVER, "nodeFit": False}
    if selectors is not None:
        raw["podSelectors"] = selectors
    run = start(raw, tnode("s1", "gold"), tnode("t1", "silver"),
                pod("p", "s1", cpu="10m", memory="10", labels=labels))
    assert run.cycle() == (["p"] if evicted else [])
    if not evicted:
        assert run.kept("p") == ["labels match none of the podSelectors"]


@pytest.mark.parametrize(("selector", "evicted"), [
    # Test_filterNodes: nil selector takes both nodes, "gold" only one tier, "bronze" none
    (None, ["p"]),
    ({"matchLabels": {"tier": "gold"}}, []),
    ({"matchLabels": {"tier": "bronze"}}, []),
])
def test_node_selector(selector: dict[str, Any] | None, evicted: list[str]) -> None:
    raw: dict[str, Any] = {"evictionOrder": GOLD_SILVER}
    if selector is not None:
        raw["nodeSelector"] = selector
    run = start(raw, tnode("n1", "gold"), tnode("n2", "silver"), pod("p", "n1", cpu="10m"))
    assert run.cycle() == evicted
    if selector == {"matchLabels": {"tier": "bronze"}}:
        assert run.notes() == ["No nodes selected for CustomPriority"]
    elif selector is not None:
        idle = ("CustomPriority requires at least 2 priority levels with nodes; only tier gold "
                "(1) has nodes among the 1 selected")
        assert run.notes() == [idle]
        assert run.plugin.node_role("n1") == idle


def test_classify_nodes_by_priority() -> None:
    """Test_classifyNodesByPriority: a node goes to the first tier selecting it; a tier whose
    selector does not compile gets none; a node no tier selects is in none."""
    raw = {"evictionOrder": [*GOLD_SILVER, {"name": "bad", "nodeSelector": {
        "matchExpressions": [{"key": "tier", "operator": "Invalid"}]}}]}
    run = start(raw, tnode("n1", "gold"), tnode("n2", "silver"), tnode("n3", "bronze"))
    run.cycle()
    assert run.plugin.tier_of == {"n1": 0, "n2": 1}
    assert run.plugin.node_role("n3") == "in no evictionOrder tier"
    assert any(text.startswith("evictionOrder tier bad selects no node") for text in run.notes())


def test_pod_requests_sum_the_containers() -> None:
    """Test_getPodRequests: 250m + 250m cpu, 128Mi + 256Mi memory."""
    p = pod("p", "n", cpu="250m", memory="128Mi", spec={"containers": [
        {"name": "a", "image": "i", "resources": {"requests": {"cpu": "250m",
                                                               "memory": "128Mi"}}},
        {"name": "b", "image": "i", "resources": {"requests": {"cpu": "250m",
                                                               "memory": "256Mi"}}}]})
    assert p.requests["cpu"] == 500
    assert p.requests["memory"] == 384 << 20


def test_sort_pods_by_requests_ascending() -> None:
    """Test_sortPodsByRequestsAscending: cpu, then memory, then namespace and name."""
    a = pod("a", cpu="200m", memory="100")
    b = pod("b", cpu="100m", memory="500")
    c = pod("c", cpu="100m", memory="100")
    assert [p.name for p in sorted([a, b, c], key=request_order)] == ["c", "b", "a"]


def test_requests_fit_and_what_was_sent() -> None:
    """Test_requestsFit_and_subRequests: 500m / 1024 free; 200m / 512 sent leaves 300m / 512,
    so 400m no longer fits."""
    n = node("n", cpu="500m", memory="1024")
    snap = snapshot(n)
    small = pod("small", "other", cpu="200m", memory="512")
    assert insufficient_resource(small, n, snap) is None
    big = pod("big", "other", cpu="400m", memory=None)
    assert insufficient_resource(big, n, snap) is None
    assert insufficient_resource(big, n, snap, sent={"cpu": 200, "memory": 512},
                                 sent_pods=1) == "insufficient cpu"
    assert insufficient_resource(pod("x", "other", cpu="300m", memory="512"), n, snap,
                                 sent={"cpu": 200, "memory": 512}, sent_pods=1) is None


def test_find_evictable_pods() -> None:
    """Test_findEvictablePods: one cheaper node of 1000m; with nodeFit the small and mid pods
    go (and the early stop is not reached before them), without it every pod."""
    pods = [pod("small", "s", cpu="100m", memory="100"), pod("big", "s", cpu="2", memory="100"),
            pod("mid", "s", cpu="400m", memory="100"), pod("big2", "s", cpu="3", memory="100"),
            pod("big3", "s", cpu="3", memory="100"), pod("big4", "s", cpu="3", memory="100")]
    nodes = [tnode("s", "gold", cpu="100"), tnode("t1", "silver", cpu="1")]
    assert set(once({"evictionOrder": GOLD_SILVER}, *nodes, *pods)) >= {"small", "mid"}
    assert len(once({"evictionOrder": GOLD_SILVER, "nodeFit": False}, *nodes, *pods)) == 6


def test_node_remaining_requests() -> None:
    """Test_nodeRemainingRequests: 2000m less 500m and 700m leaves 800m."""
    n = tnode("n1", "silver", cpu="2")
    snap = snapshot(n, pod("p1", "n1", cpu="500m"), pod("p2", "n1", cpu="700m"))
    assert snap.node_requested("n1")["cpu"] == 1200
    assert insufficient_resource(pod("x", "o", cpu="800m", memory=None), n, snap) is None
    assert insufficient_resource(pod("y", "o", cpu="801m", memory=None), n,
                                 snap) == "insufficient cpu"


def test_cordon_node() -> None:
    """Test_cordonNode: the node becomes unschedulable; a node that does not exist fails."""
    snap = snapshot(tnode("n1", None))
    executor = SimulationExecutor(snap)
    assert executor.set_unschedulable("n1", True).ok
    assert snap.nodes["n1"].spec.unschedulable
    missing = executor.set_unschedulable("missing", True)
    assert not missing.ok and missing.message == 'nodes "missing" not found'


def test_evict_from_priority_to_targets() -> None:
    """Test_evictFromPriorityToTargets: without nodeFit both pods go; with dryRun none."""
    objects = [tnode("s1", "gold"), tnode("t1", "silver"), pod("p1", "s1", cpu="10m"),
               pod("p2", "s1", cpu="20m")]
    assert once({"evictionOrder": GOLD_SILVER, "nodeFit": False}, *objects) == ["p1", "p2"]
    run = start({"evictionOrder": GOLD_SILVER, "nodeFit": False, "dryRun": True}, *objects)
    assert run.cycle() == []
    assert run.kept("p1") == ["dryRun: would be evicted: evicting from gold priority resource "
                              "to lower priority resource"]


def test_evict_by_draining_nodes() -> None:
    """Test_evictByDrainingNodes_and_processEvictions: two 100m pods, two cheaper nodes of
    500m in two tiers; DrainNode with autoCordon evicts both and cordons the node. (Its second
    half, a pod lister that fails, has no counterpart: the snapshot cannot fail to list.)"""
    raw = {"evictionOrder": [*GOLD_SILVER, tier("bronze")], "mode": "DrainNode",
           "autoCordon": True, "nodeFit": False}  # the Go test's zero NodeFit
    run = start(raw, tnode("s1", "gold"), tnode("t1", "silver", cpu="500m"),
                tnode("t2", "bronze", cpu="500m"), pod("p1", "s1"), pod("p2", "s1"))
    assert run.cycle() == ["p1", "p2"]
    assert run.cordoned("s1")
    assert run.notes("s1") == ["cordoned node s1: autoCordon: draining its 2 pod(s) to "
                               "cheaper tiers"]


@pytest.mark.parametrize(("raw", "evicted"), [
    # Test_Balance: paused; a BestEffort run
    ({"evictionOrder": GOLD_SILVER, "paused": True}, []),
    ({"evictionOrder": GOLD_SILVER, "mode": "BestEffort", "nodeFit": False}, ["p"]),
    ({"evictionOrder": GOLD_SILVER, "mode": "BestEffort"}, ["p"]),
])
def test_balance(raw: dict[str, Any], evicted: list[str]) -> None:
    run = start(raw, tnode("s1", "gold"), tnode("t1", "silver"), pod("p", "s1", cpu="10m"))
    assert run.cycle() == evicted
    if raw.get("paused"):
        assert run.notes() == ["CustomPriority is paused and will do nothing"]


# -- what desched adds ---------------------------------------------------------------------------


def test_best_effort_reserves_room_on_the_cheaper_nodes() -> None:
    """Koordinator's BestEffort evicts every pod that fits a cheaper node now, three pods of
    400m for one 1000m node; desched counts each pod sent there, so the third stays."""
    run = start({"evictionOrder": GOLD_SILVER}, tnode("s1", "gold", cpu="4"),
                tnode("t1", "silver"), *(pod(f"p{i}", "s1", cpu="400m") for i in range(3)))
    assert run.cycle() == ["p0", "p1"]
    assert run.kept("p2") == ["no cheaper node can take it: t1: insufficient cpu with the 2 "
                              "pod(s) already sent there"]


def test_tiers_in_order_first_fit() -> None:
    """Gold's pods go to the first cheaper node with room, silver before bronze; silver's pods
    then go to bronze."""
    raw = {"evictionOrder": [*GOLD_SILVER, tier("bronze")]}
    run = start(raw, tnode("g", "gold"), tnode("s", "silver", cpu="300m"),
                tnode("b", "bronze", cpu="2"), pod("g1", "g", cpu="200m"),
                pod("s1", "s", cpu="100m"))
    assert run.cycle() == ["g1", "s1"]
    reasons = [d.reason for d in run.handle.log.evictions()]
    assert reasons == [
        "evicting from gold priority resource to lower priority resource; fits now on s",
        "evicting from silver priority resource to lower priority resource; fits now on b"]


def test_best_effort_gives_up_after_five_pods_in_a_row_fit_nowhere() -> None:
    pods = [pod(f"big{i}", "s1", cpu="2") for i in range(5)] + [pod("zz", "s1", cpu="3")]
    run = start({"evictionOrder": GOLD_SILVER}, tnode("s1", "gold", cpu="100"),
                tnode("t1", "silver"), *pods)
    assert run.cycle() == []
    assert run.kept("zz") == ["not tried: the 5 pods before it on node s1 fit no cheaper node"]


def test_keep_threshold_keeps_a_well_used_node() -> None:
    raw = {"evictionOrder": [tier("gold", keepThreshold={"cpu": 50}), tier("silver")]}
    run = start(raw, tnode("busy", "gold"), tnode("idle", "gold"), tnode("t", "silver", cpu="4"),
                pod("b1", "busy", cpu="300m"), pod("b2", "busy", cpu="200m"),
                pod("i1", "idle", cpu="100m"))
    assert run.cycle() == ["i1"]
    kept = ("node busy of tier gold keeps its pods: cpu requests 50.00% >= keepThreshold 50%")
    assert run.notes("busy") == [kept]
    run.handle.log.explain_pods = frozenset({"default/b1"})
    assert run.plugin.verdict(run.snap.pods["default/b1"], []) == kept


def test_reject_threshold_caps_what_a_cheaper_node_takes() -> None:
    raw = {"evictionOrder": [tier("gold"), tier("silver", rejectThreshold={"cpu": 60})]}
    run = start(raw, tnode("g", "gold"), tnode("t", "silver"), pod("t0", "t", cpu="300m"),
                pod("g1", "g", cpu="200m"), pod("g2", "g", cpu="200m"))
    assert run.cycle() == ["g1"]
    assert run.kept("g2") == ["no cheaper node can take it: t: cpu requests would reach 70.00% "
                              "> rejectThreshold 60% of tier silver"]


def test_drain_node_moves_nothing_unless_every_pod_has_a_place() -> None:
    raw = {"evictionOrder": GOLD_SILVER, "mode": "DrainNode", "autoCordon": True}
    run = start(raw, tnode("g", "gold", cpu="4"), tnode("t", "silver"),
                pod("small", "g", cpu="100m"), pod("huge", "g", cpu="2"))
    assert run.cycle() == []
    assert not run.cordoned("g")
    why = "no cheaper node can take it: t: insufficient cpu"
    assert run.kept("huge") == [why]
    assert run.notes("g") == [f"node g of tier gold is not drained: not all of its 2 pod(s) can "
                              f"be placed; first: default/huge: {why}"]
    run.handle.log.explain_pods = frozenset({"default/small"})
    assert run.plugin.verdict(run.snap.pods["default/small"], []) == run.notes("g")[0]


def test_drain_node_without_node_fit_still_counts_requests() -> None:
    """Koordinator's DrainNode checks the cheaper nodes' free requests even without nodeFit."""
    raw = {"evictionOrder": GOLD_SILVER, "mode": "DrainNode", "nodeFit": False}
    objects = [tnode("g", "gold", cpu="4"), tnode("t", "silver", unschedulable=True),
               pod("a", "g", cpu="600m"), pod("b", "g", cpu="600m")]
    assert once(raw, *objects) == []
    assert once(raw, *objects[:3]) == ["a"]  # nodeFit off: a cordoned node takes pods


def test_a_failed_eviction_stops_the_drain_and_undoes_the_cordon() -> None:
    budget = decode("PodDisruptionBudget", {
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "guarded"}}},
        "status": {"disruptionsAllowed": 0}})
    raw = {"evictionOrder": GOLD_SILVER, "mode": "DrainNode", "autoCordon": True}
    run = start(raw, tnode("g", "gold"), tnode("t", "silver", cpu="2"), budget,
                pod("a", "g"), pod("b", "g", labels={"app": "guarded"}), pod("c", "g"))
    assert run.cycle() == ["a"]
    assert not run.cordoned("g")
    assert run.notes("g") == [
        "cordoned node g: autoCordon: draining its 3 pod(s) to cheaper tiers",
        "node g of tier gold: the drain stopped after 1 eviction(s): eviction of default/b "
        "failed",
        "uncordoned node g: autoCordon: eviction of default/b failed"]


def test_a_node_cordoned_before_stays_cordoned() -> None:
    """Koordinator uncordons the node whichever cordoned it; desched undoes only its own."""
    raw = {"evictionOrder": GOLD_SILVER, "mode": "DrainNode", "autoCordon": True}
    run = start(raw, tnode("g", "gold", unschedulable=True), tnode("t", "silver", cpu="2"),
                pod("a", "g"))
    assert run.cycle() == ["a"]
    assert run.cordoned("g")
    assert run.notes("g") == []


def test_dry_run_cordons_nothing() -> None:
    raw = {"evictionOrder": GOLD_SILVER, "mode": "DrainNode", "autoCordon": True,
           "dryRun": True}
    run = start(raw, tnode("g", "gold"), tnode("t", "silver", cpu="2"), pod("a", "g"))
    assert run.cycle() == []
    assert not run.cordoned("g")
    assert run.notes("g") == ["dryRun: would cordon node g (autoCordon: draining its 1 pod(s) "
                              "to cheaper tiers)"]
    assert run.plugin.node_role("g") == ("tier gold: a source for the cheaper tier(s) silver; "
                                         "node g of tier gold would be drained (1 pod(s))")


@pytest.mark.parametrize(("limits", "evicted"), [
    (Limits(per_node=1), ["a1", "b1"]),
    (Limits(total=1), ["a1"]),
])
def test_limits(limits: Limits, evicted: list[str]) -> None:
    """BestEffort: a node limit moves on to the next node, the total limit ends the run."""
    run = start({"evictionOrder": GOLD_SILVER}, tnode("a", "gold"), tnode("b", "gold"),
                tnode("t", "silver", cpu="4"), pod("a1", "a"), pod("a2", "a"), pod("b1", "b"),
                limits=limits)
    assert run.cycle() == evicted


def test_drain_node_stopped_by_a_limit_is_uncordoned() -> None:
    """A limit met once the drain has started (the pre-check bypassed here, standing for a
    refusal it cannot foresee, such as MigrationController's maxMigratingPerNode) stops the
    drain and undoes the cordon."""
    raw = {"evictionOrder": GOLD_SILVER, "mode": "DrainNode", "autoCordon": True}
    run = start(raw, tnode("g", "gold"), tnode("t", "silver", cpu="2"), pod("a", "g"),
                pod("b", "g"), limits=Limits(per_node=1))
    run.handle.evictor.evictor.limit_for_all = lambda pods: None  # type: ignore[method-assign]
    assert run.cycle() == ["a"]
    assert not run.cordoned("g")
    assert ("node g of tier gold: the drain stopped after 1 eviction(s): eviction of default/b "
            "refused: maximum number of evicted pods per node reached") in run.notes("g")


def test_evictable_namespaces_include_and_exclude_both_apply() -> None:
    """Koordinator's pod filter checks the include list, then the exclude list."""
    raw = {"evictionOrder": GOLD_SILVER,
           "evictableNamespaces": {"include": ["a", "b"], "exclude": ["b"]}}
    run = start(raw, tnode("g", "gold"), tnode("t", "silver", cpu="4"),
                pod("pa", "g", namespace="a"), pod("pb", "g", namespace="b"),
                pod("pc", "g", namespace="c"))
    assert run.cycle() == ["pa"]
    assert run.kept("pb") == ["namespace b is not evictable (evictableNamespaces)"]


def test_finished_pods_are_not_moved() -> None:
    run = start({"evictionOrder": GOLD_SILVER}, tnode("g", "gold"), tnode("t", "silver"),
                pod("done", "g", phase="Succeeded"))
    assert run.cycle() == []


def test_roles_and_verdicts_for_explain() -> None:
    raw = {"evictionOrder": [*GOLD_SILVER, tier("bronze")], "nodeSelector": {
        "matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}}
    objects = [tnode("g", "gold"), tnode("s", "silver"),
               node("out", labels={"tier": "gold", "pool": "x"}), tnode("none", None),
               pod("gp", "out"), pod("np", "none"), pod("sp", "s")]
    run = start(raw, *objects)
    run.cycle()
    plugin = run.plugin
    assert plugin.node_role("g") == "tier gold: a source for the cheaper tier(s) silver"
    assert plugin.node_role("s") == "tier silver, the cheapest with nodes: a target, never a source"
    pods = run.snap.pods
    assert plugin.verdict(pods["default/gp"], []) == "node out is outside the plugin's nodeSelector"
    assert plugin.verdict(pods["default/np"], []) == "node none is in no evictionOrder tier"
    assert plugin.verdict(pods["default/sp"], []) == (
        "node s is in tier silver, the cheapest with nodes: its pods have nowhere cheaper to go")



def test_a_tier_the_run_did_not_reach_is_not_called_the_cheapest() -> None:
    """The total limit ended the run in gold: silver's pods were never looked at."""
    raw = {"evictionOrder": [*GOLD_SILVER, tier("bronze")]}
    run = start(raw, tnode("g", "gold"), tnode("s", "silver"), tnode("b", "bronze", cpu="4"),
                pod("g1", "g"), pod("s1", "s"), limits=Limits(total=1))
    assert run.cycle() == ["g1"]
    pods = run.snap.pods
    assert run.plugin.verdict(pods["default/s1"], []) == RUN_ENDED


def test_what_pingpongguard_hears_about_a_landing_node() -> None:
    """A replacement on a node no cheaper than its pod's undoes the move; on a cheaper one it
    does not, unless that tier's rejectThreshold would be crossed."""
    raw = {"evictionOrder": [tier("gold"), tier("silver", rejectThreshold={"cpu": 30}),
                             tier("bronze", rejectThreshold={"cpu": 50})]}
    run = start(raw, tnode("g1", "gold"), tnode("g2", "gold"), tnode("s", "silver"),
                tnode("b", "bronze"), tnode("none", None), pod("p", "g1", cpu="600m"),
                pod("q", "s", cpu="600m"))
    run.cycle()
    plugin, pods = run.plugin, run.snap.pods
    assert plugin.over_thresholds_after("g2", pods["default/q"]) == (
        "CustomPriority has it in tier gold, not cheaper than tier silver")
    assert plugin.over_thresholds_after("none", pods["default/q"]) is None
    assert plugin.over_thresholds_after("b", pods["default/q"]) == (
        "CustomPriority's cpu requests would reach 60.00% > rejectThreshold 50% of tier bronze")
    # silver, the first run's target tier: its own threshold, whatever tier ran last
    assert plugin.over_thresholds_after("s", pods["default/p"]) == (
        "CustomPriority's cpu requests would reach 120.00% > rejectThreshold 30% of tier silver")


class _KeepByPreEviction:
    """A preEvictionFilter that keeps the pods named (DefaultEvictor's namespaceLabelSelector
    or nodeFit, say)."""

    def __init__(self, *names: str) -> None:
        self.names = frozenset(names)

    def filter(self, pod: Any) -> str | None:
        return None

    def pre_eviction_filter(self, pod: Any) -> str | None:
        return "kept by the preEvictionFilter" if pod.name in self.names else None


@pytest.mark.parametrize("mode", ["BestEffort", "DrainNode"])
def test_a_pod_the_pre_eviction_filter_keeps_is_not_evicted(mode: str) -> None:
    raw = {"evictionOrder": GOLD_SILVER, "mode": mode, "autoCordon": mode == "DrainNode"}
    run = start(raw, tnode("g", "gold"), tnode("t", "silver", cpu="2"),
                pod("a", "g", cpu="100m"), pod("kept", "g", cpu="100m"))
    run.handle.evictor.pre_eviction_filters.append(_KeepByPreEviction("kept"))
    assert run.cycle() == ["a"]
    assert run.kept("kept") == ["kept by the preEvictionFilter"]


@pytest.mark.parametrize(("limits", "field"), [
    (Limits(per_node=2), "maxNoOfPodsToEvictPerNode"),
    (Limits(total=2), "maxNoOfPodsToEvictTotal"),
    (Limits(per_namespace=2), "maxNoOfPodsToEvictPerNamespace"),
])
def test_drain_node_does_not_start_a_drain_a_limit_would_stop(limits: Limits,
                                                              field: str) -> None:
    """A limit that would end the drain half way leaves the node as it is: not cordoned, no pod
    evicted; a smaller node the limit lets through is drained."""
    raw = {"evictionOrder": GOLD_SILVER, "mode": "DrainNode", "autoCordon": True}
    run = start(raw, tnode("g1", "gold"), tnode("g2", "gold"), tnode("t", "silver", cpu="4"),
                pod("a", "g1"), pod("b", "g1"), pod("c", "g1"), pod("d", "g2"),
                limits=limits)
    assert run.cycle() == ["d"]
    assert not run.cordoned("g1")
    assert run.notes("g1") == [f"node g1 of tier gold is not drained: evicting its 3 pod(s) "
                               f"would pass {field}"]

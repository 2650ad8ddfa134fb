"""Eviction limits (total, then per node when the pod has a nodeName, then per namespace; each
`count + 1 > limit`; reset every cycle) and the cycle's run order, as upstream's."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from builders import NOW, handle_for, node, pod, snapshot
from desched.executors.simulation import SimulationExecutor
from desched.framework.decisions import DecisionLog
from desched.framework.evictor import EvictionLimitError, Evictor, Limits
from desched.framework.policy import Policy, ProfileConfig
from desched.framework.registry import PluginSpec
from desched.framework.runner import SKIP_FEW_NODES, Descheduler
from desched.framework.types import Clock
from desched.model.node import Node
from desched.plugins.catalog import PLUGINS
from desched.plugins.podlifetime import PodLifeTimeArgs
from desched.policy_files.loader import policy_from_document

TOTAL_MSG = "maximum number of evicted pods per a descheduling cycle reached"
NODE_MSG = "maximum number of evicted pods per node reached"
NAMESPACE_MSG = "maximum number of evicted pods per namespace reached"


def evictor_for(limits: Limits, *pods: Any) -> tuple[Evictor, SimulationExecutor]:
    snap = snapshot(node("n1"), node("n2"), *pods)
    executor = SimulationExecutor(snap)
    return Evictor(limits, executor, DecisionLog()), executor


def attempt(ev: Evictor, p: Any) -> str:
    """'evicted', 'refused' (executor said no) or the limit scope that stopped it."""
    try:
        return "evicted" if ev.evict(p, "default", "Test", "because") else "refused"
    except EvictionLimitError as err:
        return err.scope


# (id, limits, pods as (name, node, namespace), expected outcome per pod in order)
LIMIT_CASES: list[tuple[str, Limits, list[tuple[str, str, str]], list[str]]] = [
    ("no limits", Limits(), [("a", "n1", "x"), ("b", "n1", "x"), ("c", "n1", "x")],
     ["evicted", "evicted", "evicted"]),
    ("total 0 means no evictions", Limits(total=0), [("a", "n1", "x"), ("b", "n2", "y")],
     ["total", "total"]),
    ("total 2", Limits(total=2), [("a", "n1", "x"), ("b", "n2", "y"), ("c", "n1", "z")],
     ["evicted", "evicted", "total"]),
    ("total is checked before node and namespace",
     Limits(total=1, per_node=1, per_namespace=1), [("a", "n1", "x"), ("b", "n1", "x")],
     ["evicted", "total"]),
    ("total 0 is checked before node 0 and namespace 0",
     Limits(total=0, per_node=0, per_namespace=0), [("a", "n1", "x")], ["total"]),
    ("per node 1", Limits(per_node=1),
     [("a", "n1", "x"), ("b", "n1", "y"), ("c", "n2", "x"), ("d", "n2", "z")],
     ["evicted", "node", "evicted", "node"]),
    ("per node 0", Limits(per_node=0), [("a", "n1", "x")], ["node"]),
    ("per node does not apply to a pod without nodeName", Limits(per_node=0),
     [("a", "", "x"), ("b", "", "x")], ["evicted", "evicted"]),
    ("node is checked before namespace", Limits(per_node=1, per_namespace=1),
     [("a", "n1", "x"), ("b", "n1", "x")], ["evicted", "node"]),
    ("per namespace 1", Limits(per_namespace=1),
     [("a", "n1", "x"), ("b", "n2", "x"), ("c", "n2", "y"), ("d", "n1", "y")],
     ["evicted", "namespace", "evicted", "namespace"]),
    ("per namespace 2", Limits(per_namespace=2),
     [("a", "n1", "x"), ("b", "n2", "x"), ("c", "n2", "x")], ["evicted", "evicted", "namespace"]),
    ("all three, none reached", Limits(total=3, per_node=2, per_namespace=2),
     [("a", "n1", "x"), ("b", "n1", "y"), ("c", "n2", "x")], ["evicted", "evicted", "evicted"]),
    ("limits apply to the pods already counted, not the refused ones",
     Limits(total=3, per_node=1), [("a", "n1", "x"), ("b", "n1", "x"), ("c", "n2", "x"),
                                   ("d", "n2", "x")],
     ["evicted", "node", "evicted", "node"]),
]


@pytest.mark.parametrize(("limits", "specs", "expected"), [c[1:] for c in LIMIT_CASES],
                         ids=[c[0] for c in LIMIT_CASES])
def test_limits(limits: Limits, specs: list[tuple[str, str, str]], expected: list[str]) -> None:
    pods = [pod(name, node_name, namespace=ns) for name, node_name, ns in specs]
    ev, executor = evictor_for(limits, *pods)
    assert [attempt(ev, p) for p in pods] == expected
    evicted = [p.name for p, outcome in zip(pods, expected, strict=True) if outcome == "evicted"]
    assert [p.name for p in executor.evicted] == evicted
    assert ev.total == len(evicted)


def test_limited_decisions_carry_upstream_messages() -> None:
    pods = [pod("a", "n1", namespace="x"), pod("b", "n1", namespace="y"),
            pod("c", "n2", namespace="x"), pod("d", "n2", namespace="z"),
            pod("e", "n2", namespace="z")]
    ev, _ = evictor_for(Limits(total=2, per_node=1, per_namespace=1), *pods)
    outcomes = [attempt(ev, p) for p in pods]
    assert outcomes == ["evicted", "node", "namespace", "evicted", "total"]
    limited = [(d.pod, d.node, d.reason, d.plugin, d.profile) for d in ev.log.decisions
               if d.outcome == "limited"]
    assert limited == [("b", "n1", NODE_MSG, "Test", "default"),
                       ("c", "n2", NAMESPACE_MSG, "Test", "default"),
                       ("e", "n2", TOTAL_MSG, "Test", "default")]
    assert [d.pod for d in ev.log.evictions()] == ["a", "d"]


def test_limit_error_message_and_scope() -> None:
    ev, _ = evictor_for(Limits(total=0), pod("a"))
    with pytest.raises(EvictionLimitError, match=TOTAL_MSG) as info:
        ev.evict(pod("a"), "default", "Test", "r")
    assert info.value.scope == "total"


def test_refused_evictions_do_not_count() -> None:
    """A PDB refusal is not an eviction: it uses up no limit."""
    pdb = _pdb_allowing(0)
    blocked = pod("blocked", "n1", labels={"app": "web"})
    other = pod("other", "n1")
    ev, executor = evictor_for(Limits(total=1, per_node=1), blocked, other)
    executor.snapshot.add(pdb)
    assert attempt(ev, blocked) == "refused"
    assert attempt(ev, other) == "evicted"
    assert [d.outcome for d in ev.log.decisions] == ["pdb-blocked", "evicted"]


def _pdb_allowing(n: int) -> Any:
    from builders import decode

    return decode("PodDisruptionBudget", {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": n}})


def test_new_cycle_resets_counters() -> None:
    pods = [pod(f"p{i}", "n1", namespace="x") for i in range(4)]
    ev, _ = evictor_for(Limits(total=1, per_node=1, per_namespace=1), *pods)
    assert attempt(ev, pods[0]) == "evicted"
    assert attempt(ev, pods[1]) == "total"
    ev.new_cycle()
    assert (ev.total, ev.by_node, ev.by_namespace) == (0, {}, {})
    assert attempt(ev, pods[1]) == "evicted"
    assert attempt(ev, pods[2]) == "total"


def test_limits_are_shared_by_every_plugin_of_a_profile() -> None:
    pods = [pod("a", "n1"), pod("b", "n1")]
    snap = snapshot(node("n1"), node("n2"), *pods)
    first, executor = handle_for(snap, plugin="First", limits=Limits(per_node=1))
    assert first.evict(pods[0], "r") is True
    second = type(first)(snap, first.evictor, first.clock, first.log, "default", "Second")
    with pytest.raises(EvictionLimitError):
        second.evict(pods[1], "r")
    assert executor.evicted == ["a"]


def test_policy_keys_map_to_limits() -> None:
    policy = policy_from_document("policy.yaml", {
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictTotal": 0, "maxNoOfPodsToEvictPerNode": 2,
        "maxNoOfPodsToEvictPerNamespace": 3, "profiles": []}, PLUGINS)
    assert (policy.limits.total, policy.limits.per_node, policy.limits.per_namespace) == (0, 2, 3)
    unset = policy_from_document("policy.yaml", {
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": []}, PLUGINS)
    assert (unset.limits.total, unset.limits.per_node, unset.limits.per_namespace) == (
        None, None, None)


# --- run_cycle: order and skipping -------------------------------------------------------------
class Recorder:
    """A fake deschedule/balance plugin recording when it ran and on which nodes."""

    calls: ClassVar[list[tuple[str, str, list[str]]]] = []

    def __init__(self, args: Any, handle: Any) -> None:
        self.name = f"{handle.profile}/{handle.plugin}"

    def deschedule(self, nodes: list[Node]) -> None:
        Recorder.calls.append(("deschedule", self.name, [n.name for n in nodes]))

    def balance(self, nodes: list[Node]) -> None:
        Recorder.calls.append(("balance", self.name, [n.name for n in nodes]))


# The real plugins and three that record their calls.
RECORDING = {**PLUGINS, **{name: PluginSpec(
    name=name, extension_points=frozenset({"deschedule", "balance"}), args_type=dict,
    factory=Recorder) for name in ("FakeD", "FakeB", "FakeBoth")}}


@pytest.fixture
def recorder() -> list[tuple[str, str, list[str]]]:
    Recorder.calls = []
    return Recorder.calls


def profile(name: str, deschedule: list[str], balance: list[str]) -> ProfileConfig:
    plugins = [*deschedule, *balance]
    return ProfileConfig(name=name, args=dict.fromkeys(plugins),
                         enabled={"deschedule": deschedule, "balance": balance})


def descheduler(snap: Any, *profiles: ProfileConfig, limits: Limits | None = None
                ) -> tuple[Descheduler, SimulationExecutor]:
    policy = Policy(path="test", format="v1alpha2", profiles=list(profiles), plugins=RECORDING,
                    limits=limits or Limits())
    executor = SimulationExecutor(snap)
    return Descheduler(policy, snap, executor, Clock(NOW)), executor


def test_deschedule_of_every_profile_runs_before_any_balance(
        recorder: list[tuple[str, str, list[str]]]) -> None:
    snap = snapshot(node("n1"), node("n2"))
    d, _ = descheduler(snap, profile("p1", ["FakeD"], ["FakeB"]),
                       profile("p2", ["FakeD", "FakeBoth"], ["FakeBoth", "FakeB"]))
    assert d.run_cycle(1) is None
    assert [(ep, name) for ep, name, _ in recorder] == [
        ("deschedule", "p1/FakeD"),
        ("deschedule", "p2/FakeD"),
        ("deschedule", "p2/FakeBoth"),
        ("balance", "p1/FakeB"),
        ("balance", "p2/FakeBoth"),
        ("balance", "p2/FakeB"),
    ]
    assert all(nodes == ["n1", "n2"] for _, _, nodes in recorder)


def test_plugin_in_two_extension_points_is_one_instance(
        recorder: list[tuple[str, str, list[str]]]) -> None:
    snap = snapshot(node("n1"), node("n2"))
    d, _ = descheduler(snap, profile("p", ["FakeBoth"], ["FakeBoth"]))
    [prof] = d.profiles
    assert prof.deschedule[0][1] is prof.balance[0][1]


@pytest.mark.parametrize(("node_list", "skipped"), [
    ([], True),
    ([node("n1")], True),
    ([node("n1"), node("n2", ready=False)], True),
    ([node("n1", ready=False), node("n2", ready=False), node("n3")], True),
    ([node("n1"), node("n2")], False),
    ([node("n1"), node("n2", unschedulable=True)], False),  # unschedulable nodes are kept
    ([node("n1"), node("n2"), node("n3", ready=False)], False),
], ids=["no nodes", "one node", "one ready of two", "one ready of three", "two ready",
        "unschedulable counts", "two ready of three"])
def test_cycle_needs_two_ready_nodes(recorder: list[tuple[str, str, list[str]]],
                                     node_list: list[Any], skipped: bool) -> None:
    snap = snapshot(*node_list, pod("a", "n1"))
    d, _ = descheduler(snap, profile("p", ["FakeD"], ["FakeB"]))
    result = d.run_cycle(1)
    if skipped:
        assert result == SKIP_FEW_NODES
        assert recorder == []
    else:
        assert result is None
        ready = [n.name for n in node_list if n.ready]
        assert recorder == [("deschedule", "p/FakeD", ready), ("balance", "p/FakeB", ready)]


def test_policy_node_selector_picks_the_cycle_nodes(
        recorder: list[tuple[str, str, list[str]]]) -> None:
    snap = snapshot(node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "a"}),
                    node("n3", labels={"pool": "b"}))
    d, _ = descheduler(snap, profile("p", ["FakeD"], []))
    d.policy.node_selector = lambda labels: labels.get("pool") == "b"
    assert d.run_cycle(1) == SKIP_FEW_NODES
    d.policy.node_selector = lambda labels: labels.get("pool") == "a"
    assert d.run_cycle(2) is None
    assert recorder == [("deschedule", "p/FakeD", ["n1", "n2"])]


def _plt(max_age: int = 3600) -> PodLifeTimeArgs:
    return PodLifeTimeArgs(max_pod_life_time_seconds=max_age)


def test_real_plugins_share_global_limits_across_profiles_and_cycles() -> None:
    """PodLifeTime in two profiles under maxNoOfPodsToEvictTotal=1: one eviction per cycle in
    all; the counters are reset by the next cycle."""
    pods = [pod(f"p{i}", f"n{i % 2 + 1}", created=f"2026-11-2{i}T00:00:00Z") for i in range(4)]
    snap = snapshot(node("n1"), node("n2"), *pods)
    cfg = [ProfileConfig(name=name, args={"PodLifeTime": _plt()},
                         enabled={"deschedule": ["PodLifeTime"]}) for name in ("a", "b")]
    d, executor = descheduler(snap, *cfg, limits=Limits(total=1))
    d.run_cycle(1)
    assert [p.name for p in executor.evicted] == ["p0"]
    d.run_cycle(2)
    assert [p.name for p in executor.evicted] == ["p0", "p1"]
    evictions = d.log.evictions()
    assert [(e.cycle, e.profile, e.pod) for e in evictions] == [(1, "a", "p0"), (2, "a", "p1")]
    limited = [(x.cycle, x.profile, x.reason) for x in d.log.decisions if x.outcome == "limited"]
    # Each plugin instance stops at its first total-limit refusal.
    assert limited == [(1, "a", TOTAL_MSG), (1, "b", TOTAL_MSG), (2, "a", TOTAL_MSG),
                       (2, "b", TOTAL_MSG)]


def test_real_plugins_deschedule_before_balance_across_profiles() -> None:
    """Profile 'first' balances (RemoveDuplicates), profile 'second' deschedules (PodLifeTime):
    PodLifeTime still runs first and takes the old pod the duplicates check would have taken."""
    from desched.plugins.removeduplicates import RemoveDuplicatesArgs

    old = pod("old", "n1", created="2026-11-01T00:00:00Z")
    dups = [pod(f"d{i}", "n1", created="2026-11-22T11:00:00Z") for i in range(2)]
    snap = snapshot(node("n1"), node("n2"), old, *dups)
    balance = ProfileConfig(name="first", args={"RemoveDuplicates": RemoveDuplicatesArgs()},
                            enabled={"balance": ["RemoveDuplicates"]})
    deschedule = ProfileConfig(name="second", args={"PodLifeTime": _plt(86400)},
                               enabled={"deschedule": ["PodLifeTime"]})
    d, executor = descheduler(snap, balance, deschedule)
    d.run_cycle(1)
    # PodLifeTime evicts "old" first; then RemoveDuplicates sees d0, d1 on n1 of two nodes:
    # ceil(2/2)=1, so d1 goes.
    assert [p.name for p in executor.evicted] == ["old", "d1"]
    assert [(e.profile, e.plugin) for e in d.log.evictions()] == [
        ("second", "PodLifeTime"), ("first", "RemoveDuplicates")]

"""RemovePodsViolatingInterPodAntiAffinity's includeSoftConstraints: a pod whose preferred pod
anti-affinity is violated is evicted once the scheduler model places its replacement where the
term is no longer violated, and kept, with the reason, when the replacement would come back,
land where the term still selects a pod (running, or the replacement of a pod evicted in the
same run), or nowhere; the required pass is upstream's either way."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import NOW, args, handle_for, node, pod, snapshot
from desched.framework.evictor import Limits
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.removepodsviolatinginterpodantiaffinity import (
    PLUGIN,
    RemovePodsViolatingInterPodAntiAffinity,
    RemovePodsViolatingInterPodAntiAffinityArgs,
    validate,
)
from desched.simulate.simulation import run_simulation

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / \
    "RemovePodsViolatingInterPodAntiAffinity-preferred"
HOST = "kubernetes.io/hostname"
SOFT = {"includeSoftConstraints": True}


def preferring(app: str, weight: int = 100) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": {"topologyKey": HOST,
                                               "labelSelector": {"matchLabels": {"app": app}}}}]}}}


def web(name: str, node_name: str, **kw: Any) -> Any:
    return pod(name, node_name, labels={"app": "web"}, spec=preferring("web"), **kw)


def run(raw: dict[str, Any], *objects: Any, limits: Limits | None = None
        ) -> tuple[list[str], Any, RemovePodsViolatingInterPodAntiAffinity]:
    snap = snapshot(*objects)
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, {}), setup)
    handle, executor = handle_for(snap, plugin=PLUGIN, limits=limits, filters=[evictor])
    plugin = RemovePodsViolatingInterPodAntiAffinity(
        args(RemovePodsViolatingInterPodAntiAffinityArgs, raw), handle)
    plugin.deschedule(snap.ready_nodes())
    return executor.evicted, handle, plugin


def kept(handle: Any) -> list[str]:
    return [reason for (_, _, reason) in handle.log.filtered_counts]


def test_without_the_opt_in_preferred_terms_are_ignored() -> None:
    assert run({}, node("n1"), node("n2"), web("w0", "n1"), web("w1", "n1"))[0] == []


def test_a_co_located_replica_moves_to_the_free_node() -> None:
    evicted, handle, _ = run(SOFT, node("n1"), node("n2"), node("n3"), web("w0", "n1"),
                             web("w1", "n1"), web("w2", "n2"))
    assert evicted == ["w0"]  # w1 is then alone on n1
    assert handle.log.evictions()[0].reason == (
        "pod's preferred anti-affinity (weight 100, topologyKey kubernetes.io/hostname) selects "
        "pod default/w1 on the same node; its replacement would land on n3 (kube-default), "
        "where no pod it selects runs (includeSoftConstraints)")


def test_no_better_node_keeps_the_pods() -> None:
    """Every node runs a replica: the model's choice still holds one, so both stay."""
    evicted, handle, _ = run(SOFT, node("n1"), node("n2"), web("w0", "n1"), web("w1", "n1"),
                             web("w2", "n2"))
    assert evicted == []
    assert kept(handle) == [
        f"pod's preferred anti-affinity (weight 100, topologyKey kubernetes.io/hostname) selects "
        f"pod default/{other} on the same node, but its replacement would land on n2 "
        f"(kube-default), where it still selects pod default/w2 (includeSoftConstraints)"
        for other in ("w1", "w0")]


def test_a_replacement_that_would_come_back_keeps_the_pod() -> None:
    """n2 is tainted: the only node that takes the replacement is the pod's own."""
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    evicted, handle, _ = run(SOFT, node("n1"), node("n2", taints=taint), web("w0", "n1"),
                             web("w1", "n1"))
    assert evicted == []
    assert kept(handle)[0].endswith(", but its replacement would land on n1 again (kube-default) "
                                    "(includeSoftConstraints)")


def test_two_replacements_are_not_sent_to_the_same_free_node() -> None:
    """Three replicas share n1 and n2 is free: the first goes to n2; the model would send the
    others there too (it does not see the replacement coming), so they are kept: two of three
    on n1 is the best two nodes allow."""
    evicted, handle, _ = run(SOFT, node("n1"), node("n2"), web("w0", "n1"), web("w1", "n1"),
                             web("w2", "n1"))
    assert evicted == ["w0"]
    assert kept(handle) == [
        f"pod's preferred anti-affinity (weight 100, topologyKey kubernetes.io/hostname) selects "
        f"pod default/{other} on the same node, but its replacement would land on n2 "
        f"(kube-default), where the replacement of pod default/w0, evicted this run, is "
        f"expected (includeSoftConstraints)" for other in ("w2", "w1")]


def test_equally_good_nodes_take_one_replacement_each() -> None:
    """n2 and n3 score the same: the model picks n3 for both w0 and w1 (by name), but
    kube-scheduler picks at random among them, so the second goes to n2, the tied node where no
    replacement is due."""
    evicted, handle, _ = run(SOFT, node("n1"), node("n2"), node("n3"), web("w0", "n1"),
                             web("w1", "n1"), web("w2", "n1"))
    assert evicted == ["w0", "w1"]
    assert [re.search(r"land on (n\d)", d.reason).group(1)  # type: ignore[union-attr]
            for d in handle.log.evictions()] == ["n3", "n2"]


def test_required_terms_are_upstreams_first() -> None:
    required = {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "db"}}}]}}}
    evicted, handle, _ = run(SOFT, node("n1"), node("n2"), node("n3"),
                             pod("a", "n1", labels={"app": "x"}, spec=required),
                             pod("db", "n1", labels={"app": "db"}), web("w0", "n2"),
                             web("w1", "n2"))
    assert evicted == ["a", "w0"]
    assert handle.log.evictions()[0].reason.startswith("pod's required anti-affinity")


def test_the_total_limit_ends_the_soft_pass() -> None:
    objects = [node("n1"), node("n2"), node("n3"), node("n4"), web("w0", "n1"), web("w1", "n1"),
               pod("c0", "n2", labels={"app": "c"}, spec=preferring("c")),
               pod("c1", "n2", labels={"app": "c"}, spec=preferring("c"))]
    assert run(SOFT, *objects)[0] == ["w0", "c0"]
    assert run(SOFT, *objects, limits=Limits(total=1))[0] == ["w0"]


def test_explain_says_why_a_pod_was_passed_over() -> None:
    snap_objects = [node("n1"), node("n2"), web("w0", "n1"), pod("plain", "n2")]
    snap = snapshot(*snap_objects)
    setup, _ = handle_for(snap)
    handle, _ = handle_for(snap, plugin=PLUGIN, filters=[DefaultEvictor(
        args(DefaultEvictorArgs, {}), setup)])
    handle.log.explain_pods = frozenset({"default/w0", "default/plain"})
    plugin = RemovePodsViolatingInterPodAntiAffinity(
        args(RemovePodsViolatingInterPodAntiAffinityArgs, SOFT), handle)
    plugin.deschedule(snap.ready_nodes())
    assert plugin.verdict(snap.pods["default/w0"], []) == (
        "no other pod in its topology domain (kubernetes.io/hostname) matches its preferred pod "
        "anti-affinity")
    assert plugin.verdict(snap.pods["default/plain"], []) == (
        "pod has no required or preferred pod anti-affinity (a pod that another pod's term "
        "selects is not evicted for it)")


@pytest.mark.parametrize(("raw", "errors"), [
    ({"schedulerConfig": "sched.yaml"},
     ["schedulerConfig is only used when includeSoftConstraints is true"]),
    ({**SOFT, "schedulerConfig": "/nonexistent/sched.yaml"},
     ["schedulerConfig: /nonexistent/sched.yaml: No such file or directory"]),
    ({**SOFT, "schedulerConfig": "-"},
     ["schedulerConfig: must name a file (standard input holds the policy or nothing)"]),
    (SOFT, []),
])
def test_validation(raw: dict[str, Any], errors: list[str]) -> None:
    got = validate(args(RemovePodsViolatingInterPodAntiAffinityArgs, raw))
    assert [e.split(":")[0] for e in got] == [e.split(":")[0] for e in errors]
    if errors and "nonexistent" not in errors[0]:
        assert got == errors


@settings(max_examples=40, deadline=None)
@given(replicas=st.lists(st.integers(0, 4), min_size=1, max_size=7))
def test_each_eviction_targets_a_node_without_a_replica(replicas: list[int]) -> None:
    """Whatever the placement of one workload over five nodes: every eviction names a target
    that held no replica, no two evictions the same target, and an evicted pod had a partner
    on its node."""
    nodes = [node(f"n{i}") for i in range(5)]
    pods = [web(f"w{i}", f"n{where}") for i, where in enumerate(replicas)]
    evicted, handle, _ = run(SOFT, *nodes, *pods)
    holding = set(f"n{where}" for where in replicas)
    targets = [re.search(r"would land on (n\d)", d.reason).group(1)  # type: ignore[union-attr]
               for d in handle.log.evictions()]
    assert len(set(targets)) == len(targets)
    assert not set(targets) & holding
    for name in evicted:
        own = f"n{replicas[int(name[1:])]}"
        assert replicas.count(int(own[1:])) >= 2


def test_example() -> None:
    result = run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], NOW,
                            1, False)
    assert [(d.pod, d.node) for d in result.evictions] == [("web-5d8f9-0", "worker-1")]

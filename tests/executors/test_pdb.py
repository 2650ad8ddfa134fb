"""PodDisruptionBudgets in simulation, as the policy/v1 Eviction API applies them:
status.disruptionsAllowed when present, otherwise computed from the healthy pods in the snapshot;
each eviction uses one disruption up; evicted pods still count as expected."""

from __future__ import annotations

from typing import Any

import pytest

from builders import decode, handle_for, node, pod, snapshot
from desched.executors.pdb import MULTIPLE_PDBS, TOO_MANY_REQUESTS
from desched.executors.simulation import SimulationExecutor
from desched.framework.evictor import Limits

WEB = {"app": "web"}


def budget(name: str = "web", selector: dict[str, str] | None = None,
           status: dict[str, Any] | None = None, namespace: str = "default",
           **spec: Any) -> Any:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": selector or WEB}, **spec}}
    if status is not None:
        body["status"] = status
    return decode("PodDisruptionBudget", body)


def web(name: str, ready: bool = True, node_name: str = "n1", **kw: Any) -> Any:
    kw.setdefault("labels", dict(WEB))
    return pod(name, node_name, ready=ready, **kw)


def evict_all(pdbs: list[Any], pods: list[Any], order: list[str] | None = None
              ) -> tuple[list[bool], SimulationExecutor]:
    """Try to evict `order` (default: every pod, in order); whether each one went."""
    snap = snapshot(node("n1"), node("n2"), *pdbs, *pods)
    executor = SimulationExecutor(snap)
    by_name = {p.name: p for p in pods}
    results = [executor.evict(by_name[name], "default", "Test", "r").ok
               for name in (order or [p.name for p in pods])]
    return results, executor


def healthy(n: int, prefix: str = "h") -> list[Any]:
    return [web(f"{prefix}{i}") for i in range(n)]


# (id, PDB spec/status, pods, eviction outcomes in order)
CASES: list[tuple[str, dict[str, Any], list[Any], list[bool]]] = [
    # status.disruptionsAllowed is honoured and consumed one per eviction.
    ("status allows 2 of 4", {"minAvailable": 1, "status": {"disruptionsAllowed": 2}},
     healthy(4), [True, True, False, False]),
    ("status allows 0", {"minAvailable": 1, "status": {"disruptionsAllowed": 0}},
     healthy(4), [False, False, False, False]),
    ("status wins over a spec that would allow none",
     {"minAvailable": 4, "status": {"disruptionsAllowed": 3}}, healthy(4),
     [True, True, True, False]),
    ("status wins over a spec that would allow all",
     {"maxUnavailable": "100%", "status": {"disruptionsAllowed": 1}}, healthy(4),
     [True, False, False, False]),
    # Computed from the healthy pods when status is absent.
    ("minAvailable int 2 of 4", {"minAvailable": 2}, healthy(4), [True, True, False, False]),
    ("minAvailable int equal to the pods", {"minAvailable": 3}, healthy(3),
     [False, False, False]),
    ("minAvailable int counts only Ready pods", {"minAvailable": 2},
     [*healthy(2), web("u0", ready=False), web("u1", ready=False)], [False, False]),
    ("minAvailable 50% of 4: 2 allowed", {"minAvailable": "50%"}, healthy(4),
     [True, True, False, False]),
    ("minAvailable 50% of 5 rounds up to 3: 2 allowed, evicted pods stay expected",
     {"minAvailable": "50%"}, healthy(5), [True, True, False, False, False]),
    ("minAvailable 0%", {"minAvailable": "0%"}, healthy(2), [True, True]),
    ("maxUnavailable int 1", {"maxUnavailable": 1}, healthy(4), [True, False, False, False]),
    ("maxUnavailable int 2 of 5", {"maxUnavailable": 2}, healthy(5),
     [True, True, False, False, False]),
    ("maxUnavailable 0", {"maxUnavailable": 0}, healthy(3), [False, False, False]),
    ("maxUnavailable 30% of 10 rounds up to 3; evicted pods stay expected",
     {"maxUnavailable": "30%"}, healthy(10),
     [True, True, True, False, False, False, False, False, False, False]),
    ("maxUnavailable 25% of 5 rounds up to 2", {"maxUnavailable": "25%"}, healthy(5),
     [True, True, False, False, False]),
    ("maxUnavailable 1 already used by an unready pod", {"maxUnavailable": 1},
     [*healthy(3), web("u", ready=False)], [False, False, False]),
    ("a budget naming neither allows no disruption", {}, healthy(3), [False, False, False]),
]


@pytest.mark.parametrize(("spec", "pods", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_budget(spec: dict[str, Any], pods: list[Any], expected: list[bool]) -> None:
    spec = dict(spec)
    status = spec.pop("status", None)
    order = [p.name for p in pods if p.name.startswith("h")]
    results, executor = evict_all([budget(status=status, **spec)], pods, order)
    assert results == expected
    assert [p.name for p in executor.evicted] == [n for n, ok in zip(order, results,
                                                                     strict=True) if ok]


def test_refusal_message_is_the_eviction_apis() -> None:
    snap = snapshot(node("n1"), node("n2"), budget(minAvailable=1), web("only"))
    executor = SimulationExecutor(snap)
    result = executor.evict(snap.pods["default/only"], "default", "Test", "r")
    assert not result.ok
    assert result.outcome == "pdb-blocked"
    # The API's message, then the budget and its numbers (what the API's details say).
    assert result.message == (f"{TOO_MANY_REQUESTS} (PodDisruptionBudget default/web: "
                              f"healthy 1, desired healthy 1, disruptionsAllowed 0)")
    assert "default/only" in snap.pods  # nothing happened


def test_pods_outside_the_selector_or_namespace_are_not_covered() -> None:
    pods = [pod("other", labels={"app": "db"}), pod("web-elsewhere", namespace="x", labels=WEB)]
    results, _ = evict_all([budget(minAvailable="100%")], pods)
    assert results == [True, True]


def test_budgets_are_counted_separately() -> None:
    pods = [web("w0"), web("w1"), pod("d0", labels={"app": "db"}), pod("d1", labels={"app": "db"})]
    pdbs = [budget("web", maxUnavailable=1), budget("db", selector={"app": "db"}, maxUnavailable=1)]
    results, _ = evict_all(pdbs, pods, ["w0", "w1", "d0", "d1"])
    assert results == [True, False, True, False]


def test_pod_matching_two_budgets_is_refused() -> None:
    pods = [web("w0", labels={"app": "web", "tier": "fe"}), web("w1")]
    pdbs = [budget("by-app", maxUnavailable=5),
            budget("by-tier", selector={"tier": "fe"}, maxUnavailable=5)]
    snap = snapshot(node("n1"), node("n2"), *pdbs, *pods)
    executor = SimulationExecutor(snap)
    result = executor.evict(snap.pods["default/w0"], "default", "Test", "r")
    assert not result.ok
    assert result.message == MULTIPLE_PDBS
    assert executor.evict(snap.pods["default/w1"], "default", "Test", "r").ok


@pytest.mark.parametrize(("phase", "meta"), [
    ("Pending", None),
    ("Succeeded", None),
    ("Failed", None),
    ("Running", {"deletionTimestamp": "2026-11-22T11:00:00Z"}),
], ids=["pending", "succeeded", "failed", "terminating"])
def test_pending_terminal_and_terminating_pods_ignore_the_budget(
        phase: str, meta: dict[str, Any] | None) -> None:
    subject = web("x", ready=False, phase=phase, meta=meta)
    pods = [subject, web("h0"), web("h1")]
    # An unhealthy budget (2 healthy of 3 desired) that allows nothing: still no obstacle.
    results, _ = evict_all([budget(minAvailable=3)], pods, ["x", "h0"])
    assert results == [True, False]
    # The ignored pod uses no disruption: one healthy pod may still go.
    results, _ = evict_all([budget(minAvailable=1, status={"disruptionsAllowed": 1})], pods,
                           ["x", "h0", "h1"])
    assert results == [True, True, False]


@pytest.mark.parametrize("status", [None, {"disruptionsAllowed": 0, "currentHealthy": 3,
                                           "desiredHealthy": 3, "expectedPods": 4}],
                         ids=["computed", "from status"])
def test_unhealthy_pod_with_healthy_budget_is_evicted_without_using_a_disruption(
        status: dict[str, Any] | None) -> None:
    pods = [web("u", ready=False), *healthy(3)]
    results, _ = evict_all([budget(minAvailable=3, status=status)], pods, ["u", "h0"])
    assert results == [True, False]


def test_unhealthy_pod_keeps_counting_as_expected() -> None:
    # maxUnavailable 1 over 4 pods, one unready: the budget is healthy (3 of desired 3), so the
    # unready pod may go for free. Its workload will recreate it, so it stays expected: the
    # healthy pods are still at the minimum and none may go.
    pods = [web("u", ready=False), *healthy(3)]
    results, _ = evict_all([budget(maxUnavailable=1)], pods, ["u", "h0", "h1"])
    assert results == [True, False, False]


def test_evicted_pending_pod_keeps_counting_as_expected() -> None:
    pods = [web("pending", ready=False, phase="Pending"), *healthy(3)]
    results, _ = evict_all([budget(maxUnavailable=1)], pods, ["pending", "h0"])
    assert results == [True, False]


@pytest.mark.parametrize("status", [None, {"disruptionsAllowed": 0, "currentHealthy": 2,
                                           "desiredHealthy": 3}],
                         ids=["computed", "from status"])
def test_unhealthy_pod_with_unhealthy_budget_is_refused(status: dict[str, Any] | None) -> None:
    pods = [web("u", ready=False), *healthy(2)]
    results, _ = evict_all([budget(minAvailable=3, status=status)], pods, ["u"])
    assert results == [False]


def test_unhealthy_pod_under_a_zero_desired_budget_uses_a_disruption() -> None:
    # desiredHealthy 0 is not a "healthy budget" (the API requires desiredHealthy > 0), so the
    # unready pod goes through the ordinary check: it may go while disruptions are allowed, and
    # uses one up.
    pods = [web("u", ready=False), *healthy(1)]
    results, _ = evict_all([budget(maxUnavailable=1, status={
        "disruptionsAllowed": 1, "currentHealthy": 1, "desiredHealthy": 0})], pods, ["u", "h0"])
    assert results == [True, False]


def test_always_allow_evicts_unhealthy_pods_of_an_unhealthy_budget() -> None:
    pods = [web("u0", ready=False), web("u1", ready=False), *healthy(2)]
    spec = {"minAvailable": 3, "unhealthyPodEvictionPolicy": "AlwaysAllow"}
    results, _ = evict_all([budget(**spec)], pods, ["u0", "u1", "h0"])
    assert results == [True, True, False]
    spec["unhealthyPodEvictionPolicy"] = "IfHealthyBudget"
    results, _ = evict_all([budget(**spec)], pods, ["u0", "u1", "h0"])
    assert results == [False, False, False]


def test_always_allow_does_not_free_healthy_pods() -> None:
    results, _ = evict_all([budget(minAvailable=2, unhealthyPodEvictionPolicy="AlwaysAllow")],
                           healthy(2))
    assert results == [False, False]


def test_budget_is_tracked_across_plugins_and_cycles() -> None:
    """The allowance is per run: a new cycle does not give the disruptions back."""
    pods = healthy(4)
    snap = snapshot(node("n1"), node("n2"), budget(minAvailable=1, status={
        "disruptionsAllowed": 2}), *pods)
    handle, executor = handle_for(snap, limits=Limits())
    assert handle.evict(pods[0], "r") is True
    handle.evictor.evictor.new_cycle()
    assert handle.evict(pods[1], "r") is True
    assert handle.evict(pods[2], "r") is False
    assert executor.evicted == ["h0", "h1"]
    [blocked] = [d for d in handle.log.decisions if d.outcome == "pdb-blocked"]
    assert blocked.pod == "h2"
    assert blocked.reason.startswith(TOO_MANY_REQUESTS)
    assert blocked.reason.endswith("disruptionsAllowed 0)")


def test_negative_allowance_is_refused() -> None:
    results, _ = evict_all([budget(minAvailable=1, status={"disruptionsAllowed": -1})],
                           healthy(2))
    assert results == [False, False]


def test_a_workload_short_of_pods_has_no_disruption_to_spare() -> None:
    """maxUnavailable counts against the replicas the controller wants (3), not the pods that
    exist (2): with 2 healthy of 3 wanted and maxUnavailable 1, nothing may go."""
    from builders import decode, node, pod, snapshot
    from desched.executors.pdb import TOO_MANY_REQUESTS, BudgetTracker

    rs = decode("ReplicaSet", {"metadata": {"name": "rs-1", "namespace": "default",
                                            "uid": "uid-ReplicaSet-rs-1"},
                               "spec": {"replicas": 3}})
    budget = decode("PodDisruptionBudget", {
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "a"}}}})
    pods = [pod(f"p{i}", labels={"app": "a"}) for i in range(2)]
    tracker = BudgetTracker(snapshot(node("n1"), node("n2"), rs, budget, *pods))
    assert tracker.check(pods[0]) == (None, f"{TOO_MANY_REQUESTS} (PodDisruptionBudget "
                                            f"default/b: healthy 2, desired healthy 2, "
                                            f"disruptionsAllowed 0)")
    # The same budget over a workload that has all its pods allows one.
    full = decode("ReplicaSet", {"metadata": {"name": "rs-1", "namespace": "default",
                                              "uid": "uid-ReplicaSet-rs-1"},
                                 "spec": {"replicas": 2}})
    tracker = BudgetTracker(snapshot(node("n1"), node("n2"), full, budget, *pods))
    assert tracker.check(pods[0])[1] is None


def test_a_refusal_names_the_budget_as_it_is_after_each_change() -> None:
    """The refusal is worked out once per state of the budget: an eviction it allowed (a pod
    gone, a disruption used) or a pod coming back gives new numbers, never the old text."""
    pods = healthy(5)
    snap = snapshot(node("n1"), node("n2"), budget(minAvailable=3), *pods)
    executor = SimulationExecutor(snap)

    def refusal(p: Any) -> str | None:
        return executor.evict(p, "default", "Test", "r").message

    assert executor.evict(pods[0], "default", "Test", "r").ok
    assert executor.evict(pods[1], "default", "Test", "r").ok
    numbers = "healthy 3, desired healthy 3, disruptionsAllowed 0)"
    assert refusal(pods[2]).endswith(numbers)  # type: ignore[union-attr]
    assert refusal(pods[3]).endswith(numbers)  # type: ignore[union-attr]
    # A pod of the budget comes back (a replacement), healthy: one disruption is free again.
    snap.add_pod(web("h9", node_name="n2"))
    assert executor.evict(pods[2], "default", "Test", "r").ok
    # Back at three healthy of three desired: refused again, with the numbers as they are now.
    assert refusal(pods[3]).endswith(numbers)  # type: ignore[union-attr]


def test_a_standing_refusal_gives_way_once_a_replacement_frees_a_disruption() -> None:
    """The budget's other pods meet the same refusal while nothing changes; a replaced pod
    (simulate --reschedule) gives its disruption back, and the next attempt is counted anew."""
    pods = healthy(4)
    snap = snapshot(node("n1"), node("n2"),
                    budget(minAvailable=1, status={"disruptionsAllowed": 1}), *pods)
    executor = SimulationExecutor(snap)
    assert executor.evict(pods[0], "default", "Test", "r").ok
    first = executor.evict(pods[1], "default", "Test", "r")
    again = executor.evict(pods[2], "default", "Test", "r")
    assert not first.ok and first.message.endswith("disruptionsAllowed 0)")
    assert again == first
    executor.budgets.replaced(pods[0])
    assert executor.evict(pods[1], "default", "Test", "r").ok
    # Refused again, with the numbers as they are now (one healthy pod fewer).
    last = executor.evict(pods[2], "default", "Test", "r")
    assert not last.ok and "healthy 2, desired healthy 1, disruptionsAllowed 0" in last.message


def _replica_set(name: str, replicas: int) -> Any:
    return decode("ReplicaSet", {"metadata": {"name": name, "namespace": "default",
                                              "uid": f"uid-ReplicaSet-{name}"},
                                 "spec": {"replicas": replicas}})


def test_the_expected_count_follows_an_evicted_pod_without_a_workload() -> None:
    """maxUnavailable over a ReplicaSet's pod and a bare one: the bare pod's workload cannot be
    resolved, so the pods count (2, one may go); once it is evicted, the ReplicaSet's 5
    replicas do, and the refusal says so."""
    rs_pod = web("rs-0", owner=("ReplicaSet", "rs-1"))
    bare = web("bare", owner=None)
    snap = snapshot(node("n1"), node("n2"), _replica_set("rs-1", 5),
                    budget(maxUnavailable=1), rs_pod, bare)
    executor = SimulationExecutor(snap)
    assert executor.evict(bare, "default", "Test", "r").ok
    refused = executor.evict(rs_pod, "default", "Test", "r")
    assert refused.message.endswith("healthy 1, desired healthy 4, disruptionsAllowed 0)")


def test_the_expected_count_follows_pods_gone_other_than_by_eviction() -> None:
    """A covered pod leaving the snapshot without an eviction (a planned move) takes its
    workload out of the expected count at the next recount: rs-b's replica no longer counts
    once rs-b's pod is gone (2 expected, not 3), so a1 may go after a0 (the healthy count is
    kept by evictions alone)."""
    a0, a1 = (web(f"a{i}", owner=("ReplicaSet", "rs-a")) for i in range(2))
    b0 = web("b0", owner=("ReplicaSet", "rs-b"))
    snap = snapshot(node("n1"), node("n2"), _replica_set("rs-a", 2), _replica_set("rs-b", 1),
                    budget(maxUnavailable=1), a0, a1, b0)
    executor = SimulationExecutor(snap)
    assert executor.check_budget(a0).ok  # 3 expected, 3 healthy, 1 may go
    snap.remove_pod(b0)
    assert executor.evict(a0, "default", "Test", "r").ok
    assert executor.evict(a1, "default", "Test", "r").ok


def test_the_expected_count_stays_while_evicted_workloads_stay_wanted() -> None:
    """Evicting the pods of a budget one by one: each refusal counts the replicas the
    workloads want, evicted pods included (as a fresh count would)."""
    pods = [web(f"p{i}", owner=("ReplicaSet", "rs-1")) for i in range(4)]
    snap = snapshot(node("n1"), node("n2"), _replica_set("rs-1", 4),
                    budget(maxUnavailable=2), *pods)
    executor = SimulationExecutor(snap)
    outcomes = [executor.evict(p, "default", "Test", "r") for p in pods]
    assert [o.ok for o in outcomes] == [True, True, False, False]
    assert outcomes[3].message.endswith("healthy 2, desired healthy 2, disruptionsAllowed 0)")


def test_a_budget_with_its_status_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot taken from a cluster has the disruption controller's numbers in each
    budget's status: a refusal names them, and the snapshot's pods are not counted for it."""
    import desched.executors.pdb as pdb_module

    def no_count(*_: Any) -> Any:
        raise AssertionError("counted a budget that has its status")
    monkeypatch.setattr(pdb_module, "count_namespace", no_count)
    status = {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2,
              "expectedPods": 3}
    pods = [web("u", ready=False), *healthy(3)]
    snap = snapshot(node("n1"), node("n2"), budget(maxUnavailable=1, status=status), *pods)
    executor = SimulationExecutor(snap)
    went = [executor.evict(snap.pods[f"default/{name}"], "default", "Test", "r")
            for name in ("u", "h0", "h1")]
    assert [result.ok for result in went] == [True, True, False]
    assert went[2].message == (f"{TOO_MANY_REQUESTS} (PodDisruptionBudget default/web: "
                               f"healthy 3, desired healthy 2, disruptionsAllowed 0)")

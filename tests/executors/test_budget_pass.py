"""Every budget of a namespace counted in one pass: the same counts as walking each budget's
own pods, kept current by the tracker's eviction records, and a budget asked after a removal
the tracker did not record counted alone."""

from __future__ import annotations

from collections import Counter
from typing import Any

from builders import decode, node, pod, snapshot
from desched.executors.budget_pass import count_namespace
from desched.executors.simulation import SimulationExecutor
from desched.model.pod import Pod


def budget(name: str, app: str, namespace: str = "default", **spec: Any) -> Any:
    return decode("PodDisruptionBudget", {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec}})


def member(name: str, app: str, **kw: Any) -> Pod:
    kw.setdefault("labels", {"app": app})
    return pod(name, "n1", **kw)


def test_the_pass_counts_each_budget_as_its_own_pods_would() -> None:
    """Non-terminal pods are live, Ready and not terminating ones healthy, a Failed pod
    only names its owner; pods of another namespace or label count for no budget here."""
    pods = [member("w0", "web"), member("w1", "web", ready=False),
            member("w2", "web", phase="Failed", owner=("ReplicaSet", "rs-old")),
            member("w3", "web", meta={"deletionTimestamp": "2026-11-20T12:00:00Z"}),
            member("d0", "db", owner=("StatefulSet", "db")),
            member("x0", "web", namespace="other"), member("o0", "cache")]
    web, db = budget("web", "web"), budget("db", "db")
    snap = snapshot(node("n1"), web, db, budget("web", "web", namespace="other"), *pods)
    counts = count_namespace(snap, "default")
    assert (counts[id(web)].live, counts[id(web)].healthy) == (3, 1)
    assert (counts[id(db)].live, counts[id(db)].healthy) == (1, 1)
    owners: Counter[str] = Counter()
    for owned in counts[id(web)].owners.values():  # by reference tuple: these share none
        owners[owned.pod.metadata.owner_references[0].name] += owned.pods
    assert owners == {"rs-1": 3, "rs-old": 1}


def _refusal(executor: SimulationExecutor, victim: Pod) -> str:
    result = executor.evict(victim, "default", "Test", "r")
    assert not result.ok
    return result.message


def test_a_budget_counted_by_the_pass_follows_the_evictions_made_since() -> None:
    """Asking about web counts db too; db's pod evicted afterwards (one disruption allowed)
    leaves db's count at 1 healthy of 2 expected, as a count made then would say."""
    webs = [member(f"w{i}", "web") for i in range(2)]
    dbs = [member(f"d{i}", "db") for i in range(2)]
    snap = snapshot(node("n1"), budget("web", "web", maxUnavailable=0),
                    budget("db", "db", minAvailable=1), *webs, *dbs)
    executor = SimulationExecutor(snap)
    assert "PodDisruptionBudget default/web: healthy 2" in _refusal(executor, webs[0])
    assert executor.evict(dbs[0], "default", "Test", "r").ok
    assert _refusal(executor, dbs[1]).endswith(
        "healthy 1, desired healthy 1, disruptionsAllowed 0)")


def test_an_evicted_pod_without_a_workload_leaves_the_expected_count() -> None:
    """maxUnavailable over a ReplicaSet's 3 replicas (2 here) and a bare pod: the bare pod
    makes the pods count (3 expected, 1 may go); evicted, the ReplicaSet's 3 replicas do, as
    the pass's pods less the bare one say (2 healthy of 2 desired: refused)."""
    webs = [member(f"w{i}", "web") for i in range(2)]
    bare = member("bare", "web", owner=None)
    replica_set = decode("ReplicaSet", {"metadata": {"name": "rs-1", "namespace": "default",
                                                     "uid": "uid-rs-1"},
                                        "spec": {"replicas": 3}})
    snap = snapshot(node("n1"), replica_set, budget("web", "web", maxUnavailable=1), *webs, bare)
    executor = SimulationExecutor(snap)
    assert executor.evict(bare, "default", "Test", "r").ok
    assert _refusal(executor, webs[0]).endswith(
        "healthy 2, desired healthy 2, disruptionsAllowed 0)")


def test_a_budget_asked_after_an_unrecorded_removal_is_counted_alone() -> None:
    """A db pod leaves the snapshot other than by eviction (a planned move) after the pass:
    db's first count sees it gone (1 healthy), not the pass's 2."""
    webs = [member(f"w{i}", "web") for i in range(2)]
    dbs = [member(f"d{i}", "db") for i in range(3)]
    snap = snapshot(node("n1"), budget("web", "web", maxUnavailable=0),
                    budget("db", "db", minAvailable=2), *webs, *dbs)
    executor = SimulationExecutor(snap)
    _refusal(executor, webs[0])
    snap.remove_pod(dbs[2])
    assert _refusal(executor, dbs[0]).endswith(
        "healthy 2, desired healthy 2, disruptionsAllowed 0)")

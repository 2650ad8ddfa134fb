"""Replacement pods (docs/scheduler.md): new, placed by the model, carrying the evicted pod's usage;
metric times advance with the simulated clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from builders import NOW, decode, node, pod, snapshot
from desched.scheduler.kube_default import KubeDefault
from desched.scheduler.placement import reschedule
from desched.snapshot.clock import advance_metrics


def nodemetric(name: str, pods: dict[str, str]) -> Any:
    return decode("NodeMetric", {"metadata": {"name": name}, "status": {
        "updateTime": (NOW - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nodeMetric": {"systemUsage": {"resources": {"cpu": "0"}}},
        "podsMetric": [{"namespace": "default", "name": p, "podUsage": {"resources": {"cpu": c}}}
                       for p, c in pods.items()]}})


def test_a_replacement_is_a_new_running_ready_pod_with_the_usage_of_the_old() -> None:
    old = pod("web-1", "n1", created="2026-10-01T00:00:00Z",
              status={"containerStatuses": [{"restartCount": 7}]})
    snap = snapshot(node("n1"), node("n2"), old, pod("busy", "n1", cpu="3"),
                    nodemetric("n1", {"web-1": "1500m", "busy": "100m"}), nodemetric("n2", {}),
                    decode("PodMetrics", {"metadata": {"name": "web-1", "namespace": "default"},
                                          "timestamp": "2026-11-22T11:59:00Z",
                                          "containers": [{"name": "c", "usage": {"cpu": "1"}}]}))
    snap.remove_pod(old)
    later = NOW + timedelta(minutes=10)
    ((gone, new, where),) = reschedule([old], snap, 3, snap.ready_nodes(), KubeDefault(), later)
    assert (gone, where) == (old, "n2")
    assert new.name == "web-1-r3" and new.node_name == "n2"
    assert new.metadata.creation_timestamp == later
    assert new.status.start_time == later
    assert new.status.phase == "Running" and new.ready
    assert sum(c.restart_count for c in new.status.container_statuses) == 0
    assert snap.pods["default/web-1-r3"] is new
    # The measured usage moved with it: off n1's NodeMetric, onto n2's, and a PodMetrics.
    assert [e.name for e in snap.node_metrics["n1"].status.pods_metric] == ["busy"]
    moved = snap.node_metrics["n2"].status.pods_metric
    assert [(e.name, e.pod_usage.resources["cpu"]) for e in moved if e.pod_usage] == [
        ("web-1-r3", "1500m")]
    assert snap.metrics_pods["default/web-1-r3"].timestamp == later


def test_a_replacement_of_a_replacement_does_not_grow_its_name() -> None:
    old = pod("web-1-r3", "n1")
    snap = snapshot(node("n1"), old)
    snap.remove_pod(old)
    ((_, new, _),) = reschedule([old], snap, 5, snap.ready_nodes(), KubeDefault(), NOW)
    assert new.name == "web-1-r5"


def test_each_replacement_is_placed_while_the_later_evictions_still_run() -> None:
    """Live, a replacement is bound before the descheduler's next eviction, and the evicted
    pods terminate for seconds, counted on their node: x's replacement finds n1 full (x and y
    terminating) and goes to n2; y's fits nowhere until x and y are gone, then takes n1.
    Placed after every eviction with the pods gone, both would have gone to the emptied n1."""
    x, y = pod("x", "n1", cpu="2"), pod("y", "n1", cpu="2")
    snap = snapshot(node("n1"), node("n2"), x, y, pod("z", "n2", cpu="1", owner=None))
    snap.remove_pod(x)
    snap.remove_pod(y)
    placed = reschedule([x, y], snap, 1, snap.ready_nodes(), KubeDefault(), NOW)
    assert [(new.name, where) for _, new, where in placed] == [("x-r1", "n2"), ("y-r1", "n1")]
    assert "default/x" not in snap.pods and "default/y" not in snap.pods


def test_bare_pods_are_not_recreated() -> None:
    old = pod("bare", "n1", owner=None)
    snap = snapshot(node("n1"), old)
    snap.remove_pod(old)
    assert reschedule([old], snap, 1, snap.ready_nodes(), KubeDefault(), NOW) == []


def test_metric_times_advance_with_the_clock() -> None:
    snap = snapshot(node("n1"), nodemetric("n1", {}),
                    decode("NodeMetrics", {"metadata": {"name": "n1"},
                                           "timestamp": "2026-11-22T11:59:00Z"}))
    before = snap.node_metrics["n1"].status.update_time
    advance_metrics(snap, timedelta(seconds=600))
    assert snap.node_metrics["n1"].status.update_time == before + timedelta(seconds=600)
    assert snap.metrics_nodes["n1"].timestamp.isoformat() == "2026-11-22T12:09:00+00:00"


def test_a_most_allocated_scheduler_packs_what_high_node_utilization_drains() -> None:
    """With kube-scheduler's default profile the replacements of the pods HighNodeUtilization
    evicts from worker-3 land back on worker-3, which is drained again the next cycle; with the
    MostAllocated configuration upstream recommends they pack onto worker-2, and stay."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "HighNodeUtilization"

    def run(*extra: str) -> dict[str, Any]:
        proc = subprocess.run(
            [sys.executable, "-m", "desched", "simulate", "--policy",
             str(example / "policy.yaml"), "--snapshot", str(example / "cluster.yaml"),
             "--cycles", "3", "--reschedule", "--output", "json", *extra],
            capture_output=True, text=True, check=False, timeout=60)
        assert proc.returncode == 0, proc.stderr
        out: dict[str, Any] = json.loads(proc.stdout)
        return out

    default = run()
    assert len(default["evictions"]) == 6
    assert {r["node"] for r in default["rescheduled"]} == {"worker-3"}
    packed = run("--scheduler-config", str(example / "scheduler-config.yaml"))
    assert len(packed["evictions"]) == 2
    assert [(r["node"], r["replaces"]) for r in packed["rescheduled"]] == [
        ("worker-2", "shop/batch-0"), ("worker-2", "shop/api-0")]


ANTI_WEB = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}}}


def test_a_terminating_pod_still_holds_its_anti_affinity() -> None:
    """One web pod per node: while the evicted web pod terminates on n1 (kube-scheduler still
    counts it), its replacement cannot go there and takes n2, although n1 is emptier; a pod
    deleted at once (terminationGracePeriodSeconds 0) leaves n1 free for it."""
    for grace, expected in ((None, "n2"), (0, "n1")):
        spec = {**ANTI_WEB, **({"terminationGracePeriodSeconds": grace} if grace == 0 else {})}
        web = pod("web-1", "n1", labels={"app": "web"}, spec=spec)
        snap = snapshot(node("n1"), node("n2"), web, pod("busy", "n2", cpu="2", owner=None))
        snap.remove_pod(web)
        ((_, _, where),) = reschedule([web], snap, 1, snap.ready_nodes(), KubeDefault(), NOW)
        assert where == expected, grace
        assert "default/web-1" not in snap.pods  # gone once the cycle's replacements are placed
        # The guard's question about the running pod gets the same answer.
        again = snapshot(node("n1"), node("n2"), web, pod("busy", "n2", cpu="2", owner=None))
        assert KubeDefault().place(again.pods["default/web-1"], again.ready_nodes(), again,
                                   NOW).node == expected


def test_pending_replacements_take_the_room_as_the_evicted_pods_go() -> None:
    """Both nodes are full while x and y terminate; x goes first (evicted first), and x's
    replacement takes its room at once; y's waits for y's node. Placed after both were gone,
    x's replacement would have taken the last node by name of the two tied ones, n2."""
    x, y = pod("x", "n1", cpu="2"), pod("y", "n2", cpu="2")
    snap = snapshot(node("n1", cpu="2"), node("n2", cpu="2"), x, y)
    snap.remove_pod(x)
    snap.remove_pod(y)
    placed = reschedule([x, y], snap, 1, snap.ready_nodes(), KubeDefault(), NOW)
    assert [(new.name, where) for _, new, where in placed] == [("x-r1", "n1"), ("y-r1", "n2")]


def test_kube_scheduler_s_random_choice_among_ties() -> None:
    """With a random source the model picks any of the equally scored nodes, as kube-scheduler
    does; without one, the last by name, every time."""
    import random

    many = [node(f"n{i}") for i in range(6)]
    snap = snapshot(pod("new", node_name=""), *many)
    subject, ready = snap.pods["default/new"], snap.ready_nodes()
    assert {KubeDefault().place(subject, ready, snap, NOW).node for _ in range(5)} == {"n5"}
    rng = random.Random(3)
    picks = {KubeDefault(rng=rng).place(subject, ready, snap, NOW).node for _ in range(40)}
    assert len(picks) > 1 and picks <= {n.name for n in many}


def test_simulate_gives_the_balance_after_as_a_range_over_outcomes() -> None:
    import re
    import subprocess
    import sys
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--policy", str(examples / "policy.yaml"),
         "--snapshot", str(examples / "cluster.yaml"), "--now", "2026-11-22T12:00:00Z",
         "--reschedule", "--outcomes", "8"],
        capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "ranges over 8 outcomes" in proc.stdout
    found = re.search(r"cpu requests: std [\d.]+ -> ([\d.]+) \(([\d.]+)–([\d.]+)\) points",
                      proc.stdout)
    assert found is not None, proc.stdout
    point, low, high = (float(g) for g in found.groups())
    assert low <= point <= high and low < high

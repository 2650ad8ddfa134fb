"""bench/generate_production.py builds clusters a scheduler could have built (issue 23).

Every bound pod passed the scheduler's filters when placed: its requests fit its node's
allocatable cpu, memory and pod count, it tolerates the node's NoSchedule/NoExecute taints, and
the node matches its nodeSelector and required node affinity, except on the nodes the generator
relabelled afterwards (annotated, listed in its summary). What fit nowhere is Pending,
PodScheduled=False, Unschedulable. Judged with desched's own predicates.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from desched.executors.pdb import BudgetTracker
from desched.predicates.nodeaffinity import required_affinity_matcher
from desched.predicates.taints import SCHEDULING_EFFECTS, first_untolerated
from desched.simulate.simulation import run_simulation
from desched.snapshot.loader import load_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import generate_production as gen

REPO = Path(__file__).resolve().parents[2]
BASE_NOW = gen.BASE_TIME  # the end of the creation span: the oldest pods are past 40 days
NODES, PODS = 60, 1500


def problems(path: Path, drifted: frozenset[str] = frozenset(),
             retainted: frozenset[str] = frozenset()) -> list[str]:
    """Everything in the cluster at `path` no scheduler would have done; on the `drifted` nodes
    (relabelled after placement) nodeSelector and affinity are not judged, on the `retainted`
    ones (tainted after placement) taints."""
    snapshot = load_snapshot([str(path)])
    found: list[str] = []
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in snapshot.pods.values():
        if not pod.node_name:
            cond = pod.condition("PodScheduled")
            if cond is None or (cond.status, cond.reason) != ("False", "Unschedulable"):
                found.append(f"{pod.key}: pending without PodScheduled=False Unschedulable")
            continue
        node = snapshot.nodes[pod.node_name]
        used[node.name].update(pod.requests)
        used[node.name]["pods"] += 1
        taint = first_untolerated(node.spec.taints, pod.spec.tolerations, SCHEDULING_EFFECTS)
        if taint is not None and node.name not in retainted:
            found.append(f"{pod.key}: on {node.name}, taint {taint.key} not tolerated")
        if node.name not in drifted and not required_affinity_matcher(pod)(node):
            found.append(f"{pod.key}: on {node.name} outside its nodeSelector/affinity")
    for name, requests in used.items():
        allocatable = snapshot.nodes[name].allocatable
        for resource in ("cpu", "memory", "pods"):
            if requests[resource] > allocatable[resource]:
                found.append(f"{name}: {resource} requests {requests[resource]} "
                             f"> allocatable {allocatable[resource]}")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("seed", [7, 11])
def test_production_cluster_is_schedulable(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "cluster.jsonl"
    summary: dict[str, Any] = gen.generate(NODES, PODS, str(path), seed)
    assert problems(path, frozenset(summary["drifted"])) == []
    assert summary["overcommitted"] == 0
    assert summary["pods"] == PODS
    snapshot = load_snapshot([str(path)])
    pending = [pod for pod in snapshot.pods.values() if not pod.node_name]
    assert len(pending) == summary["pending"]
    # The drift the summary states, and only that, is marked on the nodes (desched's Node keeps
    # no annotations: read the file) and moves some pods outside their affinity.
    marked = sorted(node["metadata"]["name"] for node in _raw_nodes(path)
                    if gen.DRIFT in node["metadata"].get("annotations", {}))
    assert marked == sorted(summary["drifted"])
    assert 0 < len(marked) <= max(1, round(NODES * gen.DRIFT_SHARE))
    assert any("outside" in p for p in problems(path))


def _raw_nodes(path: Path) -> list[dict[str, Any]]:
    pages = (json.loads(line) for line in path.read_text().splitlines())
    return [item for page in pages if page["kind"] == "NodeList" for item in page["items"]]


def test_checker_catches_the_old_scenario(tmp_path: Path) -> None:
    """production-v1 binds overflowing pods anywhere: the check above must see it."""
    path = tmp_path / "cluster.jsonl"
    gen.generate_v1(NODES, PODS, str(path), 7)
    found = problems(path)
    assert any("requests" in p for p in found)
    assert any("outside" in p or "taint" in p for p in found)


@pytest.mark.slow
def test_needs_work_cluster_is_schedulable_and_gives_every_kind_of_plugin_work(
        tmp_path: Path) -> None:
    """The needs-work scenario: as a scheduler placed it (spread and anti-affinity honoured at
    every placement, the down zone avoided while down), then changed as clusters change; the
    all-strategies policy finds work in every plugin that the changes are for."""
    path = tmp_path / "cluster.jsonl"
    summary: dict[str, Any] = gen.generate_needs_work(NODES, PODS, str(path), 7)
    assert summary["overcommitted"] == 0 and summary["pods"] == PODS
    assert problems(path, frozenset(summary["drifted"]), frozenset(summary["retainted"])) == []
    assert summary["failed"] > 0 and summary["unready"] > 0 and summary["retainted"]
    snapshot = load_snapshot([str(path)])
    # The zone that was down holds less than the others: it came back nearly empty.
    by_zone: dict[str, list[int]] = defaultdict(list)
    for pod in snapshot.pods.values():
        if pod.node_name and pod.namespace != "kube-system":
            zone = snapshot.nodes[pod.node_name].labels[gen.ZONE]
            by_zone[zone].append(pod.requests["cpu"])
    down = sum(by_zone.pop(gen.OUTAGE_ZONE, []))
    assert all(down < sum(cpu) / 2 for cpu in by_zone.values()), (down, by_zone.keys())
    # Unready pods carry the kubelet's message (text with brackets, which YAML readers meet).
    unready = [p for p in snapshot.pods.values() if p.node_name and not p.ready
               and p.status.phase == "Running"]
    assert len(unready) == summary["unready"]
    text = path.read_text(encoding="utf-8")
    assert text.count('"message":"containers with unready status: [main]"') == 2 * len(unready)
    # Each budget's status is what the disruption controller, and desched counting the
    # snapshot's pods itself, make of them.
    tracker = BudgetTracker(snapshot)
    budgets = [pdb for pdbs in snapshot.pdbs_by_namespace.values() for pdb in pdbs]
    assert budgets
    for pdb in budgets:
        expected, healthy, desired = tracker._counts(pdb)
        status = pdb.status
        assert status is not None, pdb.metadata.name
        assert (status.expected_pods, status.current_healthy, status.desired_healthy,
                status.disruptions_allowed) == (expected, healthy, desired,
                                                max(0, healthy - desired)), pdb.metadata.name
    result = run_simulation(str(REPO / "bench" / "all-strategies.yaml"), [str(path)],
                            BASE_NOW, 1, False)
    plugins = Counter(d.plugin for d in result.log.decisions if d.outcome == "evicted")
    for plugin in ("RemoveDuplicates", "LowNodeUtilization", "PodLifeTime",
                   "RemovePodsHavingTooManyRestarts", "RemovePodsViolatingNodeAffinity",
                   "RemovePodsViolatingTopologySpreadConstraint", "RemoveFailedPods",
                   "RemovePodsViolatingNodeTaints"):
        assert plugins[plugin] > 0, plugins

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

from desched.predicates.nodeaffinity import required_affinity_matches
from desched.predicates.taints import SCHEDULING_EFFECTS, first_untolerated
from desched.snapshot.loader import load_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import generate_production as gen

NODES, PODS = 60, 1500


def problems(path: Path, drifted: frozenset[str] = frozenset()) -> list[str]:
    """Everything in the cluster at `path` no scheduler would have done; on the `drifted` nodes
    (relabelled after placement) nodeSelector and affinity are not judged."""
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
        if taint is not None:
            found.append(f"{pod.key}: on {node.name}, taint {taint.key} not tolerated")
        if node.name not in drifted and not required_affinity_matches(pod, node):
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

"""Every plugin says why it did nothing, and what was kept is counted per cycle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", "simulate", *args],
                          capture_output=True, text=True, check=False, timeout=60)


def write(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def cluster(tmp_path: Path, cpu_per_node: list[str]) -> str:
    items: list[dict[str, Any]] = []
    for i, cpu in enumerate(cpu_per_node, 1):
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
                      "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}}})
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"p{i}", "namespace": "default", "uid": f"u{i}",
            "creationTimestamp": "2026-11-21T00:00:00Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "rs",
                                 "controller": True}]},
            "spec": {"nodeName": f"n{i}", "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running"}})
    return write(tmp_path, "cluster.json", json.dumps({"kind": "List", "items": items}))


def policy(plugin: str, args: str, point: str = "balance") -> str:
    return f"""apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: p
  pluginConfig:
  - name: {plugin}
    args: {args}
  plugins:
    {point}: {{enabled: [{plugin}]}}
"""


@pytest.mark.parametrize(("plugin", "args", "cpus", "said"), [
    ("LowNodeUtilization", "{thresholds: {cpu: 10}, targetThresholds: {cpu: 50}}",
     ["1", "1", "1"], "No node is underutilized, nothing to do here, you might tune your "
                      "thresholds further"),
    ("LowNodeUtilization", "{thresholds: {cpu: 30}, targetThresholds: {cpu: 50}}",
     ["1500m", "1500m", "100m"], "All nodes are under target utilization, nothing to do here"),
    ("LowNodeUtilization", "{thresholds: {cpu: 30}, targetThresholds: {cpu: 50}}",
     ["100m", "100m", "100m"], "All nodes are underutilized, nothing to do here"),
    ("LowNodeUtilization",
     "{thresholds: {cpu: 30}, targetThresholds: {cpu: 50}, numberOfNodes: 3}",
     ["3", "100m", "100m"], "Number of nodes underutilized (2) is less or equal than "
                            "NumberOfNodes (3), nothing to do here"),
    ("HighNodeUtilization", "{thresholds: {cpu: 10}}", ["1", "1", "1"],
     "No node is underutilized, nothing to do here, you might tune your thresholds further"),
])
def test_node_utilization_says_why_it_did_nothing(tmp_path: Path, plugin: str, args: str,
                                                  cpus: list[str], said: str) -> None:
    proc = simulate("--policy", write(tmp_path, "policy.yaml", policy(plugin, args)),
                    "--snapshot", cluster(tmp_path, cpus), "--now", "2026-11-22T12:00:00Z",
                    "--output", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["evictions"] == []
    assert [n["note"] for n in out["notes"]] == [said]


def test_a_plugin_without_a_reason_of_its_own_gets_one(tmp_path: Path) -> None:
    young = policy("PodLifeTime", "{maxPodLifeTimeSeconds: 604800}", point="deschedule")
    proc = simulate("--policy", write(tmp_path, "policy.yaml", young), "--snapshot",
                    cluster(tmp_path, ["1", "1"]), "--now", "2026-11-22T12:00:00Z")
    assert proc.returncode == 0, proc.stderr
    assert "[p/PodLifeTime]: evicted nothing: no pod met its criteria" in proc.stdout


def test_kept_counts_are_per_cycle_and_never_exceed_the_pods() -> None:
    proc = simulate("--policy", str(EXAMPLES / "policy.yaml"), "--snapshot",
                    str(EXAMPLES / "cluster.yaml"), "--now", "2026-11-22T12:00:00Z",
                    "--cycles", "3", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    per_cycle: dict[int, int] = {}
    for entry in out["skipped"]:
        per_cycle[entry["cycle"]] = per_cycle.get(entry["cycle"], 0) + entry["pods"]
    assert sorted(per_cycle) == [1, 2, 3]
    # Each plugin keeps a pod at most once a cycle; two plugins run here.
    assert all(count <= 2 * 13 for count in per_cycle.values())
    text = simulate("--policy", str(EXAMPLES / "policy.yaml"), "--snapshot",
                    str(EXAMPLES / "cluster.yaml"), "--now", "2026-11-22T12:00:00Z",
                    "--cycles", "3").stdout
    assert "kept in cycle 3 (pods a plugin considered but did not evict, by reason):" in text

"""Koordinator's top-level `dryRun` through `desched simulate`: every dry-run eviction goes
through the simulation executor, so a PodDisruptionBudget refuses it as it would refuse the real
one, and each cycle starts again from the cluster as it is (a dry run evicts nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.process

KOORDINATOR = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
dryRun: {dry_run}
profiles:
- name: koord
  plugins:
    evict: {{disabled: [{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}}
    filter: {{disabled: [{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}}
    balance: {{enabled: [{{name: RemoveDuplicates}}]}}
"""


def cluster(tmp_path: Path, allowed: int) -> str:
    """Four replicas of one ReplicaSet on n1 of three nodes (RemoveDuplicates moves two), under
    a PodDisruptionBudget that allows `allowed` disruptions."""
    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
         "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}}}
        for i in (1, 2, 3)]
    for i in range(4):
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"web-{i}", "namespace": "default", "uid": f"u{i}", "labels": {"app": "web"},
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "rs",
                                 "controller": True}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "web:1"}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True"}]}})
    items.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": {"name": "web", "namespace": "default"},
                  "spec": {"maxUnavailable": allowed,
                           "selector": {"matchLabels": {"app": "web"}}},
                  "status": {"disruptionsAllowed": allowed, "currentHealthy": 4,
                             "desiredHealthy": 4 - allowed, "expectedPods": 4}})
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def simulate(tmp_path: Path, dry_run: bool, allowed: int, cycles: int) -> dict[str, Any]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(KOORDINATOR.format(dry_run=str(dry_run).lower()))
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--config", str(policy), "--snapshot",
         cluster(tmp_path, allowed), "--now", "2026-11-22T12:00:00Z", "--cycles", str(cycles),
         "--output", "json"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_a_pdb_refuses_a_dry_run_eviction(tmp_path: Path) -> None:
    out = simulate(tmp_path, dry_run=True, allowed=1, cycles=1)
    assert out["evictions"] == []
    assert [(d["cycle"], d["pod"]) for d in out["dryRun"]] == [(1, "web-2")]
    assert [(r["cycle"], r["outcome"], r["pod"]) for r in out["refusals"]] == [
        (1, "pdb-blocked", "web-3")]
    assert out["refusals"][0]["reason"].startswith(
        "Cannot evict pod as it would violate the pod's disruption budget. "
        "(PodDisruptionBudget default/")


def test_dry_run_decides_as_the_real_run_would(tmp_path: Path) -> None:
    real = simulate(tmp_path, dry_run=False, allowed=1, cycles=1)
    dry = simulate(tmp_path, dry_run=True, allowed=1, cycles=1)
    assert [e["pod"] for e in real["evictions"]] == [e["pod"] for e in dry["dryRun"]]
    assert real["refusals"] == dry["refusals"]


def test_each_dry_run_cycle_starts_from_the_untouched_cluster(tmp_path: Path) -> None:
    out = simulate(tmp_path, dry_run=True, allowed=2, cycles=3)
    # Nothing was evicted, so every cycle sees the four replicas and the PDB's two disruptions.
    assert [(d["cycle"], d["pod"]) for d in out["dryRun"]] == [
        (c, p) for c in (1, 2, 3) for p in ("web-2", "web-3")]
    assert out["refusals"] == []
    real = simulate(tmp_path, dry_run=False, allowed=2, cycles=3)
    # The real run evicts them once; the budget is used up and the rest stay balanced.
    assert [(e["cycle"], e["pod"]) for e in real["evictions"]] == [(1, "web-2"), (1, "web-3")]

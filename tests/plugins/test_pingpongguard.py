"""PingPongGuard through the real CLI on the hotspot scenario, and its argument validation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from desched.plugins.pingpongguard import PingPongGuardArgs, validate

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "lownodeload-hotspot"
HOT, IDLE = "cn-beijing.10.0.0.53", "cn-beijing.10.0.0.215"


def simulate(policy: Path, *extra: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--policy", str(policy), "--snapshot",
         str(SCENARIO / "cluster.yaml"), "--cycles", "14", "--reschedule", "--output", "json",
         *extra], capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_without_the_guard_a_requests_scheduler_ping_pongs() -> None:
    """The replacement goes back to the hot node, carries its usage there, and the node is hot
    again: the same workload is evicted again once the detector counts six passes anew."""
    run = simulate(SCENARIO / "policy.yaml", "--scheduler", "kube-default")
    assert [(e["cycle"], e["node"]) for e in run["evictions"]] == [(6, HOT), (12, HOT)]
    assert {e["pod"].split("-r")[0] for e in run["evictions"]} == {
        "stress-demo-588f9646cf-s7x2k"}
    assert [r["node"] for r in run["rescheduled"]] == [HOT, HOT]


def test_the_guard_with_kube_default_refuses_with_the_reason() -> None:
    """stress-demo's replacement would come back, so it is refused; a web pod's would not
    (kube-scheduler spreads its ReplicaSet's pods), so LowNodeLoad moves that one instead."""
    run = simulate(SCENARIO / "policy-guard-kube-default.yaml", "--scheduler", "kube-default")
    assert [(e["cycle"], e["pod"]) for e in run["evictions"]] == [(6, "web-7d9f8c6b5-abcde")]
    assert [r["node"] for r in run["rescheduled"]] == [IDLE]
    reasons = {s["reason"]: s["pods"] for s in run["skipped"]}
    assert reasons[f"replacement would land on {HOT} again (kube-default)"] > 0


def test_with_load_aware_scheduling_the_pod_moves_and_stays() -> None:
    run = simulate(SCENARIO / "policy-guard-koord-load-aware.yaml",
                   "--scheduler", "koord-load-aware")
    assert [(e["cycle"], e["node"]) for e in run["evictions"]] == [(6, HOT)]
    assert [r["node"] for r in run["rescheduled"]] == [IDLE]


@pytest.mark.parametrize(("scheduler", "errors"), [
    ("kube-default", []),
    ("koord-load-aware", []),
    ("kube", ['scheduler: Unsupported value: "kube": supported values: "kube-default", '
              '"koord-load-aware"']),
])
def test_validation(scheduler: str, errors: list[str]) -> None:
    assert validate(PingPongGuardArgs(scheduler=scheduler)) == errors


def test_a_bad_scheduler_is_one_line_exit_2(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text((SCENARIO / "policy-guard-kube-default.yaml").read_text().replace(
        "scheduler: kube-default", "scheduler: default"))
    proc = subprocess.run([sys.executable, "-m", "desched", "validate", "--policy", str(policy)],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1
    assert 'scheduler: Unsupported value: "default"' in proc.stderr


LNU_POLICY = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: default
  pluginConfig:
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 20}
      targetThresholds: {cpu: 50}
  - name: PingPongGuard
  plugins:
    balance: {enabled: [LowNodeUtilization]}
    preEvictionFilter: {enabled: [PingPongGuard]}
"""


def lnu_cluster() -> list[dict[str, Any]]:
    def node(name: str, zone: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"zone": zone, "kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}

    def pod(name: str, node: str, cpu: str, prefer_c: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {"nodeName": node, "containers": [
            {"name": "c", "image": "app:1", "resources": {"requests": {"cpu": cpu}}}]}
        if prefer_c:
            spec["affinity"] = {"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {
                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["c"]}]}}]}}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "default", "uid": name,
            "creationTimestamp": "2026-11-20T00:00:00Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "rs",
                                 "controller": True}]},
            "spec": spec, "status": {"phase": "Running"}}

    return [node("n1", "a"), node("n2", "b"), node("n3", "c"),
            *(pod(f"hot-{i}", "n1", "800m", True) for i in range(3)),
            pod("mid", "n3", "1800m", False)]


@pytest.mark.parametrize("guarded", [False, True])
def test_a_target_the_evicting_plugin_would_find_overutilized_is_refused(
        tmp_path: Path, guarded: bool) -> None:
    """n1 is over 50% cpu, n2 idle, n3 at 45%. The pods prefer zone c: kube-default sends a
    replacement to n3, which LowNodeUtilization would then find over its 50% target."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(LNU_POLICY if guarded else LNU_POLICY.replace(
        "    preEvictionFilter: {enabled: [PingPongGuard]}\n", ""))
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": lnu_cluster()}))
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--policy", str(policy), "--snapshot",
         str(cluster), "--now", "2026-11-22T12:00:00Z", "--output", "json"],
        capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    if not guarded:
        assert [e["node"] for e in run["evictions"]] == ["n1"]
        return
    assert run["evictions"] == []
    reasons = {s["reason"] for s in run["skipped"]}
    assert ("replacement would land on n3 (kube-default), where LowNodeUtilization would find "
            "it overutilized (cpu 65% > 50%)") in reasons

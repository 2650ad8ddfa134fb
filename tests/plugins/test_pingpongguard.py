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
    run = simulate(SCENARIO / "policy-guard-kube-default.yaml", "--scheduler", "kube-default")
    assert run["evictions"] == []
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

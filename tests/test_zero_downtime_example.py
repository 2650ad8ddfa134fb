"""examples/zero-downtime/: the policy and cluster of docs/moves.md, simulated as the docs show
(`--cycles 6 --reschedule`). Its text is kept in simulate.txt beside them and must not drift;
each pod on a tainted worker moves, every Deployment whose every pod must move is restarted,
and no paced workload ever has more than one pod unavailable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from desched.report.render import to_json_obj
from desched.simulate.simulation import SimulationResult, run_simulation

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = Path("examples") / "zero-downtime"
TAINTED = {"worker-1", "worker-2"}


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the text names the files as the docs' command does


def simulate(cycles: int = 6) -> SimulationResult:
    return run_simulation(str(EXAMPLE / "policy.yaml"), [str(EXAMPLE / "cluster.yaml")], None,
                          cycles, True)


@pytest.mark.process
def test_the_text_is_the_one_kept_beside_the_example() -> None:
    expected = (REPO / EXAMPLE / "simulate.txt").read_text(encoding="utf-8")
    # A process: `simulate` ends its process without tearing the heap down (cli._exit_fast).
    proc = subprocess.run([sys.executable, "-m", "desched", "simulate", "--policy",
                           str(EXAMPLE / "policy.yaml"), "--snapshot",
                           str(EXAMPLE / "cluster.yaml"), "--cycles", "6", "--reschedule"],
                          capture_output=True, text=True, check=False, timeout=120, cwd=REPO)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == expected


def test_every_pod_leaves_the_tainted_workers_and_restarts_are_surge_first(in_repo: None) -> None:
    report = to_json_obj(simulate())
    moved = {(e["pod"], e["mode"]) for e in report["evictions"]}
    assert {p for p, mode in moved if mode == "restart"} == {
        "web-5d8f9-x7k2p", "api-7c4b2-a9f3q", "api-7c4b2-b2m8r", "api-7c4b2-c6t1v"}
    assert [(r["deployment"], r["maxSurge"], r["maxUnavailable"]) for r in report["restarts"]] \
        == [("web", 1, 0), ("api", 1, 0)]
    on_tainted = {e["pod"] for e in report["evictions"] if e["node"] in TAINTED}
    assert len(on_tainted) == 13  # every pod the two workers held
    placed = [r["node"] for r in report["rescheduled"]]
    assert placed and not set(placed) & TAINTED


def test_paced_workloads_move_one_pod_per_cycle(in_repo: None) -> None:
    report = to_json_obj(simulate())
    per_cycle: dict[tuple[int, str], int] = {}
    for e in report["evictions"]:
        if e["mode"] == "evict":
            workload = e["pod"].rsplit("-", 1)[0]
            per_cycle[(e["cycle"], workload)] = per_cycle.get((e["cycle"], workload), 0) + 1
    assert set(per_cycle.values()) == {1}
    assert {c for c, w in per_cycle if w == "cart-6b7d8"} == {1, 2, 3, 4, 5, 6}
    assert {c for c, w in per_cycle if w == "db"} == {1, 2, 3}

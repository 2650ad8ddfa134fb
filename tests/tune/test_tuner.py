"""`desched tune` on the LowNodeUtilization example: the search's answer, written as a policy
file, is what `simulate` of that file does; bounds and the budget hold; workers change nothing;
an unreachable goal gets its one-line reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from desched.simulate.simulation import Simulation
from desched.tune.evaluate import measure
from desched.tune.floor import Floor
from desched.tune.goals import parse_goals
from desched.tune.output import floor_line
from desched.tune.tuner import Settings, Tuner

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "LowNodeUtilization"
POLICY, CLUSTER = str(EXAMPLE / "policy.yaml"), str(EXAMPLE / "cluster.yaml")
GOAL = "max cpu requests <= 60%"


def tuned(goals: list[str], vary: list[str] = (), **settings: object):  # type: ignore[no-untyped-def]
    warned: list[str] = []
    tuner = Tuner(POLICY, [CLUSTER], parse_goals(goals), list(vary),
                  Settings(floor_time_limit=10, **settings), warned.append)  # type: ignore[arg-type]
    return tuner.tune()


def desched(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                          text=True, timeout=300, input=stdin, check=False)


def test_the_written_policy_does_what_the_recommendation_says(tmp_path: Path) -> None:
    result = tuned([GOAL])
    best = result.recommended
    assert best is not None and best.measured is not None and best.measured.meets
    # The example's own thresholds (cpu 50) evict 3 pods to reach 42.5%: 55 reaches 55% with 2.
    assert result.baseline.evictions == 3 and best.measured.evictions == 2
    assert result.written is not None
    written = tmp_path / "tuned.yaml"
    written.write_text(result.written)
    again = Simulation(str(written), [CLUSTER], None, cycles=3, reschedule=True,
                       with_frames=True).run()
    replay = measure(again, parse_goals([GOAL]))
    assert replay == best.measured
    # The file is the user's, comments and all, with the one value changed.
    before = Path(POLICY).read_text().splitlines()
    after = result.written.splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [("      targetThresholds: {cpu: 50, memory: 50, pods: 50}",
                        "      targetThresholds: {cpu: 55, memory: 50, pods: 50}")]


def test_the_search_keeps_to_its_bounds_and_budget() -> None:
    result = tuned([GOAL], ["LowNodeUtilization.targetThresholds.cpu=50:70:5",
                            "LowNodeUtilization.thresholds.cpu=10:20:10"], budget=4)
    ran = [c for c in result.found.candidates.values() if c.measured is not None]
    assert 0 < len(ran) <= 4
    for c in result.found.candidates.values():
        high, low = c.values
        assert high in (50, 55, 60, 65, 70) and low in (10, 20)


def test_workers_find_what_one_process_finds() -> None:
    one = tuned([GOAL], jobs=1)
    two = tuned([GOAL], jobs=2)
    assert {p: c.measured for p, c in one.found.candidates.items()} == {
        p: c.measured for p, c in two.found.candidates.items()}
    assert one.written == two.written


def test_an_unreachable_goal_says_why_in_one_line() -> None:
    proc = desched("tune", "--policy", POLICY, "--snapshot", CLUSTER, "--goal",
                   "max cpu requests <= 5%", "-o", "yaml", "--floor-time-limit", "10")
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --goal: no candidate meets the goals: ")
    text = desched("tune", "--policy", POLICY, "--snapshot", CLUSTER, "--goal",
                   "max cpu requests <= 5%", "--floor-time-limit", "10")
    assert text.returncode == 0 and "no candidate meets the goals: " in text.stdout


def test_cli_json_and_stdin_policy() -> None:
    proc = desched("tune", "--policy", "-", "--snapshot", CLUSTER, "--goal", GOAL, "-o", "json",
                   "--jobs", "1", "--floor-time-limit", "10", stdin=Path(POLICY).read_text())
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["goals"] == [GOAL] and out["policy"] == "<stdin>"
    assert out["recommended"]["evictions"] == 2
    assert out["recommended"]["values"]["LowNodeUtilization.targetThresholds.cpu"] == 55
    assert out["yourPolicy"]["evictions"] == 3
    assert "cpu: 55" in out["policyFile"]
    assert out["now"] == [{"goal": GOAL, "figure": 80.0, "met": False}]  # worker-1: 3200m of 4


def test_a_floor_of_no_moves_is_empty_when_the_cluster_misses_the_goals() -> None:
    relaxed = Floor(0, 0, "optimal", None, "HiGHS", 1.0, "relaxation (a lower bound)")
    assert floor_line(relaxed, None, met_now=True).startswith("floor: 0 pod moves (optimal")
    empty = floor_line(relaxed, None, met_now=False)
    assert empty.startswith("floor: no useful bound (optimal; HiGHS, relaxation")
    assert empty.endswith("so all it says is at least 1")


@pytest.mark.parametrize(("args", "message"), [
    (["--goal", "max cpu <= 70"], "--goal: \"max cpu <= 70\": say which cpu figure"),
    (["--goal", GOAL, "--vary", "Nope.x=1:2"], "--vary: "),
])
def test_bad_flags_are_one_line(args: list[str], message: str) -> None:
    proc = desched("tune", "--policy", POLICY, "--snapshot", CLUSTER, *args)
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_warnings_are_said_once_whatever_the_workers(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(Path(CLUSTER).read_text()))
    docs[0]["items"] = [i for i in docs[0]["items"] if i["kind"] != "Service"]
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(docs))
    proc = desched("tune", "--policy", POLICY, "--snapshot", str(cluster), "--goal", GOAL,
                   "--jobs", "2", "--floor-time-limit", "10", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    warnings = proc.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("warning: the snapshot holds no Service")
    assert json.loads(proc.stdout)["yourPolicy"]["evictions"] == 3

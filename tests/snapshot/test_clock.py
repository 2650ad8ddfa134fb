"""The clock a snapshot is simulated at: capture time, else its newest timestamp, never the wall
clock."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from builders import decode, node, pod, snapshot
from desched.snapshot.clock import newest_timestamp, snapshot_clock

pytestmark = pytest.mark.process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def info(created: str) -> object:
    return decode("SnapshotInfo", {"apiVersion": "desched.io/v1alpha1",
                                   "metadata": {"name": "snapshot", "creationTimestamp": created}})


def test_the_capture_time_wins_over_any_timestamp() -> None:
    snap = snapshot(node("n1"), pod("p", created="2026-11-24T10:00:00Z"),
                    info("2026-11-24T09:00:00Z"))
    clock = snapshot_clock(snap)
    assert (clock.now, clock.source) == (at("2026-11-24T09:00:00Z"), "snapshot capture time")


def test_several_files_take_the_latest_capture() -> None:
    snap = snapshot(info("2026-11-24T09:00:00Z"), info("2026-11-24T09:05:00Z"),
                    info("2026-11-24T08:00:00Z"))
    assert snapshot_clock(snap).now == at("2026-11-24T09:05:00Z")


@pytest.mark.parametrize(("objects", "expected", "where"), [
    ([pod("old", created="2026-11-01T00:00:00Z"), pod("new", created="2026-11-20T00:00:00Z")],
     "2026-11-20T00:00:00Z", "Pod default/new creationTimestamp"),
    ([pod("p", created="2026-11-01T00:00:00Z",
          status={"startTime": "2026-11-02T00:00:00Z", "conditions": [
              {"type": "Ready", "status": "True",
               "lastTransitionTime": "2026-11-21T08:30:00Z"}]})],
     "2026-11-21T08:30:00Z", "Pod default/p condition lastTransitionTime"),
    ([pod("p", created="2026-11-01T00:00:00Z"),
      decode("NodeMetric", {"metadata": {"name": "n1"},
                            "status": {"updateTime": "2026-11-22T11:59:30Z"}})],
     "2026-11-22T11:59:30Z", "NodeMetric n1 updateTime"),
    ([pod("p", created="2026-11-01T00:00:00Z", meta={
        "deletionTimestamp": "2026-11-03T00:00:00Z"})],
     "2026-11-03T00:00:00Z", "Pod default/p deletionTimestamp"),
    ([node("n1"), decode("PodMetrics", {"metadata": {"name": "p", "namespace": "default"},
                                        "timestamp": "2026-11-05T00:00:00+02:00"})],
     "2026-11-04T22:00:00Z", "PodMetrics p timestamp"),
])
def test_without_a_capture_time_the_newest_timestamp_stands_in(
        objects: list[object], expected: str, where: str) -> None:
    clock = snapshot_clock(snapshot(*objects))
    assert clock.now == at(expected)
    assert clock.now.tzinfo == UTC
    assert clock.source == f"newest timestamp in the snapshot: {where}"


def test_unparsable_condition_times_are_left_to_the_condition_decoder() -> None:
    snap = snapshot(pod("p", created="2026-11-01T00:00:00Z", status={"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}]}))
    assert newest_timestamp(snap) == (at("2026-11-01T00:00:00Z"),
                                      "Pod default/p creationTimestamp")


def test_a_snapshot_without_any_time_falls_back_to_the_wall_clock_and_says_so() -> None:
    snap = snapshot(node("n1"))
    before = datetime.now(UTC).replace(microsecond=0)
    clock = snapshot_clock(snap)
    assert before <= clock.now <= datetime.now(UTC)
    assert clock.source == "wall clock: the snapshot holds no timestamp"


# -- through the CLI ---------------------------------------------------------------------------

def simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", "simulate", *args],
                          capture_output=True, text=True, check=False, timeout=60)


@pytest.mark.parametrize("example", ["LowNodeUtilization-metrics", "RemoveFailedPods"])
def test_an_old_snapshot_decides_as_it_did_when_taken(example: str) -> None:
    """Without --now the run is that of the snapshot's time, whatever the date today."""
    folder = EXAMPLES / "plugins" / example
    files = ["--policy", str(folder / "policy.yaml"), "--snapshot", str(folder / "cluster.yaml"),
             "--output", "json"]
    default, fixed = simulate(*files), simulate(*files, "--now", "2026-11-22T12:00:00Z")
    assert default.returncode == fixed.returncode == 0, default.stderr
    ours, theirs = json.loads(default.stdout), json.loads(fixed.stdout)
    def evicted(run: dict[str, Any]) -> list[tuple[str, str]]:
        return [(e["namespace"], e["pod"]) for e in run["evictions"]]
    # The same pods (ages in the reasons differ by the minutes between the two clocks).
    assert evicted(ours) == evicted(theirs) != []
    assert ours["clock"]["source"].startswith("newest timestamp in the snapshot: ")
    assert theirs["clock"] == {"now": "2026-11-22T12:00:00Z", "source": "--now"}


def test_the_hotspot_example_still_has_fresh_metrics_without_now() -> None:
    folder = EXAMPLES / "lownodeload-hotspot"
    proc = simulate("--policy", str(folder / "policy.yaml"),
                    "--snapshot", str(folder / "cluster.yaml"), "--cycles", "6")
    assert proc.returncode == 0, proc.stderr
    assert ("clock: 2026-11-22T11:59:30Z (newest timestamp in the snapshot: NodeMetric "
            "cn-beijing.10.0.0.53 updateTime)") in proc.stdout
    assert "cycle 6: 1 pod(s) evicted" in proc.stdout


def test_a_captured_snapshot_runs_at_its_capture_time(tmp_path: Path) -> None:
    folder = EXAMPLES / "plugins" / "RemoveFailedPods"
    text = (folder / "cluster.yaml").read_text() + (
        "\n---\napiVersion: desched.io/v1alpha1\nkind: SnapshotInfo\n"
        "metadata: {name: snapshot, creationTimestamp: '2026-11-22T12:00:00Z'}\n")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(text)
    proc = simulate("--policy", str(folder / "policy.yaml"), "--snapshot", str(cluster))
    assert proc.returncode == 0, proc.stderr
    assert "clock: 2026-11-22T12:00:00Z (snapshot capture time)" in proc.stdout
    assert "warning" not in proc.stderr  # SnapshotInfo is a kind desched knows

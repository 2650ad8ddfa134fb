"""Faults on the real thing, judged by the API server's own audit log (bench/faults.py holds
the scenarios; the bench adds the Go descheduler's figures): whatever happens to the control
plane or to desched, no pod receives two successful evictions, no pod is deleted around its
budget, the budget's floor of Ready pods holds, two replicas never evict in overlapping windows,
and desched evicts again and finishes clean cycles after the fault. Where desched's watches are
answered 410 (watch-expired), no cycle runs before it has listed again; where the API server
dies mid-migration, every PodMigrationJob ends Succeeded or Failed, none twice for a pod.

These tests kill and pause control-plane processes, so each gets a control plane of its own
(from KUBEBUILDER_ASSETS), never the one the other tests share."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from controlplane import ASSETS_ENV, running

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import faults  # noqa: E402

pytestmark = [pytest.mark.needs("kube-controller-manager", "kube-scheduler"),
              pytest.mark.timeout(600)]


@pytest.mark.parametrize("fault", list(faults.FAULTS))
def test_no_fault_evicts_twice_breaks_a_budget_or_makes_two_leaders(
        fault: str, tmp_path: Path) -> None:
    assets = os.environ.get(ASSETS_ENV)
    if not assets:
        pytest.skip(f"e2e faults: set {ASSETS_ENV}; these tests kill and pause the control "
                    f"plane's processes, so they start their own")
    with running(Path(assets).resolve(), tmp_path / "plane", faults.apiserver_args(fault)) as plane:
        result = faults.run_fault(plane, fault, "desched", tmp_path / "run")
    logs = "\n".join(Path(p).read_text(errors="replace")[-2000:] for p in result["logs"])
    assert result["podsEvictedTwice"] == 0, f"{result}\n{logs}"
    assert result["podsDeleted"] == 0, result
    assert not result["budgetBreached"], result
    assert result["overlappingLeaders"] == 0, f"{result}\n{logs}"
    assert result.get("lateOldLeaderRequests", 0) == 0, f"{result}\n{logs}"
    assert result["secondsToNextEviction"] is not None, result
    if fault == "apf-throttle":  # the fault happened: desched's requests were refused
        assert result["throttled"] > 0, result
    if fault == "watch-expired":  # the fault happened: desched's watches were answered 410
        assert result["relists"] > 0, f"{result}\n{logs}"
        assert result["cyclesBeforeRelists"] == 0, f"{result}\n{logs}"
    if fault == "apiserver-restart-migration":  # killed while jobs were Running
        assert result["jobsRunningAtRestart"] > 0, result
        assert result["jobsStuck"] == [], f"{result}\n{logs}"
        assert result["jobsTwice"] == 0, f"{result}\n{logs}"
    # SIGKILL ends the first replica of descheduler-kill; the paused leader exits 1 when it
    # finds its lease lost (as upstream's does); every other exit is a clean stop.
    expected = {"descheduler-kill": [-9, 0], "leader-pause": [1, 0]}.get(
        fault, [0] * len(result["exitCodes"]))
    assert result["exitCodes"] == expected, f"{result}\n{logs}"

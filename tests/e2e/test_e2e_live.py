"""`desched run` on a real control plane, the parts kmock cannot vouch for: a policy reloaded
while it runs, the stale-cache guard when kube-apiserver goes away (its watches break and
resume from a fresh watch cache), and the /cycles page telling what the log tells.

Every test uses bench/faults.py's cluster (a Deployment of 12 pods kube-scheduler places on
two nodes the stand-in kubelet serves, a budget of at most 3 unavailable) on a control plane of
its own, because the stale-cache test kills kube-apiserver."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from controlplane import ASSETS_ENV, ControlPlane, free_port, running

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import faults  # noqa: E402

pytestmark = [pytest.mark.needs("kube-controller-manager", "kube-scheduler"),
              pytest.mark.timeout(600)]


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    assets = os.environ.get(ASSETS_ENV)
    if not assets:
        pytest.skip(f"e2e live: set {ASSETS_ENV}; these tests need a control plane of their "
                    f"own (one kills kube-apiserver)")
    with running(Path(assets).resolve(), tmp_path / "plane", faults.APISERVER_ARGS) as p:
        yield p


def stamp(entry: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(entry["timestamp"]).replace("Z", "+00:00"))


def events(log: Path, name: str) -> list[dict[str, Any]]:
    return [e for e in faults.log_lines(log) if e.get("event") == name]


def test_a_policy_changed_while_running_applies_at_the_next_cycle(
        plane: ControlPlane, tmp_path: Path) -> None:
    """Started with PodLifeTime at one hour (nothing to evict), the policy file is rewritten
    to 6 s and SIGHUP sent: the reload is logged, and evictions follow; an invalid file then
    changes nothing (one line names it) and the cycles go on."""
    with faults.churn(plane):
        runner = faults.Runner(plane, tmp_path)
        replica = runner.start("desched-a", policy_text=faults.POLICY.replace(
            "maxPodLifeTimeSeconds: 6", "maxPodLifeTimeSeconds: 3600"))
        policy = tmp_path / "policy.yaml"
        try:
            cycles = faults.finished_cycles(replica.log)
            faults.wait_until("two cycles under the 1 h policy",
                              lambda: faults.finished_cycles(replica.log) >= cycles + 2, 60)
            quiet = len(faults.evictions(plane))
            policy.write_text(faults.POLICY)
            replica.proc.send_signal(signal.SIGHUP)
            faults.wait_until("the 6 s policy to be applied and to evict", lambda: (
                len(events(replica.log, "policy reloaded")) == 1
                and len(faults.evictions(plane)) > quiet), 120)
            policy.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
                              "profiles: [{name: x, pluginConfig: [{name: NoSuchPlugin}]}]\n")
            replica.proc.send_signal(signal.SIGHUP)
            faults.wait_until("the invalid policy to be refused", lambda: bool(events(
                replica.log, "policy not reloaded; the running policy stays")), 60)
            cycles = faults.finished_cycles(replica.log)
            faults.wait_until("cycles after the refusal", lambda: (
                faults.finished_cycles(replica.log) >= cycles + 2), 60)
        finally:
            runner.stop_all()
    assert quiet == 0, "the 1 h policy evicted"
    assert len(events(replica.log, "policy reloaded")) == 1
    assert replica.proc.returncode == 0


def test_cycles_are_skipped_while_the_cache_is_stale_and_resume_after(
        plane: ControlPlane, tmp_path: Path) -> None:
    """kube-apiserver killed for 8 s: every cycle due meanwhile is skipped with the reason
    (the cache is not current), no eviction is attempted on the stale view, and once the
    informers have listed again desched evicts and finishes clean cycles."""
    with faults.churn(plane):
        runner = faults.Runner(plane, tmp_path)
        replica = runner.start("desched-a")
        try:
            faults.wait_until("evictions", lambda: len(faults.evictions(plane)) >= 3, 120)
            plane.processes["kube-apiserver"].kill()
            down = time.monotonic()
            faults.wait_until("a cycle skipped as stale", lambda: bool(events(
                replica.log, "descheduling cycle skipped: the cluster cache is not current; "
                             "the next cycle runs as soon as it is")), 60)
            time.sleep(max(0.0, 8 - (time.monotonic() - down)))
            back = datetime.now(UTC)
            plane.restart_apiserver()
            cycles = faults.finished_cycles(replica.log)
            before = len(faults.evictions(plane))
            faults.wait_until("clean cycles and evictions after the restart", lambda: (
                faults.finished_cycles(replica.log) >= cycles + 2
                and len(faults.evictions(plane)) > before), 180)
        finally:
            runner.stop_all()
    lines = faults.log_lines(replica.log)
    skipped = [e for e in lines if str(e.get("event", "")).startswith("descheduling cycle skipped")]
    assert skipped and all(e.get("stale_seconds") for e in skipped), skipped
    # Nothing was asked of the server on the stale view: from the first skipped cycle until the
    # server was back, no eviction was tried (the one in flight at the kill may have failed).
    first_skip = stamp(skipped[0])
    tried = [e for e in lines if e.get("event") in ("Evicted pod", "Error evicting pod")
             and first_skip <= stamp(e) < back]
    assert not tried, tried
    assert faults.judge(plane, {"desched-a"}, faults.FLOOR, None)["podsEvictedTwice"] == 0
    assert replica.proc.returncode == 0


def test_the_cycles_page_tells_what_the_log_tells(plane: ControlPlane, tmp_path: Path) -> None:
    port = free_port()
    with faults.churn(plane):
        runner = faults.Runner(plane, tmp_path)
        replica = runner.start("desched-a", "--metrics-address", f"127.0.0.1:{port}")
        try:
            faults.wait_until("a cycle that evicted", lambda: any(
                e.get("totalEvicted") for e in events(replica.log,
                                                      "descheduling cycle finished")), 120)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/cycles.json",
                                        timeout=30) as answer:
                page = json.loads(answer.read())
            logged = faults.log_lines(replica.log)  # read after the page: it holds at least
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/cycles", timeout=30) as answer:
                html = answer.read().decode()
        finally:
            runner.stop_all()
    evicted_by_cycle: dict[int, set[str]] = {}
    for e in logged:
        if e.get("event") == "Evicted pod":
            evicted_by_cycle.setdefault(int(e["cycle"]), set()).add(e["pod"])
    assert page["cycles"], page
    for cycle in page["cycles"]:
        on_page = {f"{x['namespace']}/{x['pod']}" for x in cycle.get("evictions", [])}
        assert on_page == evicted_by_cycle.get(cycle["cycle"], set()), cycle["cycle"]
        assert cycle["live"]["evicted"] == len(on_page)
    assert any(cycle.get("evictions") for cycle in page["cycles"])
    assert page["instance"]["dryRun"] is False
    newest = max(c["cycle"] for c in page["cycles"])
    assert f"{newest}" in html and "<html" in html.lower()

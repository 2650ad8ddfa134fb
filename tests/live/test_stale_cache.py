"""The stale-cache guard of `desched run` against kmock: a cycle starts only while every informer
is watching; when the cache has not been current for longer than the bound the cycle is skipped
(logged, counted), and the next one runs as soon as the cache is current again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import Emulator, FakeApiServer
from test_run import background, cluster, config, runner_for, until

from desched.live.run import Runner
from desched.live.triggers import SCHEDULED, Cause

pytestmark = pytest.mark.asyncio


def guarded(runner: Runner) -> list[list[str]]:
    """Record, at the start of every cycle, the informers that were not current."""
    seen: list[list[str]] = []
    original = runner.run_cycle

    async def run_cycle(number: int, cause: Cause = SCHEDULED) -> Any:
        seen.append([i.resource.label for i in runner.informers if i.stale_since is not None])
        return await original(number, cause)

    runner.run_cycle = run_cycle  # type: ignore[method-assign]
    return seen


def cycles(runner: Runner, result: str) -> int:
    return sum(1 for r in runner.reports if r.result == result)


async def outage(api: FakeApiServer) -> None:
    """Every pod watch fails (500) from now on, and the open ones are dropped."""
    api.fail("watch", "Pod", 500, times=10**6)
    await api.end_watches(abort=True)


async def test_no_cycle_on_a_cache_that_is_not_current(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    runner = runner_for(config(tmp_path, emulator, interval="50ms", dry_run=True,
                               stale_cache_timeout=30.0))
    started = guarded(runner)
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 2)
        await outage(api)
        pods = next(i for i in runner.informers if i.resource.kind == "Pod")
        await until(lambda: pods.stale_since is not None)
        held, waits = len(runner.reports), runner.stale_waits
        # Ten looks of the guard at the stale cache: no cycle started meanwhile.
        await until(lambda: runner.stale_waits >= waits + 10)
        assert len(runner.reports) <= held + 1  # at most the cycle already under way
        api.faults.clear()
        await until(lambda: len(runner.reports) >= held + 3)
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert all(stale == [] for stale in started), started
    assert cycles(runner, "stale") == 0  # the outage stayed within the bound


async def test_a_long_outage_skips_the_cycle_then_runs_as_soon_as_current(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    runner = runner_for(config(tmp_path, emulator, interval="50ms", dry_run=True,
                               stale_cache_timeout=0.2))
    started = guarded(runner)
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 1)
        await outage(api)
        await until(lambda: cycles(runner, "stale") >= 1)
        waits = runner.stale_waits
        await until(lambda: runner.stale_waits >= waits + 10)
        assert cycles(runner, "stale") == 1  # one skipped cycle, then it waits for the cache
        skipped_at = len(runner.reports)
        api.faults.clear()
        await until(lambda: len(runner.reports) > skipped_at)
        assert runner.reports[skipped_at].result == "completed"
        text = runner.metrics.render().decode()
        assert 'desched_cycles_total{result="stale"} 1.0' in text
        assert 'desched_informer_stale_seconds{resource="pods"} 0.0' in text
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert all(stale == [] for stale in started), started


METRICS_POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
metricsProviders:
- source: KubernetesMetrics
profiles:
- name: default
  pluginConfig:
  - name: DefaultEvictor
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 3600}
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 20, memory: 20}
      targetThresholds: {cpu: 50, memory: 50}
      metricsUtilization: {source: KubernetesMetrics}
  plugins:
    deschedule: {enabled: [PodLifeTime]}
    balance: {enabled: [LowNodeUtilization]}
"""


async def test_metrics_server_down_skips_only_the_plugins_that_read_it(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    # metrics.k8s.io answers 500 from the start and all along: desched starts anyway, every
    # cycle runs (the polled metrics kinds do not count as a stale cache), PodLifeTime acts and
    # LowNodeUtilization ends with a note and a metric.
    cluster(api)
    for kind in ("NodeMetrics", "PodMetrics"):
        api.fail("list", kind, 500, times=10**6)
    path = tmp_path / "metrics.yaml"
    path.write_text(METRICS_POLICY)
    runner = runner_for(config(tmp_path, emulator, policy_path=str(path), interval="50ms",
                               dry_run=True, kinds=None, stale_cache_timeout=0.1))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 3)
        text = runner.metrics.render().decode()
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert {r.result for r in runner.reports} == {"completed"}
    for report in runner.reports:
        assert sorted(d.pod for d in report.log.decisions if d.outcome == "evicted") == [
            "old-1", "old-2"]
        assert [n.plugin for n in report.log.notes] == ["LowNodeUtilization"]
        assert report.log.notes[0].text.startswith("error getting node usage:")
    count = float(text.split('desched_usage_unavailable_total{plugin="LowNodeUtilization",'
                             'profile="default"} ')[1].split()[0])
    assert count >= 3  # one per cycle (the cycles the text was rendered after)

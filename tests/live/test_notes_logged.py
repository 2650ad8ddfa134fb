"""In `desched run`, what a plugin notes (why it did nothing, nodes it could not measure) is
logged, one line a note, with its profile, plugin and cycle."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fake_apiserver import Emulator, FakeApiServer
from structlog.testing import capture_logs
from test_run import background, cluster, config, runner_for, until

pytestmark = pytest.mark.asyncio

IDLE_POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: default
  pluginConfig:
  - name: DefaultEvictor
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 1}
      targetThresholds: {cpu: 2}
  plugins:
    balance: {enabled: [LowNodeUtilization]}
"""


async def test_a_plugin_that_does_nothing_says_why_in_the_log(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    path = tmp_path / "idle.yaml"
    path.write_text(IDLE_POLICY)
    runner = runner_for(config(tmp_path, emulator, policy_path=str(path), interval="50ms",
                               dry_run=True))
    with capture_logs() as logs:
        async with background(runner) as task:
            await until(lambda: len(runner.reports) >= 2)
            runner.request_stop("test")
            assert await asyncio.wait_for(task, 10) == 0
    said = [e for e in logs if e.get("strategy") == "LowNodeUtilization"]
    assert said, logs
    assert said[0]["event"] == ("No node is underutilized, nothing to do here, you might tune "
                                "your thresholds further")
    assert said[0]["profile"] == "default"
    assert said[0]["log_level"] == "info"
    assert {e["cycle"] for e in said} >= {1, 2}

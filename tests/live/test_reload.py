"""Policy hot reload in `desched run` against kmock: a changed file applies at the next cycle
boundary (never mid-cycle), an invalid one is refused while the running policy goes on, plugin
state survives a reload that leaves the plugin's configuration unchanged, and SIGHUP checks the
file at once in the real command."""

from __future__ import annotations

import asyncio
import signal
import textwrap
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import Emulator, FakeApiServer
from test_run import (
    POLICY,
    background,
    cluster,
    config,
    decisions,
    json_lines,
    kubeconfig,
    policy_file,
    runner_for,
    start,
    until,
)

from builders import COMMAND_WAIT
from desched.live.run import Runner

pytestmark = pytest.mark.asyncio

KEEP_ALL = POLICY.replace("maxPodLifeTimeSeconds: 3600", "maxPodLifeTimeSeconds: 86400")


def metric(runner: Runner, name: str) -> dict[str, float]:
    """Samples of one metric family: the label text -> value."""
    out = {}
    for line in runner.metrics.render().decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, _, value = line.rpartition(" ")
            out[labels[len(name):]] = float(value)
    return out


def write(path: str, text: str) -> None:
    Path(path).write_text(text.format(notify="false") if "{notify}" in text else text)


def evicted_by_cycle(runner: Runner) -> list[list[str]]:
    return [sorted(d.pod for d in r.log.decisions if d.outcome == "evicted")
            for r in runner.reports]


async def test_a_valid_change_applies_at_the_next_cycle(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    path = policy_file(tmp_path, text=KEEP_ALL)
    runner = runner_for(config(tmp_path, emulator, policy_path=path, interval="100ms",
                               dry_run=True, policy_poll=0.01))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 1)
        first_hash = metric(runner, "desched_policy_info")
        write(path, POLICY)
        await until(lambda: any(evicted_by_cycle(runner)))
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    cycles = evicted_by_cycle(runner)
    changed = next(i for i, pods in enumerate(cycles) if pods)
    assert all(pods == [] for pods in cycles[:changed])
    assert cycles[changed] == ["old-1", "old-2"]  # the whole cycle under the new policy
    assert metric(runner, "desched_policy_reload_total") == {'{result="success"}': 1.0}
    info = metric(runner, "desched_policy_info")
    assert len(info) == 1 and info != first_hash


async def test_an_invalid_change_is_refused_and_the_running_policy_goes_on(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    path = policy_file(tmp_path)
    runner = runner_for(config(tmp_path, emulator, policy_path=path, interval="50ms",
                               dry_run=True, policy_poll=0.01))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 1)
        write(path, POLICY.replace("maxPodLifeTimeSeconds: 3600", "maxPodLifeTimeSeconds: x"))
        await until(lambda: metric(runner, "desched_policy_reload_total").get(
            '{result="failed"}') == 1.0)
        seen = len(runner.reports)
        await until(lambda: len(runner.reports) >= seen + 2)
        # Fixed again: applied, and the failure is not counted twice.
        write(path, KEEP_ALL)
        await until(lambda: metric(runner, "desched_policy_reload_total").get(
            '{result="success"}') == 1.0)
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    cycles = evicted_by_cycle(runner)
    # Every cycle until the fix ran the first policy (the dry run evicts the same pods).
    assert cycles[: seen + 2] == [["old-1", "old-2"]] * (seen + 2)
    assert metric(runner, "desched_policy_reload_total")['{result="failed"}'] == 1.0


async def test_a_change_mid_cycle_waits_for_the_cycle_to_end(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    evictions = cluster(api)
    path = policy_file(tmp_path)
    runner = runner_for(config(tmp_path, emulator, policy_path=path, interval="50ms",
                               policy_poll=0.005))
    noticed = asyncio.Event()

    def change(body: dict[str, Any]) -> None:
        if not noticed.is_set():  # at the cycle's first eviction
            write(path, KEEP_ALL)
            assert runner.reloader is not None
            runner.reloader.check()
            noticed.set()

    evictions.on_request = change
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 2)
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert noticed.is_set()
    # The change was noticed during cycle 1, which still evicted both pods by the old policy.
    assert decisions(runner)[:2] == [("evicted", "default/old-1", "PodLifeTime"),
                                     ("evicted", "default/old-2", "PodLifeTime")]
    assert runner.reports[0].evicted == 2
    assert metric(runner, "desched_policy_reload_total") == {'{result="success"}': 1.0}


LOWNODELOAD = textwrap.dedent("""\
    apiVersion: descheduler/v1alpha2
    kind: DeschedulerConfiguration
    {top}
    profiles:
    - name: koord
      plugins:
        evict: {{disabled: [{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}}
        filter: {{disabled: [{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}}
        balance:
          enabled: [{{name: LowNodeLoad}}]
      pluginConfig:
      - name: LowNodeLoad
        args:
          lowThresholds: {{cpu: 20, memory: 30}}
          highThresholds: {{cpu: {high}, memory: 60}}
    """)


async def test_plugin_state_survives_when_its_configuration_is_unchanged(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    path = str(tmp_path / "koord.yaml")
    write(path, LOWNODELOAD.format(top="", high=50))
    runner = runner_for(config(tmp_path, emulator, policy_path=path, interval="50ms",
                               policy_poll=0.01))
    key = ("koord", "LowNodeLoad")
    async with background(runner) as task:
        await until(lambda: key in runner.carried)
        detectors = runner.carried[key].node
        # Another setting changes; LowNodeLoad's does not: the same detectors go on.
        write(path, LOWNODELOAD.format(top="maxNoOfPodsToEvictTotal: 5", high=50))
        await until(lambda: runner.policy.limits.total == 5)
        await until(lambda: len(runner.reports) >= 3 and key in runner.carried)
        assert runner.carried[key].node is detectors
        # LowNodeLoad's thresholds change: its detectors start over.
        write(path, LOWNODELOAD.format(top="maxNoOfPodsToEvictTotal: 5", high=55))
        await until(lambda: metric(runner, "desched_policy_reload_total").get(
            '{result="success"}') == 2.0)
        await until(lambda: key in runner.carried)
        assert runner.carried[key].node is not detectors
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0


async def test_a_change_of_how_the_process_runs_is_not_applied(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    path = str(tmp_path / "koord.yaml")
    write(path, LOWNODELOAD.format(top="", high=50))
    runner = runner_for(config(tmp_path, emulator, policy_path=path, interval="50ms",
                               policy_poll=0.01))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 1)
        before = runner.policy
        write(path, LOWNODELOAD.format(top="dryRun: true", high=50))
        await until(lambda: metric(runner, "desched_policy_reload_total").get(
            '{result="failed"}') == 1.0)
        seen = len(runner.reports)
        await until(lambda: len(runner.reports) >= seen + 1)
        assert runner.policy is before and not runner.dry_run
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0


@pytest.mark.process
async def test_command_sighup_checks_the_policy_at_once(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    path = policy_file(tmp_path)
    proc = await start("--policy", path, "--interval", "1h", "--dry-run", "--log-format",
                       "json", "--kubeconfig", kubeconfig(tmp_path, str(emulator.url).rstrip("/")))
    assert proc.stderr is not None

    async def line_with(text: str) -> dict[str, Any]:
        while True:
            raw = await asyncio.wait_for(proc.stderr.readline(), COMMAND_WAIT)  # type: ignore[union-attr]
            assert raw, f"no log line with {text!r}"
            if text in raw.decode():
                return json_lines(raw)[0]

    await line_with("next descheduling cycle")
    write(path, POLICY.replace("maxPodLifeTimeSeconds: 3600", "maxPodLifeTimeSeconds: -5"))
    proc.send_signal(signal.SIGHUP)
    refused = await line_with("policy not reloaded")
    assert refused["level"] == "error" and refused["policy"] == path
    assert "maxPodLifeTimeSeconds" in refused["error"] or "negative" in refused["error"]
    write(path, KEEP_ALL)
    proc.send_signal(signal.SIGHUP)
    changed = await line_with("policy file changed")
    assert changed["policy"] == path
    proc.send_signal(signal.SIGTERM)
    _, rest = await asyncio.wait_for(proc.communicate(), COMMAND_WAIT)
    assert proc.returncode == 0, rest.decode()

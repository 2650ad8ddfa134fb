"""Policy switching on its own (live/reload.py, PolicySwitch): which reloaded policies a running
loop can take (not a changed dryRun, not one that turns the loop into a single run), the
schedule a new policy brings, and the cycle boundary: a change applies through the loop, or is
refused with why (counted, the running policy staying). With the whole loop:
tests/live/test_reload.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import desched.live.reload
from desched.framework.policy import Policy
from desched.live.config import RunConfig, Schedule
from desched.live.metrics import Metrics
from desched.live.reload import PolicySwitch
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import load_policy

pytestmark = pytest.mark.asyncio

POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
{extra}profiles:
- name: p
  plugins:
    deschedule: {{enabled: [{{name: PodLifeTime}}]}}
  pluginConfig:
  - name: PodLifeTime
    args: {{maxPodLifeTimeSeconds: {seconds}}}
"""


def write(path: Path, seconds: int = 3600, extra: str = "") -> None:
    path.write_text(POLICY.format(seconds=seconds, extra=extra))


def switch(tmp_path: Path, **options: object) -> tuple[PolicySwitch, Path]:
    path = tmp_path / "policy.yaml"
    write(path, extra="deschedulingInterval: 1m\n")
    config = RunConfig(policy_path=str(path), signals=False, **options)  # type: ignore[arg-type]
    return PolicySwitch(config, Metrics()), path


def reloads(s: PolicySwitch, result: str) -> float:
    return s.metrics.registry.get_sample_value("desched_policy_reload_total",
                                               {"result": result}) or 0.0


async def test_only_a_loop_reading_a_file_watches_it(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    s, _ = switch(tmp_path)
    assert s.watch(looping=False, loop=loop) is None and s.reloader is None
    stdin = PolicySwitch(RunConfig(policy_path="-", signals=False), Metrics())
    assert stdin.watch(looping=True, loop=loop) is None
    task = s.watch(looping=True, loop=loop)
    assert task is not None and s.reloader is not None
    task.cancel()


async def test_a_valid_change_applies_through_the_loop(tmp_path: Path) -> None:
    s, path = switch(tmp_path)
    task = s.watch(looping=True, loop=asyncio.get_running_loop())
    assert task is not None
    task.cancel()
    applied: list[tuple[Policy, Schedule]] = []

    async def apply(policy: Policy, schedule: Schedule) -> str | None:
        applied.append((policy, schedule))
        return None

    running = Schedule("interval", 60.0)
    await s.at_boundary(False, running, apply)
    assert applied == []  # unchanged: nothing to apply
    write(path, seconds=60, extra="deschedulingInterval: 2m\n")
    await s.at_boundary(False, running, apply)
    [(policy, schedule)] = applied
    assert policy.profiles[0].args["PodLifeTime"].max_pod_life_time_seconds == 60
    assert (schedule.kind, schedule.interval) == ("interval", 120.0)
    assert reloads(s, "success") == 1


async def test_the_flags_schedule_wins_over_the_policys(tmp_path: Path) -> None:
    s, _ = switch(tmp_path, interval="5m")
    running = Schedule("interval", 300.0)
    policy = Policy("policy.yaml", "koordinator", [], descheduling_interval=120.0)
    assert s.schedule_for(policy, False, running) is running


async def test_what_a_running_loop_cannot_take(tmp_path: Path) -> None:
    s, _ = switch(tmp_path)
    running = Schedule("interval", 60.0)
    dry = Policy("policy.yaml", "koordinator", [], dry_run=True, descheduling_interval=60.0)
    assert str(s.schedule_for(dry, False, running)).startswith("dryRun changed: ")
    once = Policy("policy.yaml", "koordinator", [])
    assert str(s.schedule_for(once, False, running)).startswith(
        "the policy no longer sets deschedulingInterval: a running loop cannot become a "
        "single run")


async def test_a_change_the_loop_cannot_apply_is_refused_once(tmp_path: Path) -> None:
    s, path = switch(tmp_path)
    task = s.watch(looping=True, loop=asyncio.get_running_loop())
    assert task is not None
    task.cancel()

    async def refuse(policy: Policy, schedule: Schedule) -> str | None:
        return "the API server does not serve it"

    write(path, seconds=60, extra="deschedulingInterval: 1m\n")
    running = Schedule("interval", 60.0)
    await s.at_boundary(False, running, refuse)
    await s.at_boundary(False, running, refuse)  # the same content: not reported again
    assert reloads(s, "failed") == 1 and reloads(s, "success") == 0
    write(path, seconds=60)  # drops deschedulingInterval: refused before the loop is asked
    await s.at_boundary(False, running, refuse)
    assert reloads(s, "failed") == 2


async def test_changed_process_settings_wait_for_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reloaded Koordinator file's descheduling applies; its leaderElection and the other
    process settings cannot change in a running process: said once per reload."""
    path = tmp_path / "policy.yaml"
    write(path, extra="deschedulingInterval: 1m\n")
    started = load_policy(str(path), PLUGINS)
    s = PolicySwitch(RunConfig(policy_path=str(path), signals=False), Metrics(),
                     started.process)
    warned: list[str] = []
    monkeypatch.setattr(desched.live.reload.log, "warning",
                        lambda message, *a, **k: warned.append(message))
    task = s.watch(looping=True, loop=asyncio.get_running_loop())
    assert task is not None
    task.cancel()

    async def apply(policy: Policy, schedule: Schedule) -> str | None:
        return None

    running = Schedule("interval", 60.0)
    write(path, seconds=60, extra="deschedulingInterval: 1m\n")
    await s.at_boundary(False, running, apply)
    assert warned == []  # the same process settings
    write(path, seconds=60, extra="deschedulingInterval: 1m\nleaderElection: "
                                  "{leaderElect: false}\n")
    await s.at_boundary(False, running, apply)
    assert reloads(s, "success") == 2
    assert [w.split(":")[0] for w in warned] == ["the policy's process settings (leaderElection, "
                                                 "clientConnection, healthzBindAddress, "
                                                 "metricsBindAddress, enableProfiling) changed"]

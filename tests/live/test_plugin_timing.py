"""Plugin timing (live/plugin_timing.py): one `descheduler_strategy_duration_seconds` sample
per plugin run, labelled strategy and profile, failed runs included, registered as a hook on a
cycle's Descheduler."""

from __future__ import annotations

import time

import pytest

from builders import NOW, node, pod, snapshot
from desched.executors.simulation import SimulationExecutor
from desched.framework.runner import Descheduler
from desched.framework.types import Clock
from desched.live.metrics import Metrics
from desched.live.plugin_timing import PluginTimer
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import parse_policy

NAME = "descheduler_strategy_duration_seconds"


def count(metrics: Metrics, strategy: str, profile: str) -> float:
    return metrics.registry.get_sample_value(
        f"{NAME}_count", {"strategy": strategy, "profile": profile}) or 0.0


def total(metrics: Metrics, strategy: str, profile: str) -> float:
    return metrics.registry.get_sample_value(
        f"{NAME}_sum", {"strategy": strategy, "profile": profile}) or 0.0


def test_a_run_is_one_sample_of_its_duration() -> None:
    metrics = Metrics()
    timer = PluginTimer(metrics)
    with timer("p", "PodLifeTime", "deschedule"):
        time.sleep(0.02)
    assert count(metrics, "PodLifeTime", "p") == 1
    assert 0.02 <= total(metrics, "PodLifeTime", "p") < 1


def test_a_failed_run_is_timed_too() -> None:
    metrics = Metrics()
    with pytest.raises(ValueError), PluginTimer(metrics)("p", "X", "balance"):
        raise ValueError("boom")
    assert count(metrics, "X", "p") == 1


def test_every_plugin_run_of_a_cycle_is_timed() -> None:
    policy = parse_policy("policy.yaml", b"""apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: one
  pluginConfig:
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 60}
  - name: LowNodeUtilization
    args: {thresholds: {cpu: 10}, targetThresholds: {cpu: 50}}
  plugins:
    deschedule: {enabled: [PodLifeTime]}
    balance: {enabled: [LowNodeUtilization]}
""", PLUGINS)
    snap = snapshot(node("n1"), node("n2"), pod("p1", "n1"))
    metrics = Metrics()
    d = Descheduler(policy, snap, SimulationExecutor(snap), Clock(NOW))
    d.register_hook(PluginTimer(metrics))
    d.run_cycle(1)
    d.run_cycle(2)
    assert count(metrics, "PodLifeTime", "one") == 2
    assert count(metrics, "LowNodeUtilization", "one") == 2
    assert count(metrics, "DefaultEvictor", "one") == 0  # a filter has no run of its own

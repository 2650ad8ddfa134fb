"""Plugin-run hooks (framework/runner.py, PluginRunHook): what `desched run` times each plugin
run with. A hook wraps every deschedule and balance run in the run order, hooks nest in
registration order, a failing run still leaves them, and without hooks nothing changes: the
profiles' plugin lists stay as built."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from builders import NOW, node, pod, snapshot
from desched.executors.simulation import SimulationExecutor
from desched.framework.runner import Descheduler, PluginRunHook
from desched.framework.types import Clock
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import parse_policy

POLICY = b"""apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: a
  pluginConfig:
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 60}
  - name: LowNodeUtilization
    args: {thresholds: {cpu: 10}, targetThresholds: {cpu: 50}}
  plugins:
    deschedule: {enabled: [PodLifeTime]}
    balance: {enabled: [LowNodeUtilization]}
- name: b
  pluginConfig:
  - name: RemoveFailedPods
  plugins:
    deschedule: {enabled: [RemoveFailedPods]}
"""


def descheduler() -> Descheduler:
    snap = snapshot(node("n1"), node("n2"), pod("p1", "n1"), pod("p2", "n2"))
    policy = parse_policy("policy.yaml", POLICY, PLUGINS)
    return Descheduler(policy, snap, SimulationExecutor(snap), Clock(NOW))


def recorder(seen: list[tuple[str, ...]], tag: str) -> PluginRunHook:
    @contextmanager
    def hook(profile: str, plugin: str, point: str) -> Iterator[None]:
        seen.append((tag, "enter", profile, plugin, point))
        try:
            yield
        except BaseException as err:
            seen.append((tag, "failed", type(err).__name__))
            raise
        finally:
            seen.append((tag, "exit", profile, plugin))

    return hook


def test_a_hook_wraps_every_plugin_run_in_the_run_order() -> None:
    d = descheduler()
    seen: list[tuple[str, ...]] = []
    d.register_hook(recorder(seen, "h"))
    d.run_cycle(1)
    assert [s[2:] for s in seen if s[1] == "enter"] == [
        ("a", "PodLifeTime", "deschedule"), ("b", "RemoveFailedPods", "deschedule"),
        ("a", "LowNodeUtilization", "balance")]
    assert [s[1] for s in seen] == ["enter", "exit"] * 3


def test_hooks_nest_in_registration_order() -> None:
    d = descheduler()
    seen: list[tuple[str, ...]] = []
    d.register_hook(recorder(seen, "outer"))
    d.register_hook(recorder(seen, "inner"))
    d.run_cycle(1)
    assert [(s[0], s[1]) for s in seen[:4]] == [
        ("outer", "enter"), ("inner", "enter"), ("inner", "exit"), ("outer", "exit")]


def test_a_failing_run_leaves_the_hooks() -> None:
    d = descheduler()
    seen: list[tuple[str, ...]] = []
    d.register_hook(recorder(seen, "h"))

    def boom(nodes: object) -> None:
        raise RuntimeError("boom")

    plugin = d.profiles[0].deschedule[0][1]
    plugin.deschedule = boom  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="boom"):
        d.run_cycle(1)
    assert seen == [("h", "enter", "a", "PodLifeTime", "deschedule"),
                    ("h", "failed", "RuntimeError"), ("h", "exit", "a", "PodLifeTime")]


def test_the_profiles_lists_stay_as_built() -> None:
    d = descheduler()
    built = [(list(p.deschedule), list(p.balance)) for p in d.profiles]
    d.register_hook(recorder([], "h"))
    d.run_cycle(1)
    assert [(p.deschedule, p.balance) for p in d.profiles] == built
    for profile in d.profiles:
        for name, plugin in [*profile.deschedule, *profile.balance]:
            assert profile.plugins[name] is plugin

"""Plugin timing for `desched run`: a framework hook (framework/runner.py, PluginRunHook) that
observes `descheduler_strategy_duration_seconds{strategy,profile}` around each plugin run, as
upstream times each strategy. The Runner registers it on every cycle's Descheduler; the
profiles' plugin lists stay as built, and simulate registers nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from desched.live.metrics import Metrics


class PluginTimer:
    """The hook: called with (profile, plugin, extension point), it times that run, failed
    runs included."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    @contextmanager
    def __call__(self, profile: str, plugin: str, point: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.metrics.strategy_duration.labels(plugin, profile).observe(
                time.perf_counter() - started)

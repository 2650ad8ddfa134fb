"""The stale-cache guard on its own (live/stale_cache.py): how long a cycle waits for a cache
that is not current, which kinds it judges (watched ones, not polled metrics), the waits it
counts, and the skipped cycle's log line, metric and report. With the run loop:
tests/live/test_stale_cache.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from desched.framework.policy import Policy
from desched.live.config import Schedule
from desched.live.metrics import Metrics
from desched.live.stale_cache import StaleCacheGuard

pytestmark = pytest.mark.asyncio


def informer(label: str, stale_for: float | None, watchable: bool = True) -> Any:
    """A stand-in informer, not current for `stale_for` seconds (None: watching)."""
    since = None if stale_for is None else time.monotonic() - stale_for
    return SimpleNamespace(
        resource=SimpleNamespace(label=label, watchable=watchable), stale_since=since,
        stale_for=lambda now: 0.0 if since is None else now - since)


def guard(informers: list[Any], timeout: float | None = None,
          on_sleep: Any = None) -> tuple[StaleCacheGuard, list[float]]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if on_sleep is not None:
            on_sleep()

    return StaleCacheGuard(lambda: informers, Metrics(), sleep, timeout), slept


async def test_the_bound_is_the_timeout_else_one_interval() -> None:
    assert guard([], timeout=7.0)[0].bound(Schedule("interval", 300.0)) == 7.0
    g, _ = guard([])
    assert g.bound(Schedule("interval", 300.0)) == 300.0
    # Cron: the time between its next two fire times.
    assert g.bound(Schedule("cron", cron="*/10 * * * *")) == 600.0


async def test_a_current_cache_does_not_wait() -> None:
    g, slept = guard([informer("pods", None), informer("nodes", None)])
    assert await g.current(5.0)
    assert slept == [] and g.waits == 0


async def test_polled_kinds_are_not_judged() -> None:
    g, slept = guard([informer("nodemetrics.metrics.k8s.io", 3600.0, watchable=False)])
    assert await g.current(1.0)
    assert slept == []


async def test_it_waits_for_the_cache_to_be_current_again() -> None:
    pods = informer("pods", 0.5)

    def recover() -> None:
        if len(slept) == 3:
            pods.stale_since = None

    g, slept = guard([pods], on_sleep=recover)
    assert await g.current(10.0)
    assert len(slept) == 3 and g.waits == 3
    assert all(0 < s <= 0.05 for s in slept)


async def test_a_cache_stale_past_the_bound_fails_the_wait() -> None:
    g, slept = guard([informer("pods", 2.0), informer("nodes", None)])
    assert not await g.current(1.0)
    assert slept == [] and g.waits == 0


async def test_the_skipped_cycle_says_what_was_stale() -> None:
    g, _ = guard([informer("pods", 12.34), informer("nodes", None)])
    report = g.skipped(4, Policy("policy.yaml", "v1alpha2", []), dry_run=True)
    assert (report.number, report.result, report.evicted, report.failed) == (4, "stale", 0, 0)
    assert report.facts is not None
    assert report.facts.why.startswith("the cluster cache is not current: pods for 12.")
    assert report.facts.dry_run and report.facts.started <= datetime.now(UTC)
    assert g.metrics.registry.get_sample_value("desched_cycles_total",
                                               {"result": "stale"}) == 1

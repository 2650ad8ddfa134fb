"""The stale-cache guard of `desched run` (docs/running.md): a looping run does not start a
cycle on a cache that is not current. Before each cycle it waits for every watched kind to be
watching again; when one has not been current for longer than the bound (--stale-cache-timeout,
else one interval), the cycle is skipped (logged, `desched_cycles_total{result="stale"}`, a
"stale" report) and the next one runs as soon as the cache is current.

Polled kinds (metrics.k8s.io) are judged by their samples' age instead: a metrics-server
outage must not stop the plugins that do not read it."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from desched.framework.decisions import DecisionLog
from desched.framework.policy import Policy
from desched.live import logging as desched_logging
from desched.live.config import Schedule
from desched.live.cycle_facts import CycleFacts, CycleReport
from desched.live.informer import Informer
from desched.live.metrics import Metrics

log = desched_logging.get_logger("desched.run")

# How often the guard looks again while it waits.
POLL_SECONDS = 0.05


class StaleCacheGuard:
    """`informers`: the run's informers as they are now (a reload adds some). `sleep`: the
    run's interruptible sleep (a shutdown or a lost lease ends the wait by raising)."""

    def __init__(self, informers: Callable[[], Sequence[Informer]], metrics: Metrics,
                 sleep: Callable[[float], Awaitable[None]],
                 timeout: float | None = None) -> None:
        self.informers = informers
        self.metrics = metrics
        self.sleep = sleep
        self.timeout = timeout  # --stale-cache-timeout
        # How often the guard found the cache not current and waited: a test counts these to
        # know the guard has looked, instead of sleeping and hoping it did.
        self.waits = 0

    def bound(self, schedule: Schedule) -> float:
        """How long a cycle waits for a cache that is not current: --stale-cache-timeout, else
        one interval (for cron, the time between its next two fire times)."""
        if self.timeout is not None:
            return self.timeout
        if schedule.kind == "cron":
            now = datetime.now(UTC)
            first = schedule.next_run(None, now)
            second = schedule.next_run(first, first) if first else None
            if first and second:
                return (second - first).total_seconds()
        return schedule.interval

    def stale(self, now: float) -> dict[str, float]:
        """The watched kinds that are not current, with for how long (seconds)."""
        return {i.resource.label: i.stale_for(now) for i in self.informers()
                if i.stale_since is not None and i.resource.watchable}

    async def current(self, bound: float | None) -> bool:
        """Wait until every informer is watching again; False once one has not been current
        for longer than `bound` seconds (None: wait as long as it takes)."""
        while True:
            ages = self.stale(time.monotonic()).values()
            if not ages:
                return True
            stale = max(ages)
            if bound is not None and stale > bound:
                return False
            self.waits += 1
            await self.sleep(POLL_SECONDS if bound is None
                             else min(POLL_SECONDS, bound - stale + 0.001))

    def skipped(self, number: int, policy: Policy, dry_run: bool) -> CycleReport:
        """Cycle `number` is skipped: the log line, the metric and its report."""
        stale = {label: round(seconds, 1)
                 for label, seconds in self.stale(time.monotonic()).items()}
        log.warning("descheduling cycle skipped: the cluster cache is not current; the next "
                    "cycle runs as soon as it is", cycle=number, stale_seconds=stale)
        self.metrics.cycles.labels("stale").inc()
        facts = CycleFacts(datetime.now(UTC), dry_run, policy)
        facts.why = "the cluster cache is not current: " + ", ".join(
            f"{label} for {seconds:g}s" for label, seconds in stale.items())
        return CycleReport(number, "stale", 0, 0, DecisionLog(), facts)

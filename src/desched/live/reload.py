"""Policy hot reload for `desched run`: the policy file is watched (polled, and at once on SIGHUP);
a changed file is validated as soon as it is noticed and handed to the loop, which applies it at
the next cycle boundary, never mid-cycle. An invalid file is not applied: the running policy
stays, one log line names the file and the problem, and `desched_policy_reload_total{result}`
counts it.

Polling the file's bytes (a hash, every few seconds) rather than watching inotify events is
deliberate: a ConfigMap volume is updated by swapping a `..data` symlink, which inotify reports on
the directory, not the file, and the file is small.

Two parts: `PolicyReloader` notices and validates a changed file; `PolicySwitch` watches the
file for a loop (the poll task, SIGHUP) and, at a cycle boundary, decides whether the new policy
can replace the running one (not when it changes how the process runs: dryRun, a loop becoming
a single run) and has the loop apply it.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from desched.errors import InputError
from desched.framework.policy import Policy, ProcessSettings
from desched.live.config import RunConfig, Schedule, resolve_schedule
from desched.live.logging import get_logger
from desched.live.metrics import Metrics
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import parse_policy

log = get_logger("desched.reload")


def policy_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class PendingPolicy:
    policy: Policy
    digest: str


class PolicyReloader:
    """Notices a changed policy file and keeps the validated new policy until the loop takes it."""

    def __init__(self, path: str, digest: str, metrics: Metrics) -> None:
        self.path = path
        self.running = digest  # the running policy's file hash
        self.metrics = metrics
        self.pending: PendingPolicy | None = None
        self._refused = ""  # hash of the last invalid content, so it is reported once
        metrics.policy_loaded(path, digest)

    def check(self) -> None:
        """Read the file; validate it if it changed (cheap when it did not: a hash)."""
        try:
            data = Path(self.path).read_bytes()
        except OSError as err:
            # A ConfigMap update swaps the file atomically: a missing file is a real problem,
            # yet not one to act on; the running policy stays.
            self._refuse(f"os:{err.errno}", f"cannot read the policy file: "
                                            f"{err.strerror or err}")
            return
        digest = policy_digest(data)
        if digest == self.running:
            if self.pending is not None:  # changed, then changed back before a cycle took it
                log.info("policy file is back to the running policy", policy=self.path)
            self.pending, self._refused = None, ""
            return
        if digest == self._refused or (self.pending and digest == self.pending.digest):
            return
        try:
            policy = parse_policy(self.path, data, PLUGINS)
            check(policy)
        except InputError as err:
            self._refuse(digest, str(err))
            return
        self.pending = PendingPolicy(policy, digest)
        log.info("policy file changed; it applies at the next cycle", policy=self.path,
                 hash=digest[:12])

    def _refuse(self, digest: str, problem: str) -> None:
        if digest == self._refused:
            return
        self._refused = digest
        self.pending = None  # a valid change followed by an invalid one: neither applies
        self.metrics.policy_reloads.labels("failed").inc()
        log.error("policy not reloaded; the running policy stays", policy=self.path,
                  error=problem)

    def take(self) -> PendingPolicy | None:
        pending, self.pending = self.pending, None
        return pending

    def applied(self, pending: PendingPolicy) -> None:
        self.running = pending.digest
        self._refused = ""
        self.metrics.policy_reloads.labels("success").inc()
        self.metrics.policy_loaded(self.path, pending.digest)

    def not_applied(self, pending: PendingPolicy, problem: str) -> None:
        """The loop could not apply a valid policy (it changes how the process runs)."""
        self._refuse(pending.digest, problem)


# Makes a checked policy (with the schedule it runs on) the running one: why not, if the loop
# cannot (the API server does not serve what it reads).
Apply = Callable[[Policy, Schedule], Awaitable[str | None]]


class PolicySwitch:
    """Policy switching for a looping `desched run`: the file is watched (polled every
    --policy-poll seconds, and checked at once on SIGHUP), and at each cycle boundary a changed,
    valid policy replaces the running one when it can."""

    def __init__(self, config: RunConfig, metrics: Metrics,
                 process: ProcessSettings | None = None) -> None:
        self.config = config
        self.metrics = metrics
        self.reloader: PolicyReloader | None = None
        # The Koordinator process settings the run started with (live/process_settings.py):
        # a reloaded policy's descheduling applies, its process settings only at a restart.
        self.process = process

    def watch(self, looping: bool, loop: asyncio.AbstractEventLoop) -> asyncio.Task[None] | None:
        """Start watching the policy file (a loop's; not standard input): the poll task, for
        the caller to cancel at shutdown."""
        path = self.config.policy_path
        if not looping or path == "-":
            return None
        try:
            digest = policy_digest(Path(path).read_bytes())
        except OSError:
            digest = ""  # read moments ago by prepare(): the next check reports the problem
        reloader = self.reloader = PolicyReloader(path, digest, self.metrics)

        async def poll() -> None:
            while True:
                await asyncio.sleep(self.config.policy_poll)
                reloader.check()

        task = asyncio.create_task(poll(), name="policy reload")
        if self.config.signals:
            loop.add_signal_handler(signal.SIGHUP, self.on_sighup)
        return task

    def on_sighup(self) -> None:
        log.info("SIGHUP: checking the policy file", policy=self.config.policy_path)
        if self.reloader is not None:
            self.reloader.check()

    def schedule_for(self, policy: Policy, dry_run: bool, running: Schedule) -> Schedule | str:
        """The schedule `policy` runs on, or why the running process cannot take it."""
        config = self.config
        if (config.dry_run or policy.dry_run) != dry_run:
            return ("dryRun changed: it decides how the process runs (events, leader election, "
                    "migrations); restart desched to apply it")
        schedule = running
        if not (config.once or config.interval is not None or config.cron):
            try:
                schedule = resolve_schedule(config, policy)
            except InputError as err:
                return str(err)
            if not schedule.looping:
                return ("the policy no longer sets deschedulingInterval: a running loop cannot "
                        "become a single run; restart desched to apply it")
        return schedule

    async def at_boundary(self, dry_run: bool, running: Schedule, apply: Apply) -> None:
        """At a cycle boundary: the changed policy, if valid and applicable, replaces the
        running one (through `apply`)."""
        reloader = self.reloader
        if reloader is None:
            return
        reloader.check()  # a change made since the last poll applies now, not a cycle later
        pending = reloader.take()
        if pending is None:
            return
        schedule = self.schedule_for(pending.policy, dry_run, running)
        problem = schedule if isinstance(schedule, str) else await apply(pending.policy,
                                                                         schedule)
        if problem:
            reloader.not_applied(pending, problem)
            return
        reloader.applied(pending)
        assert not isinstance(schedule, str)
        if pending.policy.process != self.process:
            log.warning("the policy's process settings (leaderElection, clientConnection, "
                        "healthzBindAddress, metricsBindAddress, enableProfiling) changed: "
                        "they apply when desched restarts", policy=self.config.policy_path)
        log.info("policy reloaded", policy=self.config.policy_path, hash=pending.digest[:12],
                 schedule=str(schedule))


def check(policy: Policy) -> None:
    from desched.framework.runner import check_policy

    check_policy(policy)

"""Migration supervision for `desched run` (docs/migration.md): one MigrationService per
profile whose evict plugin is MigrationController, started once the caches sync, switched when
a reloaded policy changes them, stopped when the lease is lost or the run ends.

A looping run runs each service beside the cycles; a --once run drives them after its cycle
until the jobs it created finish (`finish`). The services share one Verdicts (each profile's
arbitration sees the others' passes), and each cycle's MigrationController plugin checks and
feeds the object limiters its service checks and feeds (handed over as carried state)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from desched.errors import InputError
from desched.framework.evictor import Executor
from desched.live import logging as desched_logging
from desched.live.carried_state import CarriedState
from desched.live.client import ApiClient
from desched.live.events import EventRecorder
from desched.live.informer import Informer
from desched.live.metrics import Metrics
from desched.live.migration import (
    JobTemplate,
    MigrationJobExecutor,
    MigrationProfile,
    MigrationService,
    Verdicts,
)
from desched.snapshot.cluster import ClusterSnapshot

log = desched_logging.get_logger("desched.run")

Guard = Callable[[], str | None]


def serves_jobs(informers: Sequence[Informer]) -> bool:
    """Whether the API server serves PodMigrationJobs (one of the informers watches them)."""
    return any(i.resource.kind == "PodMigrationJob" and not i.skipped for i in informers)


class MigrationSupervisor:
    """The run's MigrationServices, by profile. `args`: the running policy's profiles that evict
    through PodMigrationJobs, each with its evict plugin and its args (none in a dry run);
    `looping`: whether services run beside the cycles."""

    def __init__(self, args: Mapping[str, MigrationProfile], carried: CarriedState,
                 metrics: Metrics, *, looping: bool, eviction_attempts: int = 3,
                 disable_pvc_reservation: bool = False) -> None:
        self.args = dict(args)
        self.disable_pvc_reservation = disable_pvc_reservation  # Koordinator's gate
        self.carried = carried
        self.metrics = metrics
        self.looping = looping
        self.eviction_attempts = eviction_attempts
        self.services: dict[str, MigrationService] = {}
        self.tasks: dict[str, asyncio.Task[Any]] = {}  # the services' loops, by profile
        self.verdicts = Verdicts()
        # Set by start(): what a service is built with.
        self._client: ApiClient | None = None
        self._informers: Sequence[Informer] = ()
        self._events: EventRecorder | None = None
        self._guard: Guard | None = None

    @property
    def profiles(self) -> frozenset[str]:
        return frozenset(self.services)

    def check_kinds(self, informers: Sequence[Informer], policy_path: str) -> None:
        """Raise InputError when the policy migrates and the server lacks the CRD."""
        if not self.args:
            return
        if not serves_jobs(informers):
            profiles = ", ".join(sorted(self.args))
            raise InputError(policy_path, (
                f"profile(s) {profiles} evict through MigrationController, which needs the "
                "PodMigrationJob CRD (scheduling.koordinator.sh/v1alpha1); the API server does "
                "not serve it: install deploy/crds, or run with --dry-run"))

    def start(self, client: ApiClient, informers: Sequence[Informer],
              events: EventRecorder | None, guard: Guard | None) -> None:
        """One MigrationService per MigrationController profile; the first adopts the jobs
        created by hand."""
        self._client, self._informers, self._events, self._guard = (
            client, informers, events, guard)
        for index, (profile, migration) in enumerate(self.args.items()):
            self._start(profile, migration, adopt_unowned=index == 0)
        self.metrics.watch_migrations(lambda: [
            (profile, service.phase_counts(), service.controller.evictions)
            for profile, service in self.services.items()])

    def _start(self, profile: str, migration: MigrationProfile, adopt_unowned: bool) -> None:
        assert self._client is not None
        service = MigrationService(
            profile, migration.args, self._client, self._informers, events=self._events,
            adopt_unowned=adopt_unowned, eviction_attempts=self.eviction_attempts,
            guard=self._guard, verdicts=self.verdicts,
            disable_pvc_reservation=self.disable_pvc_reservation)
        self.services[profile] = service
        # Each cycle's plugin checks and feeds the limiters the service checks and feeds.
        self.carried.hand((profile, migration.plugin), service.limiters)
        if self.looping:
            self.tasks[profile] = asyncio.create_task(service.run(),
                                                      name=f"migrations {profile}")

    async def _stop(self, profile: str) -> None:
        self.services.pop(profile, None)
        migration = self.args.get(profile)
        if migration is not None:
            self.carried.drop((profile, migration.plugin))
        task = self.tasks.pop(profile, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def switch(self, args: Mapping[str, MigrationProfile]) -> None:
        """A reloaded policy: stop the services whose profile changed or left, start the new
        ones (the first profile adopts the jobs created by hand)."""
        for profile in [p for p, a in self.args.items() if args.get(p) != a]:
            await self._stop(profile)
        first = next(iter(args), None)
        for profile, migration in args.items():
            if profile not in self.services:
                self._start(profile, migration, adopt_unowned=profile == first)
        self.args = dict(args)

    def lease_lost(self) -> None:
        """Another instance leads now: stop migrating at once."""
        for task in self.tasks.values():
            task.cancel()

    def observe(self, snapshot: ClusterSnapshot) -> None:
        """A cycle's snapshot, for the services' arbitration."""
        for service in self.services.values():
            service.observe(snapshot)

    def executor(self, evictions: Executor, client: ApiClient, loop: asyncio.AbstractEventLoop,
                 snapshot: ClusterSnapshot, *, attempts: int, timeout: float) -> Executor:
        """The cycle's executor: PodMigrationJobs for the migrating profiles, `evictions` for
        the others (itself when no profile migrates)."""
        if not self.services:
            return evictions
        templates = {profile: JobTemplate(service.args, service.creator)
                     for profile, service in self.services.items()}
        return MigrationJobExecutor(evictions, client, loop, snapshot, templates,
                                    attempts=attempts, timeout=timeout)

    async def finish(self, executor: Executor, wake: asyncio.Event) -> None:
        """--once: reconcile the jobs this run created until they finish (or time out, or
        `wake` is set)."""
        if (not isinstance(executor, MigrationJobExecutor) or not executor.created
                or self.looping):
            return

        async def drain(profile: str, service: MigrationService, mine: list[str]) -> None:
            log.info("waiting for the migration jobs of this run", profile=profile,
                     jobs=len(mine))
            left = await service.drain(mine, wake)
            if left:
                log.warning("migration jobs still in flight at exit", profile=profile,
                            jobs=sorted(left))
            else:
                log.info("migration jobs finished", profile=profile, jobs=len(mine))

        created = executor.created
        # All profiles at once: one profile's slow jobs must not starve another's.
        await asyncio.gather(*(
            drain(profile, service, mine) for profile, service in self.services.items()
            if (mine := [name for name, owner in created if owner == profile])))

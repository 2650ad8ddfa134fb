"""Migration supervision on its own (live/migration_supervisor.py), with stand-in services:
one service per MigrationController profile (the first adopts jobs created by hand), their
limiters handed to the cycles' plugins, a reload stopping the changed profiles and starting the
new ones, a lost lease stopping them at once, the CRD check, and the cycle's executor. With a
real controller against kmock: tests/live/test_migration_run.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

import desched.live.migration_supervisor as supervisor_module
from desched.errors import InputError
from desched.live.carried_state import CarriedState
from desched.live.metrics import Metrics
from desched.live.migration import MigrationJobExecutor, MigrationProfile
from desched.live.migration_supervisor import MigrationSupervisor

pytestmark = pytest.mark.asyncio
CLIENT: Any = object()  # the services here never call it


class Service:
    """Stands in for MigrationService: records how it was built and whether it runs."""

    built: ClassVar[list[Service]] = []

    def __init__(self, profile: str, args: Any, client: Any, informers: Any, *,
                 adopt_unowned: bool, **options: Any) -> None:
        self.profile, self.args, self.adopt_unowned = profile, args, adopt_unowned
        self.options = options
        self.limiters = f"limiters of {profile}"
        self.creator = f"desched/{profile}"
        self.running = False
        self.stopped = False
        self.controller = SimpleNamespace(evictions=0)
        Service.built.append(self)

    def phase_counts(self) -> dict[str, int]:
        return {}

    async def run(self) -> None:
        self.running = True
        try:
            await asyncio.Event().wait()
        finally:
            self.stopped = True


@pytest.fixture(autouse=True)
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    Service.built = []
    monkeypatch.setattr(supervisor_module, "MigrationService", Service)


def migrating(args: dict[str, Any]) -> dict[str, MigrationProfile]:
    """Profiles evicting through MigrationController with these args."""
    return {p: MigrationProfile("MigrationController", a) for p, a in args.items()}


def supervisor(args: dict[str, Any], looping: bool = True) -> MigrationSupervisor:
    return MigrationSupervisor(migrating(args), CarriedState(), Metrics(), looping=looping,
                               eviction_attempts=5)


def kinds(*served: str) -> list[Any]:
    return [SimpleNamespace(resource=SimpleNamespace(kind=k), skipped=False) for k in served]


async def test_one_service_per_profile_the_first_adopting_hand_made_jobs() -> None:
    guard = lambda: None  # noqa: E731
    s = supervisor({"a": "args-a", "b": "args-b"})
    s.start(client=CLIENT, informers=[], events=None, guard=guard)  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert [(x.profile, x.args, x.adopt_unowned) for x in Service.built] == [
        ("a", "args-a", True), ("b", "args-b", False)]
    assert Service.built[0].options["guard"] is guard
    assert Service.built[0].options["eviction_attempts"] == 5
    assert Service.built[0].options["verdicts"] is Service.built[1].options["verdicts"]
    assert s.carried[("a", "MigrationController")] == "limiters of a"
    assert s.profiles == frozenset({"a", "b"}) and all(x.running for x in Service.built)
    s.lease_lost()
    await asyncio.sleep(0)
    assert all(x.stopped for x in Service.built)


async def test_a_single_run_drives_its_services_itself() -> None:
    s = supervisor({"a": "args"}, looping=False)
    s.start(client=CLIENT, informers=[], events=None, guard=None)  # type: ignore[arg-type]
    assert s.tasks == {} and s.profiles == frozenset({"a"})


async def test_a_reload_stops_the_changed_profiles_and_starts_the_new_ones() -> None:
    s = supervisor({"same": "x", "changed": "x", "gone": "x"})
    s.start(client=CLIENT, informers=[], events=None, guard=None)  # type: ignore[arg-type]
    await asyncio.sleep(0)
    old = {x.profile: x for x in Service.built}
    await s.switch(migrating({"new": "y", "same": "x", "changed": "y"}))
    assert old["changed"].stopped and old["gone"].stopped and not old["same"].stopped
    assert sorted(s.services) == ["changed", "new", "same"]
    assert s.services["same"] is old["same"]
    # The first profile of the new policy adopts the hand-made jobs.
    assert {x.profile: x.adopt_unowned for x in Service.built[3:]} == {"new": True,
                                                                     "changed": False}
    assert ("gone", "MigrationController") not in s.carried
    for task in s.tasks.values():
        task.cancel()


async def test_the_crd_check() -> None:
    supervisor({}).check_kinds(kinds("Pod"), "policy.yaml")  # nothing migrates
    supervisor({"a": "x"}).check_kinds(kinds("Pod", "PodMigrationJob"), "policy.yaml")
    with pytest.raises(InputError, match="profile\\(s\\) a, b evict through "
                                         "MigrationController, which needs the "
                                         "PodMigrationJob CRD"):
        supervisor({"b": "x", "a": "x"}).check_kinds(kinds("Pod"), "policy.yaml")


async def test_the_cycles_executor() -> None:
    evictions: Any = object()
    s = supervisor({})
    assert s.executor(evictions, None, asyncio.get_running_loop(), None,  # type: ignore[arg-type]
                      attempts=1, timeout=1.0) is evictions
    s = supervisor({"a": "x"}, looping=False)
    s.start(client=CLIENT, informers=[], events=None, guard=None)  # type: ignore[arg-type]
    executor = s.executor(evictions, None, asyncio.get_running_loop(),  # type: ignore[arg-type]
                          None, attempts=2, timeout=3.0)
    assert isinstance(executor, MigrationJobExecutor)
    assert executor.inner is evictions and set(executor.templates) == {"a"}
    assert executor.templates["a"].creator == "desched/a"
    # Nothing created: nothing to wait for.
    await s.finish(executor, asyncio.Event())

"""MigrationService in isolation: which jobs are due, what survives an API problem, the leader
guard, and how --once tells a finished job from one the cache has not shown yet. The informer is
a plain store and the controller a recording stand-in; the HTTP paths are in
test_migration_run.py."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from desched.live import migration
from desched.live.client import ApiClient, ConnectionLost
from desched.live.informer import Informer
from desched.live.migration import MigrationService, Verdicts
from desched.migration.arbitration import PASSED_ARBITRATION_ANNOTATION, Verdict
from desched.migration.args import MigrationControllerArgs, default
from desched.model.kinds import JSON_DECODERS
from desched.model.resources import BY_KIND

pytestmark = pytest.mark.asyncio


def job(name: str, phase: str = "Running", passed: bool = True, **annotations: str) -> Any:
    if passed:
        annotations[PASSED_ARBITRATION_ANNOTATION] = "true"
    return JSON_DECODERS["PodMigrationJob"].decode(msgspec.json.encode({
        "metadata": {"name": name, "annotations": annotations,
                     "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
        "spec": {"podRef": {"namespace": "default", "name": f"p-{name}"}, "ttl": "5m"},
        "status": {"phase": phase}}))


class Controller:
    """Records passes; raises what `fail` maps a job to."""

    def __init__(self) -> None:
        self.passes: list[str] = []
        self.fail: dict[str, BaseException] = {}
        self.waits: dict[str, float] = {}
        self.verdicts: list[Verdict] = []  # arbitration's, as written to the jobs

    async def reconcile(self, name: str) -> bool:
        self.passes.append(name)
        if name in self.fail:
            raise self.fail[name]
        return True

    def retry_after(self, name: str) -> float:
        return self.waits.get(name, 0.0)

    async def scavenge(self, name: str) -> bool:
        raise ConnectionLost(f"delete podmigrationjob {name}: read timeout")

    async def apply_verdict(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)


def service(*jobs: Any, guard: Any = None) -> tuple[MigrationService, Controller]:
    informer = Informer(ApiClient.for_server("http://127.0.0.1:9", trust_env=False),
                        BY_KIND["PodMigrationJob"])
    informer.store = {j.metadata.name: j for j in jobs}
    informer.synced.set()  # the cache as listed: arbitration builds its snapshot from it
    args = MigrationControllerArgs()
    default(args)
    svc = MigrationService("p", args, informer.client, [informer], guard=guard,
                           verdicts=Verdicts())
    fake = Controller()
    svc.controller = fake  # type: ignore[assignment]
    return svc, fake


async def test_one_job_failing_does_not_stop_the_others() -> None:
    svc, fake = service(job("a"), job("b"), job("c"))
    fake.fail = {"a": ConnectionLost("get podmigrationjob a: read timeout"),
                 "b": KeyError("a bug")}
    await svc.round()
    assert sorted(fake.passes) == ["a", "b", "c"]
    loop = asyncio.create_task(svc.run())  # nothing escapes its rounds, even a bug
    try:
        while svc.rounds < 3:
            await asyncio.sleep(0.01)
        assert not loop.done()
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop


async def test_unchanged_jobs_wait_for_the_requeue_and_backoff_wins_over_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The rounds run at one instant of the service's clock: "not again before 3 s" does not
    # depend on how fast a loaded machine runs them.
    monkeypatch.setattr(migration, "time", SimpleNamespace(monotonic=lambda: 1_000.0))
    a, b = job("a"), job("b")
    svc, fake = service(a, b)
    await svc.round()
    await svc.round()
    assert sorted(fake.passes) == ["a", "b"]  # unchanged: not again before 3 s
    fake.waits["b"] = 30.0  # b's evictions keep failing: it backs off
    svc.jobs.store["a"] = job("a")  # changed objects
    svc.jobs.store["b"] = job("b")
    await svc.round()
    assert sorted(fake.passes) == ["a", "a", "b"]


async def test_pending_jobs_wait_for_arbitration() -> None:
    svc, fake = service(job("w", phase="Pending", passed=False))
    await svc.round()
    # Arbitrated before any pass: its pod is not in the cache, so it did not pass.
    assert [(v.job, v.outcome) for v in fake.verdicts] == [("w", "failed")]
    assert fake.passes == []
    svc.verdicts.record("w", "passed")  # written, the cache does not show it yet
    await svc.round()
    assert fake.passes == ["w"]


async def test_a_lost_lease_stops_rounds_and_evictions() -> None:
    refusal = "leader election lost"
    lost = False
    svc, fake = service(job("a"), guard=lambda: refusal if lost else None)
    lost = True
    await svc.round()
    assert fake.passes == [] and svc.rounds == 0
    pod = JSON_DECODERS["Pod"].decode(b'{"metadata": {"name": "p-a", "namespace": "default"}}')
    assert svc.limited(pod, {"metadata": {"name": "a"}}) == refusal


async def test_scavenger_survives_a_failing_delete() -> None:
    old = job("old", phase="Succeeded")
    svc, _ = service(old)
    assert await svc.scavenge(datetime(2030, 1, 1, tzinfo=UTC)) == []


async def test_drain_waits_for_jobs_the_cache_has_not_shown() -> None:
    svc, _ = service()
    seen: set[str] = set()
    assert svc.active(["new"], seen) == {"new"}  # created, its watch event still on the way
    svc.jobs.store["new"] = job("new")
    assert svc.active(["new"], seen) == {"new"}
    svc.jobs.store["new"] = job("new", phase="Succeeded")
    assert svc.active(["new"], seen) == set()
    del svc.jobs.store["new"]  # deleted after it was shown: gone
    assert svc.active(["new"], seen) == set()
    stop = asyncio.Event()
    stop.set()
    assert await svc.drain(["never-shown"], stop) == {"never-shown"}

"""The reports a loop keeps (its ten most recent cycles) must not keep those cycles' snapshots
alive: at 150,000 pods each holds its own indices. Neither may what the /cycles page keeps of
them (the utilization before and after, the workloads evicted), nor its rendering."""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fake_apiserver import Emulator, FakeApiServer
from test_run import background, cluster, config, runner_for, until

import desched.live.cycle_assembly as run_module
from desched.snapshot.cluster import ClusterSnapshot

pytestmark = pytest.mark.asyncio


async def test_kept_reports_do_not_hold_their_snapshots(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster(api)
    built: list[weakref.ref[ClusterSnapshot]] = []
    original = run_module.build_snapshot

    async def tracked(*args: Any, **kwargs: Any) -> ClusterSnapshot:
        snapshot = await original(*args, **kwargs)
        built.append(weakref.ref(snapshot))
        return snapshot

    monkeypatch.setattr(run_module, "build_snapshot", tracked)
    runner = runner_for(config(tmp_path, emulator, interval="50ms", dry_run=True,
                               metrics_address="127.0.0.1:0"))
    async with background(runner) as task, aiohttp.ClientSession(trust_env=False) as http:
        await until(lambda: len(runner.reports) >= 1)
        while len(runner.reports) < 4:  # the page fetched as the cycles go
            for path in ("/cycles", "/cycles.json"):
                async with http.get(f"http://127.0.0.1:{runner.servers[0].port}{path}") as r:
                    assert r.status == 200
                    await r.read()
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    gc.collect()
    assert len(runner.reports) >= 4
    assert all(r.facts is not None and r.facts.frames is not None for r in runner.reports)
    alive = [ref for ref in built if ref() is not None]
    assert alive == [], f"{len(alive)} of {len(built)} snapshots still alive"

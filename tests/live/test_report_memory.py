"""The reports a loop keeps (its ten most recent cycles) must not keep those cycles' snapshots
alive: at 150,000 pods each holds its own indices."""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import Emulator, FakeApiServer
from test_run import background, cluster, config, runner_for, until

import desched.live.run as run_module
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
    runner = runner_for(config(tmp_path, emulator, interval="50ms", dry_run=True))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 4)
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    gc.collect()
    assert len(runner.reports) >= 4
    alive = [ref for ref in built if ref() is not None]
    assert alive == [], f"{len(alive)} of {len(built)} snapshots still alive"

"""LowNodeLoad's anomaly detectors across `desched run --once` processes (a CronJob's runs): each
run is a new Runner, as each CronJob run is a new process; the counts live in the ConfigMap
`desched-state`, so the hot node is acted on at the run the detector allows, and not before.

kmock's emulator has no PUT and no resourceVersions, so the ConfigMap endpoints are reactions of
FakeConfigMaps below (PUT needs the current resourceVersion, else 409)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kmock
import pytest
import yaml
from fake_apiserver import Emulator, FakeApiServer, status
from test_executor import Evictions
from test_run import (
    background,
    config,
    decisions,
    json_lines,
    kubeconfig,
    runner_for,
    start,
    until,
)

from builders import COMMAND_WAIT
from desched.live.detector_state import DRY_RUN_KEY, KEY
from desched.model.resources import RESOURCES

pytestmark = pytest.mark.asyncio

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "lownodeload-hotspot"
CONFIGMAPS = kmock.resource("", "v1", "configmaps")
HOT_NODE = "cn-beijing.10.0.0.53"


class FakeConfigMaps:
    def __init__(self, server: kmock.KubernetesScaffold) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.rvs = itertools.count(1)
        self.log: list[tuple[str, int]] = []
        self.refuse: int | None = None  # answer every request with this status
        server[kmock.action.FETCH, CONFIGMAPS] << self._wrap(self._get)
        server[kmock.action.CREATE, CONFIGMAPS] << self._wrap(self._create)
        server[kmock.method.PUT, CONFIGMAPS] << self._wrap(self._replace)

    def _wrap(self, handler: Callable[[kmock.Request], tuple[int, Any]]) \
            -> Callable[[kmock.Request], Awaitable[kmock.Response]]:
        async def react(request: kmock.Request) -> kmock.Response:
            if self.refuse is not None:
                code, body = self.refuse, status(self.refuse, "configmaps is forbidden")
            else:
                code, body = handler(request)
            self.log.append((request.method.value, code))
            return kmock.Response(status=code, payload=body)
        return react

    @staticmethod
    def key(request: kmock.Request) -> str:
        return f"{request.namespace}/{request.name or request.data['metadata']['name']}"

    def _get(self, request: kmock.Request) -> tuple[int, Any]:
        obj = self.objects.get(self.key(request))
        if obj is None:
            return 404, status(404, f'configmaps "{request.name}" not found', "NotFound")
        return 200, obj

    def _create(self, request: kmock.Request) -> tuple[int, Any]:
        if self.key(request) in self.objects:
            return 409, status(409, "already exists", "AlreadyExists")
        return 201, self._store(request)

    def _replace(self, request: kmock.Request) -> tuple[int, Any]:
        current = self.objects.get(self.key(request))
        if current is None:
            return 404, status(404, "not found", "NotFound")
        sent = request.data.get("metadata", {}).get("resourceVersion")
        if sent != current["metadata"]["resourceVersion"]:
            return 409, status(409, "the object has been modified", "Conflict")
        return 200, self._store(request)

    def _store(self, request: kmock.Request) -> dict[str, Any]:
        obj = json.loads(json.dumps(request.data))
        obj["metadata"] = {**obj["metadata"], "namespace": request.namespace,
                           "resourceVersion": str(next(self.rvs))}
        self.objects[self.key(request)] = obj
        return obj

    def counts(self, key: str = KEY) -> dict[str, int]:
        """Node -> consecutive hot passes in the stored node detectors."""
        obj = self.objects.get("kube-system/desched-state")
        if obj is None:
            return {}
        entries = json.loads(obj["data"][key])["koord-descheduler/node_detectors"]
        return {node: e["abnormalities"] for node, e in entries.items()}


def hotspot(api: FakeApiServer) -> Evictions:
    """examples/lownodeload-hotspot, its NodeMetrics fresh: one node above the high thresholds."""
    api.serve(*(r.kind for r in RESOURCES))
    items = yaml.safe_load((EXAMPLE / "cluster.yaml").read_text())["items"]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for item in items:
        if item["kind"] == "NodeMetric":
            item["status"]["updateTime"] = now
        api.add_now(item["kind"], item)
    return Evictions(api).install()


def policy(tmp_path: Path, abnormalities: int) -> str:
    text = (EXAMPLE / "policy.yaml").read_text().replace(
        "      highThresholds: {cpu: 50, memory: 60}\n",
        "      highThresholds: {cpu: 50, memory: 60}\n"
        f"      anomalyCondition: {{consecutiveAbnormalities: {abnormalities}}}\n")
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return str(path)


async def once(tmp_path: Path, emulator: Emulator, path: str,
               dry_run: bool = False) -> list[tuple[str, str, str]]:
    """One CronJob run: a new Runner, nothing shared with the previous one but the cluster."""
    runner = runner_for(config(tmp_path, emulator, policy_path=path, once=True,
                               dry_run=dry_run, lease_namespace="kube-system"))
    assert await asyncio.wait_for(runner.run(), 20) == 0
    return [d for d in decisions(runner) if d[2] == "LowNodeLoad"]


async def test_a_cronjob_acts_on_the_run_the_detector_allows(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    maps = FakeConfigMaps(emulator)
    evictions = hotspot(api)
    path = policy(tmp_path, abnormalities=2)  # acted on when hot on more than 2 passes
    assert await once(tmp_path, emulator, path) == []
    assert maps.counts()[HOT_NODE] == 1
    assert await once(tmp_path, emulator, path) == []
    assert maps.counts()[HOT_NODE] == 2
    third = await once(tmp_path, emulator, path)
    assert third and all(outcome == "evicted" for outcome, _, _ in third)
    assert len(evictions.bodies) == len(third)
    # Not found, created once, then read and replaced with the resourceVersion read.
    assert maps.log == [("GET", 404), ("POST", 201), ("GET", 200), ("PUT", 200), ("GET", 200),
                        ("PUT", 200)]


async def test_without_the_configmap_each_run_starts_over(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    # RBAC refuses the ConfigMap: every run warns and goes on, and, its detectors starting
    # fresh each time, never reaches the count (the trap the ConfigMap exists for).
    maps = FakeConfigMaps(emulator)
    maps.refuse = 403
    evictions = hotspot(api)
    path = policy(tmp_path, abnormalities=2)
    for _ in range(4):
        assert await once(tmp_path, emulator, path) == []
    assert evictions.bodies == []
    assert {m for m, _ in maps.log} == {"GET", "POST"}


async def test_a_dry_run_counts_on_its_own(tmp_path: Path, emulator: Emulator,
                                           api: FakeApiServer) -> None:
    maps = FakeConfigMaps(emulator)
    evictions = hotspot(api)
    path = policy(tmp_path, abnormalities=2)
    await once(tmp_path, emulator, path)  # one real run: hot once
    assert await once(tmp_path, emulator, path, dry_run=True) == []
    assert await once(tmp_path, emulator, path, dry_run=True) == []
    third = await once(tmp_path, emulator, path, dry_run=True)
    assert third and all(outcome == "evicted" for outcome, _, _ in third)
    assert evictions.bodies == []
    # The real run's count is untouched by the dry runs, which kept their own.
    assert maps.counts()[HOT_NODE] == 1
    assert HOT_NODE in maps.counts(DRY_RUN_KEY)


async def test_a_loop_keeps_them_in_memory_and_never_asks(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    maps = FakeConfigMaps(emulator)
    hotspot(api)
    path = policy(tmp_path, abnormalities=2)
    await once(tmp_path, emulator, path)
    maps.log.clear()
    runner = runner_for(config(tmp_path, emulator, policy_path=path, interval="50ms"))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 2)
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert maps.log == []


@pytest.mark.process
async def test_the_command_as_a_cronjob_runs_it(tmp_path: Path, emulator: Emulator,
                                                api: FakeApiServer) -> None:
    maps = FakeConfigMaps(emulator)
    evictions = hotspot(api)
    path = policy(tmp_path, abnormalities=2)
    kube = kubeconfig(tmp_path, str(emulator.url).rstrip("/"))
    evicted = []
    for _ in range(3):
        proc = await start("--policy", path, "--once", "--kubeconfig", kube, "--log-format",
                           "json", "--leader-elect-resource-namespace", "kube-system")
        _, err = await asyncio.wait_for(proc.communicate(), COMMAND_WAIT)
        assert proc.returncode == 0, err.decode()
        evicted.append([e["pod"] for e in json_lines(err) if e["event"] == "Evicted pod"])
    assert evicted[:2] == [[], []] and evicted[2]
    assert len(evictions.bodies) == len(evicted[2])
    assert maps.counts()[HOT_NODE] == 0  # the anomaly was entered: the counters start over

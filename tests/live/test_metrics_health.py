"""Metrics after a cycle (upstream's names and labels plus desched's own), and the HTTP
listeners: /metrics, /healthz and /readyz, on one address or two."""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from fake_apiserver import Emulator, FakeApiServer
from test_run import POLICY, background, cluster, config, run, runner_for, until

from desched.errors import InputError
from desched.live.health import (
    Address,
    HttpServer,
    Readiness,
    health_routes,
    parse_address,
    start_servers,
)
from desched.live.metrics import Metrics

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()


async def fetch(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession(trust_env=False) as session, \
            session.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.text()


async def test_counters_after_a_cycle(tmp_path: Path, emulator: Emulator,
                                      api: FakeApiServer) -> None:
    cluster(api)
    runner, code = await run(config(tmp_path, emulator, once=True))
    assert code == 0
    value = runner.metrics.registry.get_sample_value
    labels = {"strategy": "PodLifeTime", "profile": "default", "namespace": "default"}
    assert value("descheduler_pods_evicted_total",
                 {"result": "success", "node": "n1", **labels}) == 1
    assert value("descheduler_pods_evicted_total",
                 {"result": "success", "node": "n2", **labels}) == 1
    assert value("descheduler_pods_evicted_total",
                 {"result": "error", "node": "n2", **labels}) == 1  # the PDB refusal
    assert value("descheduler_loop_duration_seconds_count") == 1
    assert value("descheduler_strategy_duration_seconds_count",
                 {"strategy": "PodLifeTime", "profile": "default"}) == 1
    assert value("desched_cycles_total", {"result": "completed"}) == 1
    assert value("desched_events_total", {"type": "Normal", "result": "posted"}) == 2
    assert (value("desched_cache_sync_seconds") or 0) > 0
    text = runner.metrics.render().decode()
    assert "descheduler_build_info{" in text
    assert "_created" not in text


async def test_limits_are_the_result_label(tmp_path: Path, emulator: Emulator,
                                           api: FakeApiServer) -> None:
    cluster(api)
    policy = tmp_path / "limited.yaml"
    policy.write_text(POLICY.format(notify="false") + "maxNoOfPodsToEvictTotal: 1\n")
    runner, _ = await run(config(tmp_path, emulator, once=True, policy_path=str(policy)))
    samples = {s.labels["result"]: s.value
               for metric in runner.metrics.registry.collect()
               if metric.name == "descheduler_pods_evicted"
               for s in metric.samples if s.name.endswith("_total")}
    assert samples["success"] == 1
    assert samples["maximum number of evicted pods per a descheduling cycle reached"] >= 1


async def test_endpoints_while_running(tmp_path: Path, emulator: Emulator,
                                       api: FakeApiServer) -> None:
    cluster(api)
    runner = runner_for(config(tmp_path, emulator, interval="1h",
                               metrics_address="127.0.0.1:0", health_address="127.0.0.1:0"))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) == 1)
        metrics_port, health_port = (s.port for s in runner.servers)
        status, text = await fetch(metrics_port, "/metrics")
        assert status == 200
        assert 'descheduler_pods_evicted_total{namespace="default",node="n1",' \
               'profile="default",result="success",strategy="PodLifeTime"} 1.0' in text
        assert 'desched_informer_synced{resource="pods"} 1.0' in text
        assert 'desched_informer_objects{resource="nodes"} 2.0' in text
        assert await fetch(health_port, "/healthz") == (200, "ok")
        assert await fetch(health_port, "/readyz") == (200, "ok")
        assert (await fetch(health_port, "/metrics"))[0] == 404  # separate listeners
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0


async def test_readyz_says_why_not() -> None:
    readiness = Readiness()
    state = {"why": "informers not synced: pods"}
    readiness.checks.append(lambda: state["why"] or None)
    metrics = Metrics()
    # Both on one address: one listener serves all three paths.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    [server] = await start_servers([
        (Address("127.0.0.1", port), {"/metrics": metrics.handle}),
        (Address("127.0.0.1", port), health_routes(readiness))])
    try:
        assert await fetch(server.port, "/readyz") == (503, "informers not synced: pods")
        assert await fetch(server.port, "/healthz") == (200, "ok")
        state["why"] = ""
        assert await fetch(server.port, "/readyz") == (200, "ok")
        status, text = await fetch(server.port, "/metrics")
        assert status == 200 and "descheduler_build_info" in text
    finally:
        await server.stop()


async def test_port_in_use_is_an_input_error() -> None:
    first = HttpServer(Address("127.0.0.1", 0), {})
    await first.start()
    try:
        second = HttpServer(Address("127.0.0.1", first.port), {})
        with pytest.raises(InputError, match="cannot listen"):
            await second.start()
    finally:
        await first.stop()


async def test_addresses() -> None:
    assert parse_address(":10258", "--metrics-address") == Address("", 10258)
    assert parse_address("0.0.0.0:10258", "f") == Address("", 10258)
    assert parse_address("127.0.0.1:0", "f") == Address("127.0.0.1", 0)
    assert parse_address("[::1]:8080", "f") == Address("::1", 8080)
    assert str(Address("::1", 8080)) == "[::1]:8080"
    for bad in ("10258", "host:", "host:99999", "::1:80", "[nope]:80"):
        with pytest.raises(InputError, match="--health-address"):
            parse_address(bad, "--health-address")

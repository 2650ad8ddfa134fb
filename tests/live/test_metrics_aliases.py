"""Upstream's deprecated metric names (still served by v0.36.0 beside the new ones) and
descheduler_build_info's labels, scraped from /metrics after a real cycle against the fake API
server: each alias carries the same series, labels, buckets and values as the name it stands
for."""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from fake_apiserver import Emulator, FakeApiServer
from test_run import background, cluster, config, runner_for, until

from desched.live.metrics import Metrics
from desched.util.build import build_info

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


@pytest.fixture(autouse=True)
def unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()


def series(text: str, name: str) -> dict[str, str]:
    """{labels: value} of the samples named exactly `name`."""
    out = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and match[1] == name:
            out[match[2] or ""] = match[3]
    return out


def declared(text: str, name: str) -> tuple[str, str]:
    """(type, help) the exposition declares for the family `name`."""
    [kind] = re.findall(rf"^# TYPE {name} (\w+)$", text, re.M)
    [help_] = re.findall(rf"^# HELP {name} (.*)$", text, re.M)
    return kind, help_


async def scrape(runner_port: int) -> str:
    async with aiohttp.ClientSession(trust_env=False) as session, \
            session.get(f"http://127.0.0.1:{runner_port}/metrics") as response:
        assert response.status == 200
        return await response.text()


@pytest.mark.asyncio
async def test_deprecated_names_mirror_the_new_ones(tmp_path: Path, emulator: Emulator,
                                                    api: FakeApiServer) -> None:
    cluster(api)
    runner = runner_for(config(tmp_path, emulator, interval="1h",
                               metrics_address="127.0.0.1:0"))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) == 1)
        text = await scrape(runner.servers[0].port)
        runner.request_stop("test")
        await task
    evicted = series(text, "descheduler_pods_evicted_total")
    assert evicted  # the cycle evicted (and was refused by a PDB once)
    assert series(text, "descheduler_pods_evicted") == evicted
    assert declared(text, "descheduler_pods_evicted")[0] == "counter"
    assert declared(text, "descheduler_pods_evicted_total")[0] == "counter"
    assert '{namespace="default",node="n2",profile="default",result="error",' \
           'strategy="PodLifeTime"}' in evicted
    for new, old in (("descheduler_loop_duration_seconds",
                      "descheduler_descheduler_loop_duration_seconds"),
                     ("descheduler_strategy_duration_seconds",
                      "descheduler_descheduler_strategy_duration_seconds")):
        for suffix in ("_bucket", "_count", "_sum"):
            assert series(text, old + suffix) == series(text, new + suffix) != {}
        kind, help_ = declared(text, old)
        assert kind == "histogram"
        assert help_.startswith("(Deprecated since 0.34.0) ")
    assert series(text, "descheduler_descheduler_loop_duration_seconds_count") == {"": "1.0"}
    assert series(text, "descheduler_descheduler_strategy_duration_seconds_count") == {
        '{profile="default",strategy="PodLifeTime"}': "1.0"}


def test_buckets_are_upstreams() -> None:
    text = Metrics().render().decode()
    loop = [re.search(r'le="([^"]+)"', k)[1]  # type: ignore[index]
            for k in series(text, "descheduler_descheduler_loop_duration_seconds_bucket")]
    assert loop == ["0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0",
                    "25.0", "50.0", "100.0", "250.0", "500.0", "+Inf"]


def test_build_info_labels_are_filled() -> None:
    [(labels, value)] = series(Metrics().render().decode(), "descheduler_build_info").items()
    assert value == "1.0"
    found = dict(re.findall(r'(\w+)="([^"]*)"', labels))
    assert set(found) >= {"GoVersion", "AppVersion", "DeschedulerVersion", "GitBranch",
                          "GitSha1"}
    build = build_info()
    assert found["AppVersion"] == build.version and found["AppVersion"]
    assert found["DeschedulerVersion"] == f"v{build.version}"
    assert re.fullmatch(r"python3\.\d+\.\d+", found["GoVersion"])
    # The suite runs from the source checkout: the commit and branch come from its .git.
    assert re.fullmatch(r"[0-9a-f]{40}", found["GitSha1"])
    assert found["GitBranch"] == build.git_branch

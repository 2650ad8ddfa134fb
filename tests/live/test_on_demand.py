"""`POST /cycles/run` (live/on_demand.py) on a run against kmock over real HTTPS: the guard's
TokenReview and SubjectAccessReview (verb post on the path) decide who may; the answer says
when the cycle ran and links its /cycles entry; one at a time, bounded per minute; refused on
plain HTTP, on HTTPS without delegation, by a standby and by a single run."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import aiohttp.web
import pytest
import pytest_asyncio
from fake_apiserver import Emulator, FakeApiServer
from test_run import FakeElector, background, cluster, config, runner_for, until
from test_serving import TOKENS, Reviews, insecure

from desched.live.on_demand import INSECURE, PATH
from desched.live.serving import SecureServing

pytestmark = pytest.mark.asyncio

OPERATOR = "system:serviceaccount:ci:rebalancer"
READER = "system:serviceaccount:monitoring:prometheus"


@pytest.fixture(autouse=True)
def unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()


class OperatorReviews(Reviews):
    """Beside the reader of test_serving: an operator allowed to post /cycles/run (a
    ClusterRole with `nonResourceURLs: [/cycles/run], verbs: [post]`), and to get /cycles."""

    async def access_review(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.Response:
        body = json.loads(await raw.read())
        self.access_reviews.append(body)
        spec = body["spec"]
        attrs = spec["nonResourceAttributes"]
        allowed = (spec["user"] == OPERATOR and (attrs["verb"], attrs["path"]) in {
            ("post", PATH), ("get", "/cycles"), ("get", "/cycles.json")}) or (
            spec["user"] == READER and attrs["verb"] == "get")
        return aiohttp.web.json_response({**body, "status": {"allowed": allowed}}, status=201)


@pytest_asyncio.fixture
async def reviews(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Reviews:
    monkeypatch.setitem(TOKENS, "operator-token", OPERATOR)
    return OperatorReviews().install(emulator)


async def post(port: int, token: str | None = None, query: str = "",
               scheme: str = "https") -> tuple[int, dict[str, Any], dict[str, str]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession(trust_env=False) as session, session.post(
            f"{scheme}://localhost:{port}{PATH}{query}", headers=headers,
            ssl=insecure() if scheme == "https" else False) as response:
        return response.status, json.loads(await response.text()), dict(response.headers)


def secure_runner(tmp_path: Path, emulator: Emulator, **options: Any) -> Any:
    options.setdefault("secure", SecureServing("127.0.0.1:0", delegate_auth=True))
    options.setdefault("interval", "1h")
    return runner_for(config(tmp_path, emulator, **options))


async def test_an_allowed_caller_runs_a_cycle_and_the_answer_links_it(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer, reviews: Reviews) -> None:
    evictions = cluster(api)
    runner = secure_runner(tmp_path, emulator, dry_run=True)
    async with background(runner):
        await until(lambda: len(runner.reports) == 1)  # the schedule's first cycle
        (server,) = runner.servers
        assert (await post(server.port))[0] == 401
        status, body, _ = await post(server.port, "viewer-token")
        assert status == 403 and body["message"].startswith(
            f'forbidden: User "viewer" cannot post path "{PATH}"')
        assert (await post(server.port, "reader-token"))[0] == 403  # may read, not run
        status, body, _ = await post(server.port, "operator-token")
        assert status == 200, body
        assert body["cycle"] == 2 and body["cause"] == f"request by {OPERATOR}"
        assert body["result"] == "completed" and body["dryRun"] is True
        assert body["evicted"] == 2  # the dry run's decisions, as the schedule's cycle
        assert body["page"] == f"https://localhost:{server.port}/cycles#cycle-2"
        assert body["json"] == f"https://localhost:{server.port}/cycles.json"
        report = runner.reports[-1]
        assert report.number == 2 and report.facts is not None
        assert report.facts.cause == f"request by {OPERATOR}"
        assert body["startedAt"] == report.facts.started.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert runner.reports[0].facts is not None
        assert runner.reports[0].facts.cause == "schedule"
        # The access review asked about the verb post on the path.
        assert {"path": PATH, "verb": "post"} in [
            r["spec"]["nonResourceAttributes"] for r in reviews.access_reviews]
        # /cycles.json tells the cause.
        async with aiohttp.ClientSession(trust_env=False) as session, session.get(
                body["json"], headers={"Authorization": "Bearer operator-token"},
                ssl=insecure()) as response:
            cycles = (await response.json())["cycles"]
        assert [c["live"]["cause"] for c in cycles] == [f"request by {OPERATOR}", "schedule"]
        async with aiohttp.ClientSession(trust_env=False) as session, session.get(
                body["page"], headers={"Authorization": "Bearer operator-token"},
                ssl=insecure()) as response:
            page = await response.text()
        assert "<th>cause</th>" in page
        assert f"<b>Started by</b> request by {OPERATOR}, not by the schedule." in page
    assert evictions.bodies == []  # a dry run: nothing sent


async def test_one_at_a_time_and_at_most_so_many_a_minute(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer, reviews: Reviews) -> None:
    cluster(api)
    runner = secure_runner(tmp_path, emulator, dry_run=True, trigger_max_per_minute=2)
    async with background(runner):
        await until(lambda: len(runner.reports) == 1)
        port = runner.servers[0].port
        first, second = await asyncio.gather(post(port, "operator-token"),
                                             post(port, "operator-token"))
        codes = sorted([first[0], second[0]])
        assert codes == [200, 409], (first, second)
        refused = first if first[0] == 409 else second
        assert refused[1]["reason"] == "Conflict"
        assert "no second cycle is started" in refused[1]["message"]
        status, body, _ = await post(port, "operator-token", "?wait=false")
        assert status == 202 and body["cycle"] == 3 and "result" not in body
        assert body["page"].endswith("/cycles#cycle-3")
        await until(lambda: len(runner.reports) == 3)
        status, body, headers = await post(port, "operator-token")
        assert status == 429 and body["reason"] == "TooManyRequests"
        assert "at most 2 cycles a minute" in body["message"]
        assert 0 < int(headers["Retry-After"]) <= 60
        status, body, _ = await post(port, "operator-token", "?wait=maybe")
        assert status == 400
    assert len(runner.reports) == 3


async def test_refused_where_no_caller_is_authenticated(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    runner = secure_runner(tmp_path, emulator, dry_run=True,
                           metrics_address="127.0.0.1:0",
                           secure=SecureServing("127.0.0.1:0"))  # TLS, no delegation
    async with background(runner):
        await until(lambda: len(runner.reports) == 1)
        plain, tls = runner.servers
        for port, scheme in ((plain.port, "http"), (tls.port, "https")):
            status, body, _ = await post(port, scheme=scheme)
            assert status == 403 and body["message"] == INSECURE
    assert len(runner.reports) == 1


async def test_a_standby_and_a_single_run_take_no_request(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer, reviews: Reviews) -> None:
    cluster(api)
    elector = FakeElector()
    runner = secure_runner(tmp_path, emulator, leader_elect=True,
                           health_address="127.0.0.1:0")
    runner.elector_factory = lambda *_: elector
    async with background(runner):
        await until(lambda: elector.waiting)
        port = runner.servers[-1].port
        status, body, _ = await post(port, "operator-token")
        assert status == 503 and body["message"].startswith(
            "no cycle on request now: this instance does not lead: the Lease ")
        elector.allow.set()
        await until(lambda: len(runner.reports) == 1)
        status, body, _ = await post(port, "operator-token", "?wait=false")
        assert status == 202 and body["cycle"] == 2
    single = secure_runner(tmp_path, emulator, interval=None, once=True)
    assert single.triggers.accepting is False
    assert single._why_no_cycle() == "this run does one cycle and exits"


async def test_no_request_is_taken_while_the_cache_is_not_current(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer, reviews: Reviews) -> None:
    """A cycle waits for a stale cache (live/stale_cache.py) as long as an interval: a request
    taken then would hang its caller that long. It is refused with why, as /readyz would."""
    cluster(api)
    runner = secure_runner(tmp_path, emulator)
    async with background(runner):
        await until(lambda: len(runner.reports) == 1)
        port = runner.servers[-1].port
        pods = next(i for i in runner.informers if i.resource.kind == "Pod")
        pods.stale_since = time.monotonic() - 5
        status, body, _ = await post(port, "operator-token", "?wait=false")
        assert status == 503, body
        assert body["message"].startswith(
            "no cycle on request now: the cluster cache is not current: pods for ")
        pods.stale_since = None
        status, body, _ = await post(port, "operator-token", "?wait=false")
        assert status == 202 and body["cycle"] == 2

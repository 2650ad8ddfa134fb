"""The Prometheus queries of `desched run` (live/prometheus.py) against a real HTTP server on
127.0.0.1 (and a real Prometheus binary when one is installed): what is sent (the form, POST
then GET, the path prefix, the bearer token), the answers handed back whatever their status,
retries of a busy server, no answer, unusable URLs, the metrics, and LowNodeUtilization deciding
over them from the cycle's thread while the event loop makes the requests."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
import pytest_asyncio

from builders import NOW, args, handle_for, node, pod, snapshot
from desched.framework.policy import MetricsProvider, Policy
from desched.framework.types import QueryFailed, UsageQueries
from desched.live.health import Address
from desched.live.metrics import Metrics
from desched.live.prometheus import BearerToken, PrometheusQueries
from desched.live.serving import self_signed
from desched.plugins.defaultevictor import DefaultEvictor, DefaultEvictorArgs
from desched.plugins.lownodeutilization import LowNodeUtilization, LowNodeUtilizationArgs
from desched.usage import METRIC_RESOURCE, PrometheusError, provider_query
from desched.usage.prometheus import CA_FILE_ENV, TOKEN_ENV, TOKEN_FILE_ENV
from usage.fake_prometheus import FakePrometheus, Request, vector

pytestmark = pytest.mark.asyncio

NOW_TEXT = "1795348800"
QUERY = "instance:node_cpu:ratio"
FORM = {"query": QUERY, "time": NOW_TEXT}
T = TypeVar("T")


@pytest_asyncio.fixture
async def queries(tmp_path: Path) -> AsyncIterator[PrometheusQueries]:
    # No service account here: an empty directory stands in for it.
    q = PrometheusQueries(asyncio.get_running_loop(), Metrics(), env={},
                          service_account_dir=str(tmp_path / "no-account"),
                          timeout=5.0, backoff=(0.01, 0.02))
    try:
        yield q
    finally:
        await q.close()


async def in_thread(call: Callable[[], T]) -> T:
    """As the cycle calls: from a worker thread, while the loop runs."""
    return await asyncio.to_thread(call)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def metric(q: PrometheusQueries, name: str, **labels: str) -> float:
    value = q.metrics.registry.get_sample_value(name, labels)
    return value or 0.0


async def test_an_instant_query_is_posted_as_a_form(queries: PrometheusQueries,
                                                    prometheus: FakePrometheus) -> None:
    prometheus.answers[QUERY] = (200, vector({"n1": 0.5}))
    answer = await in_thread(lambda: queries.prometheus(prometheus.url, None, FORM))
    assert answer.status == 200 and answer.endpoint == f"{prometheus.url}/api/v1/query"
    [request] = prometheus.requests
    assert (request.method, request.path, request.params) == ("POST", "/api/v1/query", FORM)
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert "Authorization" not in request.headers
    assert metric(queries, "desched_prometheus_queries_total", code="200") == 1
    assert metric(queries, "desched_prometheus_query_seconds_count") == 1


async def test_the_url_path_prefix_is_kept(queries: PrometheusQueries,
                                           prometheus: FakePrometheus) -> None:
    await queries.query(prometheus.url + "/prometheus/", None, FORM)
    assert prometheus.requests[0].path == "/prometheus/api/v1/query"


async def test_get_when_the_server_refuses_post(queries: PrometheusQueries,
                                                prometheus: FakePrometheus) -> None:
    prometheus.refuse_post = True
    prometheus.answers[QUERY] = (200, vector({"n1": 0.25}))
    samples = await in_thread(lambda: provider_query(queries, prometheus.url)(QUERY, NOW))
    assert [s.value for s in samples] == [0.25]
    assert [(r.method, r.params) for r in prometheus.requests] == [("POST", FORM),
                                                                    ("GET", FORM)]


async def test_an_error_answer_is_handed_back_for_usage_to_read(
        queries: PrometheusQueries, prometheus: FakePrometheus) -> None:
    prometheus.default = (400, {"status": "error", "errorType": "bad_data", "error": "at 3"})
    answer = await queries.query(prometheus.url, None, FORM)
    assert (answer.status, answer.reason) == (400, "Bad Request")
    with pytest.raises(PrometheusError, match=f"^{prometheus.url}/api/v1/query answered HTTP "
                                              "400 Bad Request: bad_data: at 3$"):
        await in_thread(lambda: provider_query(queries, prometheus.url)(QUERY, NOW))
    assert len(prometheus.requests) == 2  # a refusal is not tried again


async def test_a_busy_server_is_asked_again(queries: PrometheusQueries,
                                            prometheus: FakePrometheus) -> None:
    answers = iter([(503, b"down"), (429, b"slow down"), (200, vector({"n1": 0.5}))])

    def hook(request: Request) -> Any:
        return next(answers)

    prometheus.hook = hook
    answer = await queries.query(prometheus.url, None, FORM)
    assert answer.status == 200 and len(prometheus.requests) == 3
    assert [metric(queries, "desched_prometheus_queries_total", code=c)
            for c in ("503", "429", "200")] == [1, 1, 1]


async def test_a_server_busy_on_every_attempt_gives_its_last_answer(
        queries: PrometheusQueries, prometheus: FakePrometheus) -> None:
    prometheus.default = (503, b"<html>down</html>")
    with pytest.raises(PrometheusError, match=r"answered HTTP 503 Service Unavailable$"):
        await in_thread(lambda: provider_query(queries, prometheus.url)(QUERY, NOW))
    assert len(prometheus.requests) == 3


async def test_no_answer_is_a_query_failure(queries: PrometheusQueries) -> None:
    url = closed_port_url()
    with pytest.raises(QueryFailed, match=f"^cannot reach {url}/api/v1/query: "):
        await queries.query(url, None, FORM)
    assert metric(queries, "desched_prometheus_queries_total", code="error") == 3


async def test_a_request_that_timed_out_is_not_sent_again(
        tmp_path: Path, prometheus: FakePrometheus) -> None:
    def slow(request: Request) -> Any:
        time.sleep(0.5)
        return None

    prometheus.hook = slow
    q = PrometheusQueries(asyncio.get_running_loop(), Metrics(), env={},
                          service_account_dir=str(tmp_path), timeout=0.1)
    try:
        with pytest.raises(QueryFailed, match=r"^cannot reach "):
            await q.query(prometheus.url, None, FORM)
    finally:
        await q.close()
    assert len(prometheus.requests) == 1


@pytest.mark.parametrize(("url", "problem"), [
    ("/prometheus", "'/prometheus' is not an http(s) URL with a host"),
    ("http://[::1", "'http://[::1' is not a valid URL: Invalid IPv6 URL"),
])
async def test_an_unusable_url(queries: PrometheusQueries, url: str, problem: str) -> None:
    with pytest.raises(QueryFailed) as info:
        await queries.query(url, None, FORM)
    assert str(info.value) == f"the Prometheus URL {problem}"


async def test_the_bearer_token_file_is_read_for_every_query(
        tmp_path: Path, prometheus: FakePrometheus) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    q = PrometheusQueries(asyncio.get_running_loop(), Metrics(),
                          env={TOKEN_FILE_ENV: str(token)})
    try:
        await q.query(prometheus.url, None, FORM)
        token.write_text("rotated")
        await q.query(prometheus.url, None, FORM)
    finally:
        await q.close()
    assert [r.headers["Authorization"] for r in prometheus.requests] == [
        "Bearer first", "Bearer rotated"]


async def test_an_unreadable_token_file_is_a_query_failure(tmp_path: Path) -> None:
    q = PrometheusQueries(asyncio.get_running_loop(), Metrics(),
                          env={TOKEN_FILE_ENV: str(tmp_path / "none")})
    with pytest.raises(QueryFailed, match="cannot read the bearer token file"):
        await q.query("http://127.0.0.1:9", None, FORM)


async def test_token_sources_in_order(tmp_path: Path) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("sa-token")
    sa = str(account)
    assert BearerToken.from_env({TOKEN_FILE_ENV: "/x", TOKEN_ENV: "v"},
                                service_account_dir=sa) == BearerToken(path="/x")
    assert BearerToken.from_env({TOKEN_ENV: "v"}, service_account_dir=sa) == BearerToken(
        value="v")
    # In a pod and without a secretReference, upstream uses the service account token.
    assert BearerToken.from_env({}, service_account_dir=sa)() == "sa-token"
    assert BearerToken.from_env({}, secret_configured=True, service_account_dir=sa)() is None
    assert BearerToken.from_env({}, service_account_dir=str(tmp_path / "no"))() is None


async def test_a_provider_secret_keeps_the_service_account_token_away(
        tmp_path: Path, prometheus: FakePrometheus) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("sa-token")
    q = PrometheusQueries(asyncio.get_running_loop(), Metrics(), env={},
                          service_account_dir=str(account))
    try:
        await q.query(prometheus.url, None, FORM)
        await q.query(prometheus.url, ("monitoring", "prometheus-token"), FORM)
    finally:
        await q.close()
    assert [r.headers.get("Authorization") for r in prometheus.requests] == [
        "Bearer sa-token", None]


async def test_https_verifies_with_the_given_ca(tmp_path: Path) -> None:
    """A server whose certificate no CA here signed: the query fails (no switch skips the
    check), saying so."""
    cert, key = self_signed(Address("127.0.0.1", 0))  # for 127.0.0.1, signed by no CA
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        q = PrometheusQueries(asyncio.get_running_loop(), Metrics(), env={},
                              service_account_dir=str(tmp_path / "none"), attempts=1)
        with pytest.raises(QueryFailed, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
            await q.query(url, None, FORM)
        await q.close()
        trusted = PrometheusQueries(asyncio.get_running_loop(), Metrics(),
                                    env={CA_FILE_ENV: str(tmp_path / "cert.pem")},
                                    service_account_dir=str(tmp_path / "none"), attempts=1)
        answer_ = await trusted.query(url, None, FORM)
        await trusted.close()
        assert answer_.status == 200
    finally:
        server.close()
        await server.wait_closed()


async def test_called_on_the_loop_itself_it_refuses(queries: PrometheusQueries) -> None:
    with pytest.raises(RuntimeError, match="call it from the cycle's thread"):
        queries.prometheus("http://127.0.0.1:9", None, FORM)


# -- LowNodeUtilization over the live queries ---------------------------------------------------


NODES = [node(f"n{i}") for i in range(1, 5)]
METRIC_ARGS: dict[str, Any] = {
    "thresholds": {METRIC_RESOURCE: 30}, "targetThresholds": {METRIC_RESOURCE: 70},
    "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": QUERY}}}


def run_lnu(queries: UsageQueries, url: str, raw: dict[str, Any] | None = None) -> list[str]:
    snap = snapshot(*NODES, pod("hot-a", "n1", priority=100), pod("hot-b", "n1", priority=10),
                    pod("warm-a", "n4", priority=5), pod("warm-b", "n4", priority=1),
                    pod("cold", "n2"))
    setup, _ = handle_for(snap)
    evictor = DefaultEvictor(args(DefaultEvictorArgs, {}), setup)
    handle, executor = handle_for(snap, plugin="LowNodeUtilization", filters=[evictor])
    handle.policy = Policy("policy.yaml", "v1alpha2", [],
                           metrics_providers=[MetricsProvider("Prometheus", url)])
    handle.queries = queries
    plugin = LowNodeUtilization(args(LowNodeUtilizationArgs, raw or METRIC_ARGS), handle)
    plugin.balance(snap.ready_nodes())
    return executor.evicted


async def test_low_node_utilization_over_the_live_queries(
        tmp_path: Path, prometheus: FakePrometheus) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    prometheus.answers[QUERY] = (200, vector({"n1": 0.9, "n2": 0.2, "n3": 0.1, "n4": 0.75}))
    q = PrometheusQueries(asyncio.get_running_loop(), Metrics(),
                          env={TOKEN_FILE_ENV: str(token)})
    try:
        evicted = await in_thread(lambda: run_lnu(q, prometheus.url))
    finally:
        await q.close()
    assert evicted == ["hot-b", "warm-b"]
    [request] = prometheus.requests
    assert request.params == FORM and request.headers["Authorization"] == "Bearer s3cret"


# -- a real Prometheus (Debian's package, which scripts/test installs) -------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_against_a_real_prometheus(tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    assert binary is not None, "prometheus is not installed: scripts/test installs it"
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\n")
    process = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    q = PrometheusQueries(asyncio.get_running_loop(), Metrics(), env={})
    try:
        deadline = time.monotonic() + 30
        async with httpx2.AsyncClient(trust_env=False) as http:
            while True:
                try:
                    if (await http.get(f"{url}/-/ready", timeout=2)).status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail("prometheus did not become ready within 30 s")
                await asyncio.sleep(0.2)
        # Constant series need no scraped data: one sample per node, labelled instance.
        query = " or ".join(f'label_replace(vector({v}), "instance", "{n}", "", "")'
                            for n, v in (("n1", 0.9), ("n2", 0.2), ("n3", 0.1), ("n4", 0.75)))
        raw = {**METRIC_ARGS, "metricsUtilization": {"source": "Prometheus",
                                                     "prometheus": {"query": query}}}
        assert await in_thread(lambda: run_lnu(q, url, raw)) == ["hot-b", "warm-b"]
    finally:
        await q.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

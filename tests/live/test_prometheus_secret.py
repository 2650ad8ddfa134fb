"""`authToken.secretReference`: the Prometheus bearer token read from the Secret's
`prometheusAuthToken` key through the API client (kmock over real HTTP), and a rotated Secret's
token used on the next query (after the read interval, or at once when Prometheus refuses the
old one)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kmock
import pytest
import pytest_asyncio
from fake_apiserver import Emulator

from desched.framework.types import QueryFailed
from desched.live.client import ApiClient
from desched.live.metrics import Metrics
from desched.live.prometheus import PrometheusQueries
from desched.live.prometheus_secret import SecretTokens
from usage.fake_prometheus import FakePrometheus, Request

pytestmark = pytest.mark.asyncio

SECRETS = kmock.resource("", "v1", "secrets")
FORM = {"query": "instance:node_cpu:ratio", "time": "1795348800"}
REF = ("monitoring", "prometheus-token")


class Secrets:
    """The Secrets kmock serves: name -> prometheusAuthToken (None: no such Secret)."""

    def __init__(self, emulator: Emulator) -> None:
        self.tokens: dict[str, str | None] = {}
        self.gets = 0
        emulator[kmock.action.FETCH, SECRETS] << self._get

    async def _get(self, request: kmock.Request) -> kmock.Response:
        self.gets += 1
        token = self.tokens.get(f"{request.namespace}/{request.name}")
        if token is None:
            return kmock.Response(status=404, payload={
                "kind": "Status", "code": 404, "reason": "NotFound",
                "message": f'secrets "{request.name}" not found'})
        data = {"prometheusAuthToken": base64.b64encode(token.encode()).decode()} \
            if token else {}
        return kmock.Response(status=200, payload={
            "apiVersion": "v1", "kind": "Secret", "data": data,
            "metadata": {"name": request.name, "namespace": request.namespace}})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def api_client(emulator: Emulator) -> AsyncIterator[ApiClient]:
    async with ApiClient.for_server(str(emulator.url).rstrip("/"), trust_env=False,
                                    timeout=5.0) as client:
        yield client


def queries(tmp_path: Path, tokens: SecretTokens) -> PrometheusQueries:
    return PrometheusQueries(asyncio.get_running_loop(), Metrics(), env={},
                             service_account_dir=str(tmp_path / "no-account"), timeout=5.0,
                             backoff=(0.01, 0.02), secrets=tokens)


def bearers(prometheus: FakePrometheus) -> list[str | None]:
    return [r.headers.get("Authorization") for r in prometheus.requests]


async def test_the_secrets_token_and_its_rotation(
        tmp_path: Path, emulator: Emulator, api_client: ApiClient,
        prometheus: FakePrometheus) -> None:
    secrets = Secrets(emulator)
    secrets.tokens["monitoring/prometheus-token"] = "first"
    clock = Clock()
    tokens = SecretTokens(lambda: api_client, ttl=10.0, clock=clock)
    q = queries(tmp_path, tokens)
    try:
        await q.query(prometheus.url, REF, FORM)
        await q.query(prometheus.url, REF, FORM)  # within the interval: not read again
        assert secrets.gets == 1
        secrets.tokens["monitoring/prometheus-token"] = "second"  # rotated
        clock.now = 10.0
        await q.query(prometheus.url, REF, FORM)
        assert secrets.gets == 2
    finally:
        await q.close()
    assert bearers(prometheus) == ["Bearer first", "Bearer first", "Bearer second"]


async def test_a_refused_token_reads_the_secret_again_at_once(
        tmp_path: Path, emulator: Emulator, api_client: ApiClient,
        prometheus: FakePrometheus) -> None:
    secrets = Secrets(emulator)
    secrets.tokens["monitoring/prometheus-token"] = "old"
    tokens = SecretTokens(lambda: api_client, ttl=3600.0, clock=Clock())
    q = queries(tmp_path, tokens)

    def only_new(request: Request) -> tuple[int, Any] | None:
        ok = request.headers.get("Authorization") == "Bearer new"
        return None if ok else (401, {"status": "error", "error": "unauthorized"})

    try:
        await tokens.token(REF)  # "old" is cached
        secrets.tokens["monitoring/prometheus-token"] = "new"
        prometheus.hook = only_new
        answer = await q.query(prometheus.url, REF, FORM)
    finally:
        await q.close()
    assert answer.status == 200
    assert bearers(prometheus) == ["Bearer old", "Bearer new"]


@pytest.mark.parametrize(("stored", "message"), [
    (None, "the Prometheus authToken secret monitoring/prometheus-token does not exist"),
    ("", "the Prometheus authToken secret monitoring/prometheus-token has no "
         "prometheusAuthToken key, or it is empty"),
])
async def test_a_missing_secret_or_key_fails_the_query(
        tmp_path: Path, emulator: Emulator, api_client: ApiClient,
        prometheus: FakePrometheus, stored: str | None, message: str) -> None:
    secrets = Secrets(emulator)
    secrets.tokens["monitoring/prometheus-token"] = stored
    q = queries(tmp_path, SecretTokens(lambda: api_client))
    try:
        with pytest.raises(QueryFailed) as caught:
            await q.query(prometheus.url, REF, FORM)
    finally:
        await q.close()
    assert str(caught.value) == message
    assert prometheus.requests == []


async def test_not_connected_yet(tmp_path: Path, prometheus: FakePrometheus) -> None:
    q = queries(tmp_path, SecretTokens(lambda: None))
    try:
        with pytest.raises(QueryFailed, match="not connected to the API server"):
            await q.query(prometheus.url, REF, FORM)
    finally:
        await q.close()


async def test_the_environment_still_wins(tmp_path: Path, emulator: Emulator,
                                          api_client: ApiClient,
                                          prometheus: FakePrometheus) -> None:
    secrets = Secrets(emulator)
    q = PrometheusQueries(asyncio.get_running_loop(), Metrics(),
                          env={"DESCHED_PROMETHEUS_TOKEN": "from-env"},
                          secrets=SecretTokens(lambda: api_client))
    try:
        await q.query(prometheus.url, REF, FORM)
    finally:
        await q.close()
    assert bearers(prometheus) == ["Bearer from-env"] and secrets.gets == 0

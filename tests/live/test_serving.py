"""The HTTPS listener of `desched run` (--secure-port): the self-signed certificate or the one
given, and delegated authentication and authorization against kmock answering TokenReviews and
SubjectAccessReviews: no token 401, a refused token 401, a user the review does not allow 403,
an allowed one 200; the always-allowed paths; the cache of decisions; the flags' errors."""

from __future__ import annotations

import asyncio
import datetime
import gc
import ipaddress
import json
import ssl
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import aiohttp.web
import pytest
import pytest_asyncio
from cryptography import x509
from fake_apiserver import Emulator, FakeApiServer
from test_run import background, cluster, config, kubeconfig, runner_for, until

from desched.errors import InputError
from desched.live.client import ApiClient
from desched.live.health import Address
from desched.live.run import prepare
from desched.live.serving import (
    ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    Delegator,
    SecureServing,
    TtlCache,
    check_secure,
    self_signed,
    start_secure,
)

# test_upstream_flags' helpers are in tests/commands/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "commands"))
from test_upstream_flags import invoke

READER = "system:serviceaccount:monitoring:prometheus"
TOKENS = {"reader-token": READER, "viewer-token": "viewer"}
READABLE = {"/metrics", "/cycles", "/cycles.json"}


@pytest.fixture(autouse=True)
def unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()


@dataclass
class Reviews:
    """The API server's side of delegation: TokenReview knows TOKENS; SubjectAccessReview
    allows READER to get READABLE (a ClusterRole with those nonResourceURLs, bound to it)."""

    token_reviews: list[dict[str, Any]] = field(default_factory=list)
    access_reviews: list[dict[str, Any]] = field(default_factory=list)
    fail: int = 0  # answer the next N reviews with 500

    def install(self, emulator: Emulator) -> Reviews:
        emulator.raw_routes[TOKEN_REVIEWS] = self.token_review
        emulator.raw_routes[ACCESS_REVIEWS] = self.access_review
        return self

    async def token_review(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.Response:
        body = json.loads(await raw.read())
        assert raw.method == "POST"
        assert body["apiVersion"] == "authentication.k8s.io/v1"
        assert body["kind"] == "TokenReview"
        self.token_reviews.append(body)
        if self.fail:
            self.fail -= 1
            return aiohttp.web.json_response({"kind": "Status", "code": 500}, status=500)
        user = TOKENS.get(body["spec"]["token"])
        status: dict[str, Any] = {"authenticated": user is not None}
        if user is not None:
            status["user"] = {"username": user, "uid": f"uid-{user}",
                              "groups": ["system:authenticated"]}
        return aiohttp.web.json_response({**body, "status": status}, status=201)

    async def access_review(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.Response:
        body = json.loads(await raw.read())
        assert raw.method == "POST"
        assert body["apiVersion"] == "authorization.k8s.io/v1"
        assert body["kind"] == "SubjectAccessReview"
        self.access_reviews.append(body)
        spec = body["spec"]
        attrs = spec["nonResourceAttributes"]
        allowed = spec["user"] == READER and attrs["verb"] == "get" and attrs["path"] in READABLE
        status = {"allowed": allowed} if allowed else {"allowed": False, "reason": ""}
        return aiohttp.web.json_response({**body, "status": status}, status=201)


def insecure() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def fetch(port: int, path: str, token: str | None = None,
                context: ssl.SSLContext | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession(trust_env=False) as session, \
            session.get(f"https://localhost:{port}{path}", headers=headers,
                        ssl=context or insecure()) as response:
        return response.status, await response.text()


async def ok(_: aiohttp.web.Request) -> aiohttp.web.Response:
    return aiohttp.web.Response(text="ok")


ROUTES = {"/metrics": ok, "/cycles": ok, "/cycles.json": ok, "/healthz": ok, "/readyz": ok}


@pytest_asyncio.fixture
async def reviews(emulator: Emulator) -> Reviews:
    return Reviews().install(emulator)


def delegator(emulator: Emulator, **options: Any) -> Delegator:
    def client() -> ApiClient:
        return ApiClient.for_server(str(emulator.url).rstrip("/"), token="desched",
                                    trust_env=False, timeout=5.0)
    return Delegator(client, **options)


@pytest_asyncio.fixture
async def guarded(tmp_path: Path, emulator: Emulator,
                  reviews: Reviews) -> AsyncIterator[int]:
    """An HTTPS listener guarded through the emulator: its port."""
    serving = SecureServing("127.0.0.1:0", delegate_auth=True)
    server = await start_secure(serving, ROUTES, context=None, kubeconfig=kubeconfig(
        tmp_path, str(emulator.url).rstrip("/")))
    try:
        yield server.port
    finally:
        await server.stop()


# -- TLS -----------------------------------------------------------------------------------------

def test_self_signed_certificate_names_this_server() -> None:
    cert_pem, key_pem = self_signed(Address("10.1.2.3", 10258))
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert cert.issuer == cert.subject
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert set(names.get_values_for_type(x509.IPAddress)) >= {
        ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"),
        ipaddress.ip_address("10.1.2.3")}
    now = datetime.datetime.now(datetime.UTC)
    assert cert.not_valid_before_utc <= now < cert.not_valid_after_utc
    assert b"PRIVATE KEY" in key_pem
    # Two starts, two keys.
    assert self_signed(Address("", 0))[1] != key_pem


@pytest.mark.asyncio
async def test_the_self_signed_certificate_is_served_and_verifies() -> None:
    server = await start_secure(SecureServing("127.0.0.1:0"), ROUTES, kubeconfig=None,
                                context=None)
    try:
        # The served certificate, fetched without verifying, then trusted: localhost verifies.
        pem = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", server.port))
        trusting = ssl.create_default_context(cadata=pem)
        assert await fetch(server.port, "/metrics", context=trusting) == (200, "ok")
        # Without auth delegation every path is open over TLS.
        assert await fetch(server.port, "/cycles.json") == (200, "ok")
        with pytest.raises(aiohttp.ClientError):  # plain HTTP is not spoken there
            async with aiohttp.ClientSession(trust_env=False) as session, \
                    session.get(f"http://127.0.0.1:{server.port}/metrics") as response:
                await response.read()
    finally:
        await server.stop()


@pytest.mark.asyncio
async def test_a_given_certificate_is_served(tmp_path: Path) -> None:
    cert_pem, key_pem = self_signed(Address("127.0.0.1", 0))
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "tls.key").write_bytes(key_pem)
    serving = SecureServing("127.0.0.1:0", cert_file=str(tmp_path / "tls.crt"),
                            key_file=str(tmp_path / "tls.key"))
    serving.check()
    server = await start_secure(serving, ROUTES, kubeconfig=None, context=None)
    try:
        served = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", server.port))
        assert x509.load_pem_x509_certificate(served.encode()) == \
            x509.load_pem_x509_certificate(cert_pem)
        trusting = ssl.create_default_context(cadata=cert_pem.decode())
        assert await fetch(server.port, "/metrics", context=trusting) == (200, "ok")
    finally:
        await server.stop()


def test_certificate_errors_are_input_errors(tmp_path: Path) -> None:
    cert_pem, _ = self_signed(Address("127.0.0.1", 0))
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "other.key").write_bytes(self_signed(Address("127.0.0.1", 0))[1])
    (tmp_path / "junk.key").write_text("not a key\n")
    crt = str(tmp_path / "tls.crt")
    with pytest.raises(InputError, match="--tls-cert-file: needs --tls-private-key-file too"):
        SecureServing(":10258", cert_file=crt).check()
    with pytest.raises(InputError, match="--tls-private-key-file: needs --tls-cert-file too"):
        SecureServing(":10258", key_file=crt).check()
    with pytest.raises(InputError, match=r"--tls-cert-file: cannot read .*missing\.crt"):
        SecureServing(":10258", cert_file=str(tmp_path / "missing.crt"),
                      key_file=crt).check()
    for key in ("other.key", "junk.key"):
        with pytest.raises(InputError, match="--tls-cert-file: cannot load the certificate"):
            SecureServing(":10258", cert_file=crt, key_file=str(tmp_path / key)).check()
    with pytest.raises(InputError, match="--authorization-always-allow-paths: a path must "
                                         "start with /"):
        SecureServing(":10258", always_allow_paths=("healthz",)).check()
    with pytest.raises(InputError, match=r"--authentication-kubeconfig: .*cannot read"):
        SecureServing(":10258", delegate_auth=True,
                      authentication_kubeconfig=str(tmp_path / "nope")).check()


# -- delegated authentication and authorization -------------------------------------------------

@pytest.mark.asyncio
async def test_no_token_401_refused_token_401_not_allowed_403_allowed_200(
        guarded: int, reviews: Reviews) -> None:
    status, text = await fetch(guarded, "/metrics")
    assert status == 401
    assert json.loads(text)["reason"] == "Unauthorized"
    assert reviews.token_reviews == []  # nothing to review
    assert (await fetch(guarded, "/metrics", "forged"))[0] == 401
    status, text = await fetch(guarded, "/metrics", "viewer-token")
    assert status == 403
    assert json.loads(text)["message"] == 'forbidden: User "viewer" cannot get path "/metrics"'
    for path in ("/metrics", "/cycles", "/cycles.json"):
        assert await fetch(guarded, path, "reader-token") == (200, "ok"), path
    # The reader's role names those paths only: health is open anyway, the rest is not.
    assert (await fetch(guarded, "/nowhere", "reader-token"))[0] == 403
    # What the reviews asked.
    assert [r["spec"]["token"] for r in reviews.token_reviews] == [
        "forged", "viewer-token", "reader-token"]
    spec = reviews.access_reviews[-1]["spec"]
    assert spec["user"] == READER and spec["uid"] == f"uid-{READER}"
    assert spec["groups"] == ["system:authenticated"]
    assert spec["nonResourceAttributes"] == {"path": "/nowhere", "verb": "get"}


@pytest.mark.asyncio
async def test_health_paths_need_no_token(guarded: int, reviews: Reviews) -> None:
    assert await fetch(guarded, "/healthz") == (200, "ok")
    assert await fetch(guarded, "/readyz", "forged") == (200, "ok")
    assert (reviews.token_reviews, reviews.access_reviews) == ([], [])


@pytest.mark.asyncio
async def test_a_trailing_star_allows_a_prefix(emulator: Emulator, reviews: Reviews) -> None:
    guard = delegator(emulator, always_allow_paths=("/debug/*", "/healthz"))
    try:
        assert (await guard.verdict("/debug/x/y", "get", None)).status == 200
        assert (await guard.verdict("/healthz", "get", None)).status == 200
        assert (await guard.verdict("/healthz/x", "get", None)).status == 401
        assert (await guard.verdict("/debug", "get", None)).status == 401
    finally:
        await guard.close()


@pytest.mark.asyncio
async def test_decisions_are_cached_for_their_ttl(emulator: Emulator, reviews: Reviews) -> None:
    now = [0.0]
    guard = delegator(emulator, authn_ttl=10, authorized_ttl=10, unauthorized_ttl=5,
                      clock=lambda: now[0])
    try:
        for _ in range(5):  # a scrape every few seconds within the TTL: one review pair
            assert (await guard.verdict("/metrics", "get", "Bearer reader-token")).status == 200
            now[0] += 1
        assert (len(reviews.token_reviews), len(reviews.access_reviews)) == (1, 1)
        # Another path is another decision, the same token the same user.
        assert (await guard.verdict("/cycles", "get", "Bearer reader-token")).status == 200
        assert (len(reviews.token_reviews), len(reviews.access_reviews)) == (1, 2)
        # Past the TTL both are asked again.
        now[0] += 10
        assert (await guard.verdict("/metrics", "get", "Bearer reader-token")).status == 200
        assert (len(reviews.token_reviews), len(reviews.access_reviews)) == (2, 3)
        # A denial is kept for its own TTL; a refused token too.
        for _ in range(2):
            assert (await guard.verdict("/metrics", "get", "Bearer viewer-token")).status == 403
            assert (await guard.verdict("/metrics", "get", "Bearer forged")).status == 401
        assert (len(reviews.token_reviews), len(reviews.access_reviews)) == (4, 4)
        now[0] += 5.5  # past the denial's 5 s, within the authentication's 10 s
        assert (await guard.verdict("/metrics", "get", "Bearer viewer-token")).status == 403
        assert (len(reviews.token_reviews), len(reviews.access_reviews)) == (4, 5)
    finally:
        await guard.close()


@pytest.mark.asyncio
async def test_a_failed_review_is_not_cached(emulator: Emulator, reviews: Reviews) -> None:
    guard = delegator(emulator)
    try:
        reviews.fail = 1
        assert (await guard.verdict("/metrics", "get", "Bearer reader-token")).status == 401
        assert (await guard.verdict("/metrics", "get", "Bearer reader-token")).status == 200
        assert len(reviews.token_reviews) == 2
    finally:
        await guard.close()


def test_the_cache_is_bounded() -> None:
    cache: TtlCache[int, int] = TtlCache(size=3, clock=lambda: 0.0)
    for i in range(10):
        cache.put(i, i, 10)
    assert len(cache) == 3
    assert cache.get(9) == (True, 9) and cache.get(0) == (False, None)
    cache.put(7, 70, 10)  # used last: 8 goes first
    cache.put(10, 10, 10)
    assert cache.get(8) == (False, None) and cache.get(7) == (True, 70)
    cache.put(11, 11, 0)  # a zero TTL keeps nothing
    assert cache.get(11) == (False, None)


@pytest.mark.asyncio
async def test_the_run_serves_its_pages_behind_the_guard(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer, reviews: Reviews) -> None:
    cluster(api)
    runner = runner_for(config(tmp_path, emulator, interval="1h", health_address="127.0.0.1:0",
                               secure=SecureServing("127.0.0.1:0", delegate_auth=True)))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) == 1)
        health, secure = runner.servers
        assert secure.ssl_context is not None and health.ssl_context is None
        assert (await fetch(secure.port, "/metrics"))[0] == 401
        assert (await fetch(secure.port, "/cycles", "viewer-token"))[0] == 403
        status, text = await fetch(secure.port, "/metrics", "reader-token")
        assert status == 200 and "descheduler_pods_evicted_total" in text
        status, text = await fetch(secure.port, "/cycles.json", "reader-token")
        assert status == 200 and json.loads(text)["cycles"]
        assert await fetch(secure.port, "/healthz") == (200, "ok")
        assert await fetch(secure.port, "/readyz") == (200, "ok")
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0


def test_plain_metrics_beside_delegated_auth_only_on_loopback(tmp_path: Path,
                                                              emulator: Emulator) -> None:
    guarded = SecureServing(":10258", delegate_auth=True)
    for address in ("127.0.0.1:8080", "[::1]:8080", "localhost:8080"):
        check_secure(guarded, address)
    for address in (":8080", "0.0.0.0:8080", "10.0.0.1:8080"):
        with pytest.raises(InputError) as err:
            prepare(config(tmp_path, emulator, metrics_address=address, secure=guarded))
        assert str(err.value) == (
            f"--metrics-address: {address} would serve /metrics and /cycles over plain HTTP "
            "without authentication beside the authenticated HTTPS listener on :10258: give a "
            "loopback address (127.0.0.1:PORT or [::1]:PORT) or leave it out")
    # Without auth delegation the plain listener is the user's choice.
    check_secure(SecureServing(":10258"), ":8080")


# -- the flags -----------------------------------------------------------------------------------

def test_flags_make_the_secure_listener(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    code, seen, stderr = invoke(
        monkeypatch, "--policy", policy, "--secure-port=10258", "--delegate-auth=true",
        "--tls-cert-file=/c.crt", "--tls-private-key-file=/c.key",
        "--authorization-always-allow-paths=/healthz,/debug/*",
        "--authorization-webhook-cache-unauthorized-ttl=2s", "--authentication-skip-lookup")
    assert code == 0, stderr
    secure = seen["config"].secure
    assert secure == SecureServing("0.0.0.0:10258", cert_file="/c.crt", key_file="/c.key",
                                   delegate_auth=True,
                                   always_allow_paths=("/healthz", "/debug/*"),
                                   unauthorized_ttl=2.0)
    assert seen["warnings"] == []
    # An authentication kubeconfig asks for delegation; --disable-metrics keeps health only.
    _, seen, _ = invoke(monkeypatch, "--policy", policy, "--secure-port", "9443",
                        "--bind-address", "::1", "--authentication-kubeconfig=/k",
                        "--disable-metrics")
    secure = seen["config"].secure
    assert (secure.address, secure.delegate_auth, secure.metrics) == ("[::1]:9443", True, False)
    assert secure.authentication_kubeconfig == "/k"


@pytest.mark.parametrize(("args", "error"), [
    (["--delegate-auth"], "error: --delegate-auth: applies to the HTTPS listener: give "
                          "--secure-port PORT (e.g. --secure-port=10258)\n"),
    (["--secure-port=0", "--tls-cert-file=/c"], "error: --tls-cert-file: applies to the HTTPS "
                                                "listener: give --secure-port PORT (e.g. "
                                                "--secure-port=10258)\n"),
    (["--secure-port=1", "--authentication-token-webhook-cache-ttl=soon"],
     "error: --authentication-token-webhook-cache-ttl: "),
])
def test_flag_errors(monkeypatch: pytest.MonkeyPatch, policy: str, args: list[str],
                     error: str) -> None:
    code, _, stderr = invoke(monkeypatch, "--policy", policy, *args)
    assert code == 2
    assert stderr.startswith(error) and stderr.count("\n") == 1, stderr


@pytest.fixture
def policy(tmp_path: Path) -> str:
    from test_upstream_flags import POLICY

    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return str(path)

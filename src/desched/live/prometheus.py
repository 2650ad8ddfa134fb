"""Prometheus queries for `desched run`: framework.types.UsageQueries over httpx2, the HTTP
stack of the live client (live/client.py), so the usage sources' queries leave the cycle's
thread: each is handed to the event loop and waited for, as an eviction is
(live/eviction_api.py). usage/prometheus.py says what to ask and reads the answers.

- The request: an instant query, POSTed as a form like client_golang, sent again as a GET when
  the server refuses POST (405); a URL path prefix is kept (http://host/prometheus).
- Authentication, as upstream's prometheus provider: a bearer token from the file
  DESCHED_PROMETHEUS_TOKEN_FILE names (read again for every query, so rotation works), else
  DESCHED_PROMETHEUS_TOKEN, else the `prometheusAuthToken` key of the provider's
  `authToken.secretReference` Secret, read live and followed on rotation
  (live/prometheus_secret.py), else the service account's token when running in a pod.
- TLS: the system's CAs, the service account's ca.crt (upstream's root CA) and the bundle
  DESCHED_PROMETHEUS_CA_FILE names; the host name is verified (upstream's config has no switch
  to skip verification, and neither does desched).
- Proxies from the environment, except for this machine (as Go's ProxyFromEnvironment).
- A timeout per request (30 s); connection failures and answers a busy server gives (429, 502,
  503, 504) are tried again with backoff, `attempts` times in all (a request that used up its
  timeout is not: the cycle would wait that long again).
- Metrics: `desched_prometheus_queries_total{code}` and `desched_prometheus_query_seconds`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

import httpx2

from desched.framework.types import QueryAnswer, QueryFailed
from desched.live.client import SERVICE_ACCOUNT_DIR, run_on_loop, transport_error_text
from desched.live.metrics import Metrics
from desched.live.prometheus_secret import SecretTokens
from desched.usage.prometheus import CA_FILE_ENV, TOKEN_ENV, TOKEN_FILE_ENV, query_url
from desched.util.backoff import Backoff

TIMEOUT_SECONDS = 30.0
ATTEMPTS = 3
# Statuses a busy or restarting server answers with: worth another try.
RETRIED = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class BearerToken:
    """A bearer token read from `path` on every use (so a rotated token is picked up) or given
    as `value`; neither means no Authorization header."""

    path: str | None = None
    value: str | None = None

    def __call__(self) -> str | None:
        if self.path:
            try:
                with open(self.path, encoding="utf-8") as handle:
                    return handle.read().strip() or None
            except OSError as err:
                raise QueryFailed(f"cannot read the bearer token file {self.path}: "
                                  f"{err.strerror or err}") from None
        return self.value or None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, secret_configured: bool = False,
                 service_account_dir: str = SERVICE_ACCOUNT_DIR) -> BearerToken:
        """DESCHED_PROMETHEUS_TOKEN_FILE, then DESCHED_PROMETHEUS_TOKEN, then (only when the
        policy names no secret, as upstream) the in-cluster service account token."""
        env = os.environ if env is None else env
        if env.get(TOKEN_FILE_ENV):
            return cls(path=env[TOKEN_FILE_ENV])
        if env.get(TOKEN_ENV):
            return cls(value=env[TOKEN_ENV])
        account_token = os.path.join(service_account_dir, "token")
        if not secret_configured and os.path.isfile(account_token):
            return cls(path=account_token)
        return cls()


class _Unanswered(QueryFailed):
    """No answer came; `retry`: worth another attempt (the connection failed; not a request
    that used up its timeout, nor a token that cannot be read)."""

    def __init__(self, message: str, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _ssl_context(ca_file: str | None, service_account_dir: str) -> ssl.SSLContext:
    context = ssl.create_default_context()
    account_ca = os.path.join(service_account_dir, "ca.crt")
    for path in (account_ca, ca_file):
        if path and os.path.isfile(path):
            context.load_verify_locations(cafile=path)
    return context


def _url_problem(url: str) -> tuple[str | None, str]:
    """Why `url` is no Prometheus URL (None: it is one), and its host."""
    try:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            return f"{url!r} is not an http(s) URL with a host", ""
    except ValueError as err:
        return f"{url!r} is not a valid URL: {err}", ""
    return None, parsed.hostname


class PrometheusQueries:
    """UsageQueries for one run: `prometheus` is called from the cycle's thread and runs the
    request on `loop`. One connection pool per server URL, closed by `close`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, metrics: Metrics, *,
                 env: Mapping[str, str] | None = None,
                 service_account_dir: str = SERVICE_ACCOUNT_DIR,
                 timeout: float = TIMEOUT_SECONDS, attempts: int = ATTEMPTS,
                 backoff: tuple[float, float] = (0.5, 2.0),
                 secrets: SecretTokens | None = None) -> None:
        self.loop = loop
        self.secrets = secrets  # the authToken Secrets' reader; None: no API client
        self.metrics = metrics
        self.env = os.environ if env is None else env
        self.service_account_dir = service_account_dir
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self._clients: dict[str, httpx2.AsyncClient] = {}

    def prometheus(self, url: str, auth_secret: tuple[str, str] | None,
                   params: Mapping[str, str]) -> QueryAnswer:
        """The query, made on the event loop while this (the cycle's) thread waits."""
        return run_on_loop(self.loop, self.query(url, auth_secret, params),
                           "PrometheusQueries.prometheus waits for the event loop: call it "
                           "from the cycle's thread, or await query()")

    async def query(self, url: str, auth_secret: tuple[str, str] | None,
                    params: Mapping[str, str]) -> QueryAnswer:
        problem, host = _url_problem(url)
        if problem is not None:
            raise QueryFailed(f"the Prometheus URL {problem}")
        endpoint = query_url(url)
        token = BearerToken.from_env(self.env, secret_configured=auth_secret is not None,
                                     service_account_dir=self.service_account_dir)
        from_secret = (auth_secret is not None and self.secrets is not None
                       and not token.path and not token.value)
        if from_secret:
            assert auth_secret is not None and self.secrets is not None
            token = BearerToken(value=await self.secrets.token(auth_secret))
        client = self._client(url, host)
        backoff = Backoff(*self.backoff)
        for attempt in range(1, self.attempts + 1):
            last = attempt == self.attempts
            try:
                answer = await self._send(client, endpoint, token, params)
            except _Unanswered as err:
                if last or not err.retry:
                    raise
            else:
                if answer.status in (401, 403) and from_secret:
                    # Refused: the Secret may have been rotated since it was last read.
                    assert auth_secret is not None and self.secrets is not None
                    rotated = await self.secrets.token(auth_secret, fresh=True)
                    if rotated != token.value:
                        token = BearerToken(value=rotated)
                        answer = await self._send(client, endpoint, token, params)
                if answer.status not in RETRIED or last:
                    return answer
            await asyncio.sleep(backoff.next())
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def _send(self, client: httpx2.AsyncClient, endpoint: str, token: BearerToken,
                    params: Mapping[str, str]) -> QueryAnswer:
        headers = {"Accept": "application/json"}
        bearer = token()
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        answer = await self._request(client, "POST", endpoint, headers, params)
        if answer.status == 405:
            answer = await self._request(client, "GET", endpoint, headers, params)
        return answer

    async def _request(self, client: httpx2.AsyncClient, method: str, endpoint: str,
                       headers: dict[str, str], params: Mapping[str, str]) -> QueryAnswer:
        started = time.monotonic()
        try:
            if method == "POST":
                response = await client.post(endpoint, data=dict(params), headers=headers)
            else:
                response = await client.get(endpoint, params=dict(params), headers=headers)
        except (httpx2.HTTPError, OSError, ValueError) as err:
            self.metrics.usage_queries.labels("error").inc()
            timed_out = (isinstance(err, httpx2.TimeoutException)
                         and not isinstance(err, httpx2.ConnectTimeout))
            raise _Unanswered(f"cannot reach {endpoint}: {transport_error_text(err)}",
                              retry=not timed_out) from None
        finally:
            self.metrics.usage_query_duration.observe(time.monotonic() - started)
        self.metrics.usage_queries.labels(str(response.status_code)).inc()
        return QueryAnswer(response.status_code, response.reason_phrase, response.content,
                           endpoint)

    def _client(self, url: str, host: str) -> httpx2.AsyncClient:
        client = self._clients.get(url)
        if client is None:
            https = urllib.parse.urlsplit(url).scheme == "https"
            ca = self.env.get(CA_FILE_ENV)
            verify: ssl.SSLContext | bool = (_ssl_context(ca, self.service_account_dir)
                                             if https else True)
            client = self._clients[url] = httpx2.AsyncClient(
                verify=verify, timeout=httpx2.Timeout(self.timeout), follow_redirects=True,
                # Like Go's ProxyFromEnvironment: never proxy requests to this machine.
                trust_env=not _is_loopback(host))
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

"""The Prometheus bearer token of `metricsProviders[].prometheus.authToken.secretReference`:
read from the Secret as upstream reads it (its `prometheusAuthToken` data key), and followed
when the Secret is rotated.

Upstream keeps an informer on the Secret and rebuilds its Prometheus client when the token
changes. desched reads the Secret through the run's API client when a query needs the token
and the last read is older than `ttl` seconds, and at once when Prometheus refuses the token
(401/403), so a rotated token is used from the next query after the rotation is seen. A Secret
that is missing, or whose key is missing or empty, fails the query with one line, as upstream's
cleared client does.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable
from typing import Any

from desched.errors import InputError
from desched.framework.types import QueryFailed
from desched.live.client import ApiClient, ApiError, ConnectionLost

SECRET_KEY = "prometheusAuthToken"  # upstream's prometheusAuthTokenSecretKey
TTL_SECONDS = 10.0


class SecretTokens:
    """Bearer tokens from Secrets, by (namespace, name), read through `client()`."""

    def __init__(self, client: Callable[[], ApiClient | None], *, ttl: float = TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self.ttl = ttl
        self._clock = clock
        self._read: dict[tuple[str, str], tuple[str, float]] = {}
        self.reads = 0  # Secret GETs made (tests count them)

    async def token(self, secret: tuple[str, str], *, fresh: bool = False) -> str:
        cached = self._read.get(secret)
        if cached is not None and not fresh and self._clock() - cached[1] < self.ttl:
            return cached[0]
        token = await self._fetch(secret)
        self._read[secret] = (token, self._clock())
        return token

    async def _fetch(self, secret: tuple[str, str]) -> str:
        namespace, name = secret
        where = f"the Prometheus authToken secret {namespace}/{name}"
        client = self._client()
        if client is None:
            raise QueryFailed(f"cannot read {where}: not connected to the API server")
        self.reads += 1
        try:
            _, body = await client.call(
                "GET", f"/api/v1/namespaces/{namespace}/secrets/{name}", dict[str, Any],
                what=f"get secret {namespace}/{name}", allow=(404,))
        except (InputError, ApiError, ConnectionLost) as err:
            raise QueryFailed(f"cannot read {where}: {err}") from None
        if body is None:
            raise QueryFailed(f"{where} does not exist")
        value = (body.get("data") or {}).get(SECRET_KEY)
        try:
            token = base64.b64decode(value or "", validate=True).decode("utf-8").strip()
        except (binascii.Error, UnicodeDecodeError, TypeError):
            raise QueryFailed(f"{where}: its {SECRET_KEY} key is not base64 text") from None
        if not token:
            raise QueryFailed(f"{where} has no {SECRET_KEY} key, or it is empty")
        return token

"""The API client's own rate limit: `--client-connection-qps` / `--client-connection-burst`
(upstream's flags) and Koordinator's `clientConnection.qps` / `.burst`.

client-go limits every request of a client (lists, watches, writes, evictions) with a token
bucket: `qps` tokens a second, at most `burst` saved up, one taken per request, a request
waiting for its token in the order it asked. A QPS of 0 means client-go's default (5), a burst
of 0 its default (10), and a negative QPS no limit at all (rest.RESTClientFor). Without either
flag (and no Koordinator file setting them) desched sets no client-side limit, as before: the
API server's Priority and Fairness is what protects it (docs/compatibility.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from desched.errors import InputError

DEFAULT_QPS = 5.0  # client-go's rest.DefaultQPS
DEFAULT_BURST = 10  # rest.DefaultBurst


@dataclass(frozen=True)
class RateLimit:
    qps: float
    burst: int

    def __str__(self) -> str:
        return f"{self.qps:g} requests/s, burst {self.burst}"


def resolve_rate_limit(qps: float | None, burst: int | None, *,
                       qps_source: str = "--client-connection-qps",
                       burst_source: str = "--client-connection-burst") -> RateLimit | None:
    """The limit client-go would apply for these settings (None given for both: no limit, as
    without the flags). A negative burst, which would make client-go fail every request, is
    refused."""
    if qps is None and burst is None:
        return None
    if burst is not None and burst < 0:
        raise InputError(burst_source, f"must not be negative, got {burst} (client-go would "
                                       "refuse every request)")
    if qps is not None and qps != qps:  # NaN
        raise InputError(qps_source, "must be a number, got NaN")
    rate = qps or DEFAULT_QPS
    if rate < 0:
        return None
    return RateLimit(rate, burst or DEFAULT_BURST)


class TokenBucket:
    """golang.org/x/time/rate's limiter as client-go's token bucket uses it: the bucket starts
    full; `wait` takes a token now if one is there, else reserves the next and sleeps until it
    is due, so waiters are served in order at `qps`."""

    def __init__(self, limit: RateLimit, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.limit = limit
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(limit.burst)
        self._last = clock()
        self.waited = 0.0  # seconds requests spent waiting, in total

    def _advance(self) -> float:
        now = self._clock()
        self._tokens = min(float(self.limit.burst),
                           self._tokens + (now - self._last) * self.limit.qps)
        self._last = now
        return now

    async def wait(self) -> None:
        self._advance()
        self._tokens -= 1.0
        if self._tokens >= 0:
            return
        delay = -self._tokens / self.limit.qps
        self.waited += delay
        try:
            await self._sleep(delay)
        except asyncio.CancelledError:
            # A request given up before its turn hands its token back (rate's Cancel).
            self._advance()
            self._tokens = min(float(self.limit.burst), self._tokens + 1.0)
            raise

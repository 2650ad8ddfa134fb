"""--client-connection-qps / --client-connection-burst: client-go's token bucket on every
request of the API client, with upstream's meanings of 0 and of a negative QPS; timed on a
fake clock, and against kmock over real HTTP."""

from __future__ import annotations

import asyncio
import time

import pytest
from fake_apiserver import Emulator, FakeApiServer

from desched.errors import InputError
from desched.live.client import ApiClient
from desched.live.rate_limit import RateLimit, TokenBucket, resolve_rate_limit


class Clock:
    """Time that moves only when a request sleeps: each sleep is recorded and passes at once."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


@pytest.mark.parametrize(("qps", "burst", "want"), [
    (None, None, None),  # neither flag: no client-side limit, as before
    (0.0, None, RateLimit(5.0, 10)),  # upstream's default flags: client-go's 5 and 10
    (0.0, 0, RateLimit(5.0, 10)),
    (None, 3, RateLimit(5.0, 3)),
    (50.0, 100, RateLimit(50.0, 100)),
    (20.0, None, RateLimit(20.0, 10)),
    (0.5, 1, RateLimit(0.5, 1)),
    (-1.0, 100, None),  # a negative QPS: client-go builds no limiter
])
def test_upstreams_meanings(qps: float | None, burst: int | None,
                            want: RateLimit | None) -> None:
    assert resolve_rate_limit(qps, burst) == want


def test_a_negative_burst_is_refused() -> None:
    with pytest.raises(InputError, match=r"^--client-connection-burst: must not be negative"):
        resolve_rate_limit(10.0, -1)
    with pytest.raises(InputError, match=r"^clientConnection\.burst: must not be negative"):
        resolve_rate_limit(None, -5, burst_source="clientConnection.burst")


@pytest.mark.asyncio
async def test_the_bucket_starts_full_then_paces_at_qps() -> None:
    clock = Clock()
    bucket = TokenBucket(RateLimit(5.0, 10), clock=clock, sleep=clock.sleep)
    for _ in range(10):
        await bucket.wait()
    assert clock.sleeps == []  # the burst goes at once
    await bucket.wait()
    await bucket.wait()
    assert clock.sleeps == [0.2, 0.2]  # then one request every 1/qps
    clock.now += 60  # an idle minute refills the bucket to its burst, not beyond
    for _ in range(10):
        await bucket.wait()
    assert clock.sleeps == [0.2, 0.2]
    await bucket.wait()
    assert clock.sleeps == [0.2, 0.2, 0.2]
    assert bucket.waited == pytest.approx(0.6)


@pytest.mark.asyncio
async def test_concurrent_waiters_are_served_in_order() -> None:
    clock = Clock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))  # the clock stands still: every waiter reserves
        await asyncio.sleep(0)

    bucket = TokenBucket(RateLimit(4.0, 2), clock=clock, sleep=sleep)
    await asyncio.gather(*(bucket.wait() for _ in range(5)))
    assert slept == [0.25, 0.5, 0.75]


@pytest.mark.asyncio
async def test_a_cancelled_waiter_gives_its_token_back() -> None:
    clock = Clock()
    gate = asyncio.Event()

    async def sleep(seconds: float) -> None:
        await gate.wait()

    bucket = TokenBucket(RateLimit(1.0, 1), clock=clock, sleep=sleep)
    await bucket.wait()
    waiter = asyncio.create_task(bucket.wait())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    clock.now += 1.0  # one token due: the cancelled request's reservation is not charged
    await bucket.wait()
    assert not gate.is_set()


@pytest.mark.asyncio
async def test_every_request_of_the_client_waits_for_its_token(
        emulator: Emulator, api: FakeApiServer) -> None:
    """Lists, watches and writes against kmock: 10 at once (the burst), then paced."""
    api.serve("Node")
    clock = Clock()
    bucket = TokenBucket(RateLimit(5.0, 10), clock=clock, sleep=clock.sleep)
    async with ApiClient.for_server(str(emulator.url).rstrip("/"), trust_env=False,
                                    timeout=5.0, limiter=bucket) as client:
        for _ in range(8):
            await client.get("/api/v1/nodes", what="list nodes")
        response = await client.request("POST", "/api/v1/nodes", what="create node",
                                        body=b'{"metadata": {"name": "n1"}}')
        assert response.status_code < 300
        async with client.stream("/api/v1/nodes", {"watch": "true", "timeoutSeconds": "1"},
                                 what="watch nodes", read_timeout=5.0):
            pass
        assert clock.sleeps == []
        await client.get("/api/v1/nodes", what="list nodes")
        await client.get("/api/v1/nodes", what="list nodes")
    assert clock.sleeps == [0.2, 0.2]
    assert len(api.requests("list", "nodes")) == 10
    assert len(api.requests("watch", "nodes")) == 1


@pytest.mark.asyncio
async def test_real_time_pacing(emulator: Emulator, api: FakeApiServer) -> None:
    """On the wall clock: burst 1 at 20/s, five requests take at least four intervals."""
    api.serve("Node")
    async with ApiClient.for_server(str(emulator.url).rstrip("/"), trust_env=False,
                                    timeout=5.0,
                                    limiter=TokenBucket(RateLimit(20.0, 1))) as client:
        started = time.monotonic()
        for _ in range(5):
            await client.get("/api/v1/nodes", what="list nodes")
        assert time.monotonic() - started >= 4 / 20 - 0.01
    async with ApiClient.for_server(str(emulator.url).rstrip("/"), trust_env=False,
                                    timeout=5.0) as client:  # no limiter: no waiting
        assert client.limiter is None

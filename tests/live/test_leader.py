"""LeaseElector against kmock over real HTTP. kmock's emulator has no PUT and no
resourceVersions (and answers a second POST itself), so the Lease endpoints (GET, POST, PUT with
a resourceVersion check) are reactions of FakeLeases below on kmock's stateless scaffold.

The electors wait on a FakeClock, so every timing below is exact and no assertion races the
machine's load: a 1-second lease (the smallest leaseDurationSeconds), a 0.5 s renew deadline and a
0.1 s retry period, in fake seconds. Requests still go over real HTTP."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import kmock
import pytest
import pytest_asyncio
from fake_apiserver import status
from fake_clock import FakeClock

from desched.live.client import AccessDenied, ApiClient
from desched.live.leader import LeaseElector, format_micro_time, parse_micro_time

NS, NAME = "kube-system", "desched"
LEASE, DEADLINE, RETRY = 1.0, 0.5, 0.1
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
LEASES = kmock.resource("coordination.k8s.io", "v1", "leases")

pytestmark = pytest.mark.asyncio


class FakeLeases:
    """Leases with resourceVersions: PUT needs the current one (else 409), POST of an existing
    lease is 409 AlreadyExists. Requests are told apart by their bearer token ("Bearer <id>"),
    so one replica can be cut off (`partitioned`) while the others reach the server."""

    def __init__(self, server: kmock.KubernetesScaffold, clock: FakeClock | None = None) -> None:
        # Real time for electors on the real clock (the soak's runners).
        self.monotonic = clock.monotonic if clock is not None else time.monotonic
        self.wall = clock.wall if clock is not None else (lambda: datetime.now(UTC))
        self.objects: dict[str, dict[str, Any]] = {}
        self.rvs = itertools.count(100)
        self.log: list[tuple[str, str, int]] = []  # (method, token, status)
        self.partitioned: dict[str, int] = {}  # token -> status answered to all its requests
        self.hang: set[str] = set()  # tokens whose requests never get an answer
        self.fail_next: list[tuple[str, int]] = []  # (method, status) for the next such request
        self.before_write: Callable[[str], None] | None = None  # runs once, before a write
        self.electors: dict[str, LeaseElector] = {}
        self.violations: list[str] = []
        self.written_at: dict[str, float] = {}  # holder -> time of its last write
        # (time, holder, renewTime, wall-clock time) of every write, as the server stored it.
        self.history: list[tuple[float, str, datetime | None, datetime]] = []
        self.gather_gets: asyncio.Barrier | None = None  # hold GETs until this many arrived
        server[kmock.action.FETCH, LEASES] << self._wrap(self._get)
        server[kmock.action.CREATE, LEASES] << self._wrap(self._create)
        server[kmock.method.PUT, LEASES] << self._wrap(self._replace)

    def _wrap(self, handler: Callable[[kmock.Request], tuple[int, Any]]) \
            -> Callable[[kmock.Request], Awaitable[kmock.Response]]:
        async def react(request: kmock.Request) -> kmock.Response:
            token = request.headers.get("Authorization", "").removeprefix("Bearer ")
            method = request.method.value
            if token in self.hang:
                await asyncio.Event().wait()  # until the client gives up
            if self.gather_gets is not None and method == "GET":
                # Everyone reads the same state, then everyone writes: a real race.
                await self.gather_gets.wait()
                self.gather_gets = None
            if token in self.partitioned:
                code, body = self.partitioned[token], status(self.partitioned[token], "cut off")
            elif any(m == method for m, _ in self.fail_next):
                i = next(i for i, (m, _) in enumerate(self.fail_next) if m == method)
                code = self.fail_next.pop(i)[1]
                body = status(code, "injected")
            else:
                code, body = handler(request)
            self.log.append((method, token, code))
            return kmock.Response(status=code, payload=body)
        return react

    def key(self, request: kmock.Request) -> str:
        return f"{request.namespace}/{request.name or request.data['metadata']['name']}"

    def _get(self, request: kmock.Request) -> tuple[int, Any]:
        obj = self.objects.get(self.key(request))
        if obj is None:
            return 404, status(404, f'leases "{request.name}" not found', "NotFound")
        return 200, obj

    def _create(self, request: kmock.Request) -> tuple[int, Any]:
        self._hook("POST")
        key = self.key(request)
        if key in self.objects:
            return 409, status(409, "already exists", "AlreadyExists")
        obj = dict(request.data)
        obj["metadata"] = {**obj["metadata"], "namespace": request.namespace,
                           "uid": f"uid-{key}"}
        return 201, self._store(key, obj)

    def _replace(self, request: kmock.Request) -> tuple[int, Any]:
        self._hook("PUT")
        key = self.key(request)
        current = self.objects.get(key)
        if current is None:
            return 404, status(404, "not found", "NotFound")
        sent = request.data.get("metadata", {}).get("resourceVersion")
        if not sent:
            return 422, status(422, "metadata.resourceVersion must be specified", "Invalid")
        if sent != current["metadata"]["resourceVersion"]:
            return 409, status(409, "the object has been modified", "Conflict")
        return 200, self._store(key, dict(request.data))

    def _hook(self, method: str) -> None:
        hook, self.before_write = self.before_write, None
        if hook is not None:
            hook(method)

    def _store(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        before = (self.objects.get(key) or {}).get("spec", {}).get("holderIdentity") or ""
        after = obj.get("spec", {}).get("holderIdentity") or ""
        # The safety property: whoever held the lease has stopped leading before it changes hands.
        if before and before != after:
            previous = self.electors.get(before)
            if previous is not None and previous.is_leader():
                self.violations.append(f"{after or 'release'} took the lease while {before} led")
        if after:
            self.written_at[after] = self.monotonic()
        self.history.append((self.monotonic(), after,
                             parse_micro_time(obj.get("spec", {}).get("renewTime")),
                             self.wall()))
        obj["metadata"] = {**obj["metadata"], "resourceVersion": str(next(self.rvs))}
        self.objects[key] = obj
        return obj

    # -- for tests ---------------------------------------------------------------------------------
    def put_lease(self, holder: str, renewed: datetime | None = None, duration: int = 15,
                  transitions: int = 0, **spec: Any) -> None:
        """Write the lease as another replica (or an administrator) would."""
        renewed = renewed or self.wall()
        obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": NAME, "namespace": NS},
               "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                        "acquireTime": format_micro_time(renewed),
                        "renewTime": format_micro_time(renewed),
                        "leaseTransitions": transitions, **spec}}
        self._store(f"{NS}/{NAME}", obj)

    @property
    def spec(self) -> dict[str, Any]:
        return self.objects[f"{NS}/{NAME}"]["spec"]

    def count(self, method: str, code: int | None = None, token: str | None = None) -> int:
        return sum(1 for m, t, c in self.log
                   if m == method and (code is None or c == code)
                   and (token is None or t == token))


@pytest_asyncio.fixture
async def scaffold() -> AsyncIterator[kmock.KubernetesScaffold]:
    async with kmock.KubernetesScaffold() as handler, kmock.Server(handler):
        yield handler


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest_asyncio.fixture
async def leases(scaffold: kmock.KubernetesScaffold, clock: FakeClock) \
        -> AsyncIterator[FakeLeases]:
    fake = FakeLeases(scaffold, clock)
    yield fake
    assert fake.violations == []


@pytest_asyncio.fixture
async def elector(scaffold: kmock.KubernetesScaffold, leases: FakeLeases, clock: FakeClock) \
        -> AsyncIterator[Callable[[str], LeaseElector]]:
    """A factory of electors, each with its own connection (bearer token = identity)."""
    clients: list[ApiClient] = []
    made: list[LeaseElector] = []

    def make(identity: str) -> LeaseElector:
        client = ApiClient.for_server(str(scaffold.url).rstrip("/"), token=identity,
                                      trust_env=False, timeout=5.0)
        clients.append(client)
        e = LeaseElector(client, NAME, NS, identity, lease_duration=LEASE,
                         renew_deadline=DEADLINE, retry_period=RETRY,
                         clock=clock.monotonic, wall_clock=clock.wall, sleep=clock.sleep)
        leases.electors[identity] = e
        made.append(e)
        return e

    yield make
    # Tests may leave acquire() calls waiting: end them before the server goes away.
    pending = [t for t in asyncio.all_tasks() if not t.done()
               and t.get_coro().__qualname__.startswith("LeaseElector.")]  # type: ignore[union-attr]
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for c in clients:
        await c.close()


# The longest an acquiring elector waits between two reads of the lease (retry period + jitter),
# and the fake seconds a test moves the clock by at a time.
POLL = RETRY * 1.2
STEP = 0.01
EPS = 1e-9  # float sums of fake seconds


async def test_acquire_creates_a_missing_lease(elector: Callable[[str], LeaseElector],
                                               leases: FakeLeases, clock: FakeClock) -> None:
    a = elector("a")
    assert not a.is_leader()
    await asyncio.wait_for(a.acquire(), 10)
    assert a.is_leader() and not a.lost.is_set()
    spec = leases.spec
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(spec["acquireTime"]) and spec["acquireTime"] == spec["renewTime"]
    assert parse_micro_time(spec["acquireTime"]) == clock.wall()
    assert leases.count("POST", 201) == 1 and leases.count("PUT") == 0
    assert leases.objects[f"{NS}/{NAME}"]["metadata"]["namespace"] == NS


async def test_acquire_takes_a_free_lease_left_without_holder(
        elector: Callable[[str], LeaseElector], leases: FakeLeases, clock: FakeClock) -> None:
    leases.put_lease("", transitions=4)
    acquiring = clock.spawn(elector("a").acquire())
    await clock.settle()
    assert acquiring.done()  # at once, without waiting for the lease to expire
    await acquiring
    assert leases.spec["holderIdentity"] == "a" and leases.spec["leaseTransitions"] == 5


async def test_acquire_waits_while_another_holder_renews(
        elector: Callable[[str], LeaseElector], leases: FakeLeases, clock: FakeClock) -> None:
    leases.put_lease("other", duration=1, transitions=3)
    a = elector("a")
    acquiring = clock.spawn(a.acquire())
    for _ in range(15):  # 1.5 s, longer than the lease: only the renewals keep it
        await clock.advance(RETRY)
        leases.put_lease("other", duration=1, transitions=3)
    assert not acquiring.done() and not a.is_leader()
    assert leases.count("PUT") == 0
    assert leases.count("GET", 200, "a") >= 1 + int(1.5 / POLL)  # it kept reading
    waited = await clock.run_until(acquiring.done)
    # The last renewal had to expire first; a takes over at its first read after that.
    assert LEASE <= waited <= LEASE + POLL + STEP + EPS
    assert leases.spec["holderIdentity"] == "a"
    assert leases.spec["leaseTransitions"] == 4
    assert leases.spec["leaseDurationSeconds"] == 1


async def test_takes_over_an_expired_lease_at_once(elector: Callable[[str], LeaseElector],
                                                   leases: FakeLeases, clock: FakeClock) -> None:
    old = clock.wall() - timedelta(hours=1)
    leases.put_lease("crashed", renewed=old, duration=15, transitions=2)
    acquiring = clock.spawn(elector("a").acquire())
    await clock.settle()
    assert acquiring.done()  # its renewTime says so: no lease_duration wait
    await acquiring
    spec = leases.spec
    assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 3
    assert parse_micro_time(spec["acquireTime"]) == clock.wall()
    assert spec["leaseDurationSeconds"] == 1


async def test_takes_over_when_the_lease_stops_changing_despite_a_future_renew_time(
        elector: Callable[[str], LeaseElector], leases: FakeLeases, clock: FakeClock) -> None:
    # A holder whose clock ran an hour ahead died: its renewTime never looks expired, so the
    # lease is judged by how long it has been unchanged on our own clock (client-go's rule).
    leases.put_lease("fast-clock", renewed=clock.wall() + timedelta(hours=1), duration=1)
    acquiring = clock.spawn(elector("a").acquire())
    waited = await clock.run_until(acquiring.done)
    await acquiring
    assert LEASE <= waited <= LEASE + POLL + STEP + EPS
    assert leases.spec["holderIdentity"] == "a" and leases.spec["leaseTransitions"] == 1


async def test_conflict_on_replace_loses_to_the_other_writer(
        elector: Callable[[str], LeaseElector], leases: FakeLeases, clock: FakeClock) -> None:
    leases.put_lease("crashed", renewed=clock.wall() - timedelta(minutes=5))

    def b_wins(method: str) -> None:  # b writes between a's read and a's write
        leases.put_lease("b", duration=15, transitions=1)

    leases.before_write = b_wins
    a = elector("a")
    acquiring = clock.spawn(a.acquire())
    await clock.advance(0.4)
    assert not acquiring.done() and not a.is_leader()
    assert leases.count("PUT", 409, "a") == 1
    assert leases.count("PUT", 200, "a") == 0
    # Re-read at once after the conflict, then once per retry period.
    assert leases.count("GET", 200, "a") >= 2 + int(0.4 / POLL)
    assert leases.spec["holderIdentity"] == "b"


async def test_conflict_on_replace_retries_and_wins(elector: Callable[[str], LeaseElector],
                                                   leases: FakeLeases, clock: FakeClock) -> None:
    expired = clock.wall() - timedelta(minutes=5)
    leases.put_lease("crashed", renewed=expired, transitions=7)

    def someone_labels_it(method: str) -> None:  # a new version, still expired
        obj = leases.objects[f"{NS}/{NAME}"]
        obj["metadata"]["labels"] = {"touched": "yes"}
        leases._store(f"{NS}/{NAME}", obj)

    leases.before_write = someone_labels_it
    acquiring = clock.spawn(elector("a").acquire())
    await clock.settle()
    assert acquiring.done()  # the re-read and the retry are immediate: no sleep between
    await acquiring
    assert [c for m, _, c in leases.log if m == "PUT"] == [409, 200]
    obj = leases.objects[f"{NS}/{NAME}"]
    assert obj["spec"]["holderIdentity"] == "a" and obj["spec"]["leaseTransitions"] == 8
    assert obj["metadata"]["labels"] == {"touched": "yes"}  # kept: the write carried it


async def test_conflict_on_create_sees_the_winner(elector: Callable[[str], LeaseElector],
                                                  leases: FakeLeases, clock: FakeClock) -> None:
    leases.before_write = lambda method: leases.put_lease("b", duration=15)
    a = elector("a")
    acquiring = clock.spawn(a.acquire())
    await clock.advance(0.3)
    assert not acquiring.done() and not a.is_leader()
    assert leases.count("POST", 409, "a") == 1 and leases.count("PUT", token="a") == 0
    assert leases.count("GET", 200, "a") >= 1 + int(0.3 / POLL)  # waiting, reading


async def test_renewals_keep_the_lease(elector: Callable[[str], LeaseElector],
                                       leases: FakeLeases, clock: FakeClock) -> None:
    a, b = elector("a"), elector("b")
    await a.acquire()
    acquired = dict(leases.spec)
    b_acquiring = clock.spawn(b.acquire())
    for _ in range(round(1.5 * LEASE / STEP)):  # past the lease: only renewals kept it
        await clock.advance(STEP)
        assert a.is_leader() and not b.is_leader()
    assert not b_acquiring.done() and not a.lost.is_set()
    spec = leases.spec
    assert spec["holderIdentity"] == "a"
    assert spec["acquireTime"] == acquired["acquireTime"]
    assert spec["leaseTransitions"] == 0
    assert parse_micro_time(spec["renewTime"]) > parse_micro_time(acquired["renewTime"])  # type: ignore[operator]
    assert leases.count("PUT", 200, "a") >= round(1.5 * LEASE / RETRY) - 1  # every retry period
    assert leases.count("PUT", 409) == 0


async def test_renew_failures_stop_leading_before_the_lease_can_expire(
        elector: Callable[[str], LeaseElector], leases: FakeLeases, clock: FakeClock) -> None:
    a, b = elector("a"), elector("b")
    await a.acquire()
    await clock.advance(0.25)
    leases.partitioned["a"] = 500
    b_acquiring = clock.spawn(b.acquire())
    await clock.run_until(lambda: not a.is_leader())
    # Stopped renew_deadline after its last successful write, before the lease (that write
    # + 1 s) could be taken by another replica.
    last_write = leases.written_at["a"]
    assert DEADLINE <= clock.now - last_write <= DEADLINE + STEP + EPS
    assert await clock.run_until(a.lost.is_set) <= STEP
    assert leases.count("PUT", 500, "a") >= 2  # retried within the deadline
    await clock.run_until(b_acquiring.done)
    await b_acquiring
    assert clock.now - last_write >= LEASE
    assert b.is_leader() and not a.is_leader()
    assert leases.spec["holderIdentity"] == "b" and leases.spec["leaseTransitions"] == 1


async def test_hanging_renewals_stop_leading_in_time(elector: Callable[[str], LeaseElector],
                                                     leases: FakeLeases,
                                                     clock: FakeClock) -> None:
    a = elector("a")
    await a.acquire()
    leases.hang.add("a")
    await clock.run_until(lambda: not a.is_leader())
    assert DEADLINE <= clock.now - leases.written_at["a"] <= DEADLINE + STEP + EPS
    assert await clock.run_until(a.lost.is_set) <= STEP


async def test_a_transient_renew_failure_is_retried(elector: Callable[[str], LeaseElector],
                                                    leases: FakeLeases, clock: FakeClock) -> None:
    a = elector("a")
    await a.acquire()
    leases.fail_next.append(("PUT", 503))
    await clock.run_until(lambda: leases.count("PUT", 503) == 1)
    await clock.run_until(lambda: leases.count("PUT", 200, "a") >= 1)
    assert a.is_leader() and not a.lost.is_set()


async def test_a_taken_lease_is_lost_at_the_next_renewal(
        elector: Callable[[str], LeaseElector], leases: FakeLeases, clock: FakeClock) -> None:
    a = elector("a")
    await a.acquire()
    leases.electors.pop("a")  # an administrator hands the lease over: not a safety violation
    leases.put_lease("admin-choice", duration=15, transitions=1)
    assert await clock.run_until(a.lost.is_set) <= RETRY + STEP + EPS
    assert not a.is_leader() and leases.spec["holderIdentity"] == "admin-choice"


async def test_acquire_retries_server_errors_and_raises_on_refusal(
        elector: Callable[[str], LeaseElector], leases: FakeLeases, clock: FakeClock) -> None:
    leases.fail_next += [("GET", 500), ("GET", 503)]
    a = elector("a")
    acquiring = clock.spawn(a.acquire())
    waited = await clock.run_until(acquiring.done)
    await acquiring
    assert leases.count("GET", 500) == 1 and leases.count("GET", 503) == 1 and a.is_leader()
    assert 2 * RETRY <= waited <= 2 * POLL + STEP + EPS  # one retry period after each

    leases.partitioned["b"] = 403
    with pytest.raises(AccessDenied, match="forbidden"):
        await asyncio.wait_for(elector("b").acquire(), 10)


async def test_two_electors_racing_have_one_leader_at_any_time(
        elector: Callable[[str], LeaseElector], leases: FakeLeases, clock: FakeClock) -> None:
    a, b = elector("a"), elector("b")
    both: list[float] = []

    def sampled(done: Callable[[], bool]) -> Callable[[], bool]:
        """done(), noting every step at which both electors lead."""
        def check() -> bool:
            if a.is_leader() and b.is_leader():
                both.append(clock.now)
            return done()
        return check

    def after(seconds: float) -> Callable[[], bool]:
        end = clock.now + seconds
        return lambda: clock.now >= end - EPS

    leases.gather_gets = asyncio.Barrier(2)
    tasks = {e.identity: clock.spawn(e.acquire()) for e in (a, b)}
    await clock.settle()
    await clock.run_until(sampled(after(0.3)))
    assert len([t for t in tasks.values() if t.done()]) == 1
    assert leases.count("POST", 201) == 1 and leases.count("POST", 409) == 1
    first, second = (a, b) if a.is_leader() else (b, a)
    assert first.is_leader() and not second.is_leader()

    # The leader is cut off: it stops leading, then the other takes over once the lease expired.
    leases.partitioned[first.identity] = 500
    await clock.run_until(sampled(tasks[second.identity].done))
    await tasks[second.identity]
    assert second.is_leader() and not first.is_leader() and first.lost.is_set()

    # It comes back and waits; the new leader shuts down gracefully and hands over at once.
    del leases.partitioned[first.identity]
    rejoin = clock.spawn(first.acquire())
    await clock.run_until(sampled(after(0.3)))
    assert not rejoin.done()
    await second.release()
    assert await clock.run_until(sampled(rejoin.done)) <= POLL + STEP + EPS
    assert first.is_leader() and not second.is_leader()
    assert leases.spec["leaseTransitions"] == 2
    assert both == []


async def test_many_electors_racing_for_a_missing_lease(
        elector: Callable[[str], LeaseElector], leases: FakeLeases, clock: FakeClock) -> None:
    electors = [elector(f"e{i}") for i in range(5)]
    leases.gather_gets = asyncio.Barrier(5)
    tasks = [clock.spawn(e.acquire()) for e in electors]
    await clock.settle()
    await clock.advance(0.3)
    assert sum(t.done() for t in tasks) == 1
    assert sum(e.is_leader() for e in electors) == 1
    assert leases.count("POST", 201) == 1 and leases.count("POST", 409) == 4


async def test_release_clears_the_holder(elector: Callable[[str], LeaseElector],
                                         leases: FakeLeases, clock: FakeClock) -> None:
    a, b = elector("a"), elector("b")
    await a.acquire()
    await a.release()
    assert not a.is_leader() and a.lost.is_set()
    spec = leases.spec
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    b_acquiring = clock.spawn(b.acquire())
    await clock.settle()
    assert b_acquiring.done()  # at once: no holder to wait for
    await b_acquiring
    assert leases.spec["holderIdentity"] == "b" and leases.spec["leaseTransitions"] == 1
    puts = leases.count("PUT", token="a")
    await a.release()  # not leading: nothing is written
    assert leases.count("PUT", token="a") == puts
    assert leases.spec["holderIdentity"] == "b"


async def test_release_after_a_renew_the_server_applied_but_was_cut_short(
        elector: Callable[[str], LeaseElector], leases: FakeLeases) -> None:
    a = elector("a")
    await a.acquire()
    leases.put_lease("a", duration=1)  # a newer version of our own lease than we know of
    await a.release()
    assert leases.spec["holderIdentity"] == ""


async def test_reacquire_after_losing(elector: Callable[[str], LeaseElector],
                                      leases: FakeLeases, clock: FakeClock) -> None:
    a = elector("a")
    await a.acquire()
    leases.partitioned["a"] = 500
    await clock.run_until(a.lost.is_set)
    del leases.partitioned["a"]
    reacquiring = clock.spawn(a.acquire())  # still ours on the server: renewed, same term
    await clock.run_until(reacquiring.done)
    await reacquiring
    assert a.is_leader() and not a.lost.is_set()
    assert leases.spec["holderIdentity"] == "a" and leases.spec["leaseTransitions"] == 0


async def test_micro_time_round_trip() -> None:
    t = datetime(2026, 3, 1, 12, 30, 5, 123, tzinfo=UTC)
    assert format_micro_time(t) == "2026-03-01T12:30:05.000123Z"
    assert parse_micro_time("2026-03-01T12:30:05.000123Z") == t
    assert parse_micro_time("2026-03-01T12:30:05Z") == t.replace(microsecond=0)
    assert parse_micro_time("2026-03-01T14:30:05.000123+02:00") == t
    assert parse_micro_time("garbage") is None and parse_micro_time(None) is None


@pytest.mark.parametrize("durations", [(15, 10, 10), (10, 10, 2), (15, 10, 0)])
async def test_durations_must_be_ordered(durations: tuple[float, float, float]) -> None:
    lease, deadline, retry = durations
    client: Any = None
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaseElector(client, NAME, NS, "a", lease_duration=lease, renew_deadline=deadline,
                     retry_period=retry)

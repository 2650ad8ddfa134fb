"""Leader election on a coordination.k8s.io/v1 Lease, following client-go's leaderelection.

One replica holds the Lease and renews it every `retry_period`. Every write is a create (POST)
or a replace (PUT) carrying the resourceVersion that was read, so of two replicas writing the
same version exactly one wins and the other gets 409 Conflict, re-reads and sees the winner.

A lease is free when it has no holder, or when it has expired. It has expired when either:
- its renewTime + leaseDurationSeconds is in the past. These are the holders' wall-clock
  timestamps (MicroTime), so clocks must agree to within lease_duration - renew_deadline;
- or its record has not changed for leaseDurationSeconds on this replica's own monotonic clock.
  This is client-go's rule, and it does not depend on clocks agreeing.

The holder stops acting (is_leader() turns False, `lost` is set) once renew_deadline has passed
since its last successful renew. That deadline is shorter than lease_duration, so the holder has
stopped before any other replica may take over. `release()` clears the holder on a graceful
shutdown so that a successor can take over at once (client-go's ReleaseOnCancel).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from desched.live.client import AccessDenied, ApiClient, ApiError, ConnectionLost, Unreachable

log = logging.getLogger("desched.live")

API_VERSION = "coordination.k8s.io/v1"


def format_micro_time(value: datetime) -> str:
    """metav1.MicroTime: RFC 3339 in UTC with microseconds."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(value: Any) -> datetime | None:
    """A MicroTime (or a Time, which has no fraction), or None if it is missing or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


class _Conflict(Exception):
    """Another writer got there first (409), or the lease vanished under a replace (404)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


# Errors worth another attempt: the server or the network failed, it did not refuse.
_RETRYABLE = (ConnectionLost, Unreachable, TimeoutError)


class LeaseElector:
    """Leader election for one identity on the Lease `namespace/name`.

    `clock` is a monotonic clock in seconds (deadlines, observed changes), `wall_clock` the
    current UTC time (the lease's timestamps) and `sleep` waits on `clock`; tests replace all three
    with a fake clock."""

    def __init__(self, client: ApiClient, name: str, namespace: str, identity: str, *,
                 lease_duration: float = 15, renew_deadline: float = 10,
                 retry_period: float = 2, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], datetime] = _utcnow,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if not identity:
            raise ValueError("leader election needs a non-empty identity")
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("leader election needs 0 < retry period < renew deadline < lease "
                             f"duration (got {retry_period}, {renew_deadline}, {lease_duration})")
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.lost = asyncio.Event()
        self._client = client
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._path = f"{self._collection}/{name}"
        self._lease: dict[str, Any] | None = None  # the last version read or written
        self._observed: Any = None  # the last spec seen, and when it was first seen
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # when the last successful write was started
        self._renewer: asyncio.Task[None] | None = None

    # -- public API --------------------------------------------------------------------------------
    def is_leader(self) -> bool:
        """True while this replica holds the lease and renewed it less than renew_deadline ago.
        Safe to call from any thread (a cycle's worker thread checks it before each eviction)."""
        return (self._renewed_at is not None and not self.lost.is_set()
                and self._clock() - self._renewed_at < self.renew_deadline)

    async def acquire(self) -> None:
        """Return once this replica holds the lease, then keep renewing it in the background.

        Raises AccessDenied (RBAC) or ApiError for a request the server refuses outright;
        outages and 5xx answers are logged and retried every retry_period."""
        if self.is_leader():
            return
        await self._stop_renewing()
        self._renewed_at = None
        self.lost.clear()
        waiting_logged = conflicted = False
        while True:
            was_conflicted, conflicted = conflicted, False
            try:
                # A write slower than renew_deadline would leave no time to lead.
                async with asyncio.timeout(self.renew_deadline):
                    if await self._try_acquire_or_renew():
                        break
            except _Conflict:
                # Re-read at once (the winner's lease decides whether to wait), but only once
                # in a row, so that a server answering only 409s is not hammered.
                conflicted = True
                if not was_conflicted:
                    continue
            except _RETRYABLE as err:
                log.warning("lease %s/%s: cannot acquire, retrying: %s", self.namespace,
                            self.name, err)
            except ApiError as err:
                if not err.transient:
                    raise
                log.warning("lease %s/%s: cannot acquire, retrying: %s", self.namespace,
                            self.name, err)
            else:
                if not waiting_logged:
                    log.info("lease %s/%s is held by %s; waiting", self.namespace, self.name,
                             self._holder())
                    waiting_logged = True
            await self._sleep(self.retry_period * random.uniform(1.0, 1.2))
        log.info("lease %s/%s acquired by %s", self.namespace, self.name, self.identity)
        self._renewer = asyncio.create_task(self._renew_loop(),
                                            name=f"lease-renew-{self.name}")

    async def release(self) -> None:
        """Stop renewing and, if this replica holds the lease, clear its holder so another replica
        can take over at once. Leadership ends before the lease is written; `lost` is set."""
        await self._stop_renewing()
        leading = self.is_leader()
        self._renewed_at = None
        self.lost.set()
        if not leading or self._lease is None:
            return
        lease: dict[str, Any] | None = self._lease
        try:
            async with asyncio.timeout(self.renew_deadline):
                for _ in range(2):
                    try:
                        self._lease = await self._request("PUT", self._path,
                                                          self._released(lease), "release lease")
                        break
                    except _Conflict:
                        # A renew was cut short after the server applied it: re-read, and
                        # release only if this replica still holds the lease.
                        lease = await self._get()
                        spec = (lease or {}).get("spec") or {}
                        if spec.get("holderIdentity") != self.identity:
                            return
                else:
                    return
        except (_Conflict, ApiError, AccessDenied, *_RETRYABLE) as err:
            # The server is away or refuses: the lease then simply expires.
            log.warning("lease %s/%s: cannot release: %s", self.namespace, self.name, err)
            return
        log.info("lease %s/%s released by %s", self.namespace, self.name, self.identity)

    def _released(self, lease: dict[str, Any] | None) -> dict[str, Any]:
        assert lease is not None
        now = format_micro_time(self._wall_clock())
        spec = lease.setdefault("spec", {})
        # As client-go: no holder, a 1-second duration, the transition count kept.
        spec.update(holderIdentity="", leaseDurationSeconds=1, acquireTime=now, renewTime=now)
        return lease

    # -- acquiring and renewing ------------------------------------------------------------------
    async def _try_acquire_or_renew(self) -> bool:
        """One attempt: True if this replica holds the lease afterwards, False if another holds
        it and it has not expired. Raises _Conflict when another writer won the race."""
        started, now = self._clock(), self._wall_clock()
        if self._renewed_at is not None and self._lease is not None:
            # Renewing: replace our last version directly; a conflict falls back to a read.
            with contextlib.suppress(_Conflict):
                self._write_spec(self._lease, now, renewing=True)
                self._lease = await self._request("PUT", self._path, self._lease, "renew lease")
                self._renewed_at = started
                return True
        lease = await self._get()
        if lease is None:
            lease = {"apiVersion": API_VERSION, "kind": "Lease",
                     "metadata": {"name": self.name, "namespace": self.namespace}}
            self._write_spec(lease, now, renewing=False, transitions=0)
            self._lease = await self._request("POST", self._collection, lease, "create lease")
            self._renewed_at = started
            return True
        self._observe(lease)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and not self._expired(spec, now):
            return False
        self._write_spec(lease, now, renewing=holder == self.identity)
        self._lease = await self._request("PUT", self._path, lease, "update lease")
        self._renewed_at = started
        return True

    def _write_spec(self, lease: dict[str, Any], now: datetime, *, renewing: bool,
                    transitions: int | None = None) -> None:
        lease.setdefault("apiVersion", API_VERSION)
        lease.setdefault("kind", "Lease")
        spec = lease.setdefault("spec", {})
        stamp = format_micro_time(now)
        if not renewing:  # taking over: a new term
            if transitions is None:
                transitions = int(spec.get("leaseTransitions") or 0) + 1
            spec["leaseTransitions"] = transitions
            spec["acquireTime"] = stamp
        spec["holderIdentity"] = self.identity
        # An int32 on the server: sub-second durations (tests) round up, which only delays others.
        spec["leaseDurationSeconds"] = max(1, math.ceil(self.lease_duration))
        spec["renewTime"] = stamp

    def _observe(self, lease: dict[str, Any]) -> None:
        spec = lease.get("spec")
        if spec != self._observed:
            self._observed, self._observed_at = spec, self._clock()

    def _expired(self, spec: dict[str, Any], now: datetime) -> bool:
        duration = float(spec.get("leaseDurationSeconds") or 0)
        renewed = parse_micro_time(spec.get("renewTime"))
        if renewed is not None and renewed + timedelta(seconds=duration) < now:
            return True
        return self._clock() - self._observed_at >= duration

    async def _renew_loop(self) -> None:
        """Renew every retry_period; stop leading once a renew has not succeeded in time."""
        try:
            while True:
                await self._sleep(self.retry_period)
                reason = await self._renew()
                if reason is not None:
                    self._lose(reason)
                    return
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a bug: never keep leading on an unknown state
            log.exception("lease %s/%s: renewing failed", self.namespace, self.name)
            self._lose(f"renewing failed: {type(err).__name__}: {err}")

    async def _renew(self) -> str | None:
        """None once renewed, else why leadership is lost."""
        assert self._renewed_at is not None
        deadline = self._renewed_at + self.renew_deadline
        error, conflicted = "no attempt", False
        while (remaining := deadline - self._clock()) > 0:
            was_conflicted, conflicted = conflicted, False
            try:
                async with asyncio.timeout(remaining):
                    if await self._try_acquire_or_renew():
                        return None
                return f"the lease is now held by {self._holder()}"
            except _Conflict:
                error, conflicted = "conflict", True
                if not was_conflicted:
                    continue
            except (ApiError, AccessDenied, *_RETRYABLE) as err:
                error = str(err) or type(err).__name__
                log.warning("lease %s/%s: cannot renew, retrying: %s", self.namespace,
                            self.name, error)
            remaining = deadline - self._clock()
            if remaining > 0:
                await self._sleep(min(self.retry_period, remaining))
        return f"not renewed within {self.renew_deadline:g}s (last error: {error})"

    def _lose(self, reason: str) -> None:
        self._renewed_at = None
        self.lost.set()
        log.warning("lease %s/%s: leadership lost: %s", self.namespace, self.name, reason)

    async def _stop_renewing(self) -> None:
        task, self._renewer = self._renewer, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def holder(self) -> str:
        """Who holds the lease as last read ("" for nobody, or before the first read)."""
        spec = (self._observed if isinstance(self._observed, dict) else None) or {}
        return str(spec.get("holderIdentity") or "")

    def _holder(self) -> str:
        return self.holder or "nobody"

    # -- requests ----------------------------------------------------------------------------------
    async def _get(self) -> dict[str, Any] | None:
        try:
            return await self._request("GET", self._path, None, "get lease")
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    async def _request(self, method: str, path: str, body: dict[str, Any] | None,
                       what: str) -> dict[str, Any]:
        """One JSON request; errors are mapped as ApiClient maps them. 409, and 404 on a
        write, raise _Conflict."""
        what = f"{what} {self.namespace}/{self.name}"
        conflicts = (409, 404) if method == "PUT" else (409,)
        _, decoded = await self._client.call(method, path, dict[str, Any], what=what, body=body,
                                             allow=conflicts)
        if decoded is None:
            raise _Conflict(what)
        return decoded

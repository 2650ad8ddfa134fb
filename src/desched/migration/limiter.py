"""The object limiters of MigrationControllerArgs (docs/migration.md): a token bucket
per workload (or namespace) fed by each eviction, refusing new migrations while it is empty.

Koordinator keeps one golang.org/x/time/rate.Limiter per key in a cache whose entries expire
1.5 x the window after their last use; `TokenBucket` is that limiter, driven by the run's clock.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from desched.migration.limits import IntOrPercent
from desched.util.duration import format_duration

WORKLOAD = "workload"
NAMESPACE = "namespace"
# Checked and fed in this order (Koordinator ranges over a Go map: random order).
LIMITER_KINDS = (WORKLOAD, NAMESPACE)

_GO_INT = re.compile(r"[+-]?[0-9]+")
_SWEEP_MIN = 1024


class TokenBucket:
    """rate.Limiter: `limit` tokens per second accrue up to `burst`; a new bucket is full."""

    __slots__ = ("_last", "_tokens", "burst", "limit")

    def __init__(self, limit: float, burst: int, now: float) -> None:
        self.limit = limit
        self.burst = burst
        self._tokens = float(burst)
        self._last = now

    def tokens(self, now: float) -> float:
        elapsed = max(0.0, now - self._last)
        return min(float(self.burst), self._tokens + elapsed * self.limit)

    def allow(self, now: float) -> bool:
        """AllowN(now, 1): take a token if one is there."""
        left = self.tokens(now) - 1
        if left < 0:
            return False
        self._tokens, self._last = left, max(now, self._last)
        return True

    def give_back(self, now: float) -> None:
        """Return a token taken for something that did not happen (up to the burst)."""
        self._tokens, self._last = min(float(self.burst), self.tokens(now) + 1), max(now,
                                                                                      self._last)

    def update(self, now: float, limit: float, burst: int) -> None:
        """SetLimitAt / SetBurstAt: the tokens accrued so far are kept."""
        self._tokens, self._last = self.tokens(now), max(now, self._last)
        self.limit, self.burst = limit, burst


@dataclass(frozen=True, slots=True)
class LimiterConfig:
    kind: str  # "workload" or "namespace"
    duration: float  # the window, seconds
    max_migrating: IntOrPercent | None
    burst: int


def int_value(value: IntOrPercent | None) -> int:
    """IntOrString.IntValue(): a string goes through Atoi, so "50%" is 0."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    return int(value) if _GO_INT.fullmatch(value) else 0


class ObjectLimiters:
    """The limiters of one MigrationController. Keys are workload keys ("Deployment/ns/name")
    or namespaces."""

    def __init__(self, configs: list[LimiterConfig]) -> None:
        # A limiter type with a zero window is off (initObjectLimiters skips it).
        self.configs = {c.kind: c for c in configs if c.duration > 0}
        self._buckets: dict[tuple[str, str], tuple[TokenBucket, float]] = {}
        # Past this many buckets the expired ones go at the next track(): a key is otherwise
        # dropped only when it is looked up again, and workloads that are gone never are.
        self._sweep_at = _SWEEP_MIN
        # A live run checks and feeds the limiters from the cycle's thread and from the event
        # loop: a check and the token it takes must be one step (see PodObjectLimits.reserve).
        self.lock = threading.Lock()

    def _live(self, config: LimiterConfig, key: str, now: float) -> TokenBucket | None:
        entry = self._buckets.get((config.kind, key))
        if entry is None:
            return None
        bucket, used = entry
        if now - used >= 1.5 * config.duration:
            # The cache entry expired with its limiter.
            self._buckets.pop((config.kind, key), None)
            return None
        return bucket

    def give_back(self, kind: str, key: str, now: float) -> None:
        """Undo one track() whose eviction did not happen."""
        config = self.configs.get(kind)
        bucket = self._live(config, key, now) if config is not None and key else None
        if bucket is not None:
            bucket.give_back(now)

    def exceeded(self, keys: dict[str, str], now: float) -> str | None:
        """checkPodExceedObjectLimiter: why the first limiter of the pod's keys that has no
        whole token left refuses, or None. A key never tracked has no limiter yet."""
        for kind in LIMITER_KINDS:
            config, key = self.configs.get(kind), keys.get(kind)
            if config is None or not key:
                continue
            bucket = self._live(config, key, now)
            if bucket is None:
                continue
            tokens = bucket.tokens(now)
            if tokens - 1 < 0:
                per_window = bucket.limit * config.duration
                wait = (1 - tokens) / bucket.limit if bucket.limit > 0 else float("inf")
                return (f"objectLimiters.{kind}: {key} was migrated recently; the limiter allows "
                        f"{per_window:g} per {format_duration(config.duration)} (burst "
                        f"{bucket.burst}), next token in {format_duration(round(wait))}")
        return None

    def track(self, kind: str, key: str, max_migrating: int, now: float) -> None:
        """trackEvictedPod for one limiter type: after an eviction, create or update the key's
        bucket (max_migrating per window, burst 0 meaning 1) and take a token. A max of 0 tracks
        nothing."""
        config = self.configs.get(kind)
        if config is None or not key or max_migrating <= 0:
            return
        limit = max_migrating / config.duration
        burst = config.burst or 1
        bucket = self._live(config, key, now)
        if bucket is None:
            bucket = TokenBucket(limit, burst, now)
        elif bucket.limit != limit or bucket.burst != burst:
            bucket.update(now, limit, burst)
        bucket.allow(now)
        self._buckets[(kind, key)] = (bucket, now)
        if len(self._buckets) >= self._sweep_at:
            self._sweep(now)

    def _sweep(self, now: float) -> None:
        """Drop the buckets that expired with their limiter (as `_live` would on a lookup)."""
        self._buckets = {
            k: (bucket, used) for k, (bucket, used) in self._buckets.items()
            if k[0] in self.configs and now - used < 1.5 * self.configs[k[0]].duration}
        self._sweep_at = max(_SWEEP_MIN, 2 * len(self._buckets))

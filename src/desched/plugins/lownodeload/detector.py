"""LowNodeLoad's anomaly detector: a node is evicted from only after it was seen hot on more than
`consecutiveAbnormalities` consecutive passes (docs/lownodeload.md).

One detector per node lives in a cache whose entries expire `detectorCacheTimeout` after they were
last stored; the plugin object keeps the caches, so the state carries over between cycles. Time is
the run's clock (handle.now), never the wall clock, so simulations are reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

DEFAULT_TIMEOUT = 60.0  # seconds; a timeout <= 0 means this


class State(Enum):
    OK = "ok"
    ANOMALY = "anomaly"


@dataclass(frozen=True)
class Condition:
    """A pool's anomalyCondition as the detector uses it (timeout in seconds)."""

    timeout: float
    consecutive_abnormalities: int
    consecutive_normalities: int

    @property
    def bypass(self) -> bool:
        """Koordinator skips the detector when the count is 1: every hot node is abnormal at
        once (yet 2 needs three passes: the comparison is strict)."""
        return self.consecutive_abnormalities == 1


class Detector:
    """Koordinator's BasicDetector. Counters are consecutive runs of abnormal (hot) and normal
    observations; entering a state clears both, and Anomaly lasts `timeout` at most (marking the
    node hot again does not extend it)."""

    def __init__(self, name: str, condition: Condition) -> None:
        self.name = name
        self.condition = condition
        self.timeout = condition.timeout if condition.timeout > 0 else DEFAULT_TIMEOUT
        self.state = State.OK
        self.abnormalities = 0
        self.normalities = 0
        self.expiration: datetime | None = None

    def _normal_condition(self) -> bool:
        return self.normalities > self.condition.consecutive_normalities

    def _anomaly_condition(self) -> bool:
        return self.abnormalities > self.condition.consecutive_abnormalities

    def _set_state(self, state: State, now: datetime) -> None:
        if state is self.state:
            return  # so Reset() of an OK detector keeps its counters (a Koordinator quirk)
        self.state = state
        self.abnormalities = self.normalities = 0
        self.expiration = now + timedelta(seconds=self.timeout) if state is State.ANOMALY else None

    def current_state(self, now: datetime) -> State:
        if self.state is State.ANOMALY and self.expiration is not None and (
                self.expiration < now or self._normal_condition()):
            self._set_state(State.OK, now)
        return self.state

    def mark(self, normal: bool, now: datetime) -> State:
        """Record one observation and return the state after it."""
        state = self.current_state(now)
        if normal:
            self.normalities += 1
            self.abnormalities = 0
            if state is State.ANOMALY and self._normal_condition():
                self._set_state(State.OK, now)
        else:
            self.abnormalities += 1
            self.normalities = 0
            if state is State.OK and self._anomaly_condition():
                self._set_state(State.ANOMALY, now)
        return self.current_state(now)

    def reset(self, now: datetime) -> None:
        self._set_state(State.OK, now)


class DetectorCache:
    """go-cache semantics: an entry expires `ttl` seconds after its last `store` (ttl <= 0:
    never); an expired entry reads as absent."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[str, tuple[Detector, datetime | None]] = {}

    def get(self, name: str, now: datetime) -> Detector | None:
        entry = self._entries.get(name)
        if entry is None:
            return None
        detector, expires = entry
        if expires is not None and now > expires:
            del self._entries[name]
            return None
        return detector

    def store(self, detector: Detector, now: datetime) -> None:
        expires = now + timedelta(seconds=self.ttl) if self.ttl > 0 else None
        self._entries[detector.name] = (detector, expires)

    def __len__(self) -> int:
        return len(self._entries)

    # -- kept between processes (desched run --once: a CronJob's runs) ---------------------------

    def dump(self, now: datetime) -> dict[str, dict[str, Any]]:
        """The live entries as JSON-ready data: counters, state, times and the condition."""
        out: dict[str, dict[str, Any]] = {}
        for name in list(self._entries):
            detector = self.get(name, now)
            if detector is None:
                continue
            expires = self._entries[name][1]
            c = detector.condition
            out[name] = {
                "state": detector.state.value, "abnormalities": detector.abnormalities,
                "normalities": detector.normalities,
                "anomalyUntil": _iso(detector.expiration), "cachedUntil": _iso(expires),
                "condition": [c.timeout, c.consecutive_abnormalities,
                              c.consecutive_normalities]}
        return out

    def load(self, entries: dict[str, Any], now: datetime) -> int:
        """Take entries written by dump(); malformed or expired ones are skipped (the node then
        starts from a fresh detector, as after a cache expiry). Returns how many were taken."""
        taken = 0
        for name, entry in entries.items():
            try:
                timeout, abnormal, normal = entry["condition"]
                detector = Detector(name, Condition(float(timeout), int(abnormal), int(normal)))
                detector.state = State(entry["state"])
                detector.abnormalities = int(entry["abnormalities"])
                detector.normalities = int(entry["normalities"])
                detector.expiration = _parse_iso(entry["anomalyUntil"])
                expires = _parse_iso(entry["cachedUntil"])
            except (KeyError, TypeError, ValueError):
                continue
            if expires is not None and now > expires:
                continue
            self._entries[name] = (detector, expires)
            taken += 1
        return taken


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def _parse_iso(text: Any) -> datetime | None:
    if text is None:
        return None
    when = datetime.fromisoformat(str(text))
    if when.tzinfo is None:
        raise ValueError("a time without a zone")
    return when

"""The anomaly detector's state machine (docs/lownodeload.md), observation by
observation: strict `>` on consecutive counts, counters cleared on every state change, an
Anomaly that lasts `timeout` at most (not extended by new abnormal marks), Reset as a no-op in OK,
and the cache's TTL."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from builders import NOW
from desched.plugins.lownodeload.detector import Condition, Detector, DetectorCache, State

OK, ANOMALY = State.OK, State.ANOMALY

# Steps: (seconds since NOW, "hot" = Mark(false) | "fine" = Mark(true) | "reset" | "read").
Step = tuple[float, str]


def play(cond: Condition, steps: list[Step]) -> list[tuple[State, int, int]]:
    """The state and the (abnormal, normal) counters after each step."""
    detector = Detector("n1", cond)
    out = []
    for at, action in steps:
        now = NOW + timedelta(seconds=at)
        if action == "hot":
            detector.mark(False, now)
        elif action == "fine":
            detector.mark(True, now)
        elif action == "reset":
            detector.reset(now)
        state = detector.current_state(now)
        out.append((state, detector.abnormalities, detector.normalities))
    return out


CASES: list[tuple[str, Condition, list[Step], list[tuple[State, int, int]]]] = [
    ("anomalous after more than N abnormal marks; entering clears the counters",
     Condition(60, 2, 3), [(0, "hot"), (1, "hot"), (2, "hot"), (3, "hot")],
     [(OK, 1, 0), (OK, 2, 0), (ANOMALY, 0, 0), (ANOMALY, 1, 0)]),
    ("a normal mark breaks the streak",
     Condition(60, 2, 3), [(0, "hot"), (1, "hot"), (2, "fine"), (3, "hot"), (4, "hot")],
     [(OK, 1, 0), (OK, 2, 0), (OK, 0, 1), (OK, 1, 0), (OK, 2, 0)]),
    ("reset of an OK detector keeps its counters",
     Condition(60, 2, 3), [(0, "hot"), (1, "hot"), (2, "reset"), (3, "hot")],
     [(OK, 1, 0), (OK, 2, 0), (OK, 2, 0), (ANOMALY, 0, 0)]),
    ("reset of an anomalous detector clears it",
     Condition(60, 1, 3), [(0, "hot"), (1, "hot"), (2, "reset"), (3, "hot")],
     [(OK, 1, 0), (ANOMALY, 0, 0), (OK, 0, 0), (OK, 1, 0)]),
    ("more than M normal marks end the anomaly",
     Condition(60, 1, 2), [(0, "hot"), (1, "hot"), (2, "fine"), (3, "fine"), (4, "fine")],
     [(OK, 1, 0), (ANOMALY, 0, 0), (ANOMALY, 0, 1), (ANOMALY, 0, 2), (OK, 0, 0)]),
    ("abnormal marks in between reset the normal streak",
     Condition(60, 1, 1), [(0, "hot"), (1, "hot"), (2, "fine"), (3, "hot"), (4, "fine"),
                           (5, "fine")],
     [(OK, 1, 0), (ANOMALY, 0, 0), (ANOMALY, 0, 1), (ANOMALY, 1, 0), (ANOMALY, 0, 1),
      (OK, 0, 0)]),
    ("the anomaly lasts the timeout, not extended by abnormal marks",
     Condition(30, 1, 3), [(0, "hot"), (10, "hot"), (25, "hot"), (40, "read"), (41, "read"),
                           (42, "hot")],
     [(OK, 1, 0), (ANOMALY, 0, 0), (ANOMALY, 1, 0), (ANOMALY, 1, 0), (OK, 0, 0), (OK, 1, 0)]),
    ("a timeout <= 0 means 60s",
     Condition(0, 1, 3), [(0, "hot"), (0, "hot"), (60, "read"), (61, "read")],
     [(OK, 1, 0), (ANOMALY, 0, 0), (ANOMALY, 0, 0), (OK, 0, 0)]),
    ("after the timeout a full new streak is needed",
     Condition(10, 2, 3), [(0, "hot"), (1, "hot"), (2, "hot"), (20, "hot"), (21, "hot"),
                           (22, "hot")],
     [(OK, 1, 0), (OK, 2, 0), (ANOMALY, 0, 0), (OK, 1, 0), (OK, 2, 0), (ANOMALY, 0, 0)]),
]


@pytest.mark.parametrize(("cond", "steps", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_state_machine(cond: Condition, steps: list[Step],
                       expected: list[tuple[State, int, int]]) -> None:
    assert play(cond, steps) == expected


def test_default_condition_needs_six_hot_passes() -> None:
    detector = Detector("n1", Condition(60, 5, 3))
    states = [detector.mark(False, NOW) for _ in range(6)]
    assert states == [OK] * 5 + [ANOMALY]


@pytest.mark.parametrize(("count", "bypass"), [(1, True), (2, False), (5, False)])
def test_bypass_only_for_one(count: int, bypass: bool) -> None:
    assert Condition(60, count, 3).bypass is bypass


@pytest.mark.parametrize(("ttl", "after", "present"), [
    (300, 300, True),    # expired only strictly after the TTL
    (300, 301, False),
    (0, 10**6, True),    # no TTL: never expires
    (-1, 10**6, True),
])
def test_cache_ttl(ttl: float, after: float, present: bool) -> None:
    cache = DetectorCache(ttl)
    detector = Detector("n1", Condition(60, 2, 3))
    cache.store(detector, NOW)
    got = cache.get("n1", NOW + timedelta(seconds=after))
    assert (got is detector) is present
    assert len(cache) == (1 if present else 0)


def test_storing_refreshes_the_ttl() -> None:
    cache = DetectorCache(60)
    detector = Detector("n1", Condition(60, 2, 3))
    cache.store(detector, NOW)
    cache.store(detector, NOW + timedelta(seconds=50))
    assert cache.get("n1", NOW + timedelta(seconds=100)) is detector
    assert cache.get("n1", NOW + timedelta(seconds=111)) is None


def test_dump_and_load_keep_every_detail_across_processes() -> None:
    cache = DetectorCache(300)
    ok = Detector("n1", Condition(60, 2, 3))
    cache.store(ok, NOW)
    ok.mark(False, NOW)
    hot = Detector("n2", Condition(30, 1, 1))
    for i in range(3):
        hot.mark(False, NOW + timedelta(seconds=i))
    cache.store(hot, NOW)
    later = NOW + timedelta(seconds=10)
    data = json.loads(json.dumps(cache.dump(later)))  # as the ConfigMap holds it
    again = DetectorCache(300)
    assert again.load(data, later) == 2
    for before in (ok, hot):
        after = again.get(before.name, later)
        assert after is not None
        assert (after.state, after.abnormalities, after.normalities, after.expiration,
                after.condition) == (before.state, before.abnormalities, before.normalities,
                                     before.expiration, before.condition)
    assert again.get("n1", NOW + timedelta(seconds=301)) is None  # the TTL went along


def test_load_skips_malformed_and_expired_entries() -> None:
    cache = DetectorCache(60)
    cache.store(Detector("n1", Condition(60, 2, 3)), NOW)
    good = cache.dump(NOW)["n1"]
    entries = {"n1": good, "n2": {**good, "state": "weird"}, "n3": {"state": "ok"},
               "n4": {**good, "cachedUntil": "2000-01-01T00:00:00"}, "n5": "x"}
    again = DetectorCache(60)
    assert again.load(entries, NOW) == 1
    assert again.load({"n1": good}, NOW + timedelta(seconds=61)) == 0  # expired meanwhile

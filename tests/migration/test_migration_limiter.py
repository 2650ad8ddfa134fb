"""Object limiters (docs/migration.md): token buckets per workload or namespace over a
time window, fed after each eviction, expiring 1.5 windows after their last use."""

from __future__ import annotations

import tracemalloc

import pytest

from desched.migration.limiter import (
    NAMESPACE,
    WORKLOAD,
    LimiterConfig,
    ObjectLimiters,
    TokenBucket,
    int_value,
)

FIVE_MINUTES = 300.0


def test_a_new_bucket_is_full_and_refills_at_its_rate() -> None:
    bucket = TokenBucket(limit=0.5, burst=2, now=0.0)
    assert bucket.tokens(0.0) == 2
    assert bucket.allow(0.0) and bucket.allow(0.0)
    assert not bucket.allow(0.0)
    assert bucket.tokens(1.0) == pytest.approx(0.5)
    assert not bucket.allow(1.0)
    assert bucket.allow(2.0)
    assert bucket.tokens(100.0) == 2  # capped at the burst


def test_update_keeps_the_tokens_accrued() -> None:
    bucket = TokenBucket(limit=1.0, burst=1, now=0.0)
    assert bucket.allow(0.0)
    bucket.update(0.5, limit=0.1, burst=3)
    assert bucket.tokens(0.5) == pytest.approx(0.5)
    assert bucket.tokens(10.5) == pytest.approx(1.5)


def workload_limiter(duration: float = FIVE_MINUTES, burst: int = 0) -> ObjectLimiters:
    return ObjectLimiters([LimiterConfig(WORKLOAD, duration, None, burst)])


KEYS = {WORKLOAD: "Deployment/default/web", NAMESPACE: "default"}


def test_nothing_tracked_nothing_exceeded() -> None:
    assert workload_limiter().exceeded(KEYS, 0.0) is None


def test_default_window_for_a_six_replica_deployment() -> None:
    """{workload: {duration: 5m}} and the ladder's 2 for 6 replicas: 2 per 300s, burst 1, so one
    eviction, then one about every 150s."""
    limiters = workload_limiter()
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 2, now=0.0)
    assert limiters.exceeded(KEYS, 0.0) == (
        "objectLimiters.workload: Deployment/default/web was migrated recently; the limiter "
        "allows 2 per 5m0s (burst 1), next token in 2m30s")
    assert limiters.exceeded(KEYS, 149.0) is not None
    assert limiters.exceeded(KEYS, 150.0) is None
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 2, now=150.0)
    assert limiters.exceeded(KEYS, 200.0) is not None
    assert limiters.exceeded({WORKLOAD: "Deployment/default/other"}, 200.0) is None


def test_burst_lets_several_go_at_once() -> None:
    limiters = workload_limiter(burst=2)
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 4, now=0.0)
    assert limiters.exceeded(KEYS, 0.0) is None
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 4, now=0.0)
    assert limiters.exceeded(KEYS, 0.0) is not None
    assert limiters.exceeded(KEYS, 75.0) is None  # 4 per 300s: a token every 75s


def test_a_limiter_expires_one_and_a_half_windows_after_its_last_use() -> None:
    limiters = workload_limiter(duration=60.0)
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 1, now=0.0)
    assert limiters.exceeded(KEYS, 59.0) is not None
    assert limiters.exceeded(KEYS, 90.0) is None


def test_the_limiters_of_workloads_never_seen_again_do_not_pile_up() -> None:
    """A run of months evicts from workloads that come and go (a Job's, a rollout's): their
    limiters expire whether or not their key is asked about again. 20,000 more workloads, each
    evicted once a second, hold under 0.5 MB where keeping them would hold some 6 MB."""
    limiters = workload_limiter(duration=60.0)
    tracemalloc.start()
    try:
        for i in range(22_000):
            if i == 2_000:
                before = tracemalloc.get_traced_memory()[0]
            limiters.track(WORKLOAD, f"Job/batch/report-{i}", 1, now=float(i))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 500_000
    # The latest keep their limiter: the newest workload is still limited.
    assert limiters.exceeded({WORKLOAD: "Job/batch/report-21999"}, 21_999.0) is not None


@pytest.mark.parametrize("max_migrating", [0, -1])
def test_a_zero_maximum_tracks_nothing(max_migrating: int) -> None:
    limiters = workload_limiter()
    limiters.track(WORKLOAD, KEYS[WORKLOAD], max_migrating, now=0.0)
    assert limiters.exceeded(KEYS, 0.0) is None


def test_a_zero_window_switches_the_type_off() -> None:
    limiters = workload_limiter(duration=0.0)
    assert limiters.configs == {}
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 2, now=0.0)
    assert limiters.exceeded(KEYS, 0.0) is None


def test_namespace_and_workload_limiters_are_independent() -> None:
    limiters = ObjectLimiters([LimiterConfig(WORKLOAD, FIVE_MINUTES, None, 5),
                               LimiterConfig(NAMESPACE, 60.0, 1, 0)])
    limiters.track(NAMESPACE, "default", 1, now=0.0)
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 3, now=0.0)
    reason = limiters.exceeded(KEYS, 0.0)
    assert reason is not None and reason.startswith("objectLimiters.namespace: default ")
    assert limiters.exceeded({WORKLOAD: KEYS[WORKLOAD], NAMESPACE: "other"}, 0.0) is None


def test_a_changed_maximum_updates_the_bucket() -> None:
    limiters = workload_limiter(burst=1)
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 1, now=0.0)  # 1 per 300s
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 10, now=0.0)  # now 10 per 300s
    assert limiters.exceeded(KEYS, 29.0) is not None
    assert limiters.exceeded(KEYS, 31.0) is None


@pytest.mark.parametrize(("value", "expected"), [
    (None, 0), (3, 3), ("3", 3), ("50%", 0), ("x", 0), (" 3", 0), ("+2", 2)])
def test_int_value(value: int | str | None, expected: int) -> None:
    """IntOrString.IntValue(): the namespace limiter's maximum, a percentage reading as 0."""
    assert int_value(value) == expected


def test_give_back_returns_a_reserved_token_up_to_the_burst() -> None:
    limiters = workload_limiter()
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 2, now=0.0)
    assert limiters.exceeded(KEYS, 0.0) is not None
    limiters.give_back(WORKLOAD, KEYS[WORKLOAD], 0.0)
    assert limiters.exceeded(KEYS, 0.0) is None
    limiters.give_back(WORKLOAD, KEYS[WORKLOAD], 0.0)  # never above the burst
    limiters.track(WORKLOAD, KEYS[WORKLOAD], 2, now=0.0)
    assert limiters.exceeded(KEYS, 0.0) is not None
    limiters.give_back(NAMESPACE, "default", 0.0)  # an untracked key: nothing to return

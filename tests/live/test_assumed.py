"""EvictedPods: an evicted pod shows terminating in every snapshot until the cache shows it
terminating, gone or replaced, or the assumption expires (a fake clock)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
from fake_apiserver import pod

from builders import decode
from desched.live.assumed import EvictedPods
from desched.model.pod import Pod


def cached(name: str, **meta: Any) -> Pod:
    return decode("Pod", pod(name, metadata=meta))


def store(*pods: Pod) -> dict[str, Pod]:
    return {p.key: p for p in pods}


def test_an_evicted_pod_shows_terminating_and_the_cache_is_untouched() -> None:
    a, b = cached("a"), cached("b")
    evicted = EvictedPods()
    evicted.add(a)
    cache = store(a, b)
    shown = evicted.overlay(cache)
    assert list(shown) == ["default/a"]
    assert shown["default/a"].metadata.deletion_timestamp is not None
    assert shown["default/a"].metadata.uid == a.metadata.uid
    assert cache["default/a"] is a and a.metadata.deletion_timestamp is None
    assert evicted.overlay(cache) == shown  # kept while the cache lags
    assert len(evicted) == 1


def test_forgotten_once_the_cache_catches_up() -> None:
    a, b, c = cached("a"), cached("b"), cached("c")
    evicted = EvictedPods()
    for p in (a, b, c):
        evicted.add(p)
    terminating = msgspec.structs.replace(a, metadata=msgspec.structs.replace(
        a.metadata, deletion_timestamp=datetime.now(UTC)))
    replaced = cached("b", uid="uid-the-new-b")  # a StatefulSet's new pod of the same name
    assert evicted.overlay(store(terminating, replaced)) == {}  # and c is gone
    assert len(evicted) == 0


def test_the_assumption_expires() -> None:
    now = [100.0]
    evicted = EvictedPods(ttl=60.0, clock=lambda: now[0])
    a = cached("a")
    evicted.add(a)
    now[0] = 159.0
    assert list(evicted.overlay(store(a))) == ["default/a"]
    now[0] = 160.0
    assert evicted.overlay(store(a)) == {} and len(evicted) == 0


def test_a_pod_without_a_uid_is_not_kept() -> None:
    evicted = EvictedPods()
    evicted.add(decode("Pod", {"metadata": {"name": "x", "namespace": "default"}}))
    assert len(evicted) == 0


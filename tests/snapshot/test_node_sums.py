"""A node's request sums follow the pods leaving it: kept up to date on each removal (an
eviction) instead of counted again, and always what counting the remaining pods gives."""

from __future__ import annotations

from typing import Any

from builders import node, pod, snapshot
from desched.model.pod import Pod

GPU = "example.com/gpu"


def _pods() -> list[Pod]:
    gpu = {"containers": [{"name": "main", "image": "app:1",
                           "resources": {"requests": {"cpu": "250m", GPU: "1"}}}]}
    return [pod("a", "n1", cpu="1", memory="1Gi"),
            pod("b", "n1", cpu="500m", memory=None),  # non-zero memory: the scheduler's default
            pod("c", "n1", cpu="2", phase="Failed"),  # finished: never counted
            pod("d", "n1", cpu=None, memory=None, spec=gpu),
            pod("e", "n2", cpu="3")]


def _sums(pods: list[Pod], name: str) -> tuple[dict[str, int], tuple[int, int]]:
    fresh = snapshot(node("n1", cpu="8", extra={GPU: "2"}), node("n2"), *pods)
    return fresh.node_requested(name), fresh.node_non_zero_requested(name)


def _same(kept: dict[str, Any], counted: dict[str, Any]) -> bool:
    """Equal for every reader (they all read with .get(name, 0))."""
    return all(kept.get(k, 0) == counted.get(k, 0) for k in {*kept, *counted})


def test_sums_follow_each_removal() -> None:
    pods = _pods()
    snap = snapshot(node("n1", cpu="8", extra={GPU: "2"}), node("n2"), *pods)
    before = snap.node_requested("n1")
    assert before == {"cpu": 1750, "memory": 1 << 30, GPU: 1, "pods": 3}
    snap.node_non_zero_requested("n1")
    left = list(pods)
    for name in ("b", "c", "d", "a"):
        gone = snap.pods[f"default/{name}"]
        snap.remove_pod(gone)
        left.remove(gone)
        requested, non_zero = _sums(left, "n1")
        assert _same(snap.node_requested("n1"), requested), name
        assert snap.node_non_zero_requested("n1") == non_zero, name
    assert snap.node_requested("n1")["pods"] == 0
    # What was handed out before is left as it was; the other node is untouched.
    assert before == {"cpu": 1750, "memory": 1 << 30, GPU: 1, "pods": 3}
    assert snap.node_requested("n2") == {"cpu": 3000, "memory": 128 << 20, "pods": 1}


def test_a_pod_added_back_is_counted_again() -> None:
    pods = _pods()
    snap = snapshot(node("n1", cpu="8", extra={GPU: "2"}), node("n2"), *pods)
    snap.node_requested("n1")
    a = snap.pods["default/a"]
    snap.remove_pod(a)
    assert snap.node_requested("n1")["cpu"] == 750
    snap.add_pod(a)
    assert _same(snap.node_requested("n1"), _sums(pods, "n1")[0])


def test_sums_follow_each_addition() -> None:
    """A pod coming to a node (a replacement placed) adds to its sums, finished ones not."""
    pods = _pods()
    snap = snapshot(node("n1", cpu="8", extra={GPU: "2"}), node("n2"))
    snap.node_requested("n1")
    snap.node_non_zero_requested("n1")
    came: list[Pod] = []
    for arriving in pods:
        snap.add_pod(arriving)
        came.append(arriving)
        requested, non_zero = _sums(came, "n1")
        assert _same(snap.node_requested("n1"), requested), arriving.name
        assert snap.node_non_zero_requested("n1") == non_zero, arriving.name
    assert snap.node_requested("n1") == {"cpu": 1750, "memory": 1 << 30, GPU: 1, "pods": 3}

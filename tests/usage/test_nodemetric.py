"""Node load from NodeMetric (docs/lownodeload.md): systemUsage + the usage of the
pods still on the node; every kind of bad metric is a reason, never an exception."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from builders import NOW, decode, msgspec, node, pod, snapshot
from desched.model.meta import shared_hook
from desched.model.objects import NodeMetric
from desched.usage.nodemetric import NodeLoad, read_node_load

NAMES = ["cpu", "memory"]
UPDATED = "2026-11-22T11:59:30Z"


def metric(name: str = "n1", system: dict[str, Any] | None = None,
           pods: list[tuple[str, dict[str, Any] | None]] | None = None,
           updated: str | None = UPDATED, node_metric: bool = True,
           system_usage: bool = True) -> Any:
    """A NodeMetric; `pods` are (namespace/name, podUsage resources or None for no podUsage)."""
    status: dict[str, Any] = {}
    if updated is not None:
        status["updateTime"] = updated
    if node_metric:
        info: dict[str, Any] = {"nodeUsage": {"resources": {"cpu": "99"}}}
        if system_usage:
            info["systemUsage"] = {"resources": system or {}}
        status["nodeMetric"] = info
    entries = []
    for key, usage in pods or []:
        ns, _, pod_name = key.partition("/")
        entry: dict[str, Any] = {"namespace": ns, "name": pod_name}
        if usage is not None:
            entry["podUsage"] = {"resources": usage}
        entries.append(entry)
    status["podsMetric"] = entries
    body = {"metadata": {"name": name}, "status": status}
    try:
        return decode("NodeMetric", body)
    except msgspec.ValidationError:
        # NaN and infinities have no JSON form; build those objects directly.
        return msgspec.convert(body, NodeMetric, dec_hook=shared_hook)


def load(*objects: Any, names: list[str] | None = None, expiration: int | None = 180,
         now: Any = NOW) -> NodeLoad | str:
    snap = snapshot(node("n1"), node("n2"), *objects)
    return read_node_load(snap.nodes["n1"], snap, names or NAMES, now, expiration)


def test_usage_is_system_plus_pods_on_the_node() -> None:
    got = load(pod("a"), pod("b", priority=5500), pod("c", node_name="n2"),
               pod("done", phase="Succeeded"),
               metric(system={"cpu": "300m", "memory": "1Gi"}, pods=[
                   ("default/a", {"cpu": "2", "memory": "6Gi"}),
                   ("default/b", {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}),
                   ("default/c", {"cpu": "5"}),       # runs on n2 now
                   ("default/done", {"cpu": "7"}),    # finished
                   ("default/gone", {"cpu": "9"}),    # deleted
               ]))
    assert isinstance(got, NodeLoad)
    assert got.usage == {"cpu": 3300, "memory": 9 * 2**30, "pods": 2}
    # a is Burstable without priority: prod; b's priority is in the batch range
    assert [p.name for p in got.prod_pods] == ["a"]
    assert got.prod_usage == {"cpu": 2000, "memory": 6 * 2**30, "pods": 1}
    assert got.pod_usage == {"default/a": {"cpu": 2000, "memory": 6 * 2**30},
                             "default/b": {"cpu": 1000, "memory": 2 * 2**30}}
    assert got.notes == ["NodeMetric n1 reports 3 pod(s) no longer running on the node "
                         "(default/c, default/done, default/gone): their usage is not counted"]


def test_tracked_resources_only_and_missing_ones_are_zero() -> None:
    got = load(pod("a"), metric(system={"cpu": "100m"}, pods=[("default/a", {"memory": "1Gi"})]),
               names=["cpu", "memory", "pods", "nvidia.com/gpu"])
    assert isinstance(got, NodeLoad)
    assert got.usage == {"cpu": 100, "memory": 2**30, "nvidia.com/gpu": 0, "pods": 1}
    assert got.pod_usage["default/a"] == {"cpu": 0, "memory": 2**30, "nvidia.com/gpu": 0}


def test_entries_without_pod_usage_are_unknown() -> None:
    got = load(pod("a"), pod("b"), metric(pods=[("default/a", None), ("default/b", {"cpu": 1}),
                                                ("default/b", {"cpu": 5})]))
    assert isinstance(got, NodeLoad)
    assert got.pod_usage == {"default/b": {"cpu": 1000, "memory": 0}}  # the first entry counts
    assert got.usage["cpu"] == 1000
    assert got.notes == ["NodeMetric n1 has podsMetric entries without podUsage (default/a): "
                         "their usage is unknown"]


def test_more_than_three_gone_pods_are_summarised() -> None:
    got = load(metric(pods=[(f"default/p{i}", {"cpu": "1"}) for i in range(5)]))
    assert isinstance(got, NodeLoad)
    assert got.usage["cpu"] == 0
    assert got.notes[0].startswith("NodeMetric n1 reports 5 pod(s) no longer running on the "
                                   "node (default/p0, default/p1, default/p2 and 2 more)")


@pytest.mark.parametrize(("objects", "expiration", "now_shift", "reason"), [
    ([], 180, 0, "node n1 has no NodeMetric: it is neither a source nor a target"),
    ([metric(node_metric=False)], 180, 0, "NodeMetric n1 has no status.nodeMetric"),
    ([metric(updated=None)], 180, 0,
     "NodeMetric n1 has no status.updateTime: treated as expired"),
    # 30s old at NOW: expired exactly at 180s (>=)
    ([metric()], 180, 150, "NodeMetric n1 expired: last updated 3m0s ago, "
                           "nodeMetricExpirationSeconds is 180"),
    ([metric()], 20, 0, "NodeMetric n1 expired: last updated 30s ago, "
                        "nodeMetricExpirationSeconds is 20"),
    ([metric(updated="2026-11-22T09:00:00Z")], 180, 0,
     "NodeMetric n1 expired: last updated 3h0m0s ago, nodeMetricExpirationSeconds is 180"),
    ([metric(system={"cpu": "-500m"})], 180, 0,
     "NodeMetric n1: systemUsage cpu is negative (-500m)"),
    ([metric(system={"memory": float("nan")})], 180, 0,
     "NodeMetric n1: systemUsage memory is nan, not a valid quantity"),
    ([metric(system={"cpu": float("inf")})], 180, 0,
     "NodeMetric n1: systemUsage cpu is inf, not a valid quantity"),
    ([metric(system={"cpu": "lots"})], 180, 0,
     "NodeMetric n1: systemUsage cpu is 'lots', not a valid quantity"),
    ([pod("a"), metric(pods=[("default/a", {"memory": "-1Gi"})])], 180, 0,
     "NodeMetric n1: podsMetric default/a memory is negative (-1Gi)"),
    ([pod("a"), metric(pods=[("default/a", {"cpu": "NaN"})])], 180, 0,
     "NodeMetric n1: podsMetric default/a cpu is 'NaN', not a valid quantity"),
], ids=["missing", "no nodeMetric", "no updateTime", "expired at the limit",
        "expired, short limit", "expired hours ago", "negative system",
        "NaN system", "infinite system", "garbage system", "negative pod", "NaN pod"])
def test_unusable_metrics_are_reasons(objects: list[Any], expiration: int, now_shift: int,
                                      reason: str) -> None:
    got = load(*objects, expiration=expiration, now=NOW + timedelta(seconds=now_shift))
    assert got == reason


@pytest.mark.parametrize(("expiration", "now_shift"), [
    (180, 149),     # 179s old: fresh
    (None, 86400),  # no expiry check at all
    (0, 86400),     # a non-positive value disables the age check
    (180, -3600),   # updated "in the future" (clock skew): not expired
])
def test_fresh_metrics(expiration: int | None, now_shift: int) -> None:
    got = load(metric(system={"cpu": "1"}), expiration=expiration,
               now=NOW + timedelta(seconds=now_shift))
    assert isinstance(got, NodeLoad)
    assert got.usage["cpu"] == 1000


def test_missing_system_usage_reads_as_zero_with_a_note() -> None:
    # Koordinator's SystemUsage is a value struct: a NodeMetric without it (older koordlets,
    # other publishers, Koordinator's own tests) measures the node by its pods alone.
    got = load(pod("a"), metric(system_usage=False, pods=[("default/a", {"cpu": "2500m"})]))
    assert isinstance(got, NodeLoad)
    assert got.usage["cpu"] == 2500
    assert got.usage["memory"] == 0
    assert got.notes == ["NodeMetric n1 has no status.nodeMetric.systemUsage: read as zero (as "
                         "Koordinator does), the node's usage is its pods' alone"]


def test_bad_values_of_gone_pods_are_ignored() -> None:
    got = load(metric(pods=[("default/gone", {"cpu": "-3"})]))
    assert isinstance(got, NodeLoad)
    assert got.usage["cpu"] == 0


def test_no_update_time_is_fine_without_expiry() -> None:
    got = load(metric(updated=None), expiration=None)
    assert isinstance(got, NodeLoad)
    assert got.update_time is None

"""LowNodeLoad's orderings (docs/lownodeload.md): the eviction order of pods on a hot
node (koord priority class, priority, Kubernetes QoS, koord QoS, pod-deletion-cost,
eviction-cost, usage score, creation time) and the weighted node score."""

from __future__ import annotations

from typing import Any

import pytest

from builders import pod
from desched.model.koord import (
    EVICTION_COST_ANNOTATION,
    POD_DELETION_COST_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    QOS_CLASS_LABEL,
)
from desched.plugins.lownodeload.sort import (
    go_div,
    node_score,
    pod_usage_score,
    sort_pods_for_eviction,
)

GUARANTEED = {"containers": [{"name": "c", "image": "i", "resources": {
    "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}
BEST_EFFORT = {"containers": [{"name": "c", "image": "i"}]}
OLD, NEW = "2026-11-01T00:00:00Z", "2026-11-20T00:00:00Z"


def mk(name: str, labels: dict[str, str] | None = None, priority: int | None = None,
       spec: dict[str, Any] | None = None, annotations: dict[str, str] | None = None,
       created: str = OLD) -> Any:
    return pod(name, labels=labels, priority=priority, spec=spec, annotations=annotations,
               created=created)


def koord(cls: str) -> dict[str, str]:
    return {PRIORITY_CLASS_LABEL: cls}


EXCESS = {"cpu": 1000}  # the node is 1000m above its high threshold
WEIGHTS = {"cpu": 1, "memory": 1}

# (id, pod evicted first, pod evicted second, their usage by name; None = no metric).
# Each row ties on every earlier key of the chain, so the key it names decides.
CHAIN: list[tuple[str, Any, Any, dict[str, dict[str, int] | None]]] = [
    ("koord priority class free < batch", mk("a", koord("koord-free")),
     mk("b", koord("koord-batch")), {}),
    ("koord priority class batch < mid", mk("a", koord("koord-batch"), priority=9999),
     mk("b", koord("koord-mid"), priority=1), {}),
    ("koord priority class mid < prod", mk("a", koord("koord-mid")),
     mk("b", koord("koord-prod")), {}),
    ("priority ascending", mk("a", koord("koord-prod"), priority=5),
     mk("b", koord("koord-prod"), priority=10), {}),
    ("missing priority counts as 0", mk("a", koord("koord-prod")),
     mk("b", koord("koord-prod"), priority=1), {}),
    ("kubernetes QoS BestEffort < Burstable",
     mk("a", {**koord("koord-prod"), QOS_CLASS_LABEL: "LS"}, spec=BEST_EFFORT),
     mk("b", {**koord("koord-prod"), QOS_CLASS_LABEL: "LS"}), {}),
    ("kubernetes QoS Burstable < Guaranteed",
     mk("a", {**koord("koord-prod"), QOS_CLASS_LABEL: "LS"}),
     mk("b", {**koord("koord-prod"), QOS_CLASS_LABEL: "LS"}, spec=GUARANTEED), {}),
    ("koord QoS BE < LS", mk("a", {**koord("koord-prod"), QOS_CLASS_LABEL: "BE"}),
     mk("b", {**koord("koord-prod"), QOS_CLASS_LABEL: "LS"}), {}),
    ("koord QoS LS < LSR", mk("a", {**koord("koord-prod"), QOS_CLASS_LABEL: "LS"}),
     mk("b", {**koord("koord-prod"), QOS_CLASS_LABEL: "LSR"}), {}),
    ("koord QoS LSR < LSE", mk("a", {**koord("koord-prod"), QOS_CLASS_LABEL: "LSR"}),
     mk("b", {**koord("koord-prod"), QOS_CLASS_LABEL: "LSE"}), {}),
    ("pod-deletion-cost ascending", mk("a", annotations={POD_DELETION_COST_ANNOTATION: "-10"}),
     mk("b", annotations={POD_DELETION_COST_ANNOTATION: "5"}), {}),
    ("invalid pod-deletion-cost reads 0", mk("a", annotations={POD_DELETION_COST_ANNOTATION: "+9"}),
     mk("b", annotations={POD_DELETION_COST_ANNOTATION: "1"}), {}),
    ("eviction-cost ascending", mk("a", annotations={EVICTION_COST_ANNOTATION: "1"}),
     mk("b", annotations={EVICTION_COST_ANNOTATION: "2147483647"}), {}),
    ("pods with a metric first", mk("a", created=OLD), mk("b", created=NEW),
     {"a": {"cpu": 1}, "b": None}),
    ("usage matching the excess exactly first", mk("a"), mk("b"),
     {"a": {"cpu": 1000}, "b": {"cpu": 1100}}),
    ("then slightly larger", mk("a"), mk("b"), {"a": {"cpu": 1200}, "b": {"cpu": 900}}),
    ("then the largest of the smaller", mk("a"), mk("b"), {"a": {"cpu": 900}, "b": {"cpu": 10}}),
    ("resources not over the threshold do not score", mk("a"), mk("b"),
     {"a": {"cpu": 500, "memory": 1}, "b": {"cpu": 400, "memory": 10**12}}),
    ("newer first", mk("a", created=NEW), mk("b", created=OLD),
     {"a": {"cpu": 100}, "b": {"cpu": 100}}),
]


@pytest.mark.parametrize(("first", "second", "usage"), [row[1:] for row in CHAIN],
                         ids=[row[0] for row in CHAIN])
def test_eviction_order_chain(first: Any, second: Any,
                              usage: dict[str, dict[str, int] | None]) -> None:
    pod_usage = {f"default/{name}": u for name, u in usage.items() if u is not None}
    for order in ([first, second], [second, first]):
        ranked = sort_pods_for_eviction(order, pod_usage, EXCESS, WEIGHTS)
        assert [p.name for p in ranked] == ["a", "b"]


def test_full_ties_keep_the_input_order() -> None:
    pods = [mk(name) for name in "cab"]
    assert [p.name for p in sort_pods_for_eviction(pods, {}, EXCESS, WEIGHTS)] == list("cab")


def test_a_mixed_node_is_ordered_by_the_whole_chain() -> None:
    pods = [
        mk("prod-old", created=OLD),
        mk("batch", spec=BEST_EFFORT),
        mk("free", koord("koord-free"), priority=3500),
        mk("prod-costly", annotations={EVICTION_COST_ANNOTATION: "100"}),
        mk("prod-match"),
        mk("prod-new", created=NEW),
    ]
    usage = {"default/prod-old": {"cpu": 300}, "default/prod-match": {"cpu": 1000},
             "default/prod-new": {"cpu": 300}, "default/prod-costly": {"cpu": 1000}}
    ranked = sort_pods_for_eviction(pods, usage, EXCESS, WEIGHTS)
    assert [p.name for p in ranked] == ["free", "batch", "prod-match", "prod-new", "prod-old",
                                        "prod-costly"]


@pytest.mark.parametrize(("usage", "excess", "weights", "score"), [
    ({"cpu": 1000}, {"cpu": 1000}, {"cpu": 1}, 2.0),
    ({"cpu": 2000}, {"cpu": 1000}, {"cpu": 1}, 1.5),
    ({"cpu": 500}, {"cpu": 1000}, {"cpu": 1}, 0.5),
    ({"cpu": 0}, {"cpu": 1000}, {"cpu": 1}, 0.0),
    # weighted over the over-resources
    ({"cpu": 1000, "memory": 50}, {"cpu": 1000, "memory": 100}, {"cpu": 3, "memory": 1},
     (2.0 * 3 + 0.5) / 4),
    # a resource that is not over has no weight here
    ({"cpu": 500, "memory": 100}, {"cpu": 1000}, {"cpu": 1}, 0.5),
    ({"cpu": 500}, {"cpu": 1000}, {}, 0.0),
])
def test_pod_usage_score(usage: dict[str, int], excess: dict[str, int], weights: dict[str, int],
                         score: float) -> None:
    assert pod_usage_score(usage, excess, weights) == pytest.approx(score)


@pytest.mark.parametrize(("usage", "capacity", "weights", "score"), [
    ({"cpu": 5000, "memory": 0}, {"cpu": 10000, "memory": 100}, {"cpu": 1, "memory": 1}, 250),
    ({"cpu": 5000, "memory": 100}, {"cpu": 10000, "memory": 100}, {"cpu": 1, "memory": 1}, 750),
    # capped at the capacity; integer per-mille
    ({"cpu": 20000}, {"cpu": 10000}, {"cpu": 1}, 1000),
    ({"cpu": 1}, {"cpu": 3}, {"cpu": 1}, 333),
    # a resource without weight does not count; a zero capacity scores 0 but keeps its weight
    ({"cpu": 5000, "pods": 100}, {"cpu": 10000, "pods": 110}, {"cpu": 1}, 500),
    ({"cpu": 5000, "gpu": 1}, {"cpu": 10000}, {"cpu": 1, "gpu": 1}, 250),
    ({"cpu": 5000}, {"cpu": 10000}, {}, 0),
    ({"cpu": 5000, "memory": 30}, {"cpu": 10000, "memory": 100}, {"cpu": 3, "memory": 1}, 450),
])
def test_node_score(usage: dict[str, int], capacity: dict[str, int], weights: dict[str, int],
                    score: int) -> None:
    assert node_score(usage, capacity, weights) == score


@pytest.mark.parametrize(("a", "b", "q"), [(7, 2, 3), (-7, 2, -3), (7, -2, -3), (-7, -2, 3)])
def test_go_div_truncates_toward_zero(a: int, b: int, q: int) -> None:
    assert go_div(a, b) == q

"""Koordinator's pod and node classification: priority class, koord
QoS, the eviction-cost and pod-deletion-cost annotations, raw allocatable."""

from __future__ import annotations

from typing import Any

import pytest

from builders import node, pod
from desched.model.koord import (
    EVICTION_COST_ANNOTATION,
    POD_DELETION_COST_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    QOS_CLASS_LABEL,
    RAW_ALLOCATABLE_ANNOTATION,
    eviction_cost,
    is_prod,
    koord_qos_class,
    pod_deletion_cost,
    priority_class,
    priority_class_from_priority,
)

GUARANTEED = {"containers": [{"name": "c", "image": "i", "resources": {
    "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}
BEST_EFFORT = {"containers": [{"name": "c", "image": "i"}]}


def mk(labels: dict[str, str] | None = None, priority: int | None = None,
       spec: dict[str, Any] | None = None, qos: str = "") -> Any:
    """A Burstable pod unless `spec` or `qos` (status.qosClass) says otherwise."""
    return pod("p", labels=labels, priority=priority, spec=spec,
               status={"qosClass": qos} if qos else None)


@pytest.mark.parametrize(("priority", "expected"), [
    (None, ""), (9000, "koord-prod"), (9999, "koord-prod"), (10000, ""), (8999, ""),
    (7000, "koord-mid"), (7999, "koord-mid"), (5000, "koord-batch"), (5999, "koord-batch"),
    (3000, "koord-free"), (3999, "koord-free"), (2999, ""), (0, ""), (-1, ""),
])
def test_priority_class_ranges(priority: int | None, expected: str) -> None:
    assert priority_class_from_priority(priority) == expected


@pytest.mark.parametrize(("labels", "priority", "spec", "qos", "expected"), [
    # the label wins over spec.priority
    ({PRIORITY_CLASS_LABEL: "koord-batch"}, 9500, None, "", "koord-batch"),
    ({PRIORITY_CLASS_LABEL: "koord-free"}, None, None, "", "koord-free"),
    # an unknown label value gives none, then the koord QoS decides (Burstable -> LS -> prod)
    ({PRIORITY_CLASS_LABEL: "gold"}, 5500, None, "", "koord-prod"),
    ({PRIORITY_CLASS_LABEL: "gold"}, None, BEST_EFFORT, "", "koord-batch"),
    # no label: the priority range
    (None, 7100, None, "", "koord-mid"),
    (None, 3100, GUARANTEED, "", "koord-free"),
    # priority outside every range: derived from the koord QoS
    (None, 100, None, "", "koord-prod"),
    (None, None, GUARANTEED, "", "koord-prod"),
    (None, None, BEST_EFFORT, "", "koord-batch"),
    (None, None, None, "BestEffort", "koord-batch"),
    # a koord QoS label counts too
    ({QOS_CLASS_LABEL: "BE"}, None, GUARANTEED, "", "koord-batch"),
    ({QOS_CLASS_LABEL: "SYSTEM"}, None, BEST_EFFORT, "", "koord-prod"),
    ({QOS_CLASS_LABEL: "LSE"}, 2_000_000_000, None, "", "koord-prod"),
], ids=["label over priority", "label free", "unknown label, burstable",
        "unknown label, best effort", "mid range", "free range", "out of range burstable",
        "guaranteed", "best effort", "status qosClass", "qos label BE", "qos label SYSTEM",
        "qos label LSE"])
def test_priority_class(labels: dict[str, str] | None, priority: int | None,
                        spec: dict[str, Any] | None, qos: str, expected: str) -> None:
    p = mk(labels, priority, spec, qos)
    assert priority_class(p) == expected
    assert is_prod(p) == (expected == "koord-prod")


@pytest.mark.parametrize(("labels", "spec", "qos", "expected"), [
    ({QOS_CLASS_LABEL: "LSE"}, BEST_EFFORT, "", "LSE"),
    ({QOS_CLASS_LABEL: "SYSTEM"}, None, "", "SYSTEM"),
    ({QOS_CLASS_LABEL: "BE"}, GUARANTEED, "", "BE"),
    ({QOS_CLASS_LABEL: "be"}, GUARANTEED, "", "LSR"),  # case-sensitive: invalid, so Kubernetes'
    (None, GUARANTEED, "", "LSR"),
    (None, None, "", "LS"),
    (None, BEST_EFFORT, "", "BE"),
    (None, BEST_EFFORT, "Guaranteed", "LSR"),  # status.qosClass wins over the spec
])
def test_koord_qos_class(labels: dict[str, str] | None, spec: dict[str, Any] | None, qos: str,
                         expected: str) -> None:
    assert koord_qos_class(mk(labels, None, spec, qos)) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, 0), ("", 0), ("0", 0), ("10", 10), ("-5", -5), ("-0", 0), ("-08", -8),
    ("+10", 0), ("008", 0), ("00", 0), ("2147483647", 2147483647), ("2147483648", 0),
    ("-2147483648", -2147483648), ("-2147483649", 0), ("1.5", 0), ("1_0", 0), (" 1", 0),
    ("abc", 0), ("1e3", 0),
])
def test_cost_annotations(value: str | None, expected: int) -> None:
    for key, read in ((EVICTION_COST_ANNOTATION, eviction_cost),
                      (POD_DELETION_COST_ANNOTATION, pod_deletion_cost)):
        p = pod("p", annotations={key: value} if value is not None else None)
        assert read(p) == expected, (key, value)


@pytest.mark.parametrize(("annotation", "expected"), [
    (None, {"cpu": 8000, "memory": 16 * 2**30, "pods": 110}),
    # the annotation replaces allocatable as a whole: pods is gone
    ('{"cpu": "4", "memory": "8Gi"}', {"cpu": 4000, "memory": 8 * 2**30}),
    ('{"cpu": 2}', {"cpu": 2000}),
    # unparsable: allocatable
    ("{not json", {"cpu": 8000, "memory": 16 * 2**30, "pods": 110}),
    ('{"cpu": "lots"}', {"cpu": 8000, "memory": 16 * 2**30, "pods": 110}),
    ('["cpu"]', {"cpu": 8000, "memory": 16 * 2**30, "pods": 110}),
])
def test_raw_allocatable(annotation: str | None, expected: dict[str, int]) -> None:
    from desched.model.koord import raw_allocatable
    from desched.model.meta import ObjectMeta

    n = node("n1", cpu="8", memory="16Gi")
    if annotation is not None:
        n.metadata = ObjectMeta(name="n1", annotations={RAW_ALLOCATABLE_ANNOTATION: annotation})
    assert raw_allocatable(n) == expected

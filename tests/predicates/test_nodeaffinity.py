from __future__ import annotations

from typing import Any

import pytest

from desched.model.pod import NodeSelectorTerm
from desched.predicates.nodeaffinity import (
    has_preferred_node_affinity,
    has_required_node_affinity,
    node_selector_term_matches,
    preferred_weigher,
    required_affinity_matcher,
)

LABELS = {"zone": "a", "gen": "5", "disk": "ssd", "odd": "abc"}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def name_field(operator: str, *values: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ({}, False),  # an empty term selects nothing
        ({"matchExpressions": [expr("zone", "In", "a", "b")]}, True),
        ({"matchExpressions": [expr("zone", "In", "b")]}, False),
        ({"matchExpressions": [expr("missing", "In", "a")]}, False),
        ({"matchExpressions": [expr("zone", "NotIn", "b")]}, True),
        ({"matchExpressions": [expr("zone", "NotIn", "a")]}, False),
        ({"matchExpressions": [expr("missing", "NotIn", "a")]}, True),
        ({"matchExpressions": [expr("zone", "Exists")]}, True),
        ({"matchExpressions": [expr("missing", "Exists")]}, False),
        ({"matchExpressions": [expr("missing", "DoesNotExist")]}, True),
        ({"matchExpressions": [expr("zone", "DoesNotExist")]}, False),
        ({"matchExpressions": [expr("gen", "Gt", "4")]}, True),
        ({"matchExpressions": [expr("gen", "Gt", "5")]}, False),
        ({"matchExpressions": [expr("gen", "Gt", "-10")]}, True),
        ({"matchExpressions": [expr("gen", "Lt", "6")]}, True),
        ({"matchExpressions": [expr("gen", "Lt", "+6")]}, True),
        ({"matchExpressions": [expr("gen", "Lt", "5")]}, False),
        # Non-integer label value, missing label, bad requirement values: no match.
        ({"matchExpressions": [expr("odd", "Gt", "1")]}, False),
        ({"matchExpressions": [expr("missing", "Gt", "1")]}, False),
        ({"matchExpressions": [expr("gen", "Gt", "one")]}, False),
        ({"matchExpressions": [expr("gen", "Gt", "1.5")]}, False),
        ({"matchExpressions": [expr("gen", "Gt", "1", "2")]}, False),
        ({"matchExpressions": [expr("gen", "Lt", "99999999999999999999")]}, False),
        # Invalid requirements make the whole term match nothing.
        ({"matchExpressions": [expr("zone", "In")]}, False),
        ({"matchExpressions": [expr("zone", "Exists", "a")]}, False),
        ({"matchExpressions": [expr("zone", "NotIn")]}, False),
        # Expressions are ANDed.
        ({"matchExpressions": [expr("zone", "In", "a"), expr("disk", "In", "ssd")]}, True),
        ({"matchExpressions": [expr("zone", "In", "a"), expr("disk", "In", "hdd")]}, False),
        # matchFields: metadata.name with In/NotIn and exactly one value.
        ({"matchFields": [name_field("In", "node-1")]}, True),
        ({"matchFields": [name_field("In", "node-2")]}, False),
        ({"matchFields": [name_field("NotIn", "node-2")]}, True),
        ({"matchFields": [name_field("NotIn", "node-1")]}, False),
        ({"matchFields": [name_field("In", "node-1", "node-2")]}, False),
        ({"matchFields": [name_field("Exists")]}, False),
        # Fields and expressions together are ANDed.
        ({"matchExpressions": [expr("zone", "In", "a")],
          "matchFields": [name_field("In", "node-1")]}, True),
        ({"matchExpressions": [expr("zone", "In", "b")],
          "matchFields": [name_field("In", "node-1")]}, False),
        ({"matchExpressions": [expr("zone", "In", "a")],
          "matchFields": [name_field("In", "node-2")]}, False),
    ],
)
def test_node_selector_term(make: Any, make_node: Any, term: dict[str, Any],
                            expected: bool) -> None:
    node = make_node("node-1", labels=LABELS)
    assert node_selector_term_matches(make(term, NodeSelectorTerm), node) is expected


def test_gt_rejects_what_go_parseint_rejects(make: Any, make_node: Any) -> None:
    term = make({"matchExpressions": [expr("gen", "Gt", "1")]}, NodeSelectorTerm)
    for value, expected in [("2", True), ("+2", True), (" 2", False), ("2_0", False),
                            ("٣", False), ("0", False)]:
        node = make_node("n", labels={"gen": value})
        assert node_selector_term_matches(term, node) is expected, value


def test_match_fields_ignored_for_a_nameless_node(make: Any, make_node: Any) -> None:
    # Upstream builds no field set for a node without a name, and then skips matchFields.
    term = make({"matchFields": [name_field("In", "node-1")]}, NodeSelectorTerm)
    assert node_selector_term_matches(term, make_node("", labels=LABELS)) is True
    both = make({"matchExpressions": [expr("zone", "In", "b")],
                 "matchFields": [name_field("In", "node-1")]}, NodeSelectorTerm)
    assert node_selector_term_matches(both, make_node("", labels=LABELS)) is False


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                             {"nodeSelectorTerms": list(terms)}}}


ZONE_A = {"matchExpressions": [expr("zone", "In", "a")]}
ZONE_B = {"matchExpressions": [expr("zone", "In", "b")]}
SSD = {"matchExpressions": [expr("disk", "In", "ssd")]}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, True),
        ({"nodeSelector": {"zone": "a"}}, True),
        ({"nodeSelector": {"zone": "a", "disk": "ssd"}}, True),
        ({"nodeSelector": {"zone": "b"}}, False),
        ({"nodeSelector": {"missing": ""}}, False),
        ({"affinity": required(ZONE_A)}, True),
        ({"affinity": required(ZONE_B)}, False),
        # Terms are ORed.
        ({"affinity": required(ZONE_B, SSD)}, True),
        ({"affinity": required(ZONE_B, {})}, False),
        # A required selector without terms matches nothing.
        ({"affinity": required()}, False),
        # nodeSelector AND affinity.
        ({"nodeSelector": {"zone": "a"}, "affinity": required(ZONE_B)}, False),
        ({"nodeSelector": {"zone": "b"}, "affinity": required(ZONE_A)}, False),
        ({"nodeSelector": {"zone": "a"}, "affinity": required(ZONE_A)}, True),
        # Only preferred terms: no requirement.
        ({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": ZONE_B}]}}}, True),
        ({"affinity": {"podAntiAffinity": {}}}, True),
    ],
)
def test_required_affinity(make_pod: Any, make_node: Any, spec: dict[str, Any],
                           expected: bool) -> None:
    pod = make_pod(**spec)
    node = make_node("node-1", labels=LABELS)
    assert required_affinity_matcher(pod)(node) is expected


def test_required_matcher_reused_across_nodes(make_pod: Any, make_node: Any) -> None:
    match = required_affinity_matcher(make_pod(affinity=required(ZONE_B, SSD)))
    nodes = [make_node("n1", labels={"zone": "a"}), make_node("n2", labels={"zone": "b"}),
             make_node("n3", labels={"disk": "ssd"})]
    assert [match(n) for n in nodes] == [False, True, True]


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": term} for w, term in weighted]}}


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        (None, 0),
        (preferred(), 0),
        (preferred((10, ZONE_A)), 10),
        (preferred((10, ZONE_B)), 0),
        (preferred((10, ZONE_A), (5, {"matchExpressions": [expr("gen", "Gt", "3")]}),
                   (7, ZONE_B)), 15),
        (preferred((10, ZONE_A), (3, SSD)), 13),
        (preferred((4, {})), 0),  # an empty preference matches nothing
        (preferred((2, {"matchFields": [name_field("In", "node-1")]})), 2),
    ],
)
def test_preferred_weight(make_pod: Any, make_node: Any, affinity: dict[str, Any] | None,
                          expected: int) -> None:
    pod = make_pod(affinity=affinity) if affinity is not None else make_pod()
    node = make_node("node-1", labels=LABELS)
    assert preferred_weigher(pod)(node) == expected


@pytest.mark.parametrize(
    ("spec", "has_required", "has_preferred"),
    [
        ({}, False, False),
        ({"nodeSelector": {"zone": "a"}}, False, False),
        ({"affinity": {}}, False, False),
        ({"affinity": {"nodeAffinity": {}}}, False, False),
        ({"affinity": required()}, True, False),
        ({"affinity": required(ZONE_A)}, True, False),
        ({"affinity": preferred()}, False, False),
        ({"affinity": preferred((1, ZONE_A))}, False, True),
        ({"affinity": {"nodeAffinity": {
            **required(ZONE_A)["nodeAffinity"], **preferred((1, ZONE_A))["nodeAffinity"]}}},
         True, True),
    ],
)
def test_has_node_affinity(make_pod: Any, spec: dict[str, Any], has_required: bool,
                           has_preferred: bool) -> None:
    pod = make_pod(**spec)
    assert has_required_node_affinity(pod) is has_required
    assert has_preferred_node_affinity(pod) is has_preferred

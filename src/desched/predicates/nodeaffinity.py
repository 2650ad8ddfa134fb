"""Node selectors and node affinity, matched as component-helpers' nodeaffinity package does.

Terms are compiled to closures once per call so that a caller checking one pod against many nodes
(`required_affinity_matcher`, `preferred_weigher`) pays the parsing once. Nothing is cached across
calls: the affinity structs are not hashable and id()-keyed caches would outlive them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from desched.model.node import Node
from desched.model.pod import NodeSelectorRequirement, NodeSelectorTerm, Pod

NodeMatcher = Callable[[Node], bool]
_LabelCheck = Callable[[Mapping[str, str]], bool]
_FieldCheck = Callable[[str], bool]

# strconv.ParseInt(s, 10, 64): optional sign, ASCII digits only (Python's int() is laxer).
_INT = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NAME_FIELD = "metadata.name"


def _parse_int64(text: str) -> int | None:
    if _INT.fullmatch(text) is None:
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _always(_: Node) -> bool:
    return True


def _never(_: Node) -> bool:
    return False


def _label_check(req: NodeSelectorRequirement) -> _LabelCheck | None:
    """One matchExpressions requirement, or None when labels.NewRequirement would reject it
    (upstream then treats the whole term as matching nothing)."""
    key, op, values = req.key, req.operator, req.values
    if not key:
        return None
    if op in ("In", "NotIn"):
        if not values:
            return None
        allowed = frozenset(values)
        if op == "In":
            return lambda labels: labels.get(key) in allowed
        return lambda labels: labels.get(key) not in allowed
    if op in ("Exists", "DoesNotExist"):
        if values:
            return None
        if op == "Exists":
            return lambda labels: key in labels
        return lambda labels: key not in labels
    if op in ("Gt", "Lt"):
        bound = _parse_int64(values[0]) if len(values) == 1 else None
        if bound is None:
            return None
        greater = op == "Gt"

        def compare(labels: Mapping[str, str]) -> bool:
            text = labels.get(key)
            if text is None:
                return False
            value = _parse_int64(text)
            if value is None:
                return False
            return value > bound if greater else value < bound

        return compare
    return None


def _field_check(req: NodeSelectorRequirement) -> _FieldCheck | None:
    """One matchFields requirement: In/NotIn with exactly one value. A node's only field is
    metadata.name; any other key reads as "" (fields.Set.Get of a missing key)."""
    if req.operator not in ("In", "NotIn") or len(req.values) != 1:
        return None
    want = req.values[0]
    by_name = req.key == _NAME_FIELD
    if req.operator == "In":
        return lambda name: (name if by_name else "") == want
    return lambda name: (name if by_name else "") != want


def compile_term(term: NodeSelectorTerm) -> NodeMatcher:
    """A matcher for one NodeSelectorTerm: its requirements ANDed; an empty term or one with an
    invalid requirement matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return _never
    label_checks: list[_LabelCheck] = []
    for req in term.match_expressions:
        check = _label_check(req)
        if check is None:
            return _never
        label_checks.append(check)
    field_checks: list[_FieldCheck] = []
    for req in term.match_fields:
        field = _field_check(req)
        if field is None:
            return _never
        field_checks.append(field)

    def match(node: Node) -> bool:
        labels = node.metadata.labels
        for check in label_checks:
            if not check(labels):
                return False
        # Upstream skips matchFields for a node without a name (an empty field set).
        name = node.metadata.name
        if name:
            for field in field_checks:
                if not field(name):
                    return False
        return True

    return match


def node_selector_term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    return compile_term(term)(node)


def has_required_node_affinity(pod: Pod) -> bool:
    """requiredDuringSchedulingIgnoredDuringExecution is set (even with no terms)."""
    affinity = pod.spec.affinity
    return (affinity is not None and affinity.node_affinity is not None
            and affinity.node_affinity.required_during_scheduling_ignored_during_execution
            is not None)


def has_preferred_node_affinity(pod: Pod) -> bool:
    """At least one preferredDuringSchedulingIgnoredDuringExecution term."""
    affinity = pod.spec.affinity
    return (affinity is not None and affinity.node_affinity is not None
            and bool(affinity.node_affinity.preferred_during_scheduling_ignored_during_execution))


def required_affinity_matcher(pod: Pod) -> NodeMatcher:
    """GetRequiredNodeAffinity(pod).Match as a reusable matcher: spec.nodeSelector (every label
    equal) AND the required node affinity terms (ORed; a selector with no terms matches nothing)."""
    selector = tuple(pod.spec.node_selector.items())
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    required = (node_affinity.required_during_scheduling_ignored_during_execution
                if node_affinity is not None else None)
    if not selector and required is None:
        return _always
    terms = ([compile_term(t) for t in required.node_selector_terms]
             if required is not None else [])

    def match(node: Node) -> bool:
        labels = node.metadata.labels
        for key, value in selector:
            if labels.get(key) != value:
                return False
        if required is None:
            return True
        return any(term(node) for term in terms)

    return match


def preferred_weigher(pod: Pod) -> Callable[[Node], int]:
    """A function giving the sum of the weights of the pod's preferred terms that match a node."""
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    preferred = (node_affinity.preferred_during_scheduling_ignored_during_execution
                 if node_affinity is not None else ())
    weighted = [(compile_term(p.preference), p.weight) for p in preferred]

    def weigh(node: Node) -> int:
        return sum(weight for term, weight in weighted if term(node))

    return weigh

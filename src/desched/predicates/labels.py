"""Label selectors: metav1.LabelSelector matching and the string syntax of labels.Parse."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from desched.model.meta import LabelSelector

Matcher = Callable[[Mapping[str, str]], bool]


class SelectorError(ValueError):
    """A selector that cannot be converted (upstream: LabelSelectorAsSelector / labels.Parse)."""


def _match_all(_: Mapping[str, str]) -> bool:
    return True


def _match_none(_: Mapping[str, str]) -> bool:
    return False


_VALID_OPS = {"In", "NotIn", "Exists", "DoesNotExist"}


def _equals(key: str, value: str) -> Matcher:
    return lambda labels: labels.get(key) == value


def _not_equals(key: str, value: str) -> Matcher:
    return lambda labels: labels.get(key) != value


def _in(key: str, values: frozenset[str]) -> Matcher:
    return lambda labels: labels.get(key) in values


def _not_in(key: str, values: frozenset[str]) -> Matcher:
    # A missing key is "not in" any set, as Kubernetes selectors treat it.
    return lambda labels: labels.get(key) not in values


def _exists(key: str) -> Matcher:
    return lambda labels: key in labels


def _absent(key: str) -> Matcher:
    return lambda labels: key not in labels


def _all(checks: list[Matcher]) -> Matcher:
    if not checks:
        return _match_all
    if len(checks) == 1:
        return checks[0]
    return lambda labels: all(check(labels) for check in checks)


def compile_selector(selector: LabelSelector | None) -> Matcher:
    """A matcher for a LabelSelector. None matches nothing and an empty selector everything,
    as metav1.LabelSelectorAsSelector does."""
    if selector is None:
        return _match_none
    checks: list[Matcher] = [_equals(k, v) for k, v in (selector.match_labels or {}).items()]
    for req in selector.match_expressions or []:
        op = req.operator
        if op not in _VALID_OPS:
            raise SelectorError(f'"{op}" is not a valid label selector operator')
        if op in ("In", "NotIn") and not req.values:
            raise SelectorError("values: Invalid value: []string(nil): for 'in', 'notin' "
                                "operators, values set can't be empty")
        if op in ("Exists", "DoesNotExist") and req.values:
            raise SelectorError("values: Invalid value: for 'exists', 'doesnotexist' operators, "
                                "values set must be empty")
        values = frozenset(req.values)
        if op == "In":
            checks.append(_in(req.key, values))
        elif op == "NotIn":
            checks.append(_not_in(req.key, values))
        elif op == "Exists":
            checks.append(_exists(req.key))
        else:
            checks.append(_absent(req.key))
    return _all(checks)


def selector_is_empty(selector: LabelSelector | None) -> bool:
    return selector is None or (not selector.match_labels and not selector.match_expressions)


_TOKEN = re.compile(r"\s*(!=|==|=|!|,|\(|\)|[^\s!=,()]+)")


def parse_selector_string(text: str) -> Matcher:
    """labels.Parse: `a=b,c!=d,e in (x,y),f notin (z),g,!h`. An empty string selects everything."""
    tokens = [t for t in _TOKEN.findall(text) if t]
    pos = 0
    checks: list[Matcher] = []

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise SelectorError(f"unable to parse requirement: found '', expected: identifier "
                                f"in selector {text!r}")
        pos += 1
        return tokens[pos - 1]

    def value() -> str:
        return take() if pos < len(tokens) and tokens[pos] != "," else ""

    while pos < len(tokens):
        tok = take()
        if tok == "!":
            checks.append(_absent(take()))
        elif pos >= len(tokens) or tokens[pos] == ",":
            checks.append(_exists(tok))
        else:
            op = take()
            if op in ("=", "=="):
                checks.append(_equals(tok, value()))
            elif op == "!=":
                checks.append(_not_equals(tok, value()))
            elif op in ("in", "notin"):
                if take() != "(":
                    raise SelectorError(f"expected '(' after {op} in selector {text!r}")
                values: set[str] = set()
                while (item := take()) != ")":
                    if item != ",":
                        values.add(item)
                matcher = _in if op == "in" else _not_in
                checks.append(matcher(tok, frozenset(values)))
            else:
                raise SelectorError(f"unable to parse requirement: unexpected {op!r} "
                                    f"in selector {text!r}")
        if pos < len(tokens):
            if tokens[pos] != ",":
                raise SelectorError(f"found {tokens[pos]!r}, expected: ',' in selector {text!r}")
            pos += 1
    return _all(checks)

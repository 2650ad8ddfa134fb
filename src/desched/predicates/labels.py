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


def compile_selector(selector: LabelSelector | None) -> Matcher:
    """A matcher for a LabelSelector. None matches nothing and an empty selector everything,
    as metav1.LabelSelectorAsSelector does."""
    if selector is None:
        return _match_none
    checks: list[Callable[[Mapping[str, str]], bool]] = []
    for key, val in (selector.match_labels or {}).items():
        checks.append(lambda labels, k=key, v=val: labels.get(k) == v)
    for req in selector.match_expressions or []:
        op = req.operator
        if op not in _VALID_OPS:
            raise SelectorError(f'"{op}" is not a valid label selector operator')
        if op in ("In", "NotIn") and not req.values:
            raise SelectorError(f"values: Invalid value: []string(nil): for 'in', 'notin' operators, "
                                f"values set can't be empty")
        if op in ("Exists", "DoesNotExist") and req.values:
            raise SelectorError("values: Invalid value: for 'exists', 'doesnotexist' operators, "
                                "values set must be empty")
        values = frozenset(req.values)
        key = req.key
        if op == "In":
            checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
        elif op == "NotIn":
            checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif op == "Exists":
            checks.append(lambda labels, k=key: k in labels)
        else:
            checks.append(lambda labels, k=key: k not in labels)
    if not checks:
        return _match_all
    if len(checks) == 1:
        return checks[0]
    return lambda labels: all(check(labels) for check in checks)


def selector_is_empty(selector: LabelSelector | None) -> bool:
    return selector is None or (not selector.match_labels and not selector.match_expressions)


_TOKEN = re.compile(r"\s*(!=|==|=|!|,|\(|\)|[^\s!=,()]+)")


def parse_selector_string(text: str) -> Matcher:
    """labels.Parse: `a=b,c!=d,e in (x,y),f notin (z),g,!h`. An empty string selects everything."""
    tokens = [t for t in _TOKEN.findall(text) if t]
    pos = 0
    checks: list[Callable[[Mapping[str, str]], bool]] = []

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise SelectorError(f"unable to parse requirement: found '', expected: identifier "
                                f"in selector {text!r}")
        pos += 1
        return tokens[pos - 1]

    while pos < len(tokens):
        tok = take()
        if tok == "!":
            key = take()
            checks.append(lambda labels, k=key: k not in labels)
        else:
            key = tok
            if pos >= len(tokens) or tokens[pos] == ",":
                checks.append(lambda labels, k=key: k in labels)
            else:
                op = take()
                if op in ("=", "=="):
                    val = take() if pos < len(tokens) and tokens[pos] != "," else ""
                    checks.append(lambda labels, k=key, v=val: labels.get(k) == v)
                elif op == "!=":
                    val = take() if pos < len(tokens) and tokens[pos] != "," else ""
                    checks.append(lambda labels, k=key, v=val: labels.get(k) != v)
                elif op in ("in", "notin"):
                    if take() != "(":
                        raise SelectorError(f"expected '(' after {op} in selector {text!r}")
                    values: set[str] = set()
                    while True:
                        t = take()
                        if t == ")":
                            break
                        if t != ",":
                            values.add(t)
                    vs = frozenset(values)
                    if op == "in":
                        checks.append(lambda labels, k=key, vs=vs: labels.get(k) in vs)
                    else:
                        checks.append(lambda labels, k=key, vs=vs: labels.get(k) not in vs)
                else:
                    raise SelectorError(f"unable to parse requirement: unexpected {op!r} "
                                        f"in selector {text!r}")
        if pos < len(tokens):
            if tokens[pos] != ",":
                raise SelectorError(f"found {tokens[pos]!r}, expected: ',' in selector {text!r}")
            pos += 1
    if not checks:
        return _match_all
    return lambda labels: all(check(labels) for check in checks)

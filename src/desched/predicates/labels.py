"""Label selectors: metav1.LabelSelector matching and the string syntax of labels.Parse."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from desched.errors import quote
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


# apimachinery's validation.IsQualifiedName (label keys) and IsValidLabelValue, which
# labels.NewRequirement applies to every requirement of a selector.
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
             "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
             "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_PREFIX_MSG = ("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
               "characters, '-' or '.', and must start and end with an alphanumeric character "
               "(e.g. 'example.com', regex used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
              "'_' or '.', and must start and end with an alphanumeric character (e.g. "
              "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
              "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def _quoted(text: str) -> str:
    return quote(text)


def label_key_problem(key: str) -> str | None:
    """IsQualifiedName's first complaint about a label key, or None."""
    parts = key.split("/")
    if len(parts) > 2:
        return ("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                "'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain "
                "prefix and '/' (e.g. 'example.com/MyName')")
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "prefix part must be non-empty"
        if len(prefix) > 253:
            return "prefix part must be no more than 253 characters"
        if not _SUBDOMAIN.fullmatch(prefix):
            return _PREFIX_MSG
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME.fullmatch(name):
        return _NAME_MSG
    return None


def label_value_problem(value: str) -> str | None:
    """IsValidLabelValue's first complaint, or None."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if value and not _NAME.fullmatch(value):
        return _VALUE_MSG
    return None


def _check_requirement(key: str, values: Iterable[str]) -> None:
    problem = label_key_problem(key)
    if problem is not None:
        raise SelectorError(f"key: Invalid value: {_quoted(key)}: {problem}")
    for i, value in enumerate(values):
        problem = label_value_problem(value)
        if problem is not None:
            raise SelectorError(f"values[{i}]: Invalid value: {_quoted(value)}: {problem}")


def compile_selector(selector: LabelSelector | None, validate: bool = False) -> Matcher:
    """A matcher for a LabelSelector. None matches nothing and an empty selector everything,
    as metav1.LabelSelectorAsSelector does. `validate` checks keys and values as
    labels.NewRequirement does (policies; a snapshot's objects were validated by the API
    server, and their selectors are compiled in hot loops)."""
    if selector is None:
        return _match_none
    if validate:
        for key, value in (selector.match_labels or {}).items():
            _check_requirement(key, (value,))
    checks: list[Matcher] = [_equals(k, v) for k, v in (selector.match_labels or {}).items()]
    for req in selector.match_expressions or []:
        op = req.operator
        if op not in _VALID_OPS:
            raise SelectorError(f"{_quoted(op)} is not a valid label selector operator")
        if validate:
            _check_requirement(req.key, req.values)
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


def lenient_matcher(selector: LabelSelector | None) -> Matcher | None:
    """A selector's matcher; None for an invalid one, which selects nothing (the API server
    would have refused it)."""
    try:
        return compile_selector(selector)
    except SelectorError:
        return None


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
            key = take()
            _check_requirement(key, ())
            checks.append(_absent(key))
        elif pos >= len(tokens) or tokens[pos] == ",":
            _check_requirement(tok, ())
            checks.append(_exists(tok))
        else:
            op = take()
            if op in ("=", "=="):
                wanted = value()
                _check_requirement(tok, (wanted,))
                checks.append(_equals(tok, wanted))
            elif op == "!=":
                wanted = value()
                _check_requirement(tok, (wanted,))
                checks.append(_not_equals(tok, wanted))
            elif op in ("in", "notin"):
                if take() != "(":
                    raise SelectorError(f"expected '(' after {op} in selector {text!r}")
                values: set[str] = set()
                while (item := take()) != ")":
                    if item != ",":
                        values.add(item)
                _check_requirement(tok, sorted(values))
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

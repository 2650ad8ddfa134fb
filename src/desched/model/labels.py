"""Label selectors: metav1.LabelSelector matching (LabelSelectorAsSelector) and the string syntax
of labels.Parse, ported from apimachinery v0.36.1 (the version descheduler v0.36 builds with;
Koordinator's v0.35.6 words its errors the same): grammar, NewRequirement's checks and messages."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

from desched.errors import quote
from desched.model.meta import LabelSelector

Matcher = Callable[[Mapping[str, str]], bool]


class SelectorError(ValueError):
    """A selector that cannot be converted (upstream: LabelSelectorAsSelector / labels.Parse)."""


def _match_all(_: Mapping[str, str]) -> bool:
    return True


def _match_none(_: Mapping[str, str]) -> bool:
    return False


def _all(checks: list[Matcher]) -> Matcher:
    if not checks:
        return _match_all
    if len(checks) == 1:
        return checks[0]
    return lambda labels: all(check(labels) for check in checks)


# -- apimachinery's content.IsLabelKey / IsLabelValue / IsDNS1123Subdomain ------------------------

_LABEL_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL = re.compile(_LABEL_FMT)
_LABEL_VALUE_FMT = f"({_LABEL_FMT})?"
_DNS_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _DNS_LABEL_FMT + "(\\." + _DNS_LABEL_FMT + ")*"
_SUBDOMAIN = re.compile(_SUBDOMAIN_FMT)
_LABEL_KEY_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                  "end with an alphanumeric character")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """content.RegexError, examples and all (its doubled spaces included)."""
    shown = "".join((" or " if i else "") + f"'{ex}', " for i, ex in enumerate(examples))
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))  # Go's len() counts bytes


def _subdomain_errors(value: str) -> list[str]:
    errs = []
    if _bytes(value) > 253:
        errs.append("must be no more than 253 bytes")
    if not _SUBDOMAIN.fullmatch(value):
        errs.append(_regex_error("a lowercase RFC 1123 subdomain must consist of lower case "
                                 "alphanumeric characters, '-' or '.', and must start and end "
                                 "with an alphanumeric character", _SUBDOMAIN_FMT, "example.com"))
    return errs


def label_key_errors(key: str) -> list[str]:
    """content.IsLabelKey: every complaint about a label key."""
    parts = key.split("/")
    errs: list[str] = []
    key_error = _regex_error(_LABEL_KEY_MSG, _LABEL_FMT, "MyName", "my.name", "123-abc")
    if len(parts) > 2:
        return [f"a valid label key {key_error} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend(f"prefix part {msg}" for msg in _subdomain_errors(parts[0]))
    if not name:
        errs.append("name part must be non-empty")
    elif _bytes(name) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _LABEL.fullmatch(name):
        errs.append(f"name part {key_error}")
    return errs


def label_value_errors(value: str) -> list[str]:
    """content.IsLabelValue: every complaint about a label value."""
    errs = []
    if _bytes(value) > 63:
        errs.append("must be no more than 63 bytes")
    if value and not _LABEL.fullmatch(value):
        errs.append(_regex_error("a valid label must be an empty string or consist of "
                                 "alphanumeric characters, '-', '_' or '.', and must start and "
                                 "end with an alphanumeric character", _LABEL_VALUE_FMT,
                                 "MyValue", "my_value", "12345"))
    return errs


def label_key_problem(key: str) -> str | None:
    """A label key's complaints joined as apimachinery joins them, or None."""
    return "; ".join(label_key_errors(key)) or None


def label_value_problem(value: str) -> str | None:
    """A label value's complaints joined as apimachinery joins them, or None."""
    return "; ".join(label_value_errors(value)) or None


# -- field.Invalid rendering and the aggregate ---------------------------------------------------


def _go_quote(text: str) -> str:
    """Go's %q for the strings a selector holds (printable text; others escaped)."""
    return json.dumps(text, ensure_ascii=False)


def _go_json(values: list[str] | None) -> str:
    """json.Marshal of a []string (nil is null), HTML characters escaped as Go escapes them."""
    if values is None:
        return "null"
    text = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def _invalid(path: str, value: str, detail: str) -> str:
    return f"{path}: Invalid value: {value}: {detail}"


def _aggregate(errs: list[str]) -> str:
    unique = list(dict.fromkeys(errs))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# -- requirements ---------------------------------------------------------------------------------

# selection.Operator values, and binaryOperators as labels.Parse lists them in its errors.
IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "in", "notin", "=", "==", "!="
GREATER, LESS, EXISTS, ABSENT = "gt", "lt", "exists", "!"
_BINARY = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER, LESS)


def _requirement_errors(key: str, op: str, values: list[str] | None,
                        check_strings: bool = True) -> list[str]:
    """labels.NewRequirement with no field path (as both LabelSelectorAsSelector and
    labels.Parse call it): every complaint, in its order. `check_strings` False skips the key and
    value syntax (objects the API server validated)."""
    errs: list[str] = []
    if check_strings and (problem := label_key_problem(key)):
        errs.append(_invalid("key", _go_quote(key), problem))
    count = len(values or ())
    if op in (IN, NOT_IN) and count == 0:
        errs.append(_invalid("values", _go_json(values),
                             "for 'in', 'notin' operators, values set can't be empty"))
    elif op in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS) and count != 1:
        errs.append(_invalid("values", _go_json(values),
                             "exact-match compatibility requires one single value"))
    elif op in (EXISTS, ABSENT) and count != 0:
        errs.append(_invalid("values", _go_json(values),
                             "values set must be empty for exists and does not exist"))
    elif op in (GREATER, LESS):
        if count != 1:
            errs.append(_invalid("values", _go_json(values),
                                 "for 'Gt', 'Lt' operators, exactly one value is required"))
        errs.extend(_invalid(f"values[{i}]", _go_quote(v), "for 'Gt', 'Lt' operators, the value "
                                                           "must be an integer")
                    for i, v in enumerate(values or ()) if _go_int64(v) is None)
    if check_strings:
        for i, value in enumerate(values or ()):
            if problem := label_value_problem(value):
                errs.append(_invalid(f"values[{i}][{key}]", _go_quote(value), problem))
    return errs


_INT = re.compile(r"[+-]?[0-9]+")


def _go_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), None where Go errs."""
    if not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _matcher(key: str, op: str, values: list[str]) -> Matcher:
    if op in (IN, EQUALS, DOUBLE_EQUALS):
        wanted = frozenset(values)
        return lambda labels: key in labels and labels[key] in wanted
    if op in (NOT_IN, NOT_EQUALS):
        # A missing key is "not in" any set, as Kubernetes selectors treat it.
        unwanted = frozenset(values)
        return lambda labels: labels.get(key) not in unwanted
    if op == EXISTS:
        return lambda labels: key in labels
    if op == ABSENT:
        return lambda labels: key not in labels
    bound = int(values[0])

    def compare(labels: Mapping[str, str]) -> bool:
        have = _go_int64(labels[key]) if key in labels else None
        return have is not None and (have > bound if op == GREATER else have < bound)
    return compare


# -- metav1.LabelSelector --------------------------------------------------------------------------

_EXPRESSION_OPS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": ABSENT}


def compile_selector(selector: LabelSelector | None, validate: bool = False) -> Matcher:
    """A matcher for a LabelSelector. None matches nothing and an empty selector everything,
    as metav1.LabelSelectorAsSelector does. `validate` checks keys and values as
    labels.NewRequirement does (policies; a snapshot's objects were validated by the API
    server, and their selectors are compiled in hot loops)."""
    if selector is None:
        return _match_none
    checks: list[Matcher] = []
    for key, value in (selector.match_labels or {}).items():
        errs = _requirement_errors(key, EQUALS, [value], validate)
        if errs:
            raise SelectorError(_aggregate(errs))
        checks.append(_matcher(key, EQUALS, [value]))
    for req in selector.match_expressions or []:
        op = _EXPRESSION_OPS.get(req.operator)
        if op is None:
            raise SelectorError(f"{_go_quote(req.operator)} is not a valid label selector "
                                f"operator")
        values = list(req.values) if req.values else None
        errs = _requirement_errors(req.key, op, values, validate)
        if errs:
            raise SelectorError(_aggregate(errs))
        checks.append(_matcher(req.key, op, values or []))
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



def matcher_unless_empty(selector: LabelSelector | None) -> Matcher | None:
    """A plugin's optional labelSelector: None when it is absent or empty (every pod passes,
    so there is nothing to ask), its matcher otherwise."""
    return None if selector_is_empty(selector) else compile_selector(selector)

# -- labels.Parse ----------------------------------------------------------------------------------

_END, _ERROR, _IDENT = "end of string", "error", "identifier"
_SYMBOLS = {")": ")", ",": ",", "!": "!", "==": "==", "=": "=", ">": ">", "in": IN, "<": "<",
            "!=": "!=", "notin": NOT_IN, "(": "("}
_SPECIAL = frozenset("=!(),><")
_SPACE = frozenset(" \t\r\n")


def _lex(text: str) -> list[tuple[str, str]]:
    """labels.Lexer over the whole string: (token, literal) pairs ending with the end token. A
    NUL character ends the input there, as the Go lexer's zero byte does."""
    pos, items = 0, []

    def read() -> str:
        nonlocal pos
        if pos < len(text):
            pos += 1
            return text[pos - 1]
        return "\0"

    while True:
        ch = read()
        while ch in _SPACE:
            ch = read()
        if ch == "\0":
            items.append((_END, ""))
            return items
        pos -= 1
        buffer, last = "", ("", "")
        if ch in _SPECIAL:
            while (ch := read()) != "\0":
                if ch not in _SPECIAL:
                    pos -= 1
                    break
                buffer += ch
                if buffer in _SYMBOLS:
                    last = (_SYMBOLS[buffer], buffer)
                elif last[0]:
                    pos -= 1
                    break
            items.append(last if last[0] else (_ERROR, f"error expected: keyword found '{buffer}'"))
            continue
        while (ch := read()) != "\0":
            if ch in _SPECIAL or ch in _SPACE:
                pos -= 1
                break
            buffer += ch
        items.append((buffer if buffer in (IN, NOT_IN) else _IDENT, buffer))


class Requirement(NamedTuple):
    key: str
    op: str
    values: list[str]
    empty_set: bool = False  # written as `in ()` / `notin ()`, which labels.Parse reads as ("")


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def peek(self, values: bool = True) -> tuple[str, str]:
        return self._as(self.items[self.pos], values)

    def take(self, values: bool = True) -> tuple[str, str]:
        self.pos += 1
        return self._as(self.items[self.pos - 1], values)

    @staticmethod
    def _as(item: tuple[str, str], values: bool) -> tuple[str, str]:
        # In the values context `in` and `notin` are plain identifiers: `a in (in)`.
        return (_IDENT, item[1]) if values and item[0] in (IN, NOT_IN) else item

    def parse(self) -> list[Requirement]:
        out: list[Requirement] = []
        while True:
            tok, lit = self.peek()
            if tok == _END:
                return out
            if tok not in (_IDENT, "!"):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                out.append(self.requirement())
            except SelectorError as err:
                raise SelectorError(f"unable to parse requirement: {err}") from None
            tok, lit = self.take()
            if tok == _END:
                return out
            if tok != ",":
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self.peek()
            if tok not in (_IDENT, "!"):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        tok, key = self.take()
        op = ""
        if tok == "!":
            op = ABSENT
            tok, key = self.take()
        if tok != _IDENT:
            raise SelectorError(f"found '{key}', expected: identifier")
        problem = label_key_problem(key)
        if problem:  # validated with the parser's nil field path, which Go prints as <nil>
            raise SelectorError(_invalid("<nil>", _go_quote(key), problem))
        if op == ABSENT or self.peek()[0] in (_END, ","):
            # `!key` takes no operator: whatever follows must be a ',' or the end.
            return self._checked(Requirement(key, op or EXISTS, []))
        tok, lit = self.take(values=False)
        ops = {IN: IN, NOT_IN: NOT_IN, "=": EQUALS, "==": DOUBLE_EQUALS, "!=": NOT_EQUALS,
               ">": GREATER, "<": LESS}
        if tok not in ops:
            raise SelectorError(f"found '{lit}', expected: {', '.join(_BINARY)}")
        op = ops[tok]
        if op in (IN, NOT_IN):
            values, empty = self.value_set()
            return self._checked(Requirement(key, op, values, empty))
        return self._checked(Requirement(key, op, [self.exact_value()]))

    @staticmethod
    def _checked(req: Requirement) -> Requirement:
        errs = _requirement_errors(req.key, req.op, req.values)
        if errs:
            raise SelectorError(_aggregate(errs))
        return req

    def value_set(self) -> tuple[list[str], bool]:
        tok, lit = self.take()
        if tok != "(":
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.peek()
        if tok == ")":
            self.take()
            return [""], True
        if tok not in (_IDENT, ","):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.take()[0] != ")":
            raise SelectorError(f"found '{lit}', expected: ')'")
        return sorted(values), False

    def identifiers(self) -> set[str]:
        found: set[str] = set()
        while True:
            tok, lit = self.take()
            if tok == _IDENT:
                found.add(lit)
                nxt, nxt_lit = self.peek()
                if nxt == ")":
                    return found
                if nxt != ",":
                    raise SelectorError(f"found '{nxt_lit}', expected: ',' or ')'")
            elif tok == ",":
                if not found:
                    found.add("")  # "(,"
                nxt = self.peek()[0]
                if nxt == ")":
                    found.add("")  # ",)"
                    return found
                if nxt == ",":
                    found.add("")  # ",,"
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> str:
        if self.peek()[0] in (_END, ","):
            return ""
        tok, lit = self.take()
        if tok != _IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        return lit


def parse_requirements(text: str) -> list[Requirement]:
    """labels.Parse's requirements, in the order written; SelectorError with its message."""
    return _Parser(text).parse()


def parse_selector_string(text: str) -> Matcher:
    """labels.Parse: `a=b,c!=d,e in (x,y),f notin (z),g,!h,n>3`. An empty string selects
    everything."""
    return _all([_matcher(r.key, r.op, r.values) for r in parse_requirements(text)])


def empty_set_warnings(field: str, text: str) -> list[str]:
    """A warning when selector string `text` (the value of `field`) writes `key in ()` or
    `key notin ()`: valid, but labels.Parse reads the empty set as the empty value (""), which
    is rarely what was meant."""
    try:
        empty = [r for r in parse_requirements(text) if r.empty_set]
    except SelectorError:
        return []
    return [f'{field} {quote(text)}: labels.Parse reads "{r.key} {r.op} ()" as "{r.key} {r.op} '
            f'("")", a set holding the empty value; list the values meant, e.g. '
            f'"{r.key} {r.op} (a,b)"' for r in empty]


def format_selector(selector: LabelSelector) -> str:
    """A LabelSelector as kubectl writes one (metav1.FormatLabelSelector): `a=b,c in (x,y)`."""
    parts = [f"{key}={value}" for key, value in sorted((selector.match_labels or {}).items())]
    for req in selector.match_expressions or ():
        values = ",".join(sorted(req.values))
        parts.append({"In": f"{req.key} in ({values})", "NotIn": f"{req.key} notin ({values})",
                      "Exists": req.key, "DoesNotExist": f"!{req.key}"}.get(req.operator, ""))
    return ",".join(parts)

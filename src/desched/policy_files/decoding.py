"""Decoding a policy's parts against their schema: msgspec's type checks, then what Go's decoders
also refuse and msgspec cannot see (metav1.Duration text, TypeMeta strings), with messages that
name the place in the file and say how to fix it where the fix is known.

A message keeps its original words (Go's where desched reproduces them) and gains, on the same
line, the place (` - at `$.profiles[0].pluginConfig[1].args.thresholds.cpu``) and a hint after
`; ` (`a percentage is a number (20, not "20%")`).
"""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec
import msgspec.inspect as mi

from desched.decoding.unknown_fields import info, visit
from desched.model.meta import shared_hook
from desched.policy_files.hints import did_you_mean
from desched.util.duration import DURATION, DurationError, parse_duration_ns


class DecodingError(ValueError):
    """A part of a policy its schema refuses; the message is one line."""


def at(place: str) -> str:
    """The place suffix every decode message carries (msgspec's own notation)."""
    return f" - at `$.{place}`" if place else ""


def join(where: str, rel: str) -> str:
    if not rel:
        return where
    if not where:
        return rel
    return where + rel if rel.startswith("[") else f"{where}.{rel}"


def go_json_kind(value: Any) -> str:
    """How Go's encoding/json names a JSON value's kind in its type errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "null"


def type_meta_error(raw: dict[str, Any]) -> str | None:
    """The error Go's serializer gives when it reads an object's apiVersion and kind
    (json.Unmarshal into an anonymous struct of two strings, keys in sorted order), or None. A
    null is no error: it leaves the string empty."""
    for key in ("apiVersion", "kind"):
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            return (f"couldn't get version/kind; json parse error: json: cannot unmarshal "
                    f"{go_json_kind(value)} into Go struct field .{key} of type string")
    return None


def convert(raw: Any, schema: Any, where: str = "", kind: str = "",
            extra: tuple[str, ...] = ()) -> Any:
    """`raw` decoded into `schema` (strict types; unknown keys as the schema's structs say), and
    every metav1.Duration in it parsed as Go parses it. DecodingError naming the place in the
    file (`where` is the place of `raw`; `kind` prefixes type errors, as args errors name their
    type; `extra`: keys the top of `raw` may hold besides the schema's). An unknown field keeps
    Go's message, which names it from the top of `raw`, and gains the name it misspells."""
    try:
        out = msgspec.convert(raw, schema, dec_hook=shared_hook, str_keys=True)
    except msgspec.ValidationError as err:
        raise DecodingError(explain(str(err), raw, schema, where, kind, extra)) from None
    for place, value, t in visit(raw, info(schema), where):
        if isinstance(t, mi.Metadata) and t.extra == DURATION and isinstance(value, str):
            try:
                parse_duration_ns(value)
            except DurationError as err:
                raise DecodingError(f"{err}{at(place)}") from None
    return out


# -- explaining msgspec's errors ---------------------------------------------------------------

_UNKNOWN = re.compile(r"Object contains unknown field `(?P<field>[^`]*)`(?: - at `\$(?P<at>.*)`)?$")
_KEY = re.compile(r"(?P<body>.*) - at `key` in `\$(?P<at>.*)`$")
_AT = re.compile(r"(?P<body>.*) - at `\$(?P<at>.*)`$")
_STEP = re.compile(r"\.([^.\[]+)|\[([0-9]+|\.\.\.)\]")
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`")
# Go's integer bounds as msgspec words them, and the Go type each belongs to.
_OUT_OF_RANGE = re.compile(r"Expected `int` [<>]= (-?[0-9]+)$")
_GO_INT = {2**31 - 1: "int32", -(2**31): "int32", 2**63 - 1: "int64", -(2**63): "int64",
           2**32 - 1: "uint32"}
_PERCENT = re.compile(r"\s*([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))\s*%\s*")
_NUMBER = re.compile(r"\s*[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\s*")


def explain(text: str, raw: Any, schema: Any, where: str = "", kind: str = "",
            extra: tuple[str, ...] = ()) -> str:
    """msgspec's error `text` about `raw` as one line: Go's wording for an unknown field and an
    integer out of Go's range, msgspec's otherwise, with the place (a map value as its key, not
    `[...]`) and a hint."""
    unknown = _UNKNOWN.match(text)
    if unknown:
        rel, _, tp = _resolve(raw, schema, unknown.group("at") or "")
        field = unknown.group("field")
        known = _field_names(tp) + (list(extra) if not rel else [])
        return (f'strict decoding error: unknown field "{join(rel, field)}"'
                f"{did_you_mean(field, known)}")
    key_error = _KEY.match(text)
    if key_error:
        rel, _, _ = _resolve(raw, schema, key_error.group("at"))
        return f"{_prefixed(kind, key_error.group('body'))} (a key){at(join(where, rel))}"
    located = _AT.match(text)
    body, path = (located.group("body"), located.group("at")) if located else (text, "")
    rel, value, tp = _resolve(raw, schema, path)
    bound = _OUT_OF_RANGE.match(body)
    if bound is not None and int(bound.group(1)) in _GO_INT and rel:
        # Go's encoding/json wording, as the strict decoders report it.
        field = re.sub(r"\[[^\]]*\]", "", rel)
        return (f"json: cannot unmarshal number {value} into Go struct field {kind}.{field} of "
                f"type {_GO_INT[int(bound.group(1))]}{at(join(where, rel))}")
    return f"{_prefixed(kind, body)}{at(join(where, rel))}{_hint(body, value, tp)}"


def _prefixed(kind: str, body: str) -> str:
    return f"{kind}: {body}" if kind else body


def _hint(body: str, value: Any, tp: Any) -> str:
    """How to write what the schema wanted, when the value shows what was meant."""
    expected = _EXPECTED.search(body)
    if expected is None:
        return ""
    want = set(expected.group("want").split(" | "))
    if isinstance(value, str) and want & {"int", "float"}:
        percent = _PERCENT.fullmatch(value)
        if percent:
            return f'; a percentage is a number ({percent.group(1)}, not "{value}")'
        if _NUMBER.fullmatch(value):
            return f'; write the number without quotes ({value.strip()}, not "{value}")'
    if isinstance(value, str) and "bool" in want and value.strip().lower() in ("true", "false"):
        return f'; write {value.strip().lower()} without quotes'
    if isinstance(value, str) and "object" in want and "name" in _field_names(tp):
        # Koordinator's plugin lists hold objects: seed-style `- LowNodeLoad` needs `name:`.
        return f'; write "- name: {value}" (each entry is an object with a name)'
    if isinstance(value, dict) and "str" in want and isinstance(value.get("name"), str):
        # The other way round: a DeschedulerPolicy lists plugin names.
        return f'; write "- {value["name"]}" (each entry is a plugin name)'
    return ""


def _field_names(tp: Any) -> list[str]:
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return [f.encode_name for f in msgspec.structs.fields(tp)]
    return []


def _resolve(raw: Any, schema: Any, path: str) -> tuple[str, Any, Any]:
    """(msgspec's `path` with each `[...]` replaced by the map key whose value fails, the raw
    value there, the schema type there)."""
    rel, value, tp = "", raw, _unwrap(schema, raw)
    for name, index in _STEP.findall(path):
        try:
            if name:
                tp = _struct_fields(tp).get(name)
                value = value[name]
                rel = join(rel, name)
            elif index == "...":
                item_type = _dict_value_type(tp)
                key = _failing_key(value, item_type)
                value, tp = value[key], item_type
                rel = join(rel, str(key))
            else:
                tp = _list_item_type(tp)
                value = value[int(index)]
                rel = f"{rel}[{index}]"
        except (LookupError, TypeError):
            return rel, None, None
        tp = _unwrap(tp, value)
    return rel, value, tp


def _unwrap(tp: Any, value: Any) -> Any:
    """The alternative of an Optional / Union / Annotated type that `value` is meant for."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin is Union or origin is types.UnionType:
            alts = [a for a in get_args(tp) if a is not type(None)]
            tp = next((a for a in alts if _container(a) == _container_of(value)), alts[0])
        else:
            return tp


def _container(tp: Any) -> str:
    origin = get_origin(tp)
    base = origin if origin is not None and origin is not Annotated else tp
    if base is dict or (isinstance(base, type) and issubclass(base, msgspec.Struct)):
        return "object"
    if base is list:
        return "array"
    return "scalar"


def _container_of(value: Any) -> str:
    return "object" if isinstance(value, dict) else "array" if isinstance(value, list) else "scalar"


def _struct_fields(tp: Any) -> dict[str, Any]:
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return {f.encode_name: f.type for f in msgspec.structs.fields(tp)}
    return {}


def _dict_value_type(tp: Any) -> Any:
    return get_args(tp)[1] if get_origin(tp) is dict else Any


def _list_item_type(tp: Any) -> Any:
    return get_args(tp)[0] if get_origin(tp) is list else Any


def _failing_key(mapping: dict[Any, Any], item_type: Any) -> Any:
    """The first key (document order, as msgspec reads) whose value `item_type` refuses."""
    for key, item in mapping.items():
        try:
            msgspec.convert(item, item_type, dec_hook=shared_hook, str_keys=True)
        except msgspec.ValidationError:
            return key
    raise LookupError("no failing value")

"""Decoding plugin args strictly (upstream decodes `args` with a strict codec) and the shared
argument sub-types (namespaces, label selectors, priority thresholds)."""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec

from desched.model.meta import LabelSelector, shared_hook
from desched.predicates.labels import SelectorError, compile_selector


class ArgsError(ValueError):
    pass


# Upstream's Go integer types: a JSON number out of range is a decode error there, not a huge
# Python int here (an int32 threshold nothing can reach). (msgspec cannot bound beyond int64,
# so Go's uint fields keep plain ints and their own checks.)
Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_GO_INT = {2**31 - 1: "int32", -(2**31): "int32", 2**63 - 1: "int64", -(2**63): "int64",
           2**32 - 1: "uint32"}
_OUT_OF_RANGE = re.compile(r"Expected `int` [<>]= (-?[0-9]+)$")
_STEP = re.compile(r"\.([A-Za-z0-9_]+)|\[([0-9]+)\]")


def _lookup(raw: Any, where: str) -> Any:
    """The value at msgspec's path `a.b[0]` in `raw` (None if the path does not lead there)."""
    for name, index in _STEP.findall("." + where):
        try:
            raw = raw[int(index)] if index else raw[name]
        except (LookupError, TypeError):
            return None
    return raw


class Namespaces(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    include: list[str] = []
    exclude: list[str] = []


class PriorityThreshold(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    value: Int32 | None = None
    name: str = ""


_UNKNOWN = re.compile(r"Object contains unknown field `([^`]*)`(?: - at `\$(.*)`)?")
_AT = re.compile(r" - at `\$\.?(.*)`$")


def _describe(err: msgspec.ValidationError, kind: str, raw: Any = None) -> str:
    text = str(err)
    unknown = _UNKNOWN.match(text)
    if unknown:
        prefix = unknown.group(2).lstrip(".") if unknown.group(2) else ""
        path = f"{prefix}.{unknown.group(1)}" if prefix else unknown.group(1)
        return f'strict decoding error: unknown field "{path}"'
    at = _AT.search(text)
    where = at.group(1) if at else ""
    body = _AT.sub("", text)
    bound = _OUT_OF_RANGE.match(body)
    if bound is not None and int(bound.group(1)) in _GO_INT and where:
        # Go's encoding/json wording, as upstream's strict decoder reports it.
        go_type = _GO_INT[int(bound.group(1))]
        field = re.sub(r"\[[0-9]+\]", "", where)
        return (f"json: cannot unmarshal number {_lookup(raw, where)} into Go struct field "
                f"{kind}.{field} of type {go_type}")
    return f"{kind}: {body}" + (f" at {where!r}" if where else "")


def decode_args(args_type: type, raw: Any, kind: str) -> Any:
    """Strictly decode a plugin's raw args (None means the zero value, as upstream).

    `apiVersion` and `kind` inside args are accepted and dropped (TypeMeta, as both upstream and
    Koordinator allow them).
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ArgsError(f"{kind}: expected an object, got {type(raw).__name__}")
    body = {k: v for k, v in raw.items() if k not in ("apiVersion", "kind")}
    try:
        return msgspec.convert(body, args_type, dec_hook=shared_hook, str_keys=True)
    except msgspec.ValidationError as err:
        raise ArgsError(_describe(err, kind, body)) from None


def validate_namespaces(ns: Namespaces | None) -> list[str]:
    if ns is not None and ns.include and ns.exclude:
        return ["only one of Include/Exclude namespaces can be set"]
    return []


def validate_label_selector(selector: LabelSelector | None) -> list[str]:
    if selector is None:
        return []
    try:
        compile_selector(selector, validate=True)
    except SelectorError as err:
        return [f"failed to get label selectors from strategy's params: {err}"]
    return []


def namespace_allowed(ns: Namespaces | None, namespace: str) -> bool:
    if ns is None:
        return True
    if ns.include:
        return namespace in ns.include
    if ns.exclude:
        return namespace not in ns.exclude
    return True

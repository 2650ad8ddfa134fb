"""Decoding plugin args strictly (upstream decodes `args` with a strict codec) and the shared
argument sub-types (namespaces, label selectors, priority thresholds)."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from desched.model.meta import LabelSelector, shared_hook
from desched.predicates.labels import SelectorError, compile_selector


class ArgsError(ValueError):
    pass


class Namespaces(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    include: list[str] = []
    exclude: list[str] = []


class PriorityThreshold(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    value: int | None = None
    name: str = ""


_UNKNOWN = re.compile(r"Object contains unknown field `([^`]*)`(?: - at `\$(.*)`)?")
_AT = re.compile(r" - at `\$\.?(.*)`$")


def _describe(err: msgspec.ValidationError, kind: str) -> str:
    text = str(err)
    unknown = _UNKNOWN.match(text)
    if unknown:
        prefix = unknown.group(2).lstrip(".") if unknown.group(2) else ""
        path = f"{prefix}.{unknown.group(1)}" if prefix else unknown.group(1)
        return f'strict decoding error: unknown field "{path}"'
    at = _AT.search(text)
    where = at.group(1) if at else ""
    body = _AT.sub("", text)
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
        raise ArgsError(_describe(err, kind)) from None


def validate_namespaces(ns: Namespaces | None) -> list[str]:
    if ns is not None and ns.include and ns.exclude:
        return ["only one of Include/Exclude namespaces can be set"]
    return []


def validate_label_selector(selector: LabelSelector | None) -> list[str]:
    if selector is None:
        return []
    try:
        compile_selector(selector)
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

"""Decoding plugin args strictly (upstream decodes `args` with a strict codec) and the shared
argument sub-types (namespaces, label selectors, priority thresholds)."""

from __future__ import annotations

from typing import Any

import msgspec

from desched.decoding.go import Int32
from desched.decoding.unknown_fields import ARGS_TYPE_META
from desched.framework.registry import NamespaceScope
from desched.model.labels import SelectorError, compile_selector
from desched.model.meta import LabelSelector
from desched.policy_files.decoding import DecodingError, at, convert, type_meta_error

# A plugin's args that cannot be decoded (the same error as any other part of a policy).
ArgsError = DecodingError


class Namespaces(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    include: list[str] = []
    exclude: list[str] = []


class PriorityThreshold(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    value: Int32 | None = None
    name: str = ""


def decode_args(args_type: type, raw: Any, kind: str, where: str = "") -> Any:
    """Strictly decode a plugin's raw args (None means the zero value, as upstream); `where` is
    their place in the file, which errors name.

    `apiVersion` and `kind` inside args are accepted and dropped (TypeMeta, as both upstream and
    Koordinator allow them), once Go would have read them as strings.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ArgsError(f"{kind}: expected an object, got {type(raw).__name__}{at(where)}")
    problem = type_meta_error(raw)
    if problem:
        raise ArgsError(f"{problem}{at(where)}")
    body = {k: v for k, v in raw.items() if k not in ARGS_TYPE_META}
    return convert(body, args_type, where, kind, extra=ARGS_TYPE_META)


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


def namespace_scope(field: str, ns: Namespaces | None) -> tuple[NamespaceScope, ...]:
    """The args' namespace include or exclude under the key `field` a policy writes, for the
    plugin's Scope (none when unset)."""
    if ns is None:
        return ()
    return (NamespaceScope(field, tuple(ns.include), tuple(ns.exclude)),)


def namespace_allowed(ns: Namespaces | None, namespace: str) -> bool:
    if ns is None:
        return True
    if ns.include:
        return namespace in ns.include
    if ns.exclude:
        return namespace not in ns.exclude
    return True

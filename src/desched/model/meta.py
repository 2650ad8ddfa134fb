"""Metadata and selector structs shared by every kind."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Annotated, Any

import msgspec

from desched.model.quantity import parse_quantity
from desched.util.memo import remember


class Shared(str):
    """A string value that repeats across objects (namespaces, label values, images, owner UIDs...).

    Decoded through `shared_hook`, so each distinct value exists once in memory: at 150k pods this
    saves hundreds of megabytes for a small cost per value (measured in bench/README.md).
    """

    __slots__ = ()


class Quantity(Shared):
    """A resource quantity (`250m`, `1Gi`, or a JSON number), checked to parse when decoded: an
    invalid one is an error at its field's path, never later in whichever computation reads it
    first (requests, QoS, fit)."""

    __slots__ = ()


_shared: dict[object, Shared] = {}
_quantities: dict[object, Quantity] = {}


def _json_type(obj: Any) -> str:
    names = {type(None): "null", bool: "bool", int: "int", float: "float", list: "array",
             dict: "object"}
    return names.get(type(obj), type(obj).__name__)


def _text(obj: Any) -> str:
    if isinstance(obj, bool) or not isinstance(obj, str | int | float):
        # TypeError makes msgspec report a validation error at the field's path.
        raise TypeError(f"Expected `str | int | float`, got `{_json_type(obj)}`")
    return obj if isinstance(obj, str) else repr(obj) if isinstance(obj, float) else str(obj)


def _new_shared(obj: Any) -> Shared:
    # Only quantities may be JSON numbers (`cpu: 2`); `kind: 5` is no Kubernetes object.
    if not isinstance(obj, str):
        raise TypeError(f"Expected `str`, got `{_json_type(obj)}`")
    return remember(_shared, obj, Shared(obj))


def _new_quantity(obj: Any) -> Quantity:
    text = _text(obj)
    parse_quantity(text)  # QuantityError is a ValueError: msgspec names the field's path
    return remember(_quantities, obj, Quantity(text))


def shared_hook(typ: type, obj: Any) -> Any:
    """msgspec dec_hook: the one Shared instance for a string (a number, as a YAML quantity like
    `cpu: 2` is, becomes its decimal text). Shared and Quantity are the models' only custom
    types, and this runs millions of times per snapshot: keep it to one dict lookup."""
    cache = _quantities if typ is Quantity else _shared
    try:
        found = cache.get(obj)
    except TypeError:  # unhashable: a list or map where a string belongs
        found = None
    if found is not None:
        return found
    return _new_quantity(obj) if typ is Quantity else _new_shared(obj)


# Kubernetes timestamps always carry a zone (RFC 3339); a naive one is invalid input, rejected
# at decode time rather than failing later when compared with the clock.
Time = Annotated[datetime, msgspec.Meta(tz=True)]

# The shared default for absent maps: msgspec would copy a `{}` default into every instance.
EMPTY_MAP: Mapping[str, Any] = MappingProxyType({})


class OwnerReference(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    api_version: Shared = Shared("")
    kind: Shared = Shared("")
    name: Shared = Shared("")
    uid: Shared = Shared("")
    controller: bool | None = None


class ObjectMeta(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    name: str = ""
    namespace: Shared = Shared("")
    uid: str = ""
    labels: Mapping[str, str] = EMPTY_MAP
    annotations: Mapping[str, str] = EMPTY_MAP
    owner_references: tuple[OwnerReference, ...] = ()
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None


class LabelSelectorRequirement(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    key: str = ""
    operator: str = ""
    values: tuple[str, ...] = ()


class LabelSelector(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


# Annotations desched reads. Others (kubectl's last-applied-configuration above all) are dropped at
# load time: they are large, and no descheduling decision depends on them.
KEPT_ANNOTATION_PREFIXES = (
    "descheduler.alpha.kubernetes.io/",
    "kubernetes.io/config.",
    "scheduling.koordinator.sh/",
    "koordinator.sh/",
    "node.koordinator.sh/",
    "descheduler.koordinator.sh/",
    "controller.kubernetes.io/",
)


# What is kept: the prefixes above, and the annotations installed plugins declare they read
# (PluginSpec.annotations, added by desched.plugins.catalog when it loads them).
_kept: tuple[str, ...] = KEPT_ANNOTATION_PREFIXES


def keep_annotations(keys: Iterable[str]) -> None:
    """Also keep these annotation keys (or prefixes) as objects are loaded: what the plugins
    read. The catalog says so before anything is decoded (a policy is loaded first)."""
    global _kept
    _kept = tuple(dict.fromkeys((*_kept, *keys)))


def kept_annotations() -> tuple[str, ...]:
    """The annotation keys and prefixes objects keep as they are loaded (str.startswith's)."""
    return _kept


def trim_annotations(meta: ObjectMeta) -> None:
    """Keep only the annotations a descheduling decision can depend on."""
    annotations = meta.annotations
    if annotations:
        kept = {k: v for k, v in annotations.items() if k.startswith(_kept)}
        if len(kept) != len(annotations):
            meta.annotations = kept or EMPTY_MAP


def controller_ref(meta: ObjectMeta) -> OwnerReference | None:
    """The ownerReference with controller=true, as metav1.GetControllerOf returns it."""
    for ref in meta.owner_references:
        if ref.controller:
            return ref
    return None


def _encode_shared(obj: Any) -> Any:
    if isinstance(obj, Shared):
        return str(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


# JSON encoding for anything holding model values (Shared strings encode as plain strings).
json_encoder = msgspec.json.Encoder(enc_hook=_encode_shared)

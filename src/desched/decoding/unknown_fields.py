"""Keys a configuration file holds that its schema does not name: upstream's decoders read the
top level leniently (`profile:` for `profiles:` is silently dropped), so desched warns about each.

The walk runs over the raw document after it decoded, against the same msgspec schema, and
reports each key that schema does not name. Keys under a strict struct (forbid_unknown_fields)
have already failed decoding, so only lenient places ever report.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any, NamedTuple

import msgspec.inspect as mi

from desched.util.names import nearest

# What plugin args may hold besides their fields (TypeMeta, accepted and dropped).
ARGS_TYPE_META = ("apiVersion", "kind")


@cache
def info(schema: Any) -> mi.Type:
    return mi.type_info(schema)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _fits(value: Any, t: mi.Type) -> bool:
    if isinstance(t, mi.Metadata):
        return _fits(value, t.type)
    if isinstance(t, mi.StrType):
        return isinstance(value, str)
    if isinstance(t, (mi.StructType, mi.DictType)):
        return isinstance(value, dict)
    if isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType, mi.TupleType)):
        return isinstance(value, list)
    return False


class Unknown(NamedTuple):
    """What `visit` yields as the type of a key its struct does not name."""

    key: str
    fields: tuple[str, ...]  # the names the struct knows


def visit(value: Any, t: mi.Type | Unknown,
          where: str = "") -> Iterator[tuple[str, Any, mi.Type | Unknown]]:
    """Every (place, raw value, schema type) a decoded document holds, in document order: what
    the schema says each value is, for the checks that read the raw document after decoding. A
    key its struct does not name comes with the type Unknown."""
    yield where, value, t
    if isinstance(t, mi.Metadata):
        yield from visit(value, t.type, where)
    elif isinstance(t, mi.UnionType):
        for alt in t.types:
            if _fits(value, alt):
                yield from visit(value, alt, where)
                return
    elif isinstance(t, mi.StructType) and isinstance(value, dict):
        fields = {f.encode_name: f.type for f in t.fields}
        for key, item in value.items():
            known = fields.get(str(key))
            yield from visit(item, known if known is not None else Unknown(str(key), tuple(fields)),
                             _join(where, str(key)))
    elif isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield from visit(item, t.item_type, f"{where}[{i}]")
    elif isinstance(t, mi.TupleType) and isinstance(value, list):
        for i, (item, item_type) in enumerate(zip(value, t.item_types, strict=False)):
            yield from visit(item, item_type, f"{where}[{i}]")
    elif isinstance(t, mi.DictType) and isinstance(value, dict):
        for key, item in value.items():
            yield from visit(item, t.value_type, _join(where, str(key)))


def unknown_fields(value: Any, schema: Any, where: str = "",
                   extra: tuple[str, ...] = ()) -> list[tuple[str, str | None]]:
    """(path of each key `schema` does not name, the nearest known name or None), in document
    order. `extra`: names also accepted at the top of `value`."""
    out: list[tuple[str, str | None]] = []
    for place, _, t in visit(value, info(schema), where):
        if isinstance(t, Unknown):
            # `extra` names belong to the top of `value` only.
            top = place == _join(where, t.key)
            if not (top and t.key in extra):
                out.append((place, nearest(t.key, [*t.fields, *extra] if top else t.fields)))
    return out


def describe(path: str, found: list[tuple[str, str | None]]) -> list[str]:
    """One warning sentence per unknown field, naming the file."""
    return [f'{path}: unknown field "{field}"'
            + (f' (did you mean "{near}"?)' if near else "") + "; it is ignored"
            for field, near in found]

"""Warnings about a policy that loads but does less than it says: keys the decoder ignores
(upstream decodes the top level leniently, so `profile:` for `profiles:` is silently dropped)
and a policy that enables no plugin that evicts.

These never change what loads: the walk runs over the raw document after it decoded, against the
same msgspec schema, and reports each key that schema does not name. Keys under a strict struct
(forbid_unknown_fields) have already failed decoding, so only lenient places ever report.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any, NamedTuple

import msgspec.inspect as mi

from desched.errors import quote, shown
from desched.framework.policy import Policy
from desched.framework.registry import Plugins
from desched.model.labels import empty_set_warnings
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


def plugin_args_fields(doc: dict[str, Any], plugins: Plugins) -> list[tuple[str, str | None]]:
    """Unknown keys in each registered plugin's pluginConfig args (both v1alpha2 formats lay
    profiles out the same way): only the args' lenient sub-structs can hold any."""
    out: list[tuple[str, str | None]] = []
    profiles = doc.get("profiles")
    for i, profile in enumerate(profiles if isinstance(profiles, list) else []):
        configs = profile.get("pluginConfig") if isinstance(profile, dict) else None
        for j, pc in enumerate(configs if isinstance(configs, list) else []):
            if not isinstance(pc, dict):
                continue
            name = pc.get("name")
            spec = plugins.get(name) if isinstance(name, str) else None
            if spec is not None and isinstance(pc.get("args"), dict):
                out.extend(unknown_fields(pc["args"], spec.args_type,
                                          f"profiles[{i}].pluginConfig[{j}].args",
                                          ARGS_TYPE_META))
    return out


def idle_warning(policy: Policy) -> list[str]:
    """A warning when no profile enables a deschedule or balance plugin: nothing gets evicted."""
    if any(p.enabled.get("deschedule") or p.enabled.get("balance") for p in policy.profiles):
        return []
    text = f"{policy.path}: no deschedule or balance plugin is enabled; the policy evicts nothing"
    if any("MigrationController" in p.enabled.get("evict", ()) for p in policy.profiles):
        # `run` still carries out the PodMigrationJobs someone else creates.
        text += (" by itself (MigrationController only carries out PodMigrationJobs created by "
                 "others)")
    return [text]


def duplicate_profiles(policy: Policy) -> list[tuple[int, int, str]]:
    """(index, index of the first profile of the same name, the name) of each profile whose
    name an earlier profile has: upstream v0.36 accepts them, Koordinator's format refuses
    them (`Duplicate value`)."""
    first: dict[str, int] = {}
    found = []
    for i, profile in enumerate(policy.profiles):
        if profile.name in first:
            found.append((i, first[profile.name], profile.name))
        first.setdefault(profile.name, i)
    return found


def profile_name_warnings(policy: Policy) -> list[str]:
    """A warning per profile that repeats an earlier profile's name."""
    return [f"{policy.path}: profiles[{i}].name: {quote(name)} is also the name of "
            f"profiles[{earlier}]: upstream accepts it, but their evictions, events and metrics "
            f"cannot be told apart (Koordinator's format refuses it); give each profile its own "
            f"name" for i, earlier, name in duplicate_profiles(policy)]


def selector_warnings(policy: Policy) -> list[str]:
    """A warning when the policy's nodeSelector string writes an empty value set, `k in ()`."""
    return [f"{policy.path}: {w}"
            for w in empty_set_warnings("nodeSelector", policy.node_selector_text)]


def args_warnings(policy: Policy) -> list[str]:
    """Each enabled plugin's own warnings about its args (PingPongGuard's scheduler
    configuration), naming the file and the profile."""
    plugins = policy.plugins
    out: list[str] = []
    for profile in policy.profiles:
        enabled = {name for names in profile.enabled.values() for name in names}
        for name, args in profile.args.items():
            spec = plugins.get(name)
            if spec is not None and name in enabled:
                out.extend(f"{policy.path}: profile {shown(profile.name)}: {name}: {w}"
                           for w in spec.warnings(args))
    return out

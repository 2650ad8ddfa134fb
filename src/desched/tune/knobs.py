"""What `desched tune --vary` varies, and the candidate policies it makes.

A knob names one number (or boolean) of a plugin's args as a v1alpha2 policy writes them
(`LowNodeUtilization.targetThresholds.cpu`, LowNodeLoad's pools by name:
`LowNodeLoad.nodePools.gpu.highThresholds.cpu`), or one of the policy's top-level eviction limits
(`maxNoOfPodsToEvictPerNode`). `apply` sets values where the input's own format keeps them: a
v1alpha2 or Koordinator profile's pluginConfig args, a v1alpha1 strategy's params, the inner
policy of a ConfigMap. Which args exist and what they hold is read from the plugin's args type,
so any enabled plugin's numbers can be varied; the defaults cover the balance plugins.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec.inspect as mi

from desched.decoding.document import one_document
from desched.errors import InputError, quote
from desched.framework.policy import Policy
from desched.policy_files.convert import dump_yaml
from desched.policy_files.loader import POLICY_KEYS, policy_from_document
from desched.simulate.frames import Frame

Value = int | float | bool

LIMITS = ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace",
          "maxNoOfPodsToEvictTotal")
# Each limit's field in framework.evictor.Limits.
_LIMIT_ATTRS = dict(zip(LIMITS, ("per_node", "per_namespace", "total"), strict=True))
# v1alpha1 has no total limit (its conversion copies only these two).
_V1ALPHA1_LIMITS = LIMITS[:2]
# Where a v1alpha1 strategy's params keep the args a knob names (its first element): the
# fields v0.30's conversion copies into the plugin's args.
_V1ALPHA1_PARAMS: dict[tuple[str, str], tuple[str, ...]] = {
    **{("LowNodeUtilization", arg): ("nodeResourceUtilizationThresholds",)
       for arg in ("thresholds", "targetThresholds", "useDeviationThresholds", "numberOfNodes")},
    **{("HighNodeUtilization", arg): ("nodeResourceUtilizationThresholds",)
       for arg in ("thresholds", "numberOfNodes")},
    ("PodLifeTime", "maxPodLifeTimeSeconds"): ("podLifeTime",),
    ("RemovePodsHavingTooManyRestarts", "podRestartThreshold"): ("podsHavingTooManyRestarts",),
    ("RemoveFailedPods", "minPodLifetimeSeconds"): ("failedPods",),
}
# LowNodeLoad's pools inherit each of these maps from the top-level args when they set none:
# setting one value in a pool gives it its own copy first, so its other resources stay.
_POOL_INHERITED = ("highThresholds", "lowThresholds", "prodHighThresholds", "prodLowThresholds",
                   "resourceWeights")
PERCENT_STEP = 5
_MAX_PERCENT = 100
# Default knobs per plugin (per profile): each more multiplies the candidates a grid would run.
MAX_DEFAULT_KNOBS = 6
_GRAMMAR = ("expected PLUGIN.ARG=LOW:HIGH[:STEP] (e.g. LowNodeUtilization.targetThresholds.cpu="
            "40:80:5) or LIMIT=LOW:HIGH, LIMIT one of " + ", ".join(LIMITS))
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class Knob:
    """One setting a search varies, from `low` to `high` by `step` (both ends included)."""

    plugin: str  # "" for the policy's top-level eviction limits
    path: tuple[str, ...]  # inside the plugin's args as v1alpha2 writes them; pools by name
    low: Value
    high: Value
    step: Value
    integer: bool  # values are whole numbers (written without a decimal point)
    text: str  # as the user writes it: LowNodeUtilization.targetThresholds.cpu

    @property
    def boolean(self) -> bool:
        return isinstance(self.low, bool)

    def values(self) -> list[Value]:
        if self.boolean:
            return sorted({bool(self.low), bool(self.high)})
        count = math.floor((self.high - self.low) / self.step + 1e-9) + 1
        out: list[Value] = [_number(self.low + i * self.step, self.integer)
                            for i in range(count)]
        if out[-1] < self.high - 1e-9:
            out.append(_number(self.high, self.integer))
        return out


def _number(value: float, integer: bool) -> int | float:
    """`value` as the knob writes it: an int for a whole-number knob, else a float without
    the last bits that repeated adding of the step leaves."""
    return round(value) if integer else round(float(value), 9)


# -- what an arg is ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Leaf:
    """A number or boolean an arg path ends at, and what it may hold."""

    path: tuple[str, ...]
    kind: str  # "int", "float" or "bool"
    low: float | None  # the type's bounds, where it has them
    high: float | None
    percent: bool  # a threshold percentage: 0..100, default step 5
    current: Value | None  # the policy's value (its first profile with the plugin)


def _unwrap(info: mi.Type) -> mi.Type:
    """The type under Optional[...] and Annotated metadata."""
    while True:
        if isinstance(info, mi.Metadata):
            info = info.type
        elif isinstance(info, mi.UnionType):
            rest = [t for t in info.types if not isinstance(t, mi.NoneType)]
            if len(rest) != 1:
                return info
            info = rest[0]
        else:
            return info


def _bounds(info: mi.Type) -> tuple[float | None, float | None]:
    if isinstance(info, mi.IntType | mi.FloatType):
        low = info.ge if info.ge is not None else info.gt
        high = info.le if info.le is not None else info.lt
        return low, high
    return None, None


def _leaf_of(info: mi.Type, path: tuple[str, ...], current: Any, percent: bool) -> _Leaf | None:
    if isinstance(info, mi.BoolType):
        return _Leaf(path, "bool", None, None, False,
                     current if isinstance(current, bool) else None)
    if isinstance(info, mi.IntType | mi.FloatType):
        low, high = _bounds(info)
        if percent:
            low, high = max(low or 0, 0), min(_MAX_PERCENT if high is None else high,
                                              _MAX_PERCENT)
        value = current if isinstance(current, int | float) and not isinstance(current,
                                                                               bool) else None
        return _Leaf(path, "int" if isinstance(info, mi.IntType) else "float", low, high,
                     percent, value)
    return None


def _arg_names(info: mi.StructType) -> str:
    return ", ".join(f.encode_name for f in info.fields)


def _resolve(text: str, plugin: str, args: Any, args_type: type,
             segments: list[str]) -> _Leaf:
    """The number `segments` (the ARG of `text`, split at dots) name in `plugin`'s args, whose
    value in the policy is `args`; InputError naming what does not."""
    info = _unwrap(mi.type_info(args_type))
    path: list[str] = []
    current: Any = args
    rest = list(segments)
    where = plugin
    while rest:
        if isinstance(info, mi.StructType):
            name = rest.pop(0)
            field = next((f for f in info.fields if f.encode_name == name), None)
            if field is None:
                raise InputError("--vary", f"{quote(text)}: {where} has no {quote(name)} "
                                           f"(it has {_arg_names(info)})")
            path.append(name)
            where = f"{where}.{name}"
            current = getattr(current, field.name, None)
            info = _unwrap(field.type)
            continue
        if isinstance(info, mi.DictType):
            # A map's key may hold dots (nvidia.com/gpu): the rest of the path is the key.
            key = ".".join(rest)
            present = list(current or {})
            if key not in present:
                listed = ", ".join(present) if present else "nothing"
                raise InputError("--vary", f"{quote(text)}: {where} sets no {quote(key)} "
                                           f"(it sets {listed}); vary what the policy sets")
            leaf = _leaf_of(_unwrap(info.value_type), (*path, key), current[key],
                            path[-1].lower().endswith("thresholds"))
            if leaf is None:
                break
            return leaf
        if isinstance(info, mi.ListType) and isinstance(item := _unwrap(info.item_type),
                                                        mi.StructType):
            # Items with names (LowNodeLoad's nodePools) are addressed by name.
            names = [getattr(i, "name", "") for i in current or []]
            joined = ".".join(rest)
            found = next((n for n in sorted(names, key=len, reverse=True)
                          if n and joined.startswith(f"{n}.")), None)
            if found is None:
                listed = ", ".join(n for n in names if n) or "none"
                raise InputError("--vary", f"{quote(text)}: {where} has no item named as the "
                                           f"path says (its names: {listed})")
            path.append(found)
            where = f"{where}.{found}"
            current = next(i for i in current if getattr(i, "name", "") == found)
            rest = joined[len(found) + 1:].split(".")
            info = item
            continue
        break
    leaf = _leaf_of(info, tuple(path), current, False) if not rest else None
    if leaf is None:
        raise InputError("--vary", f"{quote(text)}: {where} is not a number or a boolean "
                                   f"{plugin} has")
    return leaf


# -- parsing --vary ------------------------------------------------------------------------------


def _parse_number(text: str, word: str) -> int | float:
    if not _NUMBER.fullmatch(word):
        raise InputError("--vary", f"{quote(text)}: {quote(word)} is not a number")
    value = float(word)
    if not math.isfinite(value):
        raise InputError("--vary", f"{quote(text)}: {quote(word)} is not a finite number")
    return int(value) if re.fullmatch(r"[+-]?[0-9]+", word) else value


def _parse_bool(text: str, word: str) -> bool:
    if word.lower() not in ("true", "false"):
        raise InputError("--vary", f"{quote(text)}: a boolean varies as false:true, "
                                   f"not {quote(word)}")
    return word.lower() == "true"


def _plugins_in(policy: Policy) -> list[str]:
    names: list[str] = []
    for profile in policy.profiles:
        for ep_names in profile.enabled.values():
            names.extend(n for n in ep_names if n not in names)
    return names


def _leaf(text: str, target: str, policy: Policy) -> tuple[str, _Leaf]:
    """(plugin, leaf) the TARGET of a --vary names."""
    if "." not in target:
        if target not in LIMITS:
            raise InputError("--vary", f"{quote(text)}: {_GRAMMAR}")
        if policy.format == "v1alpha1" and target not in _V1ALPHA1_LIMITS:
            raise InputError("--vary", f"{quote(text)}: a v1alpha1 policy has no {target} "
                                       f"(only {', '.join(_V1ALPHA1_LIMITS)})")
        return "", _Leaf((target,), "int", 0, None, False,
                         getattr(policy.limits, _LIMIT_ATTRS[target]))
    plugin, _, arg = target.partition(".")
    enabled = _plugins_in(policy)
    if plugin not in enabled:
        raise InputError("--vary", f"{quote(text)}: the policy enables no plugin {quote(plugin)}"
                                   f" (it enables {', '.join(enabled) or 'none'})")
    args = next(p.args[plugin] for p in policy.profiles if plugin in p.args)
    leaf = _resolve(text, plugin, args, policy.plugins[plugin].args_type, arg.split("."))
    if policy.format == "v1alpha1" and (plugin, leaf.path[0]) not in _V1ALPHA1_PARAMS:
        settable = [a for p, a in _V1ALPHA1_PARAMS if p == plugin]
        raise InputError("--vary", f"{quote(text)}: a v1alpha1 policy's strategy params have no "
                                   f"place for it (of {plugin} they hold "
                                   f"{', '.join(settable) or 'nothing'})")
    return plugin, leaf


def parse_vary(text: str, policy: Policy) -> Knob:
    """The knob `PLUGIN.ARG=LOW:HIGH[:STEP]` (or `LIMIT=LOW:HIGH[:STEP]`) names; InputError
    (source --vary) naming what is wrong. STEP defaults to 5 for a threshold percentage, else
    1; a boolean varies as false:true."""
    target, sep, spec = text.strip().partition("=")
    words = spec.split(":")
    if not sep or not target or len(words) not in (2, 3) or not all(w.strip() for w in words):
        raise InputError("--vary", f"{quote(text)}: {_GRAMMAR}")
    words = [w.strip() for w in words]
    plugin, leaf = _leaf(text, target.strip(), policy)
    knob_text = target.strip()
    if leaf.kind == "bool":
        if len(words) == 3:
            raise InputError("--vary", f"{quote(text)}: a boolean takes no STEP")
        low_b, high_b = _parse_bool(text, words[0]), _parse_bool(text, words[1])
        if low_b and not high_b:
            raise InputError("--vary", f"{quote(text)}: LOW true is above HIGH false")
        return Knob(plugin, leaf.path, low_b, high_b, 1, False, knob_text)
    low, high = _parse_number(text, words[0]), _parse_number(text, words[1])
    step = (_parse_number(text, words[2]) if len(words) == 3
            else PERCENT_STEP if leaf.percent else 1)
    if low > high:
        raise InputError("--vary", f"{quote(text)}: LOW {words[0]} is above HIGH {words[1]}")
    if step <= 0:
        raise InputError("--vary", f"{quote(text)}: STEP must be above 0")
    for word, value in ((words[0], low), (words[1], high)):
        if (leaf.low is not None and value < leaf.low) or (leaf.high is not None
                                                            and value > leaf.high):
            span = (f"[{_shown(leaf.low)}, {_shown(leaf.high)}]" if leaf.high is not None
                    else f">= {_shown(leaf.low)}")
            raise InputError("--vary", f"{quote(text)}: {word} is outside what {knob_text} "
                                       f"takes ({span})")
    integer = all(isinstance(v, int) for v in (low, high, step))
    if leaf.kind == "int" and not integer:
        raise InputError("--vary", f"{quote(text)}: {knob_text} takes whole numbers only")
    return Knob(plugin, leaf.path, low, high, step, integer, knob_text)


def parse_varies(texts: Iterable[str], policy: Policy) -> list[Knob]:
    """Every --vary, each setting varied once."""
    knobs: list[Knob] = []
    for text in texts:
        knob = parse_vary(text, policy)
        if any(k.plugin == knob.plugin and k.path == knob.path for k in knobs):
            raise InputError("--vary", f"{quote(text)}: {knob.text} is varied twice")
        knobs.append(knob)
    return knobs


def _shown(value: float | None) -> str:
    return "" if value is None else str(int(value)) if float(value).is_integer() else str(value)


def current(policy: Policy, knob: Knob) -> Value | None:
    """The knob's value in `policy` (its first profile with the plugin), written as the knob
    writes its own (40, not the 40.0 the args hold, on a whole-number knob); None when unset.
    The loaded policy holds it defaulted (numberOfNodes 0) and inherited (a pool's thresholds
    from the top level)."""
    if not knob.plugin:
        limit = getattr(policy.limits, _LIMIT_ATTRS[knob.path[0]])
        return limit if isinstance(limit, int) else None
    args = next((p.args[knob.plugin] for p in policy.profiles if knob.plugin in p.args), None)
    try:
        leaf = _resolve(knob.text, knob.plugin, args, policy.plugins[knob.plugin].args_type,
                        list(knob.path))
    except InputError:  # a map key or pool another policy has
        return None
    value = leaf.current
    if isinstance(value, float) and knob.integer and value.is_integer():
        return int(value)
    return value


# -- defaults from the snapshot's spread ---------------------------------------------------------


@dataclass(frozen=True)
class _Threshold:
    """A threshold map a balance plugin sets, and where its range comes from."""

    path: tuple[str, ...]  # of the map, inside the args
    values: Mapping[str, float]
    side: str  # "low" (a node below it has room), "high" (above it sheds) or "deviation"
    usage: bool  # compared with measured usage, not requests


def _balance_maps(plugin: str, args: Any) -> list[_Threshold]:
    if plugin == "LowNodeUtilization":
        usage = args.metrics_utilization is not None
        dev = args.use_deviation_thresholds
        return [_Threshold(("thresholds",), args.thresholds, "deviation" if dev else "low", usage),
                _Threshold(("targetThresholds",), args.target_thresholds,
                           "deviation" if dev else "high", usage)]
    if plugin == "HighNodeUtilization":
        return [_Threshold(("thresholds",), args.thresholds, "low",
                           args.metrics_utilization is not None)]
    if plugin != "LowNodeLoad":
        return []
    out: list[_Threshold] = []
    pools: list[tuple[tuple[str, ...], Any, bool]] = [
        ((), args, bool(args.use_deviation_thresholds))]
    pools += [(("nodePools", p.name), p, p.use_deviation_thresholds)
              for p in args.node_pools or []]
    for prefix, pool, dev in pools:
        for attr, key, side in (("low_thresholds", "lowThresholds", "low"),
                                ("high_thresholds", "highThresholds", "high"),
                                ("prod_low_thresholds", "prodLowThresholds", "low"),
                                ("prod_high_thresholds", "prodHighThresholds", "high")):
            values = getattr(pool, attr)
            # A pool's map that is the top level's own object is inherited, not set by it.
            if not values or (prefix and values is getattr(args, attr)):
                continue
            out.append(_Threshold((*prefix, key), values, "deviation" if dev else side, True))
    return out


def _series(frame: Frame, resource: str, usage: bool) -> list[float]:
    """The frame's per-node percentages the threshold of `resource` is compared with: usage
    where the plugin reads it and the snapshot measures it, else requests."""
    names = ([f"{resource} usage"] if usage else []) + (
        ["pods"] if resource == "pods" else [f"{resource} requests"])
    for name in names:
        values = list(frame.values.get(name, {}).values())
        if values:
            return values
    return []


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[int(q * (len(ordered) - 1))]


def _default_range(values: list[float], side: str, own: float) -> tuple[float, float]:
    """LOW..HIGH of a threshold from the nodes' spread: a low threshold between the lower
    nodes (10th percentile) and the median, a high one between the median and the hottest
    node, a deviation from 0 to the widest distance from the mean. Outward to the step, and
    wide enough to hold the policy's own value on its grid."""
    step = PERCENT_STEP
    if values:
        ordered = sorted(values)
        median = _quantile(ordered, 0.5)
        if side == "low":
            low, high = _quantile(ordered, 0.1), median
        elif side == "high":
            low, high = median, ordered[-1]
        else:
            mean = math.fsum(ordered) / len(ordered)
            low, high = 0.0, max(mean - ordered[0], ordered[-1] - mean)
    else:  # a resource the snapshot has no figure of: around the policy's value
        low, high = own - 4 * step, own + 4 * step
    low, high = math.floor(low / step) * step, math.ceil(high / step) * step
    # The grid from LOW passes through the policy's value.
    low = own if own < low else own - step * math.floor((own - low) / step)
    high = max(high, own)
    low, high = max(low, 0), min(high, _MAX_PERCENT)
    if high - low < step:
        low, high = max(0, min(low, high - step)), min(_MAX_PERCENT, max(high, low + step))
    return low, high


def default_knobs(policy: Policy, before: Frame) -> list[Knob]:
    """The balance settings of every balance plugin the policy enables, ranged from the
    snapshot's utilization (`before`, percent per node per series): LowNodeUtilization's and
    HighNodeUtilization's thresholds (and targetThresholds) per resource they name,
    LowNodeLoad's low and high (and prod, when set) thresholds per node pool that sets them;
    step 5. At most MAX_DEFAULT_KNOBS per plugin, the resources whose nodes differ most
    first. Pools are ranged on the whole cluster's spread."""
    knobs: list[Knob] = []
    seen: set[str] = set()
    for profile in policy.profiles:
        for plugin in profile.enabled.get("balance", []):
            if plugin in seen or plugin not in profile.args:
                continue
            seen.add(plugin)
            ranked: list[tuple[float, int, Knob]] = []
            for threshold in _balance_maps(plugin, profile.args[plugin]):
                for resource, own in threshold.values.items():
                    values = _series(before, resource, threshold.usage)
                    spread = max(values) - min(values) if values else 0.0
                    low, high = _default_range(values, threshold.side, float(own))
                    integer = all(float(v).is_integer() for v in (low, high))
                    path = (*threshold.path, resource)
                    knob = Knob(plugin, path, _number(low, integer), _number(high, integer),
                                PERCENT_STEP, integer, ".".join((plugin, *path)))
                    ranked.append((-spread, len(ranked), knob))
            knobs.extend(k for _, _, k in sorted(ranked, key=lambda r: (r[0], r[1]))[
                :MAX_DEFAULT_KNOBS])
    return knobs


# -- applying an assignment ----------------------------------------------------------------------


def _written(knob: Knob, value: Value) -> Value:
    """`value` as a policy file holds it: a boolean, a whole number without a decimal point,
    else a float."""
    if knob.boolean:
        return bool(value)
    if float(value).is_integer():
        return int(value)
    return float(value)


def configmap_key(document: Mapping[str, Any]) -> str | None:
    """The data key holding the policy, when `document` is a ConfigMap wrapping one."""
    if document.get("kind") != "ConfigMap" or document.get("apiVersion") != "v1":
        return None
    data = document.get("data") or {}
    if len(data) == 1:
        return str(next(iter(data)))
    return next(k for k in data if k in POLICY_KEYS)


def _mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """parent[key] as a mapping, made one when it is missing or null."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


def _args_of(doc: dict[str, Any], policy: Policy, plugin: str) -> list[dict[str, Any]]:
    """The args mappings of `plugin` in `doc` (made where the input leaves them out): one per
    profile that has the plugin, a v1alpha1 strategy's params."""
    if policy.format == "v1alpha1":
        strategy = _mapping(_mapping(doc, "strategies"), plugin)
        return [_mapping(strategy, "params")]
    profiles = doc.get("profiles") or []
    out = []
    for i, profile in enumerate(policy.profiles):
        if plugin not in profile.args or i >= len(profiles):
            continue
        configs = profiles[i].get("pluginConfig")
        if not isinstance(configs, list):
            configs = profiles[i]["pluginConfig"] = []
        entry = next((c for c in configs if isinstance(c, dict) and c.get("name") == plugin),
                     None)
        if entry is None:  # Koordinator runs an enabled plugin without config on its defaults
            entry = {"name": plugin}
            configs.append(entry)
        out.append(_mapping(entry, "args"))
    return out


def _set(args: dict[str, Any], policy: Policy, knob: Knob, value: Value) -> None:
    path = list(knob.path)
    if policy.format == "v1alpha1" and knob.plugin:
        for key in _V1ALPHA1_PARAMS[(knob.plugin, path[0])]:
            args = _mapping(args, key)
    here: Any = args
    while len(path) > 1:
        key = path.pop(0)
        if key == "nodePools" and isinstance(here.get(key), list):
            pool = next(p for p in here[key] if isinstance(p, dict) and p.get("name") == path[0])
            if path[1] in _POOL_INHERITED and pool.get(path[1]) is None and \
                    isinstance(here.get(path[1]), dict):
                pool[path[1]] = dict(here[path[1]])
            here = pool
            path.pop(0)
            continue
        here = _mapping(here, key)
    here[path[0]] = value


def apply(document: Mapping[str, Any], policy: Policy,
          assignment: Mapping[Knob, Value]) -> dict[str, Any]:
    """A copy of the policy `document` (as the loader parsed the file `policy` came from) with
    each knob set to its value where the input's format keeps it; keys are made when the
    input lacks them. A ConfigMap's policy is written back into its data key as YAML."""
    doc = copy.deepcopy(dict(document))
    key = configmap_key(doc)
    if key is None:
        return apply_policy(doc, policy, assignment)
    inner = one_document(f"{policy.path}", doc["data"][key], "policy")
    doc["data"][key] = dump_yaml(apply_policy(inner, policy, assignment))
    return doc


def apply_policy(doc: dict[str, Any], policy: Policy,
                 assignment: Mapping[Knob, Value]) -> dict[str, Any]:
    """`apply` on a policy document that is no ConfigMap, in place; returns it."""
    for knob, value in assignment.items():
        written = _written(knob, value)
        if not knob.plugin:
            doc[knob.path[0]] = written
            continue
        for args in _args_of(doc, policy, knob.plugin):
            _set(args, policy, knob, written)
    return doc


def candidate(path: str, document: Mapping[str, Any], policy: Policy,
              assignment: Mapping[Knob, Value]) -> Policy:
    """The policy `apply` makes, loaded and validated as a file would be; a candidate the
    plugins refuse (thresholds above targetThresholds) raises PolicyError / InputError."""
    return policy_from_document(path, apply(document, policy, assignment), policy.plugins)

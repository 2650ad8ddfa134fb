"""Which plugins a profile runs at the two extension points desched models, as kube-scheduler
works them out (`apis/config/v1/default_plugins.go` mergePluginSet, `framework/runtime`
updatePluginList and expandMultiPointPlugins).

A profile's own set of each extension point is merged into the defaults: `disabled` drops
defaults by name (`"*"`: all of them); an enabled plugin that is also a default takes its place,
weight included (a default re-enabled without a weight loses its default weight); the others are
appended. Then each extension point runs its explicitly enabled plugins, plus every multiPoint
plugin that implements it and that its `disabled` does not name (`"*"` there: no multiPoint
plugin at all). A score plugin's weight in `score.enabled` beats its multiPoint weight; missing
or zero counts as 1. `v1beta2` has no multiPoint defaults: its default filters and scores are
per extension point, and kube-scheduler's defaulting drops a v1beta2 `multiPoint` list.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import msgspec

from desched.decoding.plugin_set import merge_plugin_set
from desched.errors import quote
from desched.scheduler.config.defaults import V1_MULTI_POINT, V1BETA2_FILTERS, V1BETA2_SCORES
from desched.scheduler.config.findings import Findings
from desched.scheduler.config.known_plugins import FILTER, KNOWN, NONE, SCORE
from desched.scheduler.config.types import V1BETA2, KubeSchedulerProfile, Plugins, PluginSet


@dataclass(frozen=True, slots=True)
class Entry:
    """A plugin enabled at an extension point: its name, weight and where the file enables it
    ("" for a default)."""
    name: str
    weight: int | None
    place: str


# An extension point's plugins, by name, in the order it runs them.
Enabled = dict[str, Entry]


def named_plugins(where: str, raw: KubeSchedulerProfile) -> Iterator[tuple[str, str]]:
    """(place, name) of every plugin the profile names, in file order; a disabled `"*"` names
    none."""
    plugins = raw.plugins
    for f in msgspec.structs.fields(Plugins) if plugins is not None else ():
        ps: PluginSet | None = getattr(plugins, f.name)
        if ps is None:
            continue
        point = f"{where}.plugins.{f.encode_name}"
        for state, entries in (("enabled", ps.enabled), ("disabled", ps.disabled)):
            for k, entry in enumerate(entries):
                if not (state == "disabled" and entry.name == "*"):
                    yield f"{point}.{state}[{k}]", entry.name
    for j, pc in enumerate(raw.plugin_config):
        yield f"{where}.pluginConfig[{j}]", pc.name


def _entries(where: str, ps: PluginSet | None) -> tuple[list[Entry], set[str]]:
    if ps is None:
        return [], set()
    return ([Entry(p.name, p.weight, f"{where}.enabled[{k}]") for k, p in enumerate(ps.enabled)],
            {p.name for p in ps.disabled})


def _defaults(pairs: Iterable[tuple[str, int | None]]) -> list[Entry]:
    return [Entry(name, weight, "") for name, weight in pairs]


def merge(defaults: list[Entry], custom: list[Entry], disabled: set[str]) -> list[Entry]:
    """kube-scheduler's mergePluginSet (decoding/plugin_set.py) over entries."""
    return merge_plugin_set(defaults, custom, disabled, lambda entry: entry.name)


def _point(found: Findings, point: str, enabled: list[Entry], disabled: set[str],
           multi_point: list[Entry]) -> Enabled:
    """The plugins extension point `point` runs, in kube-scheduler's order: those enabled both
    there and by multiPoint, then multiPoint's own, then the rest enabled there."""
    kind = "FilterPlugin" if point == FILTER else "ScorePlugin"
    explicit: Enabled = {}
    for entry in enabled:
        implements = KNOWN.get(entry.name)
        if implements is not None and point not in implements:
            found.errors.append(f"{entry.place}: plugin {quote(entry.name)} does not extend "
                                f"{kind} plugin")
        elif entry.name in explicit:
            found.errors.append(f"{entry.place}: plugin {quote(entry.name)} already registered "
                                f"as {quote(kind)}")
        else:
            explicit[entry.name] = entry
    if "*" in disabled:
        return explicit
    overrides: set[str] = set()
    expanded: Enabled = {}
    for entry in multi_point:
        if point not in KNOWN.get(entry.name, NONE) or entry.name in disabled:
            continue
        if entry.name in explicit:
            overrides.add(entry.name)
        elif entry.name in expanded:
            found.errors.append(f"{entry.place or 'multiPoint'}: plugin {quote(entry.name)} "
                                f"already registered as {quote(kind)}")
        else:
            expanded[entry.name] = entry
    out = {n: e for n, e in explicit.items() if n in overrides}
    out.update(expanded)
    out.update((n, e) for n, e in explicit.items() if n not in overrides)
    return out


def weights(found: Findings, scores: Enabled) -> dict[str, int]:
    """Each score plugin's weight (its entry's: score.enabled's when it is there, else its
    multiPoint one); missing or 0 is 1 (getValidScoreWeights). kube-scheduler accepts a negative
    weight (no validation), so desched does too, and warns."""
    out: dict[str, int] = {}
    for name, entry in scores.items():
        weight = entry.weight or 1
        if weight < 0:
            found.warn(entry.place, f"score plugin {quote(name)} has a negative weight "
                                    f"({weight}); kube-scheduler accepts it, and it turns the "
                                    f"plugin's preference around")
        out[name] = weight
    return out


def filters_and_scores(found: Findings, version: str, where: str,
                       plugins: Plugins | None) -> tuple[Enabled, Enabled]:
    """The filter and score plugins a profile runs, by the rules of its file's version."""
    p = plugins or Plugins()
    if version == V1BETA2:
        return _v1beta2(found, where, p)
    mp_custom, mp_disabled = _entries(f"{where}.plugins.multiPoint", p.multi_point)
    multi_point = merge(_defaults(V1_MULTI_POINT), mp_custom, mp_disabled)
    f_enabled, f_disabled = _entries(f"{where}.plugins.filter", p.filter)
    s_enabled, s_disabled = _entries(f"{where}.plugins.score", p.score)
    filters = _point(found, FILTER, f_enabled, f_disabled, multi_point)
    return filters, _point(found, SCORE, s_enabled, s_disabled, multi_point)


def _v1beta2(found: Findings, where: str, p: Plugins) -> tuple[Enabled, Enabled]:
    if p.multi_point is not None and (p.multi_point.enabled or p.multi_point.disabled):
        found.warn(f"{where}.plugins.multiPoint", f"kube-scheduler's {V1BETA2} defaulting drops "
                                                  f"multiPoint; it is ignored")
    f_custom, f_disabled = _entries(f"{where}.plugins.filter", p.filter)
    s_custom, s_disabled = _entries(f"{where}.plugins.score", p.score)
    f_merged = merge(_defaults((n, None) for n in V1BETA2_FILTERS), f_custom, f_disabled)
    s_merged = merge(_defaults(V1BETA2_SCORES), s_custom, s_disabled)
    filters = _point(found, FILTER, f_merged, set(), [])
    return filters, _point(found, SCORE, s_merged, set(), [])

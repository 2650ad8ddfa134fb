"""Reading a KubeSchedulerConfiguration file (kubescheduler.config.k8s.io v1; v1beta3 reads as
v1, v1beta2 with its own defaults), or the ConfigMap holding one, into scheduler profiles. The
reader only decodes and assembles: the schema is types.py, the defaults defaults.py, the checks
validation.py (koord-scheduler's LoadAwareScheduling: load_aware_args.py), which plugins run
plugin_sets.py, each plugin's args plugin_args.py, and the warnings about what desched does not
model unmodelled.py."""

from __future__ import annotations

import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import msgspec

from desched.decoding.document import one_document
from desched.decoding.go import aggregate
from desched.decoding.unknown_fields import ARGS_TYPE_META, unknown_fields
from desched.errors import InputError, quote
from desched.model.meta import shared_hook
from desched.model.pod import NodeAffinity
from desched.scheduler.config import unmodelled
from desched.scheduler.config.field_errors import duplicate, msgspec_error, required
from desched.scheduler.config.findings import Findings
from desched.scheduler.config.known_plugins import MODELLED_SCORES
from desched.scheduler.config.plugin_args import PLUGIN_ARGS
from desched.scheduler.config.plugin_sets import filters_and_scores, named_plugins, weights
from desched.scheduler.config.types import (
    API_VERSIONS,
    GROUP,
    KIND,
    LOAD_AWARE,
    V1,
    V1BETA2,
    V1BETA2_EXTRA,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    PluginConfig,
)
from desched.scheduler.config.unmodelled import Note
from desched.scheduler.config.validation import validate_percentage, validate_plugin_name
from desched.scheduler.profile import (
    DEFAULT_RESOURCES,
    DEFAULT_SCHEDULER_NAME,
    FILTERS,
    FitScoring,
    LoadAwareArgs,
    Profile,
    SchedulerConfig,
    SpreadDefaults,
)

STDIN = "-"
_ACCEPTED = f"{V1} (or v1beta3, v1beta2) {KIND}, or a ConfigMap holding one"


def load_scheduler_config(path: str) -> tuple[SchedulerConfig, list[str]]:
    """The KubeSchedulerConfiguration in file `path` (`-`: standard input), or in the ConfigMap
    that file holds, and the warnings about it (each one line naming the file and the place).
    InputError when it cannot be read or kube-scheduler would refuse it."""
    if path == STDIN:
        source = "<stdin>"
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(source, f"failed to read the scheduler configuration: {err}") \
                from None
    else:
        source = path
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            detail = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            raise InputError(path, f"failed to read the scheduler configuration: {detail}") \
                from None
    return parse_scheduler_config(source, text)


def parse_scheduler_config(source: str, text: str) -> tuple[SchedulerConfig, list[str]]:
    """The configuration in `text`, read from `source` (errors and warnings name it)."""
    doc = _parse(source, text)
    if doc.get("kind") == "ConfigMap" and doc.get("apiVersion") == "v1":
        source, doc = _from_config_map(source, doc)
    return _Reader(source, doc).read()


def _parse(source: str, text: str) -> dict[str, Any]:
    doc = one_document(source, text, KIND)
    if not isinstance(doc, dict):
        raise InputError(source, f"expected a {KIND} object, got {type(doc).__name__}")
    return doc


def _from_config_map(source: str, doc: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The configuration a ConfigMap holds: its only data key, else the one key whose text is a
    KubeSchedulerConfiguration (koord-scheduler's chart names it `koord-scheduler-config`)."""
    data = doc.get("data") or {}
    if not isinstance(data, dict) or not data:
        raise InputError(source, f"ConfigMap has no data key holding a {KIND}")
    if len(data) > 1:
        keys = [k for k, v in data.items() if isinstance(v, str) and KIND in v]
        if len(keys) != 1:
            listed = ", ".join(map(str, data))
            raise InputError(source, f"ConfigMap has several data keys ({listed}); expected one "
                                     f"holding the {KIND}")
        data = {keys[0]: data[keys[0]]}
    key, text = next(iter(data.items()))
    if not isinstance(text, str):
        raise InputError(source, f"data[{quote(key)}] must be a string, got {type(text).__name__}")
    inner = f"{source}[{key}]"
    return inner, _parse(inner, text)


class _Reader:
    """One file's document into a SchedulerConfig, collecting what it finds on the way."""

    def __init__(self, source: str, doc: dict[str, Any]) -> None:
        self.source = source
        self.doc = doc
        self.found = Findings()
        self.version = ""

    def read(self) -> tuple[SchedulerConfig, list[str]]:
        cfg = self._decode()
        percentage = cfg.percentage_of_nodes_to_score
        self.found.errors.extend(validate_percentage("percentageOfNodesToScore", percentage))
        self._note(unmodelled.extenders(cfg.extenders))
        raw_profiles = cfg.profiles or [KubeSchedulerProfile()]
        profiles: dict[str, Profile] = {}
        seen: set[str] = set()
        for i, raw in enumerate(raw_profiles):
            where = f"profiles[{i}]"
            name = raw.scheduler_name
            if name is None and len(raw_profiles) == 1:
                name = DEFAULT_SCHEDULER_NAME
            if not name:
                self.found.errors.append(required(f"{where}.schedulerName"))
                name = ""
            elif name in seen:
                self.found.errors.append(duplicate(f"{where}.schedulerName", name))
            seen.add(name)
            profiles.setdefault(name, self._profile(where, name, raw))
        if self.found.errors:
            raise InputError(self.source, aggregate(self.found.errors))
        config = SchedulerConfig(profiles=MappingProxyType(profiles),
                                 percentage_of_nodes_to_score=percentage or 0, source=self.source)
        return config, self.found.warnings(self.source)

    def _note(self, notes: list[Note]) -> None:
        for place, text in notes:
            self.found.warn(place, text)

    def _decode(self) -> KubeSchedulerConfiguration:
        """The document's TypeMeta checked and its body decoded, unknown fields noted."""
        doc, source = self.doc, self.source
        api_version, kind = doc.get("apiVersion"), doc.get("kind")
        if not kind or not api_version:
            raise InputError(source, f"Object 'Kind' is missing or 'apiVersion' is missing; "
                                     f"expected {_ACCEPTED}")
        if kind != KIND or api_version not in API_VERSIONS:
            raise InputError(source, f"no kind {quote(kind)} is registered for version "
                                     f"{quote(api_version)}; expected {_ACCEPTED}")
        self.version = str(api_version)
        body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
        try:
            cfg = msgspec.convert(body, KubeSchedulerConfiguration, str_keys=True)
        except msgspec.ValidationError as err:
            raise InputError(source, msgspec_error(err, "")) from None
        extra = ("apiVersion", "kind") + (V1BETA2_EXTRA if self.version == V1BETA2 else ())
        found = unknown_fields(doc, KubeSchedulerConfiguration, extra=extra)
        if self.version != V1:  # v1 added the per-profile percentage
            for i, raw in enumerate(doc.get("profiles") or []):
                if isinstance(raw, dict) and "percentageOfNodesToScore" in raw:
                    found.append((f"profiles[{i}].percentageOfNodesToScore", None))
                    cfg.profiles[i].percentage_of_nodes_to_score = None
        self.found.unknown.extend(found)
        return cfg

    def _profile(self, where: str, name: str, raw: KubeSchedulerProfile) -> Profile:
        self.found.errors.extend(validate_percentage(f"{where}.percentageOfNodesToScore",
                                                     raw.percentage_of_nodes_to_score))
        named = list(named_plugins(where, raw))
        for place, plugin in named:
            self.found.errors.extend(validate_plugin_name(place, plugin, self.version))
        for place, plugin in named:
            self._note(unmodelled.unknown_plugin(place, plugin))
        filters, score_entries = filters_and_scores(self.found, self.version, where, raw.plugins)
        self._note(unmodelled.plugins({n: e.place for n, e in filters.items()},
                                      {n: e.place for n, e in score_entries.items()}))
        scores = weights(self.found, score_entries)
        args = self._plugin_args(where, raw.plugin_config)
        load_aware = args.get(LOAD_AWARE)
        enables_load_aware = LOAD_AWARE in filters or LOAD_AWARE in scores
        if load_aware is not None and not enables_load_aware:
            self._note([unmodelled.load_aware_not_enabled(where)])
        if enables_load_aware and load_aware is None:
            load_aware = LoadAwareArgs()
        fit, balanced = args.get("NodeResourcesFit"), args.get("NodeResourcesBalancedAllocation")
        spread, inter = args.get("PodTopologySpread"), args.get("InterPodAffinity")
        affinity = args.get("NodeAffinity")
        return Profile(
            scheduler_name=name,
            filters=frozenset(f for f in FILTERS if f in filters),
            scores=MappingProxyType({p: w for p, w in scores.items() if p in MODELLED_SCORES}),
            fit=fit if isinstance(fit, FitScoring) else FitScoring(),
            balanced_resources=balanced if isinstance(balanced, tuple) else DEFAULT_RESOURCES,
            spread=spread if isinstance(spread, SpreadDefaults) else SpreadDefaults(),
            hard_pod_affinity_weight=inter[0] if isinstance(inter, tuple) else 1,
            ignore_preferred_terms_of_existing_pods=inter[1] if isinstance(inter, tuple)
            else False,
            added_affinity=affinity if isinstance(affinity, NodeAffinity) else None,
            percentage_of_nodes_to_score=raw.percentage_of_nodes_to_score,
            load_aware=load_aware if isinstance(load_aware, LoadAwareArgs) else None,
        )

    def _plugin_args(self, where: str, configs: list[PluginConfig]) -> dict[str, object]:
        """Each configured plugin's args desched reads, validated and defaulted, by plugin."""
        out: dict[str, object] = {}
        seen: set[str] = set()
        for j, pc in enumerate(configs):
            place = f"{where}.pluginConfig[{j}]"
            if pc.name in seen:
                self.found.errors.append(duplicate(place, pc.name))
                continue
            seen.add(pc.name)
            plugin = PLUGIN_ARGS.get(pc.name)
            args = None if plugin is None else self._decode_args(place, pc.name, pc.args,
                                                                 plugin.type)
            if plugin is None or args is None:
                continue
            at = f"{place}.args"
            errors = plugin.validate(at, args)
            self.found.errors.extend(errors)
            self._note(plugin.warnings(at, args))
            if not errors:
                out[pc.name] = plugin.default(args)
        return out

    def _decode_args(self, place: str, name: str, raw: Any, args_type: type) -> Any:
        """A plugin's args decoded, None when they cannot be (the error noted)."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            self.found.errors.append(f"{place}.args: expected an object, got "
                                     f"{type(raw).__name__}")
            return None
        want = f"{name}Args"
        kind, api_version = raw.get("kind"), raw.get("apiVersion")
        group = str(api_version).rpartition("/")[0] if api_version is not None else GROUP
        if (kind is not None and kind != want) or group != GROUP:
            self.found.errors.append(f"{place}: args for plugin {name} were not of type "
                                     f"{want}.{GROUP}, got {kind or want}.{group}")
            return None
        self.found.unknown.extend(unknown_fields(raw, args_type, f"{place}.args",
                                                 ARGS_TYPE_META))
        body = {k: v for k, v in raw.items() if k not in ARGS_TYPE_META}
        try:
            return msgspec.convert(body, args_type, dec_hook=shared_hook, str_keys=True)
        except msgspec.ValidationError as err:
            self.found.errors.append(msgspec_error(err, f"{place}.args"))
            return None

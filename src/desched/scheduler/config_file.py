"""Reading a user's KubeSchedulerConfiguration into scheduler profiles (profile.py).

kube-scheduler's own semantics, from its source (v1.36, `pkg/scheduler/apis/config/v1` and
`framework/runtime/framework.go`):

- Plugins. The default set is one `multiPoint` list (profile.DEFAULT_PLUGINS, scores weighted as
  profile.DEFAULT_SCORE_WEIGHTS). A profile's own set of each extension point is merged into the
  defaults as `mergePluginSet` does: `disabled` drops defaults by name (`"*"`: all of them); an
  enabled plugin that is also a default takes its place, weight included (a default re-enabled
  without a weight loses its default weight); the others are appended. Then each extension
  point runs its explicitly enabled plugins, plus every multiPoint plugin that implements it and
  that its `disabled` does not name (`"*"` there: no multiPoint plugin at all).
- Score weights: a plugin's weight in `score.enabled` beats its multiPoint weight; a missing
  or zero weight counts as 1. kube-scheduler accepts a negative weight (no validation), so
  desched does too, and warns.
- Plugin args are defaulted and validated as kube-scheduler does, with its error wording:
  NodeResourcesFit, NodeResourcesBalancedAllocation, PodTopologySpread, InterPodAffinity,
  NodeAffinity; Koordinator's LoadAwareScheduling as koord-scheduler does
  (`pkg/scheduler/apis/config/v1`, `validation`).
- `kubescheduler.config.k8s.io/v1beta3` reads as v1. `v1beta2` has no multiPoint defaults: its
  default filters and scores are per extension point, every score weighing 1 but
  PodTopologySpread's 2 (kube-scheduler v1.28, the last to read v1beta2), and kube-scheduler's
  defaulting drops a v1beta2 `multiPoint` list.

Where desched departs from kube-scheduler: unknown fields and plugins are warnings, not errors
(koord-scheduler and other schedulers built on the framework add plugins); plugins desched does
not model are left out of the profile, with a warning when they filter or score nodes (the
volume and port filters are left out silently: a snapshot holds no volumes or ports).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, cast

import msgspec

from desched.decoding.document import one_document
from desched.decoding.go import Int32, Int64, aggregate
from desched.decoding.unknown_fields import ARGS_TYPE_META, describe, unknown_fields
from desched.errors import InputError, quote
from desched.model.labels import label_key_problem, label_value_problem
from desched.model.meta import LabelSelector, Shared, shared_hook
from desched.model.pod import NodeAffinity, NodeSelectorRequirement, TopologySpreadConstraint
from desched.scheduler.profile import (
    DEFAULT_PLUGINS,
    DEFAULT_RESOURCES,
    DEFAULT_SCHEDULER_NAME,
    DEFAULT_SCORE_WEIGHTS,
    FILTERS,
    SCORING_TYPES,
    FitScoring,
    LoadAwareArgs,
    Profile,
    ResourceSpec,
    SchedulerConfig,
    ShapePoint,
    SpreadDefaults,
)
from desched.util.names import nearest

GROUP = "kubescheduler.config.k8s.io"
V1, V1BETA3, V1BETA2 = f"{GROUP}/v1", f"{GROUP}/v1beta3", f"{GROUP}/v1beta2"
API_VERSIONS = (V1, V1BETA3, V1BETA2)
KIND = "KubeSchedulerConfiguration"
STDIN = "-"
LOAD_AWARE = "LoadAwareScheduling"

_ACCEPTED = (f"{V1} (or v1beta3, v1beta2) {KIND}, or a ConfigMap holding one")

# ---------------------------------------------------------------------------------------------
# The plugins desched knows, and which of the two extension points it models each implements.

_F, _S = "filter", "score"
_NONE: frozenset[str] = frozenset()
_FS = frozenset({_F, _S})
_FO, _SO = frozenset({_F}), frozenset({_S})

# kube-scheduler's in-tree registry (framework/plugins/registry.go).
KUBE_PLUGINS: Mapping[str, frozenset[str]] = MappingProxyType({
    "SchedulingGates": _NONE, "PrioritySort": _NONE, "NodeUnschedulable": _FO, "NodeName": _FO,
    "TaintToleration": _FS, "NodeAffinity": _FS, "NodePorts": _FO, "NodeResourcesFit": _FS,
    "VolumeRestrictions": _FO, "NodeVolumeLimits": _FO, "VolumeBinding": _FS, "VolumeZone": _FO,
    "PodTopologySpread": _FS, "InterPodAffinity": _FS, "DefaultPreemption": _NONE,
    "NodeResourcesBalancedAllocation": _SO, "ImageLocality": _SO, "DefaultBinder": _NONE,
    "DynamicResources": _FS, "NodeDeclaredFeatures": _FO, "GangScheduling": _NONE,
    "TopologyPlacementGenerator": _NONE, "PodGroupPodsCount": _NONE,
    # Removed since; the v1beta2 and v1beta3 configurations of older schedulers still name them.
    "EBSLimits": _FO, "GCEPDLimits": _FO, "AzureDiskLimits": _FO, "CinderLimits": _FO,
    "SelectorSpread": _SO,
})
# Plugins v1 rejects by name (validation.go invalidPluginsByVersion).
_V1_INVALID = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")
# koord-scheduler's plugins (cmd/koord-scheduler/main.go).
KOORD_PLUGINS: Mapping[str, frozenset[str]] = MappingProxyType({
    LOAD_AWARE: _FS, "NodeNUMAResource": _FS, "Reservation": _FS, "Coscheduling": _SO,
    "DeviceShare": _FS, "ElasticQuota": _NONE, "DefaultPreBind": _NONE,
    "NodeResourcesFitPlus": _SO, "ScarceResourceAvoidance": _SO, "SchedulingHint": _NONE,
})
_KNOWN: Mapping[str, frozenset[str]] = MappingProxyType({**KUBE_PLUGINS, **KOORD_PLUGINS})
# Score plugins the models weigh.
_SCORES = frozenset({*DEFAULT_SCORE_WEIGHTS, LOAD_AWARE})
# Known filters and scores left out without a word: volumes and host ports, which a snapshot
# does not hold.
_SILENT = frozenset({"NodePorts", "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding",
                     "VolumeZone", "EBSLimits", "GCEPDLimits", "AzureDiskLimits",
                     "CinderLimits"})

# v1beta2's defaults, per extension point (kube-scheduler v1.28 apis/config/v1beta2).
_V1BETA2_FILTERS = ("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity",
                    "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "EBSLimits",
                    "GCEPDLimits", "NodeVolumeLimits", "AzureDiskLimits", "VolumeBinding",
                    "VolumeZone", "PodTopologySpread", "InterPodAffinity")
_V1BETA2_SCORES = (("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
                   ("InterPodAffinity", 1), ("NodeResourcesFit", 1), ("NodeAffinity", 1),
                   ("PodTopologySpread", 2), ("TaintToleration", 1))

# ---------------------------------------------------------------------------------------------
# The file's schema. Fields desched does not read are `Any`: only their names matter (unknown
# ones are reported), kube-scheduler validates their values.


class _Plugin(msgspec.Struct):
    name: str = ""
    weight: Int32 | None = None


class _PluginSet(msgspec.Struct):
    enabled: list[_Plugin] = []
    disabled: list[_Plugin] = []


class _Plugins(msgspec.Struct, rename="camel"):
    pre_enqueue: _PluginSet | None = None
    queue_sort: _PluginSet | None = None
    pre_filter: _PluginSet | None = None
    filter: _PluginSet | None = None
    post_filter: _PluginSet | None = None
    pre_score: _PluginSet | None = None
    score: _PluginSet | None = None
    reserve: _PluginSet | None = None
    permit: _PluginSet | None = None
    pre_bind: _PluginSet | None = None
    bind: _PluginSet | None = None
    post_bind: _PluginSet | None = None
    multi_point: _PluginSet | None = None
    placement_generate: _PluginSet | None = None
    placement_score: _PluginSet | None = None


class _PluginConfig(msgspec.Struct):
    name: str = ""
    args: Any = None


class _Profile(msgspec.Struct, rename="camel"):
    scheduler_name: str | None = None
    percentage_of_nodes_to_score: Int32 | None = None  # v1 only
    plugins: _Plugins | None = None
    plugin_config: list[_PluginConfig] = []


class _LeaderElection(msgspec.Struct, rename="camel"):
    leader_elect: Any = None
    lease_duration: Any = None
    renew_deadline: Any = None
    retry_period: Any = None
    resource_lock: Any = None
    resource_name: Any = None
    resource_namespace: Any = None


class _ClientConnection(msgspec.Struct, rename="camel"):
    kubeconfig: Any = None
    accept_content_types: Any = None
    content_type: Any = None
    qps: Any = None
    burst: Any = None


class _TLSConfig(msgspec.Struct, rename="camel"):
    insecure: Any = None
    server_name: Any = None
    cert_file: Any = None
    key_file: Any = None
    c_a_file: Any = msgspec.field(default=None, name="caFile")
    cert_data: Any = None
    key_data: Any = None
    c_a_data: Any = msgspec.field(default=None, name="caData")


class _ManagedResource(msgspec.Struct, rename="camel"):
    name: Any = None
    ignored_by_scheduler: Any = None


class _Extender(msgspec.Struct, rename="camel"):
    url_prefix: Any = msgspec.field(default=None, name="urlPrefix")
    filter_verb: Any = None
    preempt_verb: Any = None
    prioritize_verb: Any = None
    weight: Any = None
    bind_verb: Any = None
    enable_https: Any = msgspec.field(default=None, name="enableHTTPS")
    tls_config: _TLSConfig | None = msgspec.field(default=None, name="tlsConfig")
    http_timeout: Any = msgspec.field(default=None, name="httpTimeout")
    node_cache_capable: Any = None
    managed_resources: list[_ManagedResource] = []
    ignorable: Any = None


class _Config(msgspec.Struct, rename="camel"):
    parallelism: Any = None
    leader_election: _LeaderElection | None = None
    client_connection: _ClientConnection | None = None
    enable_profiling: Any = None
    enable_contention_profiling: Any = None
    percentage_of_nodes_to_score: Int32 | None = None
    pod_initial_backoff_seconds: Any = None
    pod_max_backoff_seconds: Any = None
    profiles: list[_Profile] = []
    extenders: list[_Extender] = []
    delay_cache_until_active: Any = None


# v1beta2's top level has two more (removed in v1beta3).
_V1BETA2_EXTRA = ("healthzBindAddress", "metricsBindAddress")


# Plugin args.

class _ResourceSpec(msgspec.Struct):
    name: str = ""
    weight: Int64 = 0


class _ShapePoint(msgspec.Struct):
    utilization: Int32 = 0
    score: Int32 = 0


class _RequestedToCapacityRatio(msgspec.Struct):
    shape: list[_ShapePoint] = []


class _ScoringStrategy(msgspec.Struct, rename="camel"):
    type: str = ""
    resources: list[_ResourceSpec] = []
    requested_to_capacity_ratio: _RequestedToCapacityRatio | None = None


class _FitArgs(msgspec.Struct, rename="camel"):
    ignored_resources: list[str] = []
    ignored_resource_groups: list[str] = []
    scoring_strategy: _ScoringStrategy | None = None


class _BalancedArgs(msgspec.Struct):
    resources: list[_ResourceSpec] = []


class _Constraint(msgspec.Struct, rename="camel"):
    """A core/v1 TopologySpreadConstraint, decoded loosely so validation words its errors."""
    max_skew: Int32 = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: LabelSelector | None = None
    min_domains: Int32 | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = []


class _SpreadArgs(msgspec.Struct, rename="camel"):
    default_constraints: list[_Constraint] = []
    defaulting_type: str = ""


class _InterPodAffinityArgs(msgspec.Struct, rename="camel"):
    hard_pod_affinity_weight: Int32 | None = None
    ignore_preferred_terms_of_existing_pods: bool = False


class _NodeAffinityArgs(msgspec.Struct, rename="camel"):
    added_affinity: NodeAffinity | None = None


class _Aggregated(msgspec.Struct, rename="camel"):
    usage_thresholds: dict[str, Int64] = {}
    usage_aggregation_type: str = ""
    usage_aggregated_duration: Any = None
    score_aggregation_type: str = ""
    score_aggregated_duration: Any = None


class _LoadAwareArgs(msgspec.Struct, rename="camel"):
    filter_expired_node_metrics: bool | None = None
    node_metric_expiration_seconds: Int64 | None = None
    enable_schedule_when_node_metrics_expired: bool | None = None
    resource_weights: dict[str, Int64] = {}
    dominant_resource_weight: Int64 = 0
    usage_thresholds: dict[str, Int64] = {}
    prod_usage_thresholds: dict[str, Int64] = {}
    prod_usage_include_sys: bool = False
    score_according_prod_usage: bool | None = None
    estimator: str = ""
    estimated_scaling_factors: dict[str, Int64] | None = None
    estimated_seconds_after_pod_scheduled: Int64 | None = None
    estimated_seconds_after_initialized: Int64 | None = None
    allow_customize_estimation: bool = False
    aggregated: _Aggregated | None = None
    supported_resources: list[str] = []


# The args types desched reads, by plugin.
_ARGS: Mapping[str, type] = MappingProxyType({
    "NodeResourcesFit": _FitArgs, "NodeResourcesBalancedAllocation": _BalancedArgs,
    "PodTopologySpread": _SpreadArgs, "InterPodAffinity": _InterPodAffinityArgs,
    "NodeAffinity": _NodeAffinityArgs, LOAD_AWARE: _LoadAwareArgs})

# ---------------------------------------------------------------------------------------------
# kube-scheduler's field error wording (apimachinery validation/field).


def _go(value: object) -> str:
    """A bad value as field.Error prints it: numbers and booleans bare, strings quoted, the rest
    as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _invalid(path: str, value: object, detail: str) -> str:
    return f"{path}: Invalid value: {_go(value)}: {detail}"


def _unsupported(path: str, value: object, supported: Iterable[str]) -> str:
    return (f"{path}: Unsupported value: {_go(value)}: supported values: "
            + ", ".join(_go(s) for s in supported))


def _required(path: str, detail: str = "") -> str:
    return f"{path}: Required value" + (f": {detail}" if detail else "")


def _forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def _duplicate(path: str, value: object) -> str:
    return f"{path}: Duplicate value: {_go(value)}"


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


# ---------------------------------------------------------------------------------------------
# Reading the file.


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


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _msgspec_error(err: msgspec.ValidationError, where: str) -> str:
    """msgspec's `Expected ... - at `$.a.b`` as `where.a.b: Expected ...`; a node selector
    operator it does not know in kube-scheduler's words."""
    body, sep, at = str(err).partition(" - at `$")
    path = (where + at.rstrip("`")).lstrip(".") if sep else where
    bad_enum = body.startswith("Invalid enum value '")
    if bad_enum and path.endswith(".operator"):
        return _unsupported(path, body.removeprefix("Invalid enum value '")[:-1], _OPERATORS)
    return f"{path}: {body}" if path else body


@dataclass(frozen=True, slots=True)
class _Entry:
    """A plugin enabled at an extension point: its name, weight and where the file enables it
    ("" for a default)."""
    name: str
    weight: int | None
    place: str


class _Reader:
    def __init__(self, source: str, doc: dict[str, Any]) -> None:
        self.source = source
        self.doc = doc
        self.errors: list[str] = []
        self.notes: list[str] = []  # warnings, without the file name
        self.unknown: list[tuple[str, str | None]] = []  # unknown fields, nearest known name
        self.version = ""

    def warn(self, place: str, text: str) -> None:
        self.notes.append(f"{place}: {text}" if place else text)

    def read(self) -> tuple[SchedulerConfig, list[str]]:
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
            cfg = msgspec.convert(body, _Config, str_keys=True)
        except msgspec.ValidationError as err:
            raise InputError(source, _msgspec_error(err, "")) from None

        extra = ("apiVersion", "kind") + (_V1BETA2_EXTRA if self.version == V1BETA2 else ())
        found = unknown_fields(doc, _Config, extra=extra)
        if self.version != V1:  # v1 added the per-profile percentage
            for i, raw in enumerate(doc.get("profiles") or []):
                if isinstance(raw, dict) and "percentageOfNodesToScore" in raw:
                    found.append((f"profiles[{i}].percentageOfNodesToScore", None))
                    cfg.profiles[i].percentage_of_nodes_to_score = None
        self.unknown.extend(found)

        percentage = cfg.percentage_of_nodes_to_score
        self._check_percentage("percentageOfNodesToScore", percentage)
        for i, ext in enumerate(cfg.extenders):
            self.warn(f"extenders[{i}]", f"scheduler extender {_go(str(ext.url_prefix or ''))} "
                                         f"filters and scores nodes out of process; desched "
                                         f"does not model it, so placements may differ")

        raw_profiles = cfg.profiles or [_Profile()]
        profiles: dict[str, Profile] = {}
        seen: dict[str, int] = {}
        for i, raw in enumerate(raw_profiles):
            where = f"profiles[{i}]"
            name = raw.scheduler_name
            if name is None and len(raw_profiles) == 1:
                name = DEFAULT_SCHEDULER_NAME
            if not name:
                self.errors.append(_required(f"{where}.schedulerName"))
                name = ""
            elif name in seen:
                self.errors.append(_duplicate(f"{where}.schedulerName", name))
            seen.setdefault(name, i)
            profile = self._profile(where, name, raw)
            profiles.setdefault(name, profile)
        if self.errors:
            raise InputError(source, aggregate(self.errors))
        config = SchedulerConfig(profiles=MappingProxyType(profiles),
                                 percentage_of_nodes_to_score=percentage or 0, source=source)
        warnings = describe(source, self.unknown) + [f"{source}: {n}" for n in self.notes]
        return config, warnings

    def _check_percentage(self, where: str, value: int | None) -> None:
        if value is not None and not 0 <= value <= 100:
            self.errors.append(_invalid(where, value, "not in valid range [0-100]"))

    # -- one profile -------------------------------------------------------------------------

    def _profile(self, where: str, name: str, raw: _Profile) -> Profile:
        self._check_percentage(f"{where}.percentageOfNodesToScore",
                               raw.percentage_of_nodes_to_score)
        self._name_plugins(where, raw)
        if self.version == V1BETA2:
            filters, score_entries = self._plugins_v1beta2(where, raw.plugins)
        else:
            filters, score_entries = self._plugins_v1(where, raw.plugins)
        self._unmodelled(filters, score_entries)
        scores = self._weights(score_entries)

        args = self._plugin_args(where, raw.plugin_config)
        fit = args.get("NodeResourcesFit")
        balanced = args.get("NodeResourcesBalancedAllocation")
        spread = args.get("PodTopologySpread")
        inter = args.get("InterPodAffinity")
        affinity = args.get("NodeAffinity")
        load_aware = args.get(LOAD_AWARE)
        enables_load_aware = LOAD_AWARE in filters or LOAD_AWARE in scores
        if load_aware is not None and not enables_load_aware:
            self.warn(f"{where}.pluginConfig", f"{LOAD_AWARE} has args but no extension point "
                                               f"enables it (koord-scheduler would not run it); "
                                               f"desched models it as enabled")
        if enables_load_aware and load_aware is None:
            load_aware = LoadAwareArgs()
        return Profile(
            scheduler_name=name,
            filters=frozenset(f for f in FILTERS if f in filters),
            scores=MappingProxyType({p: w for p, w in scores.items() if p in _SCORES}),
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

    def _sets(self, where: str, plugins: _Plugins | None) -> list[tuple[str, _PluginSet]]:
        if plugins is None:
            return []
        out = []
        for f in msgspec.structs.fields(plugins):
            value = getattr(plugins, f.name)
            if value is not None:
                out.append((f"{where}.plugins.{f.encode_name}", value))
        return out

    def _name_plugins(self, where: str, raw: _Profile) -> None:
        """A warning for every name no scheduler desched knows has; an error for the plugins v1
        refuses."""
        for point, ps in self._sets(where, raw.plugins):
            for state, entries in (("enabled", ps.enabled), ("disabled", ps.disabled)):
                for k, entry in enumerate(entries):
                    self._check_name(f"{point}.{state}[{k}]", entry.name, state == "disabled")
        for j, pc in enumerate(raw.plugin_config):
            self._check_name(f"{where}.pluginConfig[{j}]", pc.name, False)

    def _check_name(self, place: str, name: str, disabled: bool) -> None:
        if disabled and name == "*":
            return
        if self.version == V1 and name in _V1_INVALID:
            self.errors.append(_invalid(place, name, f"was invalid in version {_go(V1)} "
                                                     f"(KubeSchedulerConfiguration is version "
                                                     f"{_go(self.version)})"))
        elif name not in _KNOWN:
            near = nearest(name, _KNOWN)
            self.warn(place, f"unknown plugin {quote(name)}"
                             + (f" (did you mean {near}?)" if near else ""))

    # -- which plugins filter and score ------------------------------------------------------

    @staticmethod
    def _entries(where: str, ps: _PluginSet | None) -> tuple[list[_Entry], set[str]]:
        if ps is None:
            return [], set()
        return ([_Entry(p.name, p.weight, f"{where}.enabled[{k}]")
                 for k, p in enumerate(ps.enabled)], {p.name for p in ps.disabled})

    @staticmethod
    def _merge(defaults: list[_Entry], custom: list[_Entry], disabled: set[str]) -> list[_Entry]:
        """kube-scheduler's mergePluginSet."""
        by_name = {e.name: k for k, e in enumerate(custom)}  # the last of a repeated name
        replaced: set[int] = set()
        out: list[_Entry] = []
        if "*" not in disabled:
            for entry in defaults:
                if entry.name in disabled:
                    continue
                k = by_name.get(entry.name)
                if k is not None:
                    entry = custom[k]
                    replaced.add(k)
                out.append(entry)
        out.extend(e for k, e in enumerate(custom) if k not in replaced)
        return out

    def _point(self, point: str, enabled: list[_Entry], disabled: set[str],
               multi_point: list[_Entry]) -> dict[str, _Entry]:
        """The plugins extension point `point` runs, in kube-scheduler's order: those enabled
        both there and by multiPoint, then multiPoint's own, then the rest enabled there
        (updatePluginList and expandMultiPointPlugins)."""
        kind = "FilterPlugin" if point == _F else "ScorePlugin"
        explicit: dict[str, _Entry] = {}
        for entry in enabled:
            implements = _KNOWN.get(entry.name)
            if implements is not None and point not in implements:
                self.errors.append(f"{entry.place}: plugin {quote(entry.name)} does not extend "
                                   f"{kind} plugin")
            elif entry.name in explicit:
                self.errors.append(f"{entry.place}: plugin {quote(entry.name)} already "
                                   f"registered as {quote(kind)}")
            else:
                explicit[entry.name] = entry
        if "*" in disabled:
            return explicit
        overrides: set[str] = set()
        expanded: dict[str, _Entry] = {}
        for entry in multi_point:
            if point not in _KNOWN.get(entry.name, _NONE) or entry.name in disabled:
                continue
            if entry.name in explicit:
                overrides.add(entry.name)
            elif entry.name in expanded:
                self.errors.append(f"{entry.place or 'multiPoint'}: plugin {quote(entry.name)} "
                                   f"already registered as {quote(kind)}")
            else:
                expanded[entry.name] = entry
        out = {n: e for n, e in explicit.items() if n in overrides}
        out.update(expanded)
        out.update((n, e) for n, e in explicit.items() if n not in overrides)
        return out

    def _weights(self, scores: dict[str, _Entry]) -> dict[str, int]:
        """Each score plugin's weight (its entry: score.enabled's when it is there, else its
        multiPoint one); missing or 0 is 1 (getValidScoreWeights)."""
        out: dict[str, int] = {}
        for name, entry in scores.items():
            weight = entry.weight or 1
            if weight < 0:
                self.warn(entry.place, f"score plugin {quote(name)} has a negative weight "
                                       f"({weight}); kube-scheduler accepts it, and it turns "
                                       f"the plugin's preference around")
            out[name] = weight
        return out

    def _plugins_v1(self, where: str,
                    plugins: _Plugins | None) -> tuple[dict[str, _Entry], dict[str, _Entry]]:
        p = plugins or _Plugins()
        defaults = [_Entry(n, DEFAULT_SCORE_WEIGHTS.get(n), "") for n in DEFAULT_PLUGINS]
        mp_custom, mp_disabled = self._entries(f"{where}.plugins.multiPoint", p.multi_point)
        multi_point = self._merge(defaults, mp_custom, mp_disabled)
        f_enabled, f_disabled = self._entries(f"{where}.plugins.filter", p.filter)
        s_enabled, s_disabled = self._entries(f"{where}.plugins.score", p.score)
        filters = self._point(_F, f_enabled, f_disabled, multi_point)
        return filters, self._point(_S, s_enabled, s_disabled, multi_point)

    def _plugins_v1beta2(self, where: str,
                         plugins: _Plugins | None) -> tuple[dict[str, _Entry], dict[str, _Entry]]:
        p = plugins or _Plugins()
        if p.multi_point is not None and (p.multi_point.enabled or p.multi_point.disabled):
            self.warn(f"{where}.plugins.multiPoint", f"kube-scheduler's {V1BETA2} defaulting "
                                                     f"drops multiPoint; it is ignored")
        f_custom, f_disabled = self._entries(f"{where}.plugins.filter", p.filter)
        s_custom, s_disabled = self._entries(f"{where}.plugins.score", p.score)
        f_merged = self._merge([_Entry(n, None, "") for n in _V1BETA2_FILTERS], f_custom,
                               f_disabled)
        s_merged = self._merge([_Entry(n, w, "") for n, w in _V1BETA2_SCORES], s_custom,
                               s_disabled)
        filters = self._point(_F, f_merged, set(), [])
        return filters, self._point(_S, s_merged, set(), [])

    def _unmodelled(self, filters: dict[str, _Entry], scores: dict[str, _Entry]) -> None:
        """One warning per known plugin that filters or scores here and that desched does not
        model (unknown names have theirs already)."""
        for name in dict.fromkeys([*filters, *scores]):
            if name not in _KNOWN or name in _SILENT or name in FILTERS or name in _SCORES:
                continue
            does = ("filters and scores" if name in filters and name in scores
                    else "filters" if name in filters else "scores")
            owner = " (koord-scheduler)" if name in KOORD_PLUGINS else ""
            place = (filters[name] if name in filters else scores[name]).place
            self.warn(place, f"plugin {quote(name)}{owner} {does} nodes; desched does not "
                             f"model it, so placements may differ")

    # -- plugin args -------------------------------------------------------------------------

    def _plugin_args(self, where: str, configs: list[_PluginConfig]) -> dict[str, object]:
        out: dict[str, object] = {}
        seen: set[str] = set()
        for j, pc in enumerate(configs):
            place = f"{where}.pluginConfig[{j}]"
            if pc.name in seen:
                self.errors.append(_duplicate(place, pc.name))
                continue
            seen.add(pc.name)
            args_type = _ARGS.get(pc.name)
            if args_type is None:
                continue
            args = self._decode_args(place, pc.name, pc.args, args_type)
            if args is None:
                continue
            at = f"{place}.args"
            if isinstance(args, _FitArgs):
                out[pc.name] = self._fit(at, args)
            elif isinstance(args, _BalancedArgs):
                out[pc.name] = self._balanced(at, args)
            elif isinstance(args, _SpreadArgs):
                out[pc.name] = self._spread(at, args)
            elif isinstance(args, _InterPodAffinityArgs):
                out[pc.name] = self._inter_pod_affinity(at, args)
            elif isinstance(args, _NodeAffinityArgs):
                out[pc.name] = self._node_affinity(at, args)
            elif isinstance(args, _LoadAwareArgs):
                out[pc.name] = self._load_aware(at, args)
        return out

    def _decode_args(self, place: str, name: str, raw: Any, args_type: type) -> Any:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            self.errors.append(f"{place}.args: expected an object, got {type(raw).__name__}")
            return None
        want = f"{name}Args"
        kind, api_version = raw.get("kind"), raw.get("apiVersion")
        group = str(api_version).rpartition("/")[0] if api_version is not None else GROUP
        if (kind is not None and kind != want) or group != GROUP:
            self.errors.append(f"{place}: args for plugin {name} were not of type "
                               f"{want}.{GROUP}, got {kind or want}.{group}")
            return None
        self.unknown.extend(unknown_fields(raw, args_type, f"{place}.args", ARGS_TYPE_META))
        body = {k: v for k, v in raw.items() if k not in ARGS_TYPE_META}
        try:
            return msgspec.convert(body, args_type, dec_hook=shared_hook, str_keys=True)
        except msgspec.ValidationError as err:
            self.errors.append(_msgspec_error(err, f"{place}.args"))
            return None

    def _resources(self, at: str, specs: list[_ResourceSpec]) -> tuple[ResourceSpec, ...]:
        """NodeResourcesFit's scoring resources: the default pair when none, weight 0 -> 1,
        each in (0, 100]."""
        if not specs:
            return DEFAULT_RESOURCES
        out = []
        for k, spec in enumerate(specs):
            weight = spec.weight or 1
            if not 0 < weight <= 100:
                self.errors.append(_invalid(f"{at}[{k}].weight", weight,
                                            f"resource weight of {spec.name} not in valid "
                                            f"range (0, 100]"))
            out.append(ResourceSpec(spec.name, weight))
        return tuple(out)

    def _fit(self, at: str, args: _FitArgs) -> FitScoring:
        errs_before = len(self.errors)
        for k, name in enumerate(args.ignored_resources):
            problem = label_key_problem(name)
            if problem:
                self.errors.append(_invalid(f"{at}.ignoredResources[{k}]", name, problem))
        for k, group in enumerate(args.ignored_resource_groups):
            path = f"{at}.ignoredResourceGroups[{k}]"
            if "/" in group:
                self.errors.append(_invalid(path, group, "resource group name can't contain "
                                                         "'/'"))
            problem = label_key_problem(group)
            if problem:
                self.errors.append(_invalid(path, group, problem))
        if args.ignored_resources or args.ignored_resource_groups:
            self.warn(at, "ignoredResources and ignoredResourceGroups make NodeResourcesFit "
                          "skip those resources; desched's fit still checks them")
        strategy = args.scoring_strategy
        if strategy is None:
            return FitScoring()
        at = f"{at}.scoringStrategy"
        if strategy.type not in SCORING_TYPES:
            self.errors.append(_unsupported(f"{at}.type", strategy.type, sorted(SCORING_TYPES)))
        resources = self._resources(f"{at}.resources", strategy.resources)
        shape: tuple[ShapePoint, ...] = ()
        ratio = strategy.requested_to_capacity_ratio
        if strategy.type == "RequestedToCapacityRatio":
            if ratio is None:
                self.errors.append(_required(f"{at}.requestedToCapacityRatio",
                                             "must be specified when type is "
                                             "RequestedToCapacityRatio"))
            else:
                shape = self._shape(f"{at}.requestedToCapacityRatio.shape", ratio.shape)
        elif ratio is not None:
            self.errors.append(_forbidden(f"{at}.requestedToCapacityRatio",
                                          "must be nil when type is not "
                                          "RequestedToCapacityRatio"))
        if len(self.errors) > errs_before:
            return FitScoring()
        return FitScoring(type=cast(Any, strategy.type), resources=resources, shape=shape)

    def _shape(self, at: str, points: list[_ShapePoint]) -> tuple[ShapePoint, ...]:
        """validateFunctionShape: at least one point, utilizations increasing, each in
        [0, 100], scores in [0, 10]."""
        if not points:
            self.errors.append(_required(at, "at least one point must be specified"))
            return ()
        for k in range(1, len(points)):
            if points[k - 1].utilization >= points[k].utilization:
                self.errors.append(_invalid(f"{at}[{k}].utilization", points[k].utilization,
                                            "values must be sorted in increasing order"))
                break
        for k, point in enumerate(points):
            if not 0 <= point.utilization <= 100:
                self.errors.append(_invalid(f"{at}[{k}].utilization", point.utilization,
                                            "not in valid range [0, 100]"))
            if not 0 <= point.score <= 10:
                self.errors.append(_invalid(f"{at}[{k}].score", point.score,
                                            "not in valid range [0, 10]"))
        return tuple(ShapePoint(p.utilization, p.score) for p in points)

    def _balanced(self, at: str, args: _BalancedArgs) -> tuple[ResourceSpec, ...]:
        if not args.resources:
            return DEFAULT_RESOURCES
        seen: set[str] = set()
        out = []
        for k, spec in enumerate(args.resources):
            if spec.name in seen:
                self.errors.append(_duplicate(f"{at}.resources[{k}].name", spec.name))
            seen.add(spec.name)
            weight = spec.weight or 1
            if weight != 1:
                self.errors.append(_invalid(f"{at}.resources[{k}].weight", weight, "must be 1"))
            out.append(ResourceSpec(spec.name, weight))
        return tuple(out)

    def _spread(self, at: str, args: _SpreadArgs) -> SpreadDefaults:
        defaulting = args.defaulting_type or "System"
        path = f"{at}.defaultingType"
        if defaulting not in ("System", "List"):
            self.errors.append(_unsupported(path, defaulting, ("System", "List")))
        elif defaulting == "System" and args.default_constraints:
            self.errors.append(_invalid(path, defaulting,
                                        "when .defaultConstraints are not empty"))
        constraints = []
        for k, c in enumerate(args.default_constraints):
            p = f"{at}.defaultConstraints[{k}]"
            if c.max_skew <= 0:
                self.errors.append(_invalid(f"{p}.maxSkew", c.max_skew,
                                            "not in valid range (0, inf)"))
            if not c.topology_key:
                self.errors.append(_required(f"{p}.topologyKey", "can not be empty"))
            else:
                problem = label_key_problem(c.topology_key)
                if problem:
                    self.errors.append(_invalid(f"{p}.topologyKey", c.topology_key, problem))
            if not c.when_unsatisfiable:
                self.errors.append(_required(f"{p}.whenUnsatisfiable", "can not be empty"))
            elif c.when_unsatisfiable not in ("DoNotSchedule", "ScheduleAnyway"):
                self.errors.append(_unsupported(f"{p}.whenUnsatisfiable", c.when_unsatisfiable,
                                                ("DoNotSchedule", "ScheduleAnyway")))
            if c.label_selector is not None:
                self.errors.append(_forbidden(f"{p}.labelSelector", "constraint must not "
                                              "define a selector, as they deduced for each pod"))
            for policy, value in (("nodeAffinityPolicy", c.node_affinity_policy),
                                  ("nodeTaintsPolicy", c.node_taints_policy)):
                if value is not None and value not in ("Honor", "Ignore"):
                    self.errors.append(_unsupported(f"{p}.{policy}", value, ("Honor", "Ignore")))
            for other in args.default_constraints[:k]:
                if (other.topology_key, other.when_unsatisfiable) == (c.topology_key,
                                                                      c.when_unsatisfiable):
                    self.errors.append(_duplicate(f"{at}.defaultConstraints[{k}]",
                                                  f"{{{c.topology_key}, "
                                                  f"{c.when_unsatisfiable}}}"))
                    break
            constraints.append(TopologySpreadConstraint(
                max_skew=c.max_skew, topology_key=shared_hook(Shared, c.topology_key),
                when_unsatisfiable=cast(Any, c.when_unsatisfiable), min_domains=c.min_domains,
                node_affinity_policy=cast(Any, c.node_affinity_policy),
                node_taints_policy=cast(Any, c.node_taints_policy),
                match_label_keys=tuple(c.match_label_keys)))
        kind: Literal["System", "List"] = "List" if defaulting == "List" else "System"
        return SpreadDefaults(defaulting_type=kind, constraints=tuple(constraints))

    def _inter_pod_affinity(self, at: str, args: _InterPodAffinityArgs) -> tuple[int, bool]:
        weight = 1 if args.hard_pod_affinity_weight is None else args.hard_pod_affinity_weight
        if not 0 <= weight <= 100:
            self.errors.append(_invalid(f"{at}.hardPodAffinityWeight", weight,
                                        "not in valid range [0, 100]"))
        return weight, args.ignore_preferred_terms_of_existing_pods

    def _node_affinity(self, at: str, args: _NodeAffinityArgs) -> NodeAffinity | None:
        affinity = args.added_affinity
        if affinity is None:
            return None
        at = f"{at}.addedAffinity"
        required = affinity.required_during_scheduling_ignored_during_execution
        if required is not None:
            for k, term in enumerate(required.node_selector_terms):
                self._term(f"{at}.requiredDuringSchedulingIgnoredDuringExecution"
                           f".nodeSelectorTerms[{k}]",
                           term.match_expressions, term.match_fields)
        for k, pref in enumerate(affinity.preferred_during_scheduling_ignored_during_execution):
            if pref.weight == 0:
                continue
            self._term(f"{at}.preferredDuringSchedulingIgnoredDuringExecution[{k}]",
                       pref.preference.match_expressions, pref.preference.match_fields)
        return affinity

    def _term(self, at: str, expressions: tuple[NodeSelectorRequirement, ...],
              fields: tuple[NodeSelectorRequirement, ...]) -> None:
        """nodeaffinity.NewNodeSelector's checks of one term (labels.NewRequirement's)."""
        for k, req in enumerate(expressions):
            p = f"{at}.matchExpressions[{k}]"
            problem = label_key_problem(req.key)
            if problem:
                self.errors.append(_invalid(f"{p}.key", req.key, problem))
            values = list(req.values)
            if req.operator in ("In", "NotIn") and not values:
                self.errors.append(_invalid(f"{p}.values", None, "for 'in', 'notin' operators, "
                                                                 "values set can't be empty"))
            elif req.operator in ("Exists", "DoesNotExist") and values:
                self.errors.append(_invalid(f"{p}.values", values, "values set must be empty "
                                                                   "for exists and does not "
                                                                   "exist"))
            elif req.operator in ("Gt", "Lt"):
                if len(values) != 1:
                    self.errors.append(_invalid(f"{p}.values", values or None,
                                                "for 'Gt', 'Lt' operators, exactly one value "
                                                "is required"))
                for v, value in enumerate(values):
                    try:
                        int(value, 10)
                    except ValueError:
                        self.errors.append(_invalid(f"{p}.values[{v}]", value,
                                                    "for 'Gt', 'Lt' operators, the value must "
                                                    "be an integer"))
            for v, value in enumerate(values):
                problem = label_value_problem(value)
                if problem:
                    self.errors.append(_invalid(f"{p}.values[{v}]", value, problem))
        for k, req in enumerate(fields):
            p = f"{at}.matchFields[{k}]"
            if req.operator not in ("In", "NotIn"):
                self.errors.append(_unsupported(f"{p}.operator", req.operator, ("In", "NotIn")))
            elif len(req.values) != 1:
                self.errors.append(_invalid(f"{p}.values", list(req.values) or None,
                                            "must have one element"))

    def _load_aware(self, at: str, args: _LoadAwareArgs) -> LoadAwareArgs:
        """koord-scheduler's SetDefaults_LoadAwareSchedulingArgs and
        ValidateLoadAwareSchedulingArgs (its wording; paths under the plugin's args)."""
        errs_before = len(self.errors)
        expiration = args.node_metric_expiration_seconds
        if expiration is not None and expiration <= 0:
            self.errors.append(_invalid(f"{at}.nodeMetricExpiredSeconds", expiration,
                                        "nodeMetricExpiredSeconds should be a positive value"))
        for name, weight in args.resource_weights.items():
            problem = ("should be a positive value" if weight <= 0
                       else "should be less than 100" if weight > 100 else "")
            if problem:
                self.errors.append(_invalid(f"{at}.resourceWeights", args.resource_weights,
                                            f"resource Weight of {name} {problem}, got "
                                            f"{weight}"))
                break
        dominant = args.dominant_resource_weight
        if dominant < 0:
            self.errors.append(_invalid(f"{at}.dominantResourceWeight", dominant,
                                        "dominantResourceWeight should not be a negative value"))
        if dominant > 100:
            self.errors.append(_invalid(f"{at}.dominantResourceWeight", dominant,
                                        "dominantResourceWeight should be less than 100"))
        self._thresholds(f"{at}.usageThresholds", args.usage_thresholds)
        factors = dict(args.estimated_scaling_factors or {})
        for name, factor in factors.items():
            problem = ("should be a positive value" if factor <= 0
                       else "should be less than 100" if factor > 100 else "")
            if problem:
                self.errors.append(_invalid(f"{at}.estimatedScalingFactors", factors,
                                            f"estimated resource ScalingFactor of {name} "
                                            f"{problem}, got {factor}"))
                break
        defaults = LoadAwareArgs()
        if args.estimated_scaling_factors is None:
            factors = dict(defaults.estimated_scaling_factors)
        else:
            for name, factor in defaults.estimated_scaling_factors.items():
                factors.setdefault(name, factor)
        for name in args.resource_weights:
            if name not in factors:
                self.errors.append(f"{at}.estimatedScalingFactors: Not found: {_go(name)}")
                break
        if args.aggregated is not None:
            self._thresholds(f"{at}.aggregated.usageThresholds", args.aggregated.usage_thresholds)
            for field in ("usageAggregationType", "scoreAggregationType"):
                value = getattr(args.aggregated, "usage_aggregation_type"
                                if field.startswith("usage") else "score_aggregation_type")
                supported = ("avg", "p50", "p90", "p95", "p99")
                if value and value not in supported:
                    self.errors.append(_unsupported(f"{at}.aggregated.{field}", value, supported))
        self._load_aware_unmodelled(at, args)
        if len(self.errors) > errs_before:
            return defaults
        weights = dict(args.resource_weights)
        if not weights and dominant == 0:
            weights = dict(defaults.resource_weights)
        return LoadAwareArgs(
            usage_thresholds=MappingProxyType(dict(args.usage_thresholds)
                                              or dict(defaults.usage_thresholds)),
            prod_usage_thresholds=MappingProxyType(dict(args.prod_usage_thresholds)),
            resource_weights=MappingProxyType(weights),
            estimated_scaling_factors=MappingProxyType(factors),
            node_metric_expiration_seconds=(defaults.node_metric_expiration_seconds
                                            if expiration is None else expiration),
            filter_expired_node_metrics=(True if args.filter_expired_node_metrics is None
                                         else args.filter_expired_node_metrics),
        )

    def _thresholds(self, at: str, thresholds: dict[str, int]) -> None:
        for name, value in thresholds.items():
            problem = ("should be a positive value" if value < 0
                       else "should be less than 100" if value > 100 else "")
            if problem:
                self.errors.append(_invalid(at, thresholds, f"resource Threshold of {name} "
                                                            f"{problem}, got {value}"))
                return

    def _load_aware_unmodelled(self, at: str, args: _LoadAwareArgs) -> None:
        """A warning for each LoadAwareScheduling arg set to change what koord-scheduler does
        in a way desched does not model."""
        changed = {
            "dominantResourceWeight": args.dominant_resource_weight != 0,
            "enableScheduleWhenNodeMetricsExpired":
                bool(args.enable_schedule_when_node_metrics_expired),
            "prodUsageIncludeSys": args.prod_usage_include_sys,
            "scoreAccordingProdUsage": bool(args.score_according_prod_usage),
            "estimatedSecondsAfterPodScheduled":
                args.estimated_seconds_after_pod_scheduled is not None,
            "estimatedSecondsAfterInitialized":
                args.estimated_seconds_after_initialized is not None,
            "allowCustomizeEstimation": args.allow_customize_estimation,
            "aggregated": args.aggregated is not None,
            "supportedResources": bool(args.supported_resources),
        }
        for name, is_set in changed.items():
            if is_set:
                self.warn(f"{at}.{name}", "desched's LoadAwareScheduling model does not model "
                                          "this; it is ignored")

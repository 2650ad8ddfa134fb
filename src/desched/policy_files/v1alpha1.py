"""The historic `strategies:` format (descheduler/v1alpha1), converted the way v0.30 did it:
one profile per enabled strategy, DefaultEvictor built from the top-level booleans and the
strategy's priority threshold and nodeFit."""

from __future__ import annotations

from typing import Any

import msgspec

from desched.decoding.go import Int32, aggregate
from desched.decoding.unknown_fields import describe, unknown_fields
from desched.errors import shown
from desched.framework.policy import Policy
from desched.framework.registry import Plugins
from desched.model.meta import LabelSelector
from desched.policy_files.args import ArgsError, decode_args
from desched.policy_files.decoding import DecodingError, convert
from desched.policy_files.errors import DecodeError, PolicyError
from desched.policy_files.hints import did_you_mean
from desched.policy_files.upstream import load_v1alpha2

# v1alpha1's strategies by the extension point their v1alpha2 plugin runs at.
BALANCE_STRATEGIES = {"RemoveDuplicates", "LowNodeUtilization", "HighNodeUtilization",
                      "RemovePodsViolatingTopologySpreadConstraint"}
DESCHEDULE_STRATEGIES = {"RemovePodsViolatingInterPodAntiAffinity",
                         "RemovePodsViolatingNodeAffinity", "RemovePodsViolatingNodeTaints",
                         "RemovePodsHavingTooManyRestarts", "PodLifeTime", "RemoveFailedPods"}
_EVICTOR_BOOLS = ("evictLocalStoragePods", "evictDaemonSetPods", "evictSystemCriticalPods",
                  "ignorePvcPods", "evictFailedBarePods")


# The v1alpha1 schema of v0.30's Go types, decoded as Go's decoder did: unknown keys are ignored
# (and reported as warnings), a value of the wrong type is a decode error, never coerced.
# Conversion then reads the raw dict.
class _Namespaces(msgspec.Struct):
    include: list[str] | None = None
    exclude: list[str] | None = None


class _Thresholds(msgspec.Struct, rename="camel"):
    use_deviation_thresholds: bool = False
    thresholds: dict[str, float] | None = None
    target_thresholds: dict[str, float] | None = None
    number_of_nodes: int = 0


class _Restarts(msgspec.Struct, rename="camel"):
    pod_restart_threshold: Int32 = 0
    including_init_containers: bool = False


class _PodLifeTime(msgspec.Struct, rename="camel"):
    max_pod_life_time_seconds: int | None = None
    states: list[str] | None = None
    pod_status_phases: list[str] | None = None


class _RemoveDuplicates(msgspec.Struct, rename="camel"):
    exclude_owner_kinds: list[str] | None = None


class _FailedPods(msgspec.Struct, rename="camel"):
    exclude_owner_kinds: list[str] | None = None
    min_pod_lifetime_seconds: int | None = None
    reasons: list[str] | None = None
    including_init_containers: bool = False


class _Params(msgspec.Struct, rename="camel"):
    node_resource_utilization_thresholds: _Thresholds | None = None
    node_affinity_type: list[str] | None = None
    pods_having_too_many_restarts: _Restarts | None = None
    pod_life_time: _PodLifeTime | None = None
    remove_duplicates: _RemoveDuplicates | None = None
    failed_pods: _FailedPods | None = None
    include_soft_constraints: bool = False
    namespaces: _Namespaces | None = None
    threshold_priority: Int32 | None = None
    threshold_priority_class_name: str = ""
    label_selector: LabelSelector | None = None
    node_fit: bool = False
    include_prefer_no_schedule: bool = False
    excluded_taints: list[str] | None = None
    included_taints: list[str] | None = None


class _Strategy(msgspec.Struct):
    enabled: bool = False
    weight: int = 0
    params: _Params | None = None


class _V1alpha1(msgspec.Struct, rename="camel"):
    strategies: dict[str, _Strategy | None] | None = None
    node_selector: str | None = None
    evict_failed_bare_pods: bool | None = None
    evict_local_storage_pods: bool | None = None
    evict_system_critical_pods: bool | None = None
    evict_daemon_set_pods: bool | None = None
    ignore_pvc_pods: bool | None = None
    max_no_of_pods_to_evict_per_node: int | None = None
    max_no_of_pods_to_evict_per_namespace: int | None = None


def _pick(src: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: src[k] for k in keys if src.get(k) is not None}


def _strategy_args(name: str, params: dict[str, Any]) -> dict[str, Any]:
    common = _pick(params, "namespaces", "labelSelector")
    if name == "RemovePodsViolatingNodeTaints":
        # includedTaints was never copied by the v0.30 conversion (a historic bug, kept).
        return {**common, **_pick(params, "includePreferNoSchedule", "excludedTaints")}
    if name == "RemoveFailedPods":
        return {**common, **_pick(params.get("failedPods") or {}, "includingInitContainers",
                                  "minPodLifetimeSeconds", "excludeOwnerKinds", "reasons")}
    if name == "RemovePodsViolatingNodeAffinity":
        return {**common, **_pick(params, "nodeAffinityType")}
    if name == "RemovePodsViolatingInterPodAntiAffinity":
        return common
    if name == "RemovePodsHavingTooManyRestarts":
        return {**common, **_pick(params.get("podsHavingTooManyRestarts") or {},
                                  "podRestartThreshold", "includingInitContainers")}
    if name == "PodLifeTime":
        plt = params.get("podLifeTime") or {}
        out = {**common, **_pick(plt, "maxPodLifeTimeSeconds")}
        states = list(plt.get("podStatusPhases") or []) + list(plt.get("states") or [])
        if states:
            out["states"] = states
        return out
    if name == "RemoveDuplicates":
        out = _pick(params, "namespaces")
        out.update(_pick(params.get("removeDuplicates") or {}, "excludeOwnerKinds"))
        return out
    if name == "RemovePodsViolatingTopologySpreadConstraint":
        constraints = ["DoNotSchedule"]
        if params.get("includeSoftConstraints"):
            constraints.append("ScheduleAnyway")
        return {**common, "constraints": constraints, "topologyBalanceNodeFit": True}
    # LowNodeUtilization / HighNodeUtilization
    thresholds = params.get("nodeResourceUtilizationThresholds") or {}
    out = _pick(thresholds, "thresholds", "numberOfNodes")
    if name == "LowNodeUtilization":
        out.update(_pick(thresholds, "targetThresholds", "useDeviationThresholds"))
    if params.get("namespaces"):
        out["evictableNamespaces"] = params["namespaces"]
    return out


def convert_v1alpha1(path: str, doc: dict[str, Any], plugins: Plugins) -> dict[str, Any]:
    """The equivalent v1alpha2 document; conversion errors as upstream worded them."""
    try:
        convert(doc, _V1alpha1)
    except DecodingError as err:
        raise DecodeError(path, str(err)) from None
    strategies = doc.get("strategies") or {}
    profiles: list[dict[str, Any]] = []
    for name, strategy in strategies.items():
        known = BALANCE_STRATEGIES | DESCHEDULE_STRATEGIES
        if name not in known:
            raise PolicyError(path, f"unknown strategy name: {shown(name)}"
                                    f"{did_you_mean(name, sorted(known))}")
        strategy = strategy or {}
        if not strategy.get("enabled"):
            continue
        params = strategy.get("params")
        evictor: dict[str, Any] = {k: bool(doc.get(k)) for k in _EVICTOR_BOOLS}
        if params is not None:
            evictor["nodeFit"] = bool(params.get("nodeFit")) and name != "PodLifeTime"
            value, cls = params.get("thresholdPriority"), params.get("thresholdPriorityClassName")
            if value is not None and cls:
                raise PolicyError(path, f"priority threshold misconfigured for plugin {name}")
            if value is not None:
                evictor["priorityThreshold"] = {"value": value}
            elif cls:
                evictor["priorityThreshold"] = {"name": cls}
        args = _strategy_args(name, params or {})
        spec = plugins.get(name)
        if spec is not None:
            try:
                decoded = decode_args(spec.args_type, args, f"{name}Args")
            except ArgsError as err:
                raise PolicyError(path, f"strategy {name!r} param validation failed: {err}"
                                  .replace("'", '"')) from None
            errs = spec.validate(decoded)
            if errs:
                raise PolicyError(path, f'strategy "{name}" param validation failed: '
                                        f"{aggregate(errs)}")
        ep = "balance" if name in BALANCE_STRATEGIES else "deschedule"
        profiles.append({
            "name": f"strategy-{name}-profile",
            "pluginConfig": [{"name": "DefaultEvictor", "args": evictor},
                             {"name": name, "args": args}],
            "plugins": {"filter": {"enabled": ["DefaultEvictor"]},
                        "preevictionfilter": {"enabled": ["DefaultEvictor"]},
                        ep: {"enabled": [name]}},
        })
    out: dict[str, Any] = {"profiles": profiles}
    for key in ("nodeSelector", "maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace"):
        if doc.get(key) is not None:
            out[key] = doc[key]
    return out


def load_v1alpha1(path: str, doc: dict[str, Any], plugins: Plugins) -> Policy:
    policy = load_v1alpha2(path, convert_v1alpha1(path, doc, plugins), plugins)
    policy.format = "v1alpha1"
    # About the file as written, not the v1alpha2 document converted from it.
    policy.warnings = describe(path, unknown_fields(doc, _V1alpha1,
                                                   extra=("apiVersion", "kind")))
    return policy

"""The historic `strategies:` format (descheduler/v1alpha1), converted the way v0.30 did it:
one profile per enabled strategy, DefaultEvictor built from the top-level booleans and the
strategy's priority threshold and nodeFit (reference/descheduler.md §1.7)."""

from __future__ import annotations

from typing import Any

from desched.framework.registry import registry
from desched.policy.args import ArgsError, decode_args
from desched.policy.errors import DecodeError, PolicyError, aggregate
from desched.policy.model import Policy
from desched.policy.upstream import load_v1alpha2

_BALANCE = {"RemoveDuplicates", "LowNodeUtilization", "HighNodeUtilization",
            "RemovePodsViolatingTopologySpreadConstraint"}
_DESCHEDULE = {"RemovePodsViolatingInterPodAntiAffinity", "RemovePodsViolatingNodeAffinity",
               "RemovePodsViolatingNodeTaints", "RemovePodsHavingTooManyRestarts", "PodLifeTime",
               "RemoveFailedPods"}
_EVICTOR_BOOLS = ("evictLocalStoragePods", "evictDaemonSetPods", "evictSystemCriticalPods",
                  "ignorePvcPods", "evictFailedBarePods")


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


def convert_v1alpha1(path: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The equivalent v1alpha2 document; conversion errors as upstream worded them."""
    strategies = doc.get("strategies") or {}
    if not isinstance(strategies, dict):
        raise DecodeError(path, "strategies: expected a map of strategy name to strategy")
    plugins = registry()
    profiles: list[dict[str, Any]] = []
    for name, strategy in strategies.items():
        if name not in _BALANCE and name not in _DESCHEDULE:
            raise PolicyError(path, f"unknown strategy name: {name}")
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
        ep = "balance" if name in _BALANCE else "deschedule"
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


def load_v1alpha1(path: str, doc: dict[str, Any]) -> Policy:
    policy = load_v1alpha2(path, convert_v1alpha1(path, doc))
    policy.format = "v1alpha1"
    return policy

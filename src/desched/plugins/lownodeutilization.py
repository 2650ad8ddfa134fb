"""LowNodeUtilization (balance): moves pods off nodes above `targetThresholds` while nodes below
`thresholds` have room, by pod requests (reference/descheduler.md §2.3, §2.5).

Real-usage sources (`metricsUtilization`) are accepted and validated with upstream's messages,
but this build has no metrics client: such a profile fails to build with a one-line error
rather than balancing on made-up usage.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from desched.errors import InputError
from desched.framework.registry import PluginSpec, register
from desched.framework.types import Handle
from desched.model.node import Node
from desched.model.pod import Pod
from desched.plugins.nodeutilization_common import (
    METRIC_RESOURCE,
    EvictionLimits,
    EvictionRun,
    NodeInfo,
    Percentages,
    RequestedUsage,
    above_target,
    above_threshold,
    below_threshold,
    classify_and_build,
    describe_over,
    deviation_thresholds,
    go_list,
    name_list,
    pool_has_room,
    resource_names,
    sort_by_total_usage,
    validate_thresholds,
)
from desched.policy.args import Namespaces

KUBERNETES_METRICS = "KubernetesMetrics"
PROMETHEUS = "Prometheus"


class Prometheus(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    query: str = ""


class MetricsUtilization(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                         omit_defaults=True):
    metrics_server: bool = False  # deprecated spelling of source: KubernetesMetrics
    source: str = ""
    prometheus: Prometheus | None = None


class LowNodeUtilizationArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    use_deviation_thresholds: bool = False
    thresholds: dict[str, float] = {}
    target_thresholds: dict[str, float] = {}
    number_of_nodes: int = 0
    metrics_utilization: MetricsUtilization | None = None
    evictable_namespaces: Namespaces | None = None
    eviction_limits: EvictionLimits | None = None


def _validate_threshold_pair(args: LowNodeUtilizationArgs) -> str | None:
    err = validate_thresholds(args.thresholds)
    if err is not None:
        return f"thresholds config is not valid: {err}"
    err = validate_thresholds(args.target_thresholds)
    if err is not None:
        return f"targetThresholds config is not valid: {err}"
    if len(args.thresholds) != len(args.target_thresholds):
        return "thresholds and targetThresholds configured different resources"
    for name, value in args.thresholds.items():
        target = args.target_thresholds.get(name)
        if target is None:
            return "thresholds and targetThresholds configured different resources"
        if value > target and not args.use_deviation_thresholds:
            return f"thresholds' {name} percentage is greater than targetThresholds'"
    return None


def validate(args: LowNodeUtilizationArgs) -> list[str]:
    """Upstream's ValidateLowNodeUtilizationArgs: the first problem only."""
    ns = args.evictable_namespaces
    if ns is not None and ns.include:
        return ["only Exclude namespaces can be set, inclusion is not supported"]
    err = _validate_threshold_pair(args)
    if err is not None:
        return [err]
    m = args.metrics_utilization
    if m is not None:
        if m.source == KUBERNETES_METRICS and m.metrics_server:
            return [f'it is not allowed to set both "{KUBERNETES_METRICS}" source and '
                    f"metricsServer"]
        if m.source == KUBERNETES_METRICS and m.prometheus is not None:
            return [f"prometheus configuration is not allowed to set when source is set to "
                    f'"{KUBERNETES_METRICS}"']
        if m.source == PROMETHEUS and (m.prometheus is None or not m.prometheus.query):
            return [f'prometheus query is required when metrics source is set to "{PROMETHEUS}"']
    return []


_NOT_AVAILABLE = ("is not available in this build; only pod requests are supported "
                  "(remove metricsUtilization to balance by requests)")


def usage_source_problem(args: LowNodeUtilizationArgs) -> str | None:
    """Why the plugin cannot be built for its metricsUtilization, or None for requests.

    Upstream's NewLowNodeUtilization checks come first (Prometheus thresholds must be exactly
    {MetricResource: x}; unknown or empty sources), then the missing real-usage client.
    """
    m = args.metrics_utilization
    if m is None:
        return None
    if m.source == PROMETHEUS:
        if m.prometheus is None:
            return "prometheus property is missing"
        if not m.prometheus.query:
            return "prometheus query is missing"
        for key, thresholds in (("thresholds", args.thresholds),
                                ("targetThresholds", args.target_thresholds)):
            if list(thresholds) != [METRIC_RESOURCE]:
                return (f'{key} are expected to specify a single instance of '
                        f'"{METRIC_RESOURCE}" resource, got {go_list(thresholds)} instead')
        return f'metricsUtilization source "{PROMETHEUS}" (node usage from a Prometheus ' \
               f"query) {_NOT_AVAILABLE}"
    if m.metrics_server:
        return f"metricsUtilization.metricsServer (node usage from metrics.k8s.io) {_NOT_AVAILABLE}"
    if m.source == KUBERNETES_METRICS:
        return (f'metricsUtilization source "{KUBERNETES_METRICS}" (node usage from '
                f"metrics.k8s.io) {_NOT_AVAILABLE}")
    if m.source:
        return "unrecognized metrics source"
    return "metrics source is empty"


class LowNodeUtilization:
    def __init__(self, args: LowNodeUtilizationArgs, handle: Handle) -> None:
        problem = usage_source_problem(args)
        if problem is not None:
            raise InputError("", f'unable to create "{handle.profile}" profile: unable to build '
                                 f"LowNodeUtilization plugin: {problem}")
        self.args = args
        self.handle = handle
        self.threshold_names = list(args.thresholds)
        self.names = resource_names(args.thresholds)
        self.usage = RequestedUsage(handle.snapshot, self.names)
        ns = args.evictable_namespaces
        self.excluded = frozenset(ns.exclude) if ns is not None else frozenset()
        limits = args.eviction_limits
        self.node_limit = limits.node if limits is not None else None

    def _thresholds(self, percentages: dict[str, Percentages]) -> tuple[Percentages, Percentages]:
        a = self.args
        if a.use_deviation_thresholds:
            return deviation_thresholds(percentages.values(), self.threshold_names,
                                        a.thresholds, a.target_thresholds)
        return dict(a.thresholds), dict(a.target_thresholds)

    def _removable(self, pod: Pod) -> bool:
        return self.handle.filter(pod)

    def balance(self, nodes: list[Node]) -> None:
        args = self.args
        self.usage.sync(nodes)
        low, high = classify_and_build(
            nodes, self.usage, self.names, self._thresholds,
            # Unschedulable nodes are never destinations, but may be sources.
            lambda node, pct, lo: not node.spec.unschedulable and below_threshold(pct, lo),
            lambda node, pct, hi: above_threshold(pct, hi))
        if not low or len(low) <= args.number_of_nodes or len(low) == len(nodes) or not high:
            return
        mean = "; thresholds relative to the cluster mean" if args.use_deviation_thresholds \
            else ""
        destinations = name_list(low)

        def reason(source: NodeInfo, pool: Mapping[str, int]) -> str:
            over = describe_over(source, above_target(source))
            return (f"node {source.name} is overutilized ({over}{mean}); evicting to move usage "
                    f"to underutilized nodes {destinations}")

        EvictionRun(
            handle=self.handle, usage=self.usage, names=self.names, removable=self._removable,
            continue_eviction=lambda info, pool: bool(above_target(info)) and pool_has_room(pool),
            reason=reason, excluded_namespaces=self.excluded, node_limit=self.node_limit,
            destination_kind="underutilized",
        ).run(sort_by_total_usage(high, ascending=False), low)


register(PluginSpec(
    name="LowNodeUtilization",
    extension_points=frozenset({"balance"}),
    args_type=LowNodeUtilizationArgs,
    factory=LowNodeUtilization,
    validate=validate,
))

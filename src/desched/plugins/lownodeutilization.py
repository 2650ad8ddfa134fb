"""LowNodeUtilization (balance): moves pods off nodes above `targetThresholds` while nodes below
`thresholds` have room.

Usage comes from pod requests, or with `metricsUtilization` from real usage (desched.usage):
`source: KubernetesMetrics` (or the deprecated `metricsServer: true`) reads NodeMetrics and
PodMetrics and needs the policy's `metricsProviders: [{source: KubernetesMetrics}]` or
`metricsCollector.enabled`; `source: Prometheus` runs `prometheus.query` against the policy's
Prometheus provider and tracks the single MetricResource; `source: NodeMetric` (desched's own)
reads Koordinator's NodeMetric (plugins/metrics_utilization.py). Upstream's build errors stay build
errors. Where upstream's run fails (no client, Prometheus unreachable, a bad sample), this one
records the reason and ends the run, or leaves just the node or pod with bad metrics out.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from desched.decoding.go import Int64
from desched.framework.registry import PluginSpec, RoleThreshold, Scope
from desched.framework.types import Handle
from desched.model.node import Node
from desched.model.pod import Pod
from desched.plugins.metrics_utilization import (
    SOURCE_NOTE,
    MetricsUtilization,
    UsageSources,
    metrics_scope,
    validate_metrics_utilization,
)
from desched.plugins.nodeutilization_common import (
    EvictionLimits,
    EvictionRun,
    NodeInfo,
    Percentages,
    RunFindings,
    above_target,
    above_threshold,
    below_threshold,
    classify_and_build,
    describe_over,
    deviation_thresholds,
    fmt_pct,
    name_list,
    node_capacity,
    nothing_to_do,
    pool_has_room,
    sort_by_total_usage,
    threshold_roles,
    to_percentages,
    validate_thresholds,
)
from desched.policy_files.args import Namespaces
from desched.usage.base import PodUsageError, UsageSource, note
from desched.usage.prometheus import PrometheusUsage


class LowNodeUtilizationArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    use_deviation_thresholds: bool = False
    thresholds: dict[str, float] = {}
    target_thresholds: dict[str, float] = {}
    number_of_nodes: Int64 = 0
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
    err = validate_metrics_utilization(args.metrics_utilization)
    return [err] if err is not None else []


def threshold_keys(args: LowNodeUtilizationArgs) -> tuple[tuple[str, dict[str, float]], ...]:
    """The thresholds upstream's NewLowNodeUtilization checks against the usage source."""
    return (("thresholds", args.thresholds), ("targetThresholds", args.target_thresholds))


def scope(args: LowNodeUtilizationArgs) -> Scope:
    return metrics_scope("LowNodeUtilization", args.metrics_utilization, args.evictable_namespaces)


def _findings() -> RunFindings:
    return RunFindings("overutilized", "underutilized", "over-high", "under",
                       "appropriately utilized")


class LowNodeUtilization:
    def __init__(self, args: LowNodeUtilizationArgs, handle: Handle) -> None:
        self.sources = UsageSources(handle, "LowNodeUtilization", args.metrics_utilization,
                                    threshold_keys(args))
        self.args = args
        self.handle = handle
        self.threshold_names = list(args.thresholds)
        self.mode, self.names = self.sources.mode, self.sources.names
        ns = args.evictable_namespaces
        self.excluded = frozenset(ns.exclude) if ns is not None else frozenset()
        limits = args.eviction_limits
        self.node_limit = limits.node if limits is not None else None
        # This run's usage source and target thresholds: what PingPongGuard asks about.
        self._run: tuple[UsageSource, Percentages] | None = None
        self.findings = _findings()

    def queried_usage(self) -> PrometheusUsage | None:
        """The Prometheus source runs ask (for a report's usage figures), once one has."""
        return self.sources.queried_usage()

    def _thresholds(self, percentages: dict[str, Percentages]) -> tuple[Percentages, Percentages]:
        a = self.args
        if a.use_deviation_thresholds:
            return deviation_thresholds(percentages.values(), self.threshold_names,
                                        a.thresholds, a.target_thresholds)
        return dict(a.thresholds), dict(a.target_thresholds)

    def over_thresholds_after(self, node: str, pod: Pod) -> str | None:
        """Whether `node` would be overutilized (above the target thresholds) with `pod`'s usage
        added, as this run measures it; None when not, or when the run did not measure it."""
        if self._run is None or node not in self.handle.snapshot.nodes:
            return None
        usage, high = self._run
        try:
            current, moved = usage.node_usage(node), usage.pod_usage(pod)
        except (KeyError, PodUsageError):
            return None
        after = {r: amount + moved.get(r, 0) for r, amount in current.items()}
        if "pods" in after:
            after["pods"] += 1
        pct = to_percentages(after, node_capacity(self.handle.snapshot.nodes[node]))
        if not above_threshold(pct, high):
            return None
        shown = ", ".join(f"{r} {fmt_pct(pct[r])}% > {fmt_pct(limit)}%"
                          for r, limit in high.items() if pct.get(r, 0.0) > limit)
        return f"LowNodeUtilization would find it overutilized ({shown})"

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        return self.findings.verdict(pod, self.excluded)

    def node_role(self, node: str) -> str | None:
        return self.findings.role(node)

    def balance(self, nodes: list[Node]) -> None:
        args = self.args
        findings = self.findings = _findings()
        measured = self.sources.measure(nodes)
        if measured is None:
            return
        usage, nodes = measured

        def thresholds(percentages: dict[str, Percentages]) -> tuple[Percentages, Percentages]:
            found = self._thresholds(percentages)
            self._run = (usage, found[1])
            return found

        self._run = None
        low, high = classify_and_build(
            nodes, usage, self.names, thresholds,
            # Unschedulable nodes are never destinations, but may be sources.
            lambda node, pct, lo: not node.spec.unschedulable and below_threshold(pct, lo),
            lambda node, pct, hi: above_threshold(pct, hi), findings)
        findings.classified(high, low)
        idle = nothing_to_do(len(low), len(nodes), args.number_of_nodes, len(high),
                             "All nodes are under target utilization, nothing to do here")
        if idle is not None:
            note(self.handle, idle)
            return
        mean = "; thresholds relative to the cluster mean" if args.use_deviation_thresholds \
            else ""
        detail = mean + SOURCE_NOTE[self.mode]
        destinations = name_list(low)
        if usage.pod_usage_known:
            action = "evicting to move usage"
        elif self.node_limit is None:
            action = "evicting one pod (the query gives no per-pod usage) to move load"
        else:
            action = (f"evicting up to evictionLimits.node {self.node_limit} pods (the query "
                      f"gives no per-pod usage) to move load")

        def reason(source: NodeInfo, pool: Mapping[str, int]) -> str:
            over = describe_over(source, above_target(source))
            return (f"node {source.name} is overutilized ({over}{detail}); {action} to "
                    f"underutilized nodes {destinations}")

        EvictionRun(
            handle=self.handle, usage=usage, names=self.names, removable=self.handle.filter,
            continue_eviction=lambda info, pool: bool(above_target(info)) and pool_has_room(pool),
            reason=reason, excluded_namespaces=self.excluded, node_limit=self.node_limit,
            findings=findings,
        ).run(sort_by_total_usage(high, ascending=False), low)


def role_thresholds(args: LowNodeUtilizationArgs) -> list[RoleThreshold]:
    """`thresholds` (low: the nodes that receive pods) and `targetThresholds` (high: the nodes
    that shed them), on requests, or on usage with metricsUtilization."""
    if args.use_deviation_thresholds:
        return []
    on_usage = args.metrics_utilization is not None
    return [*threshold_roles(args.thresholds, on_usage, "low", "thresholds"),
            *threshold_roles(args.target_thresholds, on_usage, "high", "targetThresholds")]


SPEC = PluginSpec(
    name="LowNodeUtilization",
    extension_points=frozenset({"balance"}),
    args_type=LowNodeUtilizationArgs,
    factory=LowNodeUtilization,
    validate=validate,
    role_thresholds=role_thresholds,
    purpose="balance",
    scope=scope,
)

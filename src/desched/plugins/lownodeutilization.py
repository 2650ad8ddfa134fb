"""LowNodeUtilization (balance): moves pods off nodes above `targetThresholds` while nodes below
`thresholds` have room.

Usage comes from pod requests, or with `metricsUtilization` from real usage (desched.usage):
`source: KubernetesMetrics` (or the deprecated `metricsServer: true`) reads NodeMetrics and
PodMetrics and needs the policy's `metricsProviders: [{source: KubernetesMetrics}]` or
`metricsCollector.enabled`; `source: Prometheus` runs `prometheus.query` against the policy's
Prometheus provider, through the handle's queries (`desched run` makes them; a simulation has
none and records why), and tracks the single MetricResource. Upstream's build errors stay build
errors. Where upstream's run fails (no client, Prometheus unreachable, a bad sample), this one
records the reason and ends the run, or leaves just the node or pod with bad metrics out.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from desched.decoding.go import Int64
from desched.errors import InputError, quote
from desched.framework.registry import PluginSpec, Reads, RoleThreshold, Scope
from desched.framework.types import Handle
from desched.model.node import Node
from desched.model.pod import Pod
from desched.plugins.nodeutilization_common import (
    METRIC_RESOURCE,
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
    go_list,
    name_list,
    node_capacity,
    nothing_to_do,
    pool_has_room,
    resource_names,
    sort_by_total_usage,
    to_percentages,
    validate_thresholds,
)
from desched.policy_files.args import Namespaces, namespace_scope
from desched.usage.base import (
    KUBERNETES_METRICS,
    PROMETHEUS,
    MetricsSettings,
    PodUsageError,
    UsageSource,
    UsageUnavailable,
    abort,
    note,
)
from desched.usage.metrics_server import KubernetesMetricsUsage
from desched.usage.prometheus import NO_QUERIES, PrometheusUsage, provider_query
from desched.usage.requests import RequestedUsage

REQUESTS = "requests"


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


def build_problem(args: LowNodeUtilizationArgs) -> str | None:
    """Why upstream's NewLowNodeUtilization refuses these args (a profile build error), or None:
    Prometheus thresholds must be exactly {MetricResource: x}, and the source must be known."""
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
        return None
    if m.metrics_server or m.source == KUBERNETES_METRICS:
        return None
    if m.source:
        return "unrecognized metrics source"
    return "metrics source is empty"


def usage_mode(args: LowNodeUtilizationArgs) -> str:
    """REQUESTS, KUBERNETES_METRICS (also for the deprecated metricsServer) or PROMETHEUS."""
    m = args.metrics_utilization
    if m is None:
        return REQUESTS
    return PROMETHEUS if m.source == PROMETHEUS else KUBERNETES_METRICS


def scope(args: LowNodeUtilizationArgs) -> Scope:
    """metrics.k8s.io's NodeMetrics and PodMetrics with metricsUtilization source
    KubernetesMetrics (or the deprecated metricsServer), and evictableNamespaces."""
    reads = (Reads(("NodeMetrics", "PodMetrics"), "LowNodeUtilization (metricsUtilization "
                                                  "source KubernetesMetrics)"),) \
        if usage_mode(args) == KUBERNETES_METRICS else ()
    return Scope(reads=reads, namespaces=namespace_scope("evictableNamespaces",
                                                         args.evictable_namespaces))


_SOURCE_NOTE = {REQUESTS: "", KUBERNETES_METRICS: "; actual usage from metrics.k8s.io",
                PROMETHEUS: "; usage from the Prometheus query"}


def _findings() -> RunFindings:
    return RunFindings("overutilized", "underutilized", "over-high", "under",
                       "appropriately utilized")


class LowNodeUtilization:
    def __init__(self, args: LowNodeUtilizationArgs, handle: Handle) -> None:
        problem = build_problem(args)
        if problem is not None:
            raise InputError("", f"unable to create {quote(handle.profile)} profile: unable to "
                                 f"build LowNodeUtilization plugin: {problem}")
        self.args = args
        self.handle = handle
        self.threshold_names = list(args.thresholds)
        self.mode = usage_mode(args)
        # Prometheus tracks MetricResource alone; the other sources also cpu, memory and pods.
        self.names = (list(args.thresholds) if self.mode == PROMETHEUS
                      else resource_names(args.thresholds))
        self.requested = RequestedUsage(handle.snapshot, self.names)
        # Built now, before any eviction, so it knows the pods the metrics were measured with.
        self.metrics = (KubernetesMetricsUsage(handle.snapshot, self.names, lambda: handle.now)
                        if self.mode == KUBERNETES_METRICS else None)
        self.prometheus: tuple[tuple[str, str, tuple[str, str] | None],
                               PrometheusUsage] | None = None
        ns = args.evictable_namespaces
        self.excluded = frozenset(ns.exclude) if ns is not None else frozenset()
        limits = args.eviction_limits
        self.node_limit = limits.node if limits is not None else None
        # This run's usage source and target thresholds: what PingPongGuard asks about.
        self._run: tuple[UsageSource, Percentages] | None = None
        self.findings = _findings()

    def _usage_source(self) -> UsageSource | None:
        """This run's source, or None (reason recorded) when the policy gives no client for it.
        The settings are read every run, as upstream re-reads its clients."""
        if self.mode == REQUESTS:
            return self.requested
        handle = self.handle
        settings = MetricsSettings.from_handle(handle)
        if self.metrics is not None:
            if not settings.metrics_client:
                abort(handle, "metrics client not initialized: the policy needs "
                              "metricsProviders: [{source: KubernetesMetrics}] (or the "
                              "deprecated metricsCollector: {enabled: true})")
                return None
            return self.metrics
        prometheus = settings.prometheus
        if prometheus is None or not prometheus.url:
            abort(handle, "prometheus client not initialized: the policy needs a "
                          "metricsProviders entry with source Prometheus and a url")
            return None
        m = self.args.metrics_utilization
        query = m.prometheus.query if m is not None and m.prometheus is not None else ""
        if handle.queries is None:  # simulate: no network requests
            abort(handle, NO_QUERIES)
            return None
        # One source for every run while the provider stays as it is: it corrects the server's
        # answers for the pods this simulation moved since its first run.
        key = (prometheus.url, query, prometheus.auth_token_secret)
        if self.prometheus is None or self.prometheus[0] != key:
            self.prometheus = key, PrometheusUsage(
                handle.snapshot,
                provider_query(handle.queries, prometheus.url, prometheus.auth_token_secret),
                {METRIC_RESOURCE: query}, self.names, lambda: handle.now)
        return self.prometheus[1]

    def queried_usage(self) -> PrometheusUsage | None:
        """The Prometheus source runs ask (for a report's usage figures), once one has."""
        return self.prometheus[1] if self.prometheus is not None else None

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

    def _measure(self, nodes: list[Node]) -> tuple[UsageSource, list[Node]] | None:
        """Sync this run's source: the source and the nodes it measured, or None to end the
        run (the reason is recorded)."""
        usage = self._usage_source()
        if usage is None:
            return None
        try:
            left_out = usage.sync(nodes)
        except UsageUnavailable as err:
            abort(self.handle, f"error getting node usage: {err}")
            return None
        if left_out:
            for name, why in left_out.items():
                note(self.handle, f"node {name} left out of this run: {why}", name)
            nodes = [n for n in nodes if n.name not in left_out]
        return usage, nodes

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        return self.findings.verdict(pod, self.excluded)

    def node_role(self, node: str) -> str | None:
        return self.findings.role(node)

    def balance(self, nodes: list[Node]) -> None:
        args = self.args
        findings = self.findings = _findings()
        measured = self._measure(nodes)
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
        detail = mean + _SOURCE_NOTE[self.mode]
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
    kind = "usage" if args.metrics_utilization is not None else "requests"
    def series(resource: str) -> str:
        return "pods" if resource == "pods" else f"{resource} {kind}"

    return [*(RoleThreshold(series(r), float(v), "low", "thresholds")
              for r, v in args.thresholds.items()),
            *(RoleThreshold(series(r), float(v), "high", "targetThresholds")
              for r, v in args.target_thresholds.items())]


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

"""`metricsUtilization`: where LowNodeUtilization and HighNodeUtilization take usage from.

Absent, usage is by pod requests. `source: KubernetesMetrics` (or the deprecated
`metricsServer: true`) reads metrics.k8s.io NodeMetrics and PodMetrics and needs the policy's
`metricsProviders: [{source: KubernetesMetrics}]` or `metricsCollector.enabled`; `source:
Prometheus` runs `prometheus.query` against the policy's Prometheus provider, through the handle's
queries (`desched run` makes them; a simulation has none and records why), and tracks the single
MetricResource. `source: NodeMetric` is desched's own: Koordinator's NodeMetric, read as
LowNodeLoad reads it (usage/nodemetric.py), with no client to configure (it is in the cluster).

Upstream's validation and build errors are kept, word for word, for its sources; NodeMetric's
follow the same templates. Where upstream's run fails (no client, Prometheus unreachable, a bad
sample), the run records the reason and ends, or leaves just the node or pod out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from desched.errors import InputError, quote
from desched.framework.registry import Reads, Scope
from desched.framework.types import Handle
from desched.model.node import Node
from desched.plugins.nodeutilization_common import METRIC_RESOURCE, go_list, resource_names
from desched.policy_files.args import Namespaces, namespace_scope
from desched.usage.base import (
    KUBERNETES_METRICS,
    PROMETHEUS,
    MetricsSettings,
    UsageSource,
    UsageUnavailable,
    abort,
    note,
)
from desched.usage.metrics_server import KubernetesMetricsUsage
from desched.usage.nodemetric import NodeMetricUsage
from desched.usage.prometheus import NO_QUERIES, PrometheusUsage, provider_query
from desched.usage.requests import RequestedUsage

REQUESTS = "requests"
NODE_METRIC = "NodeMetric"


class Prometheus(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    query: str = ""


class MetricsUtilization(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                         omit_defaults=True):
    metrics_server: bool = False  # deprecated spelling of source: KubernetesMetrics
    source: str = ""
    prometheus: Prometheus | None = None


def validate_metrics_utilization(m: MetricsUtilization | None) -> str | None:
    """Upstream's checks of metricsUtilization (the first problem), NodeMetric's alike."""
    if m is None:
        return None
    for source in (KUBERNETES_METRICS, NODE_METRIC):
        if m.source == source and m.metrics_server:
            return f'it is not allowed to set both "{source}" source and metricsServer'
        if m.source == source and m.prometheus is not None:
            return (f"prometheus configuration is not allowed to set when source is set to "
                    f'"{source}"')
    if m.source == PROMETHEUS and (m.prometheus is None or not m.prometheus.query):
        return f'prometheus query is required when metrics source is set to "{PROMETHEUS}"'
    return None


def source_problem(m: MetricsUtilization | None,
                   thresholds: Sequence[tuple[str, Mapping[str, float]]]) -> str | None:
    """Why upstream's plugin constructor refuses the source (a profile build error), or None:
    Prometheus `thresholds` (each named one) must be exactly {MetricResource: x}, and the source
    must be known."""
    if m is None:
        return None
    if m.source == PROMETHEUS:
        if m.prometheus is None:
            return "prometheus property is missing"
        if not m.prometheus.query:
            return "prometheus query is missing"
        for key, values in thresholds:
            if list(values) != [METRIC_RESOURCE]:
                return (f'{key} are expected to specify a single instance of '
                        f'"{METRIC_RESOURCE}" resource, got {go_list(values)} instead')
        return None
    if m.metrics_server or m.source in (KUBERNETES_METRICS, NODE_METRIC):
        return None
    if m.source:
        return "unrecognized metrics source"
    return "metrics source is empty"


def usage_mode(m: MetricsUtilization | None) -> str:
    """REQUESTS, KUBERNETES_METRICS (also for the deprecated metricsServer), PROMETHEUS or
    NODE_METRIC."""
    if m is None:
        return REQUESTS
    if m.source in (PROMETHEUS, NODE_METRIC):
        return m.source
    return KUBERNETES_METRICS


def tracked(mode: str, thresholds: Mapping[str, float]) -> list[str]:
    """The resources a run tracks: Prometheus its MetricResource alone, the other sources the
    threshold resources plus cpu, memory and pods."""
    return list(thresholds) if mode == PROMETHEUS else resource_names(thresholds)


def reads(mode: str, plugin: str) -> tuple[Reads, ...]:
    """The kinds the source reads beyond nodes and pods."""
    if mode == KUBERNETES_METRICS:
        return (Reads(("NodeMetrics", "PodMetrics"),
                      f"{plugin} (metricsUtilization source KubernetesMetrics)"),)
    if mode == NODE_METRIC:
        return (Reads(("NodeMetric",), f"{plugin} (metricsUtilization source NodeMetric)"),)
    return ()


def metrics_scope(plugin: str, m: MetricsUtilization | None,
                  evictable_namespaces: Namespaces | None) -> Scope:
    """A node-utilization plugin's scope: what its usage source reads, and
    evictableNamespaces."""
    return Scope(reads=reads(usage_mode(m), plugin),
                 namespaces=namespace_scope("evictableNamespaces", evictable_namespaces))


SOURCE_NOTE = {REQUESTS: "", KUBERNETES_METRICS: "; actual usage from metrics.k8s.io",
               PROMETHEUS: "; usage from the Prometheus query",
               NODE_METRIC: "; actual usage from NodeMetric"}


class UsageSources:
    """One plugin's usage source, picked per run by its metricsUtilization, and the resources
    it tracks (`names`). The sources are built once, before any eviction, so they know the pods
    the metrics were measured with. A source upstream cannot build is the profile's build
    error (InputError), named after `plugin`; `thresholds` as `source_problem` takes them, the
    first being the plugin's `thresholds`."""

    def __init__(self, handle: Handle, plugin: str, m: MetricsUtilization | None,
                 thresholds: Sequence[tuple[str, Mapping[str, float]]]) -> None:
        problem = source_problem(m, thresholds)
        if problem is not None:
            raise InputError("", f"unable to create {quote(handle.profile)} profile: unable to "
                                 f"build {plugin} plugin: {problem}")
        self.handle = handle
        self.m = m
        self.mode = usage_mode(m)
        self.names = tracked(self.mode, thresholds[0][1])
        self.requested = RequestedUsage(handle.snapshot, self.names)
        self.metrics = (KubernetesMetricsUsage(handle.snapshot, self.names, lambda: handle.now)
                        if self.mode == KUBERNETES_METRICS else None)
        self.node_metric = (NodeMetricUsage(handle.snapshot, self.names, lambda: handle.now)
                            if self.mode == NODE_METRIC else None)
        self.prometheus: tuple[tuple[str, str, tuple[str, str] | None],
                               PrometheusUsage] | None = None

    def source(self) -> UsageSource | None:
        """This run's source, or None (reason recorded) when the policy gives no client for it.
        The settings are read every run, as upstream re-reads its clients."""
        if self.mode == REQUESTS:
            return self.requested
        if self.node_metric is not None:
            return self.node_metric
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
        m = self.m
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

    def measure(self, nodes: list[Node]) -> tuple[UsageSource, list[Node]] | None:
        """Sync this run's source: the source and the nodes it measured, or None to end the
        run (the reason is recorded)."""
        usage = self.source()
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
        node_metric = self.node_metric
        if node_metric is not None:  # what left its figures partial
            for name, texts in node_metric.notes.items():
                for text in texts:
                    note(self.handle, text, name)
        return usage, nodes

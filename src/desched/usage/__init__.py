"""Usage sources behind one interface (`UsageSource`): pod requests, metrics.k8s.io
(NodeMetrics/PodMetrics) and Prometheus instant queries. Plugins pick one per run; the sources
read the snapshot (and, for Prometheus, the answers to queries that whoever runs the cycle makes:
framework.types.UsageQueries) and never fail a run on bad data. Nothing here talks to the
network."""

from desched.usage.base import (
    KUBERNETES_METRICS,
    MAX_METRICS_AGE,
    PROMETHEUS,
    Amounts,
    MetricsSettings,
    PodUsageError,
    PrometheusSettings,
    UsageSource,
    UsageUnavailable,
)
from desched.usage.metrics_server import KubernetesMetricsUsage, NodeMetricsCollector
from desched.usage.prometheus import (
    METRIC_RESOURCE,
    NODE_EXPORTER_QUERIES,
    PrometheusError,
    PrometheusUsage,
    RecordedQueries,
    instant_query,
    provider_query,
)
from desched.usage.requests import RequestedUsage

__all__ = [
    "KUBERNETES_METRICS",
    "MAX_METRICS_AGE",
    "METRIC_RESOURCE",
    "NODE_EXPORTER_QUERIES",
    "PROMETHEUS",
    "Amounts",
    "KubernetesMetricsUsage",
    "MetricsSettings",
    "NodeMetricsCollector",
    "PodUsageError",
    "PrometheusError",
    "PrometheusSettings",
    "PrometheusUsage",
    "RecordedQueries",
    "RequestedUsage",
    "UsageSource",
    "UsageUnavailable",
    "instant_query",
    "provider_query",
]

"""Usage sources behind one interface (`UsageSource`): pod requests, metrics.k8s.io
(NodeMetrics/PodMetrics) and Prometheus instant queries. Plugins pick one per run; the sources
read the snapshot (and, for Prometheus, a live server) and never fail a run on bad data."""

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
    BearerToken,
    PrometheusClient,
    PrometheusError,
    PrometheusUsage,
)
from desched.usage.requests import RequestedUsage

__all__ = [
    "KUBERNETES_METRICS",
    "MAX_METRICS_AGE",
    "METRIC_RESOURCE",
    "NODE_EXPORTER_QUERIES",
    "PROMETHEUS",
    "Amounts",
    "BearerToken",
    "KubernetesMetricsUsage",
    "MetricsSettings",
    "NodeMetricsCollector",
    "PodUsageError",
    "PrometheusClient",
    "PrometheusError",
    "PrometheusSettings",
    "PrometheusUsage",
    "RequestedUsage",
    "UsageSource",
    "UsageUnavailable",
]

"""The interface every usage source implements, the errors it raises, what the policy says about
metrics, and how a plugin records a usage problem without failing the cycle.

A source answers, for one Balance run: the absolute usage of each node (cpu in millicores, bytes,
counts), the node's non-terminal pods, and each pod's usage. Bad data never raises out of a run:
a node whose metrics are unusable is reported by `sync` and left out of the run; a pod whose
usage is unknown raises `PodUsageError` and is skipped; only a failure that leaves the whole run
without data (no client configured, Prometheus unreachable) raises `UsageUnavailable`, and the
plugin then records the reason and ends that run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from desched.model.node import Node
from desched.model.pod import Pod
from desched.util.duration import format_duration

if TYPE_CHECKING:
    from desched.framework.policy import Policy
    from desched.framework.types import Handle

log = logging.getLogger("desched.usage")

Amounts = dict[str, int]

KUBERNETES_METRICS = "KubernetesMetrics"
PROMETHEUS = "Prometheus"
# Samples older than this (by their own timestamp, against the run's clock) are not used.
# metrics-server resolves 15-60 s and upstream's collector polls every 5 s, so five minutes
# means the pipeline has stopped, not that it is slow.
MAX_METRICS_AGE = timedelta(minutes=5)


class UsageUnavailable(Exception):
    """The run has no usage data at all; the message says why (one line)."""


class PodUsageError(Exception):
    """This pod's usage is unknown; the message says why. The pod is skipped, not evicted."""


class UsageSource(Protocol):
    """Where node and pod usage come from. `sync` is called once per Balance run; the other
    methods answer from what it captured."""

    # False when the source cannot tell a pod's usage (Prometheus node queries): the eviction
    # loop then cannot account for what an eviction frees (upstream's "unconstrained" mode).
    pod_usage_known: bool

    def sync(self, nodes: Sequence[Node]) -> dict[str, str]:
        """Capture usage for `nodes`. Returns the nodes left out of this run, with why; raises
        UsageUnavailable when no node can be measured."""

    def node_usage(self, node: str) -> Amounts:
        """Absolute usage of every tracked resource of a synced node (cpu in millicores); the
        caller may mutate the returned dict."""

    def pods(self, node: str) -> list[Pod]:
        """The node's non-terminal pods, evictable or not, as captured by `sync`."""

    def pod_usage(self, pod: Pod) -> Amounts:
        """The pod's usage; raises PodUsageError when it is unknown."""


@dataclass(frozen=True)
class PrometheusSettings:
    url: str
    auth_token_secret: tuple[str, str] | None = None  # (namespace, name)


@dataclass(frozen=True)
class MetricsSettings:
    """The top-level policy fields the usage sources depend on: `metricsCollector.enabled` and
    `metricsProviders`. Built from plain values so any caller can supply them; `from_handle`
    reads them from the handle's policy."""

    collector_enabled: bool = False
    kubernetes_metrics_provider: bool = False
    prometheus: PrometheusSettings | None = None

    @classmethod
    def from_policy(cls, policy: Policy | None) -> MetricsSettings:
        if policy is None:
            return cls()
        prometheus = None
        kubernetes = False
        for provider in policy.metrics_providers:
            # Validation allows each source once; the first entry wins regardless.
            if provider.source == KUBERNETES_METRICS:
                kubernetes = True
            elif provider.source == PROMETHEUS and prometheus is None:
                prometheus = PrometheusSettings(provider.prometheus_url,
                                                provider.auth_token_secret)
        return cls(policy.metrics_collector_enabled, kubernetes, prometheus)

    @classmethod
    def from_handle(cls, handle: Handle) -> MetricsSettings:
        # `policy` is optional on a handle: tests and embedders may build one without it.
        return cls.from_policy(getattr(handle, "policy", None))

    @property
    def metrics_client(self) -> bool:
        """Whether upstream would have created the metrics.k8s.io client."""
        return self.collector_enabled or self.kubernetes_metrics_provider


def note(handle: Handle, reason: str, node: str = "") -> None:
    """Record a problem that concerns a node or the whole run rather than a pod."""
    handle.note(reason, node)


def abort(handle: Handle, reason: str) -> None:
    """End this plugin run with a recorded reason, as upstream's Balance returning an error
    (which the framework logs, running the other plugins)."""
    log.warning("%s/%s: %s", handle.profile, handle.plugin, reason)
    handle.abort(reason)


def as_utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def format_age(age: timedelta) -> str:
    """Go's Duration.String for whole seconds ("1h2m3s", "45s")."""
    return format_duration(int(age.total_seconds()))


def staleness(kind: str, timestamp: datetime | None, now: datetime,
              max_age: timedelta = MAX_METRICS_AGE) -> str | None:
    """Why a sample taken at `timestamp` is too old at `now`, or None. A sample without a
    timestamp cannot be judged and is accepted; one from the future (clock skew, or a --now
    before the snapshot was taken) is accepted too."""
    if timestamp is None:
        return None
    age = as_utc(now) - as_utc(timestamp)
    if age <= max_age:
        return None
    stamp = as_utc(timestamp).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (f"{kind} is stale: taken at {stamp}, {format_age(age)} before now (limit "
            f"{format_age(max_age)})")

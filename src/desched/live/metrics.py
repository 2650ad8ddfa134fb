"""Prometheus metrics: upstream's names and labels, so existing
dashboards and alerts keep working, plus desched's own figures (prefix `desched_`): cycles, the
informer caches, event posting and leadership.

Each Metrics instance has its own registry (several runs in one test process must not collide);
`handle_metrics` serves it in the Prometheus text format.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from desched.live.informer import Informer
from desched.util.build import build_info

if TYPE_CHECKING:
    from aiohttp import web

# Upstream exports no `_created` series; neither do we.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

LOOP_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500)
STRATEGY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100)
# Upstream deprecated its first names in 0.34.0 and still serves them beside the new ones:
# descheduler_pods_evicted (for _total), descheduler_descheduler_loop_duration_seconds and
# descheduler_descheduler_strategy_duration_seconds (the name repeated its subsystem).
DEPRECATED_SINCE = "0.34.0"


class AliasCollector(Collector):
    """The deprecated histograms: the samples of the metric they alias, under the old name, read
    at scrape time (one observation feeds both names; nothing is counted twice in memory)."""

    def __init__(self, source: Collector, name: str) -> None:
        self.source = source
        self.name = name

    def collect(self) -> Iterator[Metric]:
        for metric in self.source.collect():
            alias = Metric(self.name, f"(Deprecated since {DEPRECATED_SINCE}) "
                           f"{metric.documentation}", metric.type)
            alias.samples = [s._replace(name=self.name + s.name[len(metric.name):])
                             for s in metric.samples]
            yield alias

    def describe(self) -> Iterable[Metric]:
        return []


def render_counter_alias(counter: Counter, name: str) -> bytes:
    """Upstream's deprecated `descheduler_pods_evicted` in the text format: a counter whose
    series carry no `_total` suffix, which prometheus_client appends to every counter it
    renders. Rendered as a gauge of the alias's name and typed back as the counter it is."""
    [metric] = counter.collect()
    alias = Metric(name, f"(Deprecated since {DEPRECATED_SINCE}) {metric.documentation}",
                   "gauge")
    alias.samples = [s._replace(name=name) for s in metric.samples
                     if s.name == metric.name + "_total"]
    text = prometheus_client.generate_latest(_Fixed(alias))
    return text.replace(f"# TYPE {name} gauge\n".encode(), f"# TYPE {name} counter\n".encode())


class _Fixed(Collector):
    """One metric, as generate_latest reads a registry."""

    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self.metric


class InformerCollector(Collector):
    """Cache figures read at scrape time (scrapes are served on the loop the informers run on,
    so the stores are consistent)."""

    def __init__(self, informers: Callable[[], Sequence[Informer]]) -> None:
        self.informers = informers

    def collect(self) -> Iterator[Metric]:
        objects = GaugeMetricFamily("desched_informer_objects",
                                    "Objects in the informer cache.", labels=["resource"])
        synced = GaugeMetricFamily("desched_informer_synced",
                                   "1 once the informer's first list is in its cache "
                                   "(also for an optional kind the server does not serve).",
                                   labels=["resource"])
        lists = CounterMetricFamily("desched_informer_lists",
                                    "Full lists of the kind: the first sync plus relists "
                                    "(410 Gone, unexpected errors).", labels=["resource"])
        stale = GaugeMetricFamily("desched_informer_stale_seconds",
                                  "Seconds since the informer's watch broke or its relist "
                                  "began (0 while watching): cycles wait for a current cache.",
                                  labels=["resource"])
        now = time.monotonic()
        for informer in self.informers():
            label = [informer.resource.label]
            objects.add_metric(label, len(informer.store))
            synced.add_metric(label, 1 if informer.synced.is_set() else 0)
            lists.add_metric(label, informer.lists)
            stale.add_metric(label, round(informer.stale_for(now), 3))
        yield from (objects, synced, lists, stale)

    def describe(self) -> Iterable[Metric]:
        return []


# (profile, jobs by phase, evictions carried out) for each migration service.
MigrationFigures = tuple[str, Mapping[str, int], int]


class MigrationCollector(Collector):
    """PodMigrationJob figures read at scrape time from the migration services."""

    def __init__(self, source: Callable[[], Iterable[MigrationFigures]]) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("desched_migration_jobs",
                                 "PodMigrationJobs a migration service handles, by phase (from "
                                 "the informer cache).", labels=["profile", "phase"])
        evictions = CounterMetricFamily("desched_migration_evictions",
                                        "Pods the migration controller evicted (any eviction "
                                        "policy).", labels=["profile"])
        for profile, phases, evicted in self.source():
            for phase, count in sorted(phases.items()):
                jobs.add_metric([profile, phase], count)
            evictions.add_metric([profile], evicted)
        yield from (jobs, evictions)

    def describe(self) -> Iterable[Metric]:
        return []


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.pods_evicted = Counter(
            "descheduler_pods_evicted", "Number of evicted pods, by the result of the "
            "eviction: success, error, or the eviction limit that refused it.",
            ["result", "strategy", "profile", "namespace", "node"], registry=r)
        self.loop_duration = Histogram(
            "descheduler_loop_duration_seconds", "Time taken to complete a full descheduling "
            "cycle.", buckets=LOOP_BUCKETS, registry=r)
        self.strategy_duration = Histogram(
            "descheduler_strategy_duration_seconds", "Time taken to complete each strategy "
            "(plugin run) of a descheduling cycle.", ["strategy", "profile"],
            buckets=STRATEGY_BUCKETS, registry=r)
        # Upstream's labels; GoVersion names the runtime (python3.11.7), PythonVersion (desched's
        # own, kept for its dashboards) its bare version.
        build = build_info()
        self.build_info = Gauge(
            "descheduler_build_info", "Build information (always 1).",
            ["GoVersion", "AppVersion", "DeschedulerVersion", "PythonVersion", "GitBranch",
             "GitSha1"], registry=r)
        self.build_info.labels(build.runtime, build.version, build.git_version,
                               platform.python_version(), build.git_branch,
                               build.git_sha1).set(1)
        for alias, source in (("descheduler_descheduler_loop_duration_seconds",
                               self.loop_duration),
                              ("descheduler_descheduler_strategy_duration_seconds",
                               self.strategy_duration)):
            r.register(AliasCollector(source, alias))
        # desched's own
        self.cycles = Counter(
            "desched_cycles", "Descheduling cycles by result: completed, skipped (fewer than 2 "
            "ready nodes), stale (the cache was not current for too long), interrupted "
            "(shutdown or lost lease) or failed.", ["result"],
            registry=r)
        self.last_cycle = Gauge(
            "desched_last_cycle_timestamp_seconds", "When the last descheduling cycle ended "
            "(Unix time).", registry=r)
        self.snapshot_duration = Histogram(
            "desched_snapshot_build_seconds", "Time taken to build a cycle's snapshot from the "
            "informer caches.", buckets=LOOP_BUCKETS, registry=r)
        self.cache_sync = Gauge(
            "desched_cache_sync_seconds", "Time the informer caches took to sync at start-up.",
            registry=r)
        self.events = Counter(
            "desched_events", "Kubernetes events about evictions, by type and whether posting "
            "worked.", ["type", "result"], registry=r)
        self.leader = Gauge(
            "desched_leader", "1 while this instance holds the leader-election lease "
            "(0 without leader election, or standing by).", registry=r)
        self.usage_unavailable = Counter(
            "desched_usage_unavailable", "Plugin runs that ended without acting because their "
            "usage source (metrics-server, Prometheus) gave no usable data; the other plugins "
            "of the cycle ran.", ["profile", "plugin"], registry=r)
        self.policy_reloads = Counter(
            "desched_policy_reload", "Policy file changes noticed by the running process, by "
            "result: success (applied at a cycle boundary) or failed (invalid or not "
            "applicable; the running policy stays).", ["result"], registry=r)
        # Moves (framework/moves): every pod a cycle evicted, moved by a restart, or deferred;
        # restarts of Deployments; waits for a replacement given up.
        self.moves = Counter(
            "desched_moves", "Pods desched moved or deferred, by mode: evict (an eviction), "
            "restart (replaced by a surge-first restart of its Deployment), deferred (paced to "
            "a later cycle).", ["mode"], registry=r)
        self.deployment_restarts = Counter(
            "desched_deployment_restarts", "Deployments restarted surge-first instead of "
            "evicting their pods (in a dry run: the restarts it would make).",
            ["strategy", "profile"], registry=r)
        self.replacement_timeouts = Counter(
            "desched_replacement_timeouts", "Times desched stopped waiting for a workload's "
            "replacement to be Ready (moves.replacementTimeout), by workload kind.", ["kind"],
            registry=r)
        # Prometheus queries of the usage sources (live/prometheus.py).
        self.usage_queries = Counter(
            "desched_prometheus_queries", "Requests to the policy's Prometheus (instant "
            "queries of the usage sources), by the HTTP status of the answer, or `error` when "
            "none came (unreachable, timed out).", ["code"], registry=r)
        self.usage_query_duration = Histogram(
            "desched_prometheus_query_seconds", "Time taken by each request to the policy's "
            "Prometheus, answered or not.", buckets=STRATEGY_BUCKETS, registry=r)
        self.policy_info = Gauge(
            "desched_policy_info", "The running policy: its file and the first 12 hex digits "
            "of the file's SHA-256 (always 1).", ["path", "hash"], registry=r)
        self._informers: Sequence[Informer] = ()
        r.register(InformerCollector(lambda: self._informers))
        self._migrations: Callable[[], Iterable[MigrationFigures]] = tuple
        r.register(MigrationCollector(lambda: self._migrations()))

    def policy_loaded(self, path: str, digest: str) -> None:
        self.policy_info.clear()
        self.policy_info.labels(path, digest[:12]).set(1)

    def watch_informers(self, informers: Sequence[Informer]) -> None:
        self._informers = informers

    def watch_migrations(self, source: Callable[[], Iterable[MigrationFigures]]) -> None:
        self._migrations = source

    def evicted(self, result: str, strategy: str, profile: str, namespace: str,
                node: str) -> None:
        self.pods_evicted.labels(result, strategy, profile, namespace, node).inc()

    def moved(self, mode: str) -> None:
        self.moves.labels(mode).inc()

    def event_posted(self, type_: str, ok: bool) -> None:
        self.events.labels(type_, "posted" if ok else "failed").inc()

    def render(self) -> bytes:
        return (prometheus_client.generate_latest(self.registry)
                + render_counter_alias(self.pods_evicted, "descheduler_pods_evicted"))

    async def handle(self, request: web.Request) -> web.Response:
        from aiohttp import web

        return web.Response(body=self.render(),
                            headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})

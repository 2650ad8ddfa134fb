"""`koord-load-aware`: koord-scheduler with Koordinator's LoadAwareScheduling plugin, with the
arguments of the koord-scheduler configuration given (`--scheduler-config`, PingPongGuard's
`schedulerConfig`), else its defaults (filterExpiredNodeMetrics true, nodeMetricExpirationSeconds
180, usageThresholds cpu 65% memory 95%, resourceWeights cpu 1 memory 1, estimatedScalingFactors
cpu 85% memory 70%).

Filters: kube-default's filters, then LoadAwareScheduling's: a node whose NodeMetric expired is
unschedulable, one without a NodeMetric passes (no load data: plain scheduling), and a node whose
measured usage ratio reaches a usage threshold is unschedulable (measured usage only, so a burst
of new pods is not refused on estimates). Score: least estimated usage, per resource
(allocatable - estimated) * 100 / allocatable, weighted by resourceWeights, where estimated is the
NodeMetric usage plus an estimate for each pod on the node that the metric does not report yet
(and for the pod being placed): its limit when above its request, else request x scaling factor,
250m cpu / 200Mi memory when it requests nothing. Nodes without a NodeMetric score by that estimate
for every pod. Left out: kube-scheduler's own scores (LoadAwareScheduling dominates with
koord-scheduler's default weights), prodUsageThresholds, aggregated (percentile) usage, and
custom thresholds from node annotations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from desched.model.node import Node
from desched.model.pod import Pod
from desched.model.quantity import resource_amount
from desched.predicates.nodefit import (
    fit_prepared,
    prepare_fit,
)
from desched.scheduler.kube_default import KubeDefault
from desched.scheduler.model import LOAD_AWARE, Placement, best
from desched.scheduler.profile import DEFAULT_CONFIG, LoadAwareArgs, SchedulerConfig
from desched.scheduler.ranking import Class, Entry, Rankings, simple, simple_key
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage.nodemetric import NodeLoad, expiry_problem, read_node_load

SCALING_FACTORS = {"cpu": 85, "memory": 70}
DEFAULT_REQUESTS = {"cpu": 250, "memory": 200 * 1024 * 1024}  # millicores, bytes
_RESOURCES = ("cpu", "memory")


def pod_limits(pod: Pod) -> dict[str, int]:
    limits: dict[str, int] = {}
    for container in pod.spec.containers:
        if container.resources is not None:
            for name, quantity in container.resources.limits.items():
                limits[name] = limits.get(name, 0) + resource_amount(name, quantity)
    return limits


def estimated_usage(pod: Pod, factors: Mapping[str, int] = SCALING_FACTORS) -> dict[str, int]:
    """LoadAwareScheduling's default estimator for a pod the metrics do not report yet
    (`factors`: estimatedScalingFactors, percent)."""
    requests, limits = pod.requests, pod_limits(pod)
    out: dict[str, int] = {}
    for name in _RESOURCES:
        request, limit = requests.get(name, 0), limits.get(name, 0)
        if limit > request:
            out[name] = limit
        elif request == 0:
            out[name] = DEFAULT_REQUESTS[name]
        else:
            out[name] = request * factors.get(name, SCALING_FACTORS[name]) // 100
    return out


def load_aware_args(config: SchedulerConfig) -> LoadAwareArgs:
    """The LoadAwareScheduling arguments of a koord-scheduler configuration (the first profile
    that enables the plugin), or its defaults."""
    for profile in config.profiles.values():
        if profile.load_aware is not None:
            return profile.load_aware
    return LoadAwareArgs()


class LoadAware:
    name = LOAD_AWARE

    def __init__(self, config: SchedulerConfig = DEFAULT_CONFIG) -> None:
        self.config = config
        self.args = load_aware_args(config)
        self.requests_model = KubeDefault()
        self._rankings = Rankings()
        # node -> ((snapshot, node version, clock), its NodeMetric, its base estimate)
        self._bases: dict[str, tuple[tuple[int, int, datetime], object, dict[str, int] | str]] = {}

    def place(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
              now: datetime) -> Placement:
        if simple(pod) and snapshot.finished:
            placed = self._place_ranked(pod, nodes, snapshot, now)
            if placed is not None:
                return placed
        return self._place(pod, nodes, snapshot, now)

    def waiting(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot) -> None:
        """Not said: measured usage and its estimates move with the clock, not only with pods
        (a replacement that waits is tried each time an evicted pod goes)."""
        return None

    def entry(self, pod: Pod, snapshot: ClusterSnapshot, now: datetime) -> Entry:
        prepared = prepare_fit(pod)

        def of(node: Node) -> tuple[Class, float] | None:
            if fit_prepared(pod, node, snapshot, prepared) is not None:
                return None
            score = self.node_score(pod, node, snapshot, now)
            return None if isinstance(score, str) else ((0.0, 0.0), score)
        return of

    def _place_ranked(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
                      now: datetime) -> Placement | None:
        """As the exact search, on a Ranking (scheduler/ranking.py): a node's estimated usage
        changes only with its own pods (carried usage moves with them) and with the clock."""
        found = self._rankings.best((simple_key(pod), now), pod, nodes, snapshot,
                                    lambda p: self.entry(p, snapshot, now))
        if found is None:
            return None  # the exact search says why nothing fits
        chosen, score, count = found
        return Placement(chosen, f"least estimated usage (score {score:.1f} of {count} node(s) "
                                 f"under the usage thresholds)")

    def _place(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
               now: datetime) -> Placement:
        feasible, why = self.requests_model.feasible(pod, nodes, snapshot)
        if not feasible:
            return Placement(None, why)
        scores: dict[str, float] = {}
        refused: dict[str, int] = {}
        for node in feasible:
            verdict = self.node_score(pod, node, snapshot, now)
            if isinstance(verdict, str):
                refused[verdict] = refused.get(verdict, 0) + 1
            else:
                scores[node.name] = verdict
        if not scores:
            shown = ", ".join(f"{n} {r}" for r, n in sorted(refused.items(), key=lambda x: -x[1]))
            return Placement(None, f"0/{len(feasible)} nodes are available: {shown}")
        chosen = best(scores)
        return Placement(chosen, f"least estimated usage (score {scores[chosen]:.1f} of "
                                 f"{len(scores)} node(s) under the usage thresholds)")

    def node_score(self, pod: Pod, node: Node, snapshot: ClusterSnapshot,
                   now: datetime) -> float | str:
        """The node's score, or why LoadAwareScheduling filters it out."""
        if pod.node_name == node.name:
            base = self._node_base(node, snapshot, now, leaving=pod, args=self.args)
        else:
            base = self._cached_base(node, snapshot, now)
        if isinstance(base, str):
            return base
        estimated = dict(base)
        for name, amount in estimated_usage(pod, self.args.estimated_scaling_factors).items():
            estimated[name] += amount
        total = weight_sum = 0.0
        for name, weight in self.args.resource_weights.items():
            if name not in estimated:
                continue
            capacity = node.allocatable.get(name, 0)
            share = max(0.0, (capacity - estimated[name]) * 100.0 / capacity) if capacity else 0
            total += weight * share
            weight_sum += weight
        return total / weight_sum

    def _cached_base(self, node: Node, snapshot: ClusterSnapshot,
                     now: datetime) -> dict[str, int] | str:
        """_node_base, kept while the node's pods, its NodeMetric and the clock are the same
        (every pod placed asks about the same nodes)."""
        name = node.name
        stamp = (id(snapshot), snapshot.node_version.get(name, 0), now)
        metric = snapshot.node_metrics.get(name)
        cached = self._bases.get(name)
        if cached is not None and cached[0] == stamp and cached[1] is metric:
            return cached[2]
        base = self._node_base(node, snapshot, now, leaving=None, args=self.args)
        self._bases[name] = (stamp, metric, base)
        return base

    @staticmethod
    def _node_base(node: Node, snapshot: ClusterSnapshot, now: datetime,
                   leaving: Pod | None, args: LoadAwareArgs) -> dict[str, int] | str:
        """The node's estimated usage before the pod arrives (measured usage, less `leaving`'s,
        plus estimates for the pods the metric does not report), or why it is filtered."""
        metric = snapshot.node_metrics.get(node.name)
        load: NodeLoad | None = None
        expiry = args.node_metric_expiration_seconds
        if metric is not None:
            if (args.filter_expired_node_metrics
                    and expiry_problem(metric, now, expiry) is not None):
                return "node(s) nodeMetric expired"
            got = read_node_load(node, snapshot, _RESOURCES, now, expiry)
            load = got if isinstance(got, NodeLoad) else None
        measured = dict.fromkeys(_RESOURCES, 0)
        reported: set[str] = set()
        if load is not None:
            reported = set(load.pod_usage)
            for name in _RESOURCES:
                measured[name] = load.usage.get(name, 0)
            gone = load.pod_usage.get(leaving.key) if leaving is not None else None
            for name, amount in (gone or {}).items():
                measured[name] = max(0, measured[name] - amount)
            for name, limit in args.usage_thresholds.items():
                capacity = node.allocatable.get(name, 0)
                if capacity > 0 and measured.get(name, 0) * 100 >= limit * capacity:
                    return f"node(s) {name} usage exceed threshold"
        estimated = dict(measured)
        for other in snapshot.pods_on_node(node.name):
            if other is leaving or other.key in reported:
                continue
            for name, amount in estimated_usage(other, args.estimated_scaling_factors).items():
                estimated[name] += amount
        return estimated

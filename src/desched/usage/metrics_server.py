"""Actual usage from metrics.k8s.io (metrics-server): NodeMetrics for nodes, PodMetrics for pods
(upstream's actualUsageClient and MetricsCollector).

Upstream polls NodeMetrics every 5 s and smooths each node's cpu and memory with an EWMA
(new = round(0.9·prev + 0.1·sample)); `NodeMetricsCollector` is that collector, for a live loop
to feed. A snapshot holds one NodeMetrics per node, so unless a live collector is supplied each
run feeds a fresh collector that single sample: node usage is the NodeMetrics value as is.

Pods that leave (or arrive on) a node after the metrics were taken -- evictions earlier in the
run or in earlier simulated cycles -- are taken off (or added to) the measured node usage, by
their PodMetrics when they have one and by their requests otherwise; without this a simulation
of several cycles would keep evicting from a node whose measured usage never changes.

Beyond upstream, bad metrics never fail the run: a node whose NodeMetrics is missing, stale,
negative or unparsable is left out of the run with its reason; a pod whose PodMetrics is
missing, stale, empty, or lacks a resource for some container is skipped with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from desched.model.node import Node
from desched.model.objects import NodeMetrics, PodMetrics
from desched.model.pod import Pod
from desched.model.quantity import QuantityError, resource_amount
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage.base import (
    MAX_METRICS_AGE,
    Amounts,
    PodUsageError,
    UsageUnavailable,
    staleness,
)
from desched.usage.drift import PodMoves

# What metrics.k8s.io measures; `pods` comes from the pod count, as upstream.
MEASURED = ("cpu", "memory")
BETA = 0.9  # weight of the previous value in upstream's EWMA


def parse_usage(usage: Mapping[str, str | int | float], resources: Iterable[str]
                ) -> tuple[Amounts, str | None]:
    """The integer amounts of `resources` in a metrics usage map, or what is wrong with it as a
    noun phrase ("no cpu usage", "a negative memory usage '-1Ki'")."""
    out: Amounts = {}
    for name in resources:
        raw = usage.get(name)
        if raw is None:
            return out, f"no {name} usage"
        try:
            amount = resource_amount(name, raw)
        except (QuantityError, ValueError, OverflowError):
            return out, f"an invalid {name} usage {raw!r}"
        if amount < 0:
            return out, f"a negative {name} usage {raw!r}"
        out[name] = amount
    return out, None


def _ewma(previous: int, sample: int) -> int:
    # Go's math.Round: halves away from zero (values are never negative here).
    return math.floor(BETA * previous + (1 - BETA) * sample + 0.5)


@dataclass
class _NodeState:
    usage: Amounts | None = None  # the smoothed cpu (millicores) and memory (bytes)
    timestamp: datetime | None = None  # of the last accepted sample
    rejected: str | None = None  # why the latest sample was refused, if it was


class NodeMetricsCollector:
    """Upstream's MetricsCollector: the EWMA of each node's NodeMetrics cpu and memory. A
    refused sample (unparsable, negative, a resource missing) leaves the previous value in
    use, as a failed fetch does upstream; `read` refuses a value whose last accepted sample is
    older than `max_age`, so a node metrics-server stopped reporting (or keeps reporting badly)
    drops out instead of being balanced on old data."""

    def __init__(self, max_age: timedelta = MAX_METRICS_AGE) -> None:
        self.max_age = max_age
        self._nodes: dict[str, _NodeState] = {}

    def observe(self, samples: Iterable[NodeMetrics]) -> None:
        for sample in samples:
            state = self._nodes.setdefault(sample.metadata.name, _NodeState())
            amounts, problem = parse_usage(sample.usage, MEASURED)
            if problem is not None:
                state.rejected = f"its NodeMetrics has {problem}"
                continue
            previous = state.usage
            if previous is None:
                state.usage = amounts
            else:
                state.usage = {r: _ewma(previous[r], amounts[r]) for r in MEASURED}
            state.timestamp = sample.timestamp
            state.rejected = None

    def read(self, node: str, now: datetime) -> Amounts | str:
        """The node's smoothed usage, or why there is none to use."""
        state = self._nodes.get(node)
        if state is None:
            return "no NodeMetrics for it"
        if state.usage is None:
            return state.rejected or "no NodeMetrics for it"
        stale = staleness("its NodeMetrics", state.timestamp, now, self.max_age)
        if stale is not None:
            return stale
        return dict(state.usage)


def moved_usage(pod: Pod, metrics: PodMetrics | None) -> Amounts:
    """What a pod is taken to use when it moves: its PodMetrics when usable, else its
    requests."""
    if metrics is not None and metrics.containers:
        total = dict.fromkeys(MEASURED, 0)
        for container in metrics.containers:
            amounts, problem = parse_usage(container.usage, MEASURED)
            if problem is not None:
                break
            for name, amount in amounts.items():
                total[name] += amount
        else:
            return total
    requests = pod.requests
    return {r: requests.get(r, 0) for r in MEASURED}


class KubernetesMetricsUsage:
    """Node usage from NodeMetrics (through a collector), pod usage from PodMetrics; `pods` is
    the node's non-terminal pod count. By default both come from the snapshot
    (ClusterSnapshot.metrics_nodes / metrics_pods); a live loop passes its own `collector` and
    `pod_metrics` lookup instead."""

    pod_usage_known = True

    def __init__(self, snapshot: ClusterSnapshot, names: Sequence[str],
                 now: Callable[[], datetime], collector: NodeMetricsCollector | None = None,
                 pod_metrics: Callable[[str], PodMetrics | None] | None = None,
                 max_age: timedelta = MAX_METRICS_AGE) -> None:
        self.snapshot = snapshot
        self.names = tuple(names)
        self.now = now
        self.collector = collector
        self.pod_metrics = pod_metrics or snapshot.metrics_pods.get
        self.max_age = max_age
        self._pod_names = tuple(r for r in self.names if r != "pods")
        self._usage: dict[str, Amounts] = {}
        self._pods: dict[str, list[Pod]] = {}
        # The pods the metrics were measured with, to correct for pods that move later.
        self.moves = PodMoves(snapshot)

    def sync(self, nodes: Sequence[Node]) -> dict[str, str]:
        self._usage.clear()
        self._pods.clear()
        unmeasured = [r for r in self.names if r not in MEASURED and r != "pods"]
        if unmeasured and nodes:
            # metrics.k8s.io has cpu and memory only: no node can have it (upstream's error).
            raise UsageUnavailable(f'unable to find "{unmeasured[0]}" resource for collected '
                                   f'"{nodes[0].name}" node metric')
        collector = self.collector
        if collector is None:
            if not self.snapshot.metrics_nodes:
                raise UsageUnavailable("the snapshot holds no NodeMetrics (metrics.k8s.io/"
                                       "v1beta1); add them (kubectl get "
                                       "nodemetrics.metrics.k8s.io -o json)")
            collector = NodeMetricsCollector(self.max_age)
            collector.observe(self.snapshot.metrics_nodes.values())
        now = self.now()
        drift = self._drift()
        problems: dict[str, str] = {}
        snapshot = self.snapshot
        for node in nodes:
            name = node.name
            measured = collector.read(name, now)
            if isinstance(measured, str):
                problems[name] = measured
                continue
            shift = drift.get(name)
            if shift is not None:
                for r, amount in shift.items():
                    measured[r] = max(0, measured[r] + amount)
            measured["pods"] = snapshot.node_requested(name).get("pods", 0)
            self._usage[name] = {r: measured[r] for r in self.names}
            self._pods[name] = snapshot.pods_on_node(name)
        return problems

    def _drift(self) -> dict[str, Amounts]:
        """Per node, the usage of pods that arrived minus that of pods that left since the
        metrics were taken."""
        drift: dict[str, Amounts] = {}
        for node, moved in self.moves.since().items():
            into = drift[node] = dict.fromkeys(MEASURED, 0)
            for pod, sign in moved:
                for r, amount in moved_usage(pod, self.pod_metrics(pod.key)).items():
                    into[r] += sign * amount
        return drift

    def node_usage(self, node: str) -> Amounts:
        return self._usage[node]

    def pods(self, node: str) -> list[Pod]:
        return self._pods[node]

    def pod_usage(self, pod: Pod) -> Amounts:
        """Summed over the pod's containers in its PodMetrics, unsmoothed (upstream reads it
        live per pod)."""
        metrics = self.pod_metrics(pod.key)
        if metrics is None:
            raise PodUsageError("pod usage unknown: no PodMetrics for it")
        stale = staleness("its PodMetrics", metrics.timestamp, self.now(), self.max_age)
        if stale is not None:
            raise PodUsageError(f"pod usage unknown: {stale}")
        if not metrics.containers:
            raise PodUsageError("pod usage unknown: its PodMetrics lists no containers")
        total = dict.fromkeys(self._pod_names, 0)
        for container in metrics.containers:
            amounts, problem = parse_usage(container.usage, self._pod_names)
            if problem is not None:
                raise PodUsageError(f'pod usage unknown: container "{container.name}" has '
                                    f"{problem} in its PodMetrics")
            for r, amount in amounts.items():
                total[r] += amount
        return total

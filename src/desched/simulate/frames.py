"""Per-node utilization of a snapshot, and the balance figures a report shows per cycle.

A frame is taken before the first cycle and after each one: requested cpu, memory and pods as a
share of allocatable, and real usage where the snapshot has it (Koordinator's NodeMetric, else
metrics.k8s.io NodeMetrics). One pass over the nodes per frame, reading the snapshot's cached
per-node sums: no per-pod work.

Measured usage moves with the pods as the plugins see it move: NodeMetric counts a podsMetric
entry only while its pod is on the node (the rescheduler carries the entry to the replacement's
node); metrics.k8s.io node usage is corrected by the usage of the pods that left or arrived since
it was taken, through the same usage source LowNodeUtilization balances with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from desched.framework.policy import Policy
from desched.framework.registry import RoleThreshold
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage.metrics_server import KubernetesMetricsUsage
from desched.usage.nodemetric import NodeLoad, read_node_load

# Series of a frame: percent of allocatable. "usage" series exist only where measured.
SERIES = ("cpu requests", "memory requests", "pods", "cpu usage", "memory usage",
          "MetricResource usage")
_REQUESTED = {"cpu requests": "cpu", "memory requests": "memory", "pods": "pods"}


@dataclass
class Frame:
    label: str  # "before", "after cycle 1", ...
    # series -> node -> percent
    values: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Balance:
    series: str
    nodes: int
    mean: float
    std: float
    max: float
    over: int | None  # nodes above the policy's threshold for it, when the policy has one


def _percent(amount: float, capacity: int) -> float:
    return amount * 100.0 / capacity if capacity > 0 else 0.0


# A report shows what was measured, however old: staleness is the plugins' question.
_ANY_AGE = timedelta(days=36500)


@runtime_checkable
class QueriedUsage(Protocol):
    """A usage source that asks a server the snapshot does not hold (Prometheus): the report
    takes its figures from the answers the plugin got, corrected for the pods moved since."""

    def percentages(self, first: bool = False) -> dict[str, dict[str, float]]:
        """Series -> node -> percent: as first answered, or as now."""


@runtime_checkable
class QueriesUsage(Protocol):
    """A plugin that may hold a `QueriedUsage` (None until its first run asks)."""

    def queried_usage(self) -> QueriedUsage | None: ...


def add_queried(frame: Frame, source: QueriedUsage, first: bool = False) -> None:
    for series, values in source.percentages(first).items():
        frame.values.setdefault(series, {}).update(values)


class MeasuredUsage:
    """Node usage as measured when the snapshot was taken, moved with the pods since: made
    before the first cycle (the pods the metrics were measured with), read after each."""

    def __init__(self, snapshot: ClusterSnapshot, now: datetime) -> None:
        self.snapshot = snapshot
        self.now = now
        self._metrics_server = (KubernetesMetricsUsage(snapshot, ("cpu", "memory"),
                                                       lambda: self.now, max_age=_ANY_AGE)
                                if snapshot.metrics_nodes else None)

    def read(self, now: datetime) -> dict[str, dict[str, float]]:
        """Node -> {"cpu": millicores, "memory": bytes} for every node measured."""
        self.now = now
        snapshot = self.snapshot
        out: dict[str, dict[str, float]] = {}
        rest = []
        for name, node in snapshot.nodes.items():
            if name in snapshot.node_metrics:
                load = read_node_load(node, snapshot, ("cpu", "memory"), now, None)
                if isinstance(load, NodeLoad):
                    out[name] = {r: float(load.usage.get(r, 0)) for r in ("cpu", "memory")}
                    continue
            rest.append(node)
        source = self._metrics_server
        if source is not None and rest:
            unmeasured = source.sync(rest)
            for node in rest:
                if node.name not in unmeasured:
                    usage = source.node_usage(node.name)
                    out[node.name] = {"cpu": float(usage["cpu"]),
                                      "memory": float(usage["memory"])}
        return out


def take_frame(snapshot: ClusterSnapshot, label: str, now: datetime,
               measured: MeasuredUsage | None = None) -> Frame:
    """`measured`: the usage tracker made before the first cycle; None reads the snapshot's
    metrics as they are (right before any pod has moved)."""
    frame = Frame(label, {s: {} for s in SERIES})
    usages = (measured or MeasuredUsage(snapshot, now)).read(now)
    for name, node in snapshot.nodes.items():
        requested = snapshot.node_requested(name)
        allocatable = node.allocatable
        for series, resource in _REQUESTED.items():
            frame.values[series][name] = _percent(requested.get(resource, 0),
                                                  allocatable.get(resource, 0))
        usage = usages.get(name)
        if usage is not None:
            frame.values["cpu usage"][name] = _percent(usage["cpu"], allocatable.get("cpu", 0))
            frame.values["memory usage"][name] = _percent(usage["memory"],
                                                          allocatable.get("memory", 0))
    return frame


def role_thresholds(policy: Policy) -> list[RoleThreshold]:
    """Every threshold the policy's plugins decide a node's role with (PluginSpec.
    role_thresholds), low and high, per series and node pool, in profile and plugin order; one
    of each (series, value, role, pool)."""
    found: dict[tuple[str, float, str, str], RoleThreshold] = {}
    for profile in policy.profiles:
        for name, args in profile.args.items():
            spec = policy.plugins.get(name)
            for t in spec.role_thresholds(args) if spec else ():
                found.setdefault((t.series, t.percent, t.role, t.pool), replace(t, plugin=name))
    return list(found.values())


def thresholds(policy: Policy) -> dict[str, float]:
    """The high thresholds on every node (no node pool's own) by series, for the balance
    figures' nodes over it: the first plugin naming a series sets it."""
    found: dict[str, float] = {}
    for t in role_thresholds(policy):
        if t.role == "high" and not t.pool:
            found.setdefault(t.series, t.percent)
    return found


def balance(frame: Frame, limits: dict[str, float]) -> list[Balance]:
    out = []
    for series in SERIES:
        values = list(frame.values.get(series, {}).values())
        if not values:
            continue
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        limit = limits.get(series)
        over = sum(1 for v in values if v > limit) if limit is not None else None
        out.append(Balance(series, len(values), mean, std, max(values), over))
    return out

"""Per-node utilization of a snapshot, and the balance figures a report shows per cycle.

A frame is taken before the first cycle and after each one: requested cpu, memory and pods as a
share of allocatable, and real usage where the snapshot has it (Koordinator's NodeMetric, else
metrics.k8s.io NodeMetrics). One pass over the nodes per frame, reading the snapshot's cached
per-node sums: no per-pod work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from desched.model.quantity import QuantityError, resource_amount
from desched.policy.model import Policy
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage.nodemetric import NodeLoad, read_node_load

# Series of a frame: percent of allocatable. "usage" series exist only where measured.
SERIES = ("cpu requests", "memory requests", "pods", "cpu usage", "memory usage")
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


def _measured_usage(snapshot: ClusterSnapshot, node_name: str,
                    now: datetime) -> dict[str, float] | None:
    node = snapshot.nodes[node_name]
    if node_name in snapshot.node_metrics:
        load = read_node_load(node, snapshot, ("cpu", "memory"), now, None)
        if isinstance(load, NodeLoad):
            return {r: float(load.usage.get(r, 0)) for r in ("cpu", "memory")}
    sample = snapshot.metrics_nodes.get(node_name)
    if sample is not None:
        try:
            return {r: float(resource_amount(r, sample.usage.get(r, 0)))
                    for r in ("cpu", "memory")}
        except QuantityError:
            return None
    return None


def take_frame(snapshot: ClusterSnapshot, label: str, now: datetime) -> Frame:
    frame = Frame(label, {s: {} for s in SERIES})
    for name, node in snapshot.nodes.items():
        requested = snapshot.node_requested(name)
        allocatable = node.allocatable
        for series, resource in _REQUESTED.items():
            frame.values[series][name] = _percent(requested.get(resource, 0),
                                                  allocatable.get(resource, 0))
        usage = _measured_usage(snapshot, name, now)
        if usage is not None:
            frame.values["cpu usage"][name] = _percent(usage["cpu"], allocatable.get("cpu", 0))
            frame.values["memory usage"][name] = _percent(usage["memory"],
                                                          allocatable.get("memory", 0))
    return frame


def thresholds(policy: Policy) -> dict[str, float]:
    """The high thresholds the policy's utilization plugins use (percent), by series: the
    first of LowNodeUtilization's targetThresholds (requests) or LowNodeLoad's highThresholds
    (usage) that names the resource. Deviation thresholds are relative: none then."""
    found: dict[str, float] = {}
    for profile in policy.profiles:
        for name, args in profile.args.items():
            if name == "LowNodeUtilization" and not getattr(args, "use_deviation_thresholds",
                                                            False):
                metrics = getattr(args, "metrics_utilization", None)
                kind = "usage" if metrics is not None else "requests"
                for resource, value in (getattr(args, "target_thresholds", None) or {}).items():
                    series = "pods" if resource == "pods" else f"{resource} {kind}"
                    found.setdefault(series, float(value))
            if name == "LowNodeLoad" and not getattr(args, "use_deviation_thresholds", False):
                for resource, value in (getattr(args, "high_thresholds", None) or {}).items():
                    found.setdefault(f"{resource} usage", float(value))
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

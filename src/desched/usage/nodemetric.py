"""Node load from Koordinator's NodeMetric (slo.koordinator.sh/v1alpha1;
docs/lownodeload.md): usage = status.nodeMetric.systemUsage + the podsMetric usage of the
node's pods.

Unlike koord-descheduler, a podsMetric entry counts only while its pod is still bound to the node
and not terminal: koordlet reports an average over minutes, so an evicted or finished pod would
otherwise keep the node looking hot until the next report. Bad data (a missing, expired or
incomplete NodeMetric, values that are not valid non-negative quantities) makes the node unusable
for the run, with a reason; it never raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from desched.model.koord import is_prod
from desched.model.node import Node
from desched.model.objects import NodeMetric, ResourceList
from desched.model.pod import Pod
from desched.model.quantity import QuantityError, resource_amount
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage.base import PodUsageError, UsageUnavailable
from desched.util.duration import format_duration

Amounts = dict[str, int]
PODS = "pods"


@dataclass
class NodeLoad:
    """One node's measured load. `usage`/`prod_usage` hold every tracked resource (cpu in
    millicores) plus `pods` = the pod count; callers update them as pods are moved."""

    node: Node
    pods: list[Pod]
    prod_pods: list[Pod]
    usage: Amounts
    prod_usage: Amounts
    # pod key -> its reported usage of the tracked resources (pods without an entry are absent).
    pod_usage: dict[str, Amounts]
    update_time: datetime | None = None
    # Problems that did not make the node unusable (e.g. entries of pods that are gone).
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.node.name


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _age(seconds: float) -> str:
    return format_duration(int(seconds))


def expiry_problem(metric: NodeMetric, now: datetime, expiration_seconds: int | None) -> str | None:
    """Koordinator's isNodeMetricExpired: no updateTime, or updated at least
    `expiration_seconds` ago (a value <= 0 disables the age check; None disables both)."""
    if expiration_seconds is None:
        return None
    name = metric.metadata.name
    updated = metric.status.update_time
    if updated is None:
        return f"NodeMetric {name} has no status.updateTime: treated as expired"
    age = (_utc(now) - _utc(updated)).total_seconds()
    if expiration_seconds > 0 and age >= expiration_seconds:
        return (f"NodeMetric {name} expired: last updated {_age(age)} ago, "
                f"nodeMetricExpirationSeconds is {expiration_seconds}")
    return None


def _amounts(resources: ResourceList, names: Sequence[str], where: str) -> Amounts | str:
    """The tracked resources of a ResourceList (missing ones are 0), or why it is unusable."""
    out: Amounts = {}
    for name in names:
        if name == PODS:
            continue
        raw = resources.get(name)
        if raw is None:
            out[name] = 0
            continue
        try:
            amount = resource_amount(name, raw)
        except QuantityError:
            return f"{where} {name} is {raw!r}, not a valid quantity"
        if amount < 0:
            return f"{where} {name} is negative ({raw})"
        out[name] = amount
    return out


def read_node_load(node: Node, snapshot: ClusterSnapshot, names: Sequence[str], now: datetime,
                   expiration_seconds: int | None,
                   prod: Callable[[Pod], bool] = is_prod) -> NodeLoad | str:
    """The node's load from its NodeMetric, or why the node cannot be measured this run."""
    name = node.name
    metric = snapshot.node_metrics.get(name)
    if metric is None:
        return f"node {name} has no NodeMetric: it is neither a source nor a target"
    info = metric.status.node_metric
    if info is None:
        return f"NodeMetric {name} has no status.nodeMetric"
    expired = expiry_problem(metric, now, expiration_seconds)
    if expired is not None:
        return expired
    # Koordinator's SystemUsage is a value struct: absent reads as zero. Older koordlets and
    # other NodeMetric publishers leave it out, so the node is measured by its pods alone.
    no_system = info.system_usage is None
    system = _amounts({} if info.system_usage is None else info.system_usage.resources, names,
                      f"NodeMetric {name}: systemUsage")
    if isinstance(system, str):
        return system

    pods = snapshot.pods_on_node(name)
    on_node: Mapping[str, Pod] = {p.key: p for p in pods}
    prod_pods = [p for p in pods if prod(p)]
    prod_keys = {p.key for p in prod_pods}
    usage = dict(system)
    prod_usage = dict.fromkeys(system, 0)
    pod_usage: dict[str, Amounts] = {}
    gone: list[str] = []
    unreported: list[str] = []
    for entry in metric.status.pods_metric:
        key = f"{entry.namespace or 'default'}/{entry.name}"
        if key not in on_node:
            gone.append(key)
            continue
        if key in pod_usage:
            continue  # a repeated entry: the first one counts
        if entry.pod_usage is None:
            unreported.append(key)
            continue
        amounts = _amounts(entry.pod_usage.resources, names,
                           f"NodeMetric {name}: podsMetric {key}")
        if isinstance(amounts, str):
            return amounts
        pod_usage[key] = amounts
        for resource, amount in amounts.items():
            usage[resource] += amount
            if key in prod_keys:
                prod_usage[resource] += amount
    usage[PODS] = len(pods)
    prod_usage[PODS] = len(prod_pods)

    load = NodeLoad(node, pods, prod_pods, usage, prod_usage, pod_usage,
                    metric.status.update_time)
    if no_system:
        load.notes.append(f"NodeMetric {name} has no status.nodeMetric.systemUsage: read as zero "
                          f"(as Koordinator does), the node's usage is its pods' alone")
    if gone:
        shown = ", ".join(gone[:3]) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")
        load.notes.append(f"NodeMetric {name} reports {len(gone)} pod(s) no longer running on "
                          f"the node ({shown}): their usage is not counted")
    if unreported:
        load.notes.append(f"NodeMetric {name} has podsMetric entries without podUsage "
                          f"({', '.join(unreported[:3])}): their usage is unknown")
    return load


# Koordinator's default nodeMetricExpirationSeconds (LowNodeLoad's, and koord-scheduler's).
NODE_METRIC_EXPIRATION_SECONDS = 180


class NodeMetricUsage:
    """A `UsageSource` over Koordinator's NodeMetric (metricsUtilization `source: NodeMetric`,
    desched's own): node usage as LowNodeLoad reads it (systemUsage + its pods' podsMetric),
    `pods` the node's pod count, a pod's usage its podsMetric entry. A node whose NodeMetric is
    missing, expired or unreadable is left out of the run with the reason; what made a node's
    figures partial without making them unusable is kept in `notes`."""

    pod_usage_known = True

    def __init__(self, snapshot: ClusterSnapshot, names: Sequence[str],
                 now: Callable[[], datetime],
                 expiration_seconds: int = NODE_METRIC_EXPIRATION_SECONDS) -> None:
        self.snapshot = snapshot
        self.names = tuple(names)
        self.now = now
        self.expiration_seconds = expiration_seconds
        self._loads: dict[str, NodeLoad] = {}
        self._pod_usage: dict[str, Amounts] = {}
        self.notes: dict[str, list[str]] = {}

    def sync(self, nodes: Sequence[Node]) -> dict[str, str]:
        self._loads.clear()
        self._pod_usage.clear()
        self.notes.clear()
        if not self.snapshot.node_metrics and nodes:
            raise UsageUnavailable("the snapshot holds no NodeMetric (slo.koordinator.sh/"
                                   "v1alpha1); add them (kubectl get nodemetrics.slo."
                                   "koordinator.sh -o json)")
        now = self.now()
        problems: dict[str, str] = {}
        for node in nodes:
            load = read_node_load(node, self.snapshot, self.names, now, self.expiration_seconds)
            if isinstance(load, str):
                problems[node.name] = load
                continue
            self._loads[node.name] = load
            self._pod_usage.update(load.pod_usage)
            if load.notes:
                self.notes[node.name] = load.notes
        return problems

    def node_usage(self, node: str) -> Amounts:
        usage = self._loads[node].usage
        return {r: usage.get(r, 0) for r in self.names}

    def pods(self, node: str) -> list[Pod]:
        return self._loads[node].pods

    def pod_usage(self, pod: Pod) -> Amounts:
        usage = self._pod_usage.get(pod.key)
        if usage is None:
            raise PodUsageError(f"pod usage unknown: NodeMetric {pod.node_name} reports no usage "
                                f"for it")
        return usage

"""What LowNodeUtilization and HighNodeUtilization share:
capacities, normalisation to percentages, static and deviation thresholds, classification,
capacities capped at the high threshold, the aggregate destination pool, and the eviction loop
that drains source nodes while the pool lasts. The usage sources live in desched.usage; a source
without per-pod usage (Prometheus) makes the loop evict without accounting (upstream's
"unconstrained" mode).

Upstream defects kept on purpose, because they decide which pods go:
- the destination pool is one aggregate over all destination nodes (no per-node bin-packing);
- source nodes are ordered by a "total usage" that adds millicores, bytes and counts together;
- the destination taint check counts every taint effect and has a taint-count pre-check.
Go map order and unstable sorts are made deterministic: node input order, stable sorts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

import msgspec

from desched.framework.evictor import EvictionLimitError
from desched.framework.registry import RoleThreshold
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED
from desched.model.node import Node, Taint
from desched.model.pod import Pod, Toleration
from desched.model.quantity import format_amount
from desched.plugins.ordering import sort_by_priority_low_to_high
from desched.predicates.taints import first_untolerated
from desched.usage.base import PodUsageError, UsageSource

# Re-exported for the plugins. METRIC_RESOURCE is Prometheus mode's pseudo-resource; every node
# has a capacity of 100 for it.
from desched.usage.prometheus import METRIC_RESOURCE as METRIC_RESOURCE
from desched.usage.requests import RequestedUsage as RequestedUsage
from desched.util.percent import fmt_pct as fmt_pct

BASIC_RESOURCES = ("cpu", "memory", "pods")
MIN_PERCENTAGE = 0
MAX_PERCENTAGE = 100

Percentages = dict[str, float]
Amounts = dict[str, int]


class EvictionLimits(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """`evictionLimits` of LowNodeUtilization: `node` is a *uint upstream."""

    node: Annotated[int, msgspec.Meta(ge=0)] | None = None


# -- validation --------------------------------------------------------------------------------


def validate_thresholds(thresholds: Mapping[str, float]) -> str | None:
    """Upstream's validateThresholds: the first problem, unprefixed."""
    if not thresholds:
        return "no resource threshold is configured"
    for name, percent in thresholds.items():
        if percent < MIN_PERCENTAGE or percent > MAX_PERCENTAGE:
            return f"{name} threshold not in [{MIN_PERCENTAGE}, {MAX_PERCENTAGE}] range"
    return None


def go_list(names: Iterable[str]) -> str:
    """A []string as Go's %v prints it."""
    return "[" + " ".join(names) + "]"


def resource_names(thresholds: Mapping[str, float]) -> list[str]:
    """The threshold keys plus cpu, memory and pods: what usage is tracked for."""
    names = list(thresholds)
    names.extend(r for r in BASIC_RESOURCES if r not in thresholds)
    return names


# -- capacities, percentages, thresholds -------------------------------------------------------


def node_capacity(node: Node) -> Amounts:
    """Allocatable (or capacity when allocatable is empty), plus MetricResource = 100."""
    capacity = dict(node.allocatable)
    capacity[METRIC_RESOURCE] = 100
    return capacity


def to_percentages(usage: Mapping[str, int], capacity: Mapping[str, int]) -> Percentages:
    """used / capacity * 100 for every used resource the node has a capacity for; 0 when the
    capacity is 0."""
    out: Percentages = {}
    for name, used in usage.items():
        total = capacity.get(name)
        if total is None:
            continue
        out[name] = float(used) / float(total) * 100 if total > 0 else 0.0
    return out


def _clamp(value: float) -> float:
    return min(max(value, float(MIN_PERCENTAGE)), float(MAX_PERCENTAGE))


def deviation_thresholds(percentages: Iterable[Mapping[str, float]], names: Sequence[str],
                         low_span: Mapping[str, float], high_span: Mapping[str, float]
                         ) -> tuple[Percentages, Percentages]:
    """The mean usage over all nodes of each threshold resource, minus `low_span` and plus
    `high_span`, clamped to [0, 100]. A resource no node has a capacity for gets no threshold."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for pct in percentages:
        for name in names:
            if name in pct:
                sums[name] = sums.get(name, 0.0) + pct[name]
                counts[name] = counts.get(name, 0) + 1
    mean = {name: total / counts[name] for name, total in sums.items()}
    low = {name: _clamp(avg + -low_span.get(name, 0.0)) for name, avg in mean.items()}
    high = {name: _clamp(avg + high_span.get(name, 0.0)) for name, avg in mean.items()}
    return low, high


def threshold_roles(thresholds: Mapping[str, float], on_usage: bool,
                    role: Literal["low", "high"], arg: str) -> list[RoleThreshold]:
    """One argument's thresholds as the report's series lines: `pods`, or `<resource>
    requests` (`usage` when the plugin reads metricsUtilization)."""
    kind = "usage" if on_usage else "requests"
    return [RoleThreshold("pods" if resource == "pods" else f"{resource} {kind}",
                          float(value), role, arg)
            for resource, value in thresholds.items()]


def below_threshold(usage: Mapping[str, float], threshold: Mapping[str, float]) -> bool:
    """Every threshold resource at or below its threshold (a missing usage reads as 0)."""
    return all(usage.get(name, 0.0) <= limit for name, limit in threshold.items())


def above_threshold(usage: Mapping[str, float], threshold: Mapping[str, float]) -> bool:
    """Some threshold resource strictly above its threshold."""
    return any(usage.get(name, 0.0) > limit for name, limit in threshold.items())


def cap_capacity(capacity: Mapping[str, int], high: Mapping[str, float],
                 names: Sequence[str]) -> Amounts:
    """Capacity capped at the high threshold, truncated as int64(pct * 0.01 * capacity); full
    capacity for a resource without threshold, 0 for one the node lacks."""
    out: Amounts = {}
    for name in names:
        total = capacity.get(name)
        if total is None:
            out[name] = 0
        elif name not in high:
            out[name] = total
        else:
            out[name] = int(high[name] * 0.01 * float(total))
    return out


# -- node infos, ordering, pool ----------------------------------------------------------------


@dataclass
class NodeInfo:
    """A classified node: its absolute usage (updated as pods leave), its capacity and capped
    capacity, its pods as captured by the usage source, and the percentages and thresholds it
    was classified with (for reasons)."""

    node: Node
    usage: Amounts
    capacity: Amounts
    available: Amounts
    pods: list[Pod]
    percentages: Percentages
    low: Percentages
    high: Percentages
    evicted: int = field(default=0)

    @property
    def name(self) -> str:
        return self.node.name


def total_usage(info: NodeInfo) -> int:
    """Upstream's sort key: raw amounts of every tracked resource added up (millicores + bytes
    + counts, so memory dominates)."""
    return sum(info.usage.values())


def sort_by_total_usage(infos: list[NodeInfo], ascending: bool) -> list[NodeInfo]:
    """Stable: nodes with equal totals keep their input order (upstream's sort is unstable)."""
    return sorted(infos, key=total_usage, reverse=not ascending)


def destination_pool(destinations: Iterable[NodeInfo], names: Sequence[str]) -> Amounts:
    """One aggregate over all destinations: sum of (capped capacity - usage) per resource."""
    pool = dict.fromkeys(names, 0)
    for info in destinations:
        for name in names:
            pool[name] += info.available[name] - info.usage[name]
    return pool


def pool_has_room(pool: Mapping[str, int]) -> bool:
    return all(amount > 0 for amount in pool.values())


def exhausted(pool: Mapping[str, int]) -> list[str]:
    return [name for name, amount in pool.items() if amount <= 0]


def above_target(info: NodeInfo) -> list[str]:
    """Resources whose usage exceeds the capped capacity (isNodeAboveTargetUtilization)."""
    return [name for name, used in info.usage.items() if used > info.available.get(name, 0)]


def subtract(pool: Amounts, info: NodeInfo, pod_usage: Mapping[str, int]) -> None:
    """A pod left `info`: take its usage off the node and off the pool (pods by one)."""
    for name in pool:
        amount = 1 if name == "pods" else pod_usage.get(name, 0)
        info.usage[name] = info.usage.get(name, 0) - amount
        pool[name] -= amount


# -- explaining --------------------------------------------------------------------------------


def describe_over(info: NodeInfo, resources: Iterable[str]) -> str:
    """"cpu 82% > 50%, pods 90% > 50%" for the resources above their capped capacity."""
    parts = []
    for name in resources:
        total = info.capacity.get(name, 0)
        used = info.usage.get(name, 0)
        if total <= 0:
            parts.append(f"{name} {format_amount(name, used)} > 0 allocatable")
            continue
        limit = info.high.get(name, float(MAX_PERCENTAGE))
        parts.append(f"{name} {fmt_pct(float(used) / float(total) * 100)}% > {fmt_pct(limit)}%")
    return ", ".join(parts)


def describe_under(info: NodeInfo) -> str:
    """"cpu 10% <= 30%, pods 20% <= 30%" for every threshold resource."""
    return ", ".join(f"{name} {fmt_pct(info.percentages.get(name, 0.0))}% <= {fmt_pct(limit)}%"
                     for name, limit in info.low.items())


def name_list(infos: Sequence[NodeInfo], most: int = 3) -> str:
    names = [i.name for i in infos[:most]]
    if len(infos) > most:
        names.append(f"{len(infos) - most} more")
    return ", ".join(names)


@dataclass
class RunFindings:
    """What one LowNodeUtilization/HighNodeUtilization run found per node (never per pod), so
    that `verdict` can tell an explained pod what its node was to the run."""

    source_kind: str  # "overutilized" (LNU) or "underutilized" (HNU)
    destination_kind: str  # "underutilized" (LNU) or "schedulable" (HNU)
    # How each role compares to the thresholds, for describe: "over-high", "under", "over-low".
    source_side: str
    destination_side: str
    middle_kind: str  # a node in neither role: "appropriately utilized" (LNU)
    percentages: dict[str, Percentages] = field(default_factory=dict)
    low: Percentages = field(default_factory=dict)
    high: Percentages = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)  # node -> "source" | "destination"
    stops: dict[str, str] = field(default_factory=dict)  # source node -> why evicting stopped
    ran: bool = False  # the eviction loop ran (else a note says why the run stopped)

    def describe(self, node: str, side: str) -> str:
        """"cpu 80% > 50%" for the resources on that side of the thresholds ("under": all of
        them, at or below low), else every threshold resource against both thresholds."""
        pct = self.percentages.get(node, {})
        parts = []
        for name, low in self.low.items():
            used, high = pct.get(name, 0.0), self.high.get(name, 0.0)
            if side == "under":
                parts.append(f"{name} {fmt_pct(used)}% <= {fmt_pct(low)}%")
            elif side == "over-low" and used > low:
                parts.append(f"{name} {fmt_pct(used)}% > {fmt_pct(low)}%")
            elif side == "over-high" and used > high:
                parts.append(f"{name} {fmt_pct(used)}% > {fmt_pct(high)}%")
            elif side == "":
                parts.append(f"{name} {fmt_pct(used)}% (low {fmt_pct(low)}%, high "
                             f"{fmt_pct(high)}%)")
        return ", ".join(parts)

    def classified(self, sources: Iterable[NodeInfo], destinations: Iterable[NodeInfo]) -> None:
        """The run's classification, recorded before it may stop for want of either side."""
        self.roles.update(dict.fromkeys((i.name for i in destinations), "destination"))
        self.roles.update(dict.fromkeys((i.name for i in sources), "source"))

    def role(self, node: str) -> str | None:
        """What the run found the node to be, with the figures it classified it by; None when
        the run left the node out or stopped before measuring (its notes say why)."""
        if node not in self.percentages:
            return None
        role = self.roles.get(node)
        if role is None:
            return f"{self.middle_kind} ({self.describe(node, '')})"
        if role == "destination":
            text = (f"{self.destination_kind} ({self.describe(node, self.destination_side)}), "
                    f"a target")
        else:
            text = f"{self.source_kind} ({self.describe(node, self.source_side)}), a source of " \
                   f"evictions"
        return text if self.ran else f"{text}, but the run stopped before evicting"

    def verdict(self, pod: Pod, excluded: frozenset[str]) -> str | None:
        """Why the run passed over a pod it recorded nothing about: its namespace, or its
        node's role (not a source, or a source whose draining stopped before the pod)."""
        if pod.namespace in excluded:
            return f"namespace {pod.namespace} is excluded by evictableNamespaces"
        node = pod.node_name
        if not self.ran or node not in self.percentages:
            return None  # the run stopped before, or left the node out: its notes say why
        role = self.roles.get(node)
        if role is None:
            return (f"node {node} is neither {self.source_kind} nor {self.destination_kind} "
                    f"({self.describe(node, '')})")
        if role == "destination":
            return (f"node {node} is a destination ({self.destination_kind}: "
                    f"{self.describe(node, self.destination_side)}), not a source")
        stop = self.stops.get(node)
        if stop is None:
            return RUN_ENDED
        return (f"node {node} is a source ({self.source_kind}: "
                f"{self.describe(node, self.source_side)}), but evicting from it stopped before "
                f"this pod: {stop}")


# -- destination taints ------------------------------------------------------------------------


def _toleration_key(tolerations: Sequence[Toleration]) -> tuple[tuple[object, ...], ...]:
    return tuple((t.key, t.operator, t.value, t.effect, t.toleration_seconds)
                 for t in tolerations)


class DestinationTaints:
    """Upstream's PodToleratesTaints over the destination nodes: the pod must tolerate every
    taint (any effect) of at least one destination, and a node with more taints than the pod has
    tolerations counts as not tolerated. Destinations are grouped by taint list and verdicts are
    cached by toleration list, so the check costs one lookup for most pods."""

    def __init__(self, destinations: Iterable[NodeInfo]) -> None:
        groups: dict[tuple[tuple[str, str, str], ...], tuple[Taint, ...]] = {}
        for info in destinations:
            taints = info.node.spec.taints
            groups.setdefault(tuple((t.key, t.value, t.effect) for t in taints), taints)
        self.groups = list(groups.values())
        self._cache: dict[tuple[tuple[object, ...], ...], bool] = {}
        # id(toleration list) -> (the list, its verdict): a workload's pods share their list
        # (model.sharing), so most pods are answered without building the key.
        self._by_list: dict[int, tuple[Sequence[Toleration], bool]] = {}

    def tolerated(self, pod: Pod) -> bool:
        tolerations = pod.spec.tolerations
        known = self._by_list.get(id(tolerations))
        if known is not None and known[0] is tolerations:
            return known[1]
        key = _toleration_key(tolerations)
        verdict = self._cache.get(key)
        if verdict is None:
            verdict = any(len(tolerations) >= len(taints)
                          and first_untolerated(taints, tolerations) is None
                          for taints in self.groups)
            self._cache[key] = verdict
        self._by_list[id(tolerations)] = (tolerations, verdict)
        return verdict


# -- the eviction loop -------------------------------------------------------------------------

ContinueEviction = Callable[[NodeInfo, Mapping[str, int]], bool]
ReasonFn = Callable[[NodeInfo, Mapping[str, int]], str]


@dataclass
class EvictionRun:
    """One evictPodsFromSourceNodes call: drain `sources` in order into the aggregate pool of
    `destinations`."""

    handle: Handle
    usage: UsageSource
    names: Sequence[str]
    removable: Callable[[Pod], bool]
    continue_eviction: ContinueEviction
    reason: ReasonFn
    excluded_namespaces: frozenset[str]
    node_limit: int | None
    findings: RunFindings

    def run(self, sources: Sequence[NodeInfo], destinations: Sequence[NodeInfo]) -> None:
        findings = self.findings
        findings.ran = True
        pool = destination_pool(destinations, self.names)
        taints = DestinationTaints(destinations)
        for source in sources:
            removable = [p for p in source.pods if self.removable(p)]
            if not removable:
                continue
            try:
                self._evict_from(source, sort_by_priority_low_to_high(removable), pool, taints)
            except EvictionLimitError as err:
                if err.scope == "total":
                    return
                # node limit: on to the next source node

    def _evict_from(self, source: NodeInfo, pods: list[Pod], pool: Amounts,
                    taints: DestinationTaints) -> None:
        handle = self.handle
        snapshot = handle.snapshot
        # The profile evictor's checks and eviction, bound once (Handle.pre_eviction_filter
        # and evict, minus a call per attempt each: most attempts meet a budget's refusal).
        evictor, plugin = handle.evictor, handle.plugin
        pre_eviction_filter, evict = evictor.pre_eviction_filter, evictor.evict
        # Without per-pod usage (Prometheus) an eviction's effect is unknown: upstream's
        # "unconstrained" mode.
        usage = self.usage
        constrained = usage.pod_usage_known
        if not self.continue_eviction(source, pool):
            self._stopped(source, pool)
            return
        # Bound once: most pods here meet a budget's refusal, and the loop is per pod.
        node_limit, excluded, present = self.node_limit, self.excluded_namespaces, \
            snapshot.pods.get
        tolerated = taints.tolerated
        # The reason names the node's usage: the same until an eviction changes it.
        reason: str | None = None
        for pod in pods:
            if node_limit is not None and source.evicted >= node_limit:
                handle.skip(pod, f"evictionLimits.node {node_limit} reached for node "
                                 f"{source.name}")
                self.findings.stops[source.name] = (f"evictionLimits.node {node_limit} "
                                                    f"reached")
                break
            if present(pod.cached_key or pod.key) is not pod:
                continue  # gone since the usage snapshot
            if not tolerated(pod):
                handle.skip(pod, f"pod does not tolerate all taints of any "
                                 f"{self.findings.destination_kind} node")
                continue
            if pod.metadata.namespace in excluded:
                handle.skip(pod, f"namespace {pod.namespace} is excluded by "
                                 f"evictableNamespaces")
                continue
            if not pre_eviction_filter(pod, plugin):
                continue
            pod_usage: Amounts = {}
            if constrained:
                try:
                    pod_usage = usage.pod_usage(pod)
                except PodUsageError as err:
                    handle.skip(pod, str(err))
                    continue
            if reason is None:
                reason = self.reason(source, pool)
            try:
                evicted = evict(pod, plugin, reason)
            except EvictionLimitError as err:
                if err.scope == "namespace":
                    continue  # like any other failed eviction
                raise
            if not evicted:
                continue
            source.evicted += 1
            reason = None
            if not constrained:
                # Nothing to subtract: one pod per node, or up to evictionLimits.node.
                if self.node_limit is None:
                    self.findings.stops[source.name] = ("without per-pod usage, one pod per "
                                                        "node is evicted")
                    break
                continue
            subtract(pool, source, pod_usage)
            if not self.continue_eviction(source, pool):
                self._stopped(source, pool)
                break

    def _stopped(self, source: NodeInfo, pool: Mapping[str, int]) -> None:
        full = exhausted(pool)
        self.findings.stops[source.name] = f"after {source.evicted} eviction(s), " + (
            f"the {self.findings.destination_kind} nodes have no room left ({', '.join(full)})"
            if full else "the node is no longer above its target thresholds")


def nothing_to_do(underutilized: int, nodes: int, number_of_nodes: int, targets: int,
                  no_targets: str) -> str | None:
    """Why a node-utilization pass stops before evicting (upstream's log lines), or None."""
    if not underutilized:
        return ("No node is underutilized, nothing to do here, you might tune your thresholds "
                "further")
    if underutilized <= number_of_nodes:
        return (f"Number of nodes underutilized ({underutilized}) is less or equal than "
                f"NumberOfNodes ({number_of_nodes}), nothing to do here")
    if underutilized == nodes:
        return "All nodes are underutilized, nothing to do here"
    if not targets:
        return no_targets
    return None


def classify_and_build(nodes: Sequence[Node], usage: UsageSource, names: Sequence[str],
                       low_high: Callable[[dict[str, Percentages]],
                                          tuple[Percentages, Percentages]],
                       first: Callable[[Node, Percentages, Percentages], bool],
                       second: Callable[[Node, Percentages, Percentages], bool],
                       findings: RunFindings | None = None,
                       ) -> tuple[list[NodeInfo], list[NodeInfo]]:
    """Snapshot usage, normalise, and put each node in the first group whose criterion it meets
    (`first` gets the low thresholds, `second` the high ones); nodes meeting neither are left
    out. `low_high` turns every node's percentages into the (low, high) thresholds all nodes
    share. Both groups carry capacities capped at the high threshold. `findings` gets every
    node's percentages and the thresholds."""
    capacities: dict[str, Amounts] = {}
    absolute: dict[str, Amounts] = {}
    percentages: dict[str, Percentages] = {}
    for node in nodes:
        name = node.name
        capacities[name] = node_capacity(node)
        absolute[name] = usage.node_usage(name)
        percentages[name] = to_percentages(absolute[name], capacities[name])
    low, high = low_high(percentages)
    if findings is not None:
        findings.percentages, findings.low, findings.high = percentages, low, high
    groups: tuple[list[NodeInfo], list[NodeInfo]] = ([], [])
    for node in nodes:
        name = node.name
        pct = percentages[name]
        if first(node, pct, low):
            group = groups[0]
        elif second(node, pct, high):
            group = groups[1]
        else:
            continue
        group.append(NodeInfo(
            node=node, usage=absolute[name], capacity=capacities[name],
            available=cap_capacity(capacities[name], high, names), pods=usage.pods(name),
            percentages=pct, low=low, high=high))
    return groups

"""LowNodeLoad (balance): Koordinator's load-aware hotspot descheduling, as koord-descheduler
v1.8.0 runs it (docs/lownodeload.md). Nodes are classified by their real usage from
NodeMetric (systemUsage + the pods' usage), node pool by node pool; a node above its high
thresholds on more than `consecutiveAbnormalities` consecutive passes gives up pods, cheapest
first, to nodes under their low thresholds.

Where this differs from Koordinator (docs/lownodeload.md lists every difference):
- room on a target is reserved only for a pod actually evicted, on the target it would land on
  (NodeFit, then the target's room under its high threshold), after the pods are sorted;
  Koordinator adds every candidate's usage to some target before evicting anything;
- a NodeMetric counts only the pods still on the node; bad metrics make a node unusable for the
  run with a recorded reason;
- a node is marked by the anomaly detector at most once per cycle, and nodes already handled as
  sources are left out of every later pool;
- why a hot node gave up nothing is recorded (node notes and per-pod reasons).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from desched.decoding.go import aggregate
from desched.errors import InputError, quote
from desched.framework.evictor import EvictionLimitError
from desched.framework.registry import NodeScope, PluginSpec, Reads, RoleThreshold, Scope
from desched.framework.types import Handle
from desched.model.koord import is_prod, raw_allocatable
from desched.model.labels import compile_selector, format_selector
from desched.model.node import Node
from desched.model.pod import Pod
from desched.model.quantity import format_amount
from desched.plugins.koord_pods import PodFilter
from desched.plugins.lownodeload.args import (
    DEFAULT_POOL,
    LowNodeLoadArgs,
    Pool,
    Thresholds,
    build_pools,
    default,
    seconds,
    validate,
)
from desched.plugins.lownodeload.detector import Detector, DetectorCache, State
from desched.plugins.lownodeload.sort import node_score, sort_pods_for_eviction
from desched.policy_files.args import namespace_scope
from desched.predicates.nodefit import node_fit, placement_signature
from desched.usage.nodemetric import PODS, NodeLoad, read_node_load

__all__ = ["LowNodeLoad", "LowNodeLoadArgs", "NodeInfo", "classify", "fill_thresholds"]

log = logging.getLogger(__name__)

Amounts = dict[str, int]
MIN_PERCENTAGE, MAX_PERCENTAGE = 0.0, 100.0


class _Stop(Exception):
    """The total eviction limit was reached: the plugin stops for this cycle."""


# -- thresholds and classification ---------------------------------------------------------------


def fill_thresholds(pool: Pool) -> tuple[list[str], Thresholds, Thresholds, Thresholds,
                                         Thresholds]:
    """newThresholds, on copies: the tracked resources are every threshold key plus memory;
    a resource missing from low (prodLow) gets 100% (0 in deviation mode) for both low and high
    (prodLow and prodHigh), overwriting a high value configured without its low."""
    low, high = dict(pool.low), dict(pool.high)
    prod_low, prod_high = dict(pool.prod_low), dict(pool.prod_high)
    names = list(dict.fromkeys([*low, *high, *prod_low, *prod_high, "memory"]))
    fill = MIN_PERCENTAGE if pool.deviation else MAX_PERCENTAGE
    for name in names:
        if name not in low:
            low[name] = high[name] = fill
        if name not in prod_low:
            prod_low[name] = prod_high[name] = fill
    return list(low), low, high, prod_low, prod_high


def threshold_amount(percent: float, capacity: int) -> int:
    """int64(pct * 0.01 * capacity): truncated, so 30% of 9 pods is 2."""
    return int(float(percent) * 0.01 * float(capacity))


def _clamp(percent: float) -> float:
    return min(max(percent, MIN_PERCENTAGE), MAX_PERCENTAGE)


def average_percentages(loads: Sequence[NodeLoad], capacities: Mapping[str, Amounts],
                        prod: bool) -> dict[str, float]:
    """Mean of used/capacity*100 over all measured nodes (a node without capacity for a
    resource adds nothing but still counts in the divisor, as Koordinator's average)."""
    sums: dict[str, float] = {}
    for load in loads:
        capacity = capacities[load.name]
        for name, used in (load.prod_usage if prod else load.usage).items():
            total = capacity.get(name, 0)
            if total == 0:
                continue
            sums[name] = sums.get(name, 0.0) + used / total * 100.0
    return {name: value / len(loads) for name, value in sums.items()} if loads else {}


@dataclass
class NodeInfo:
    """A measured node with its absolute thresholds; usage changes as pods leave or are sent
    to it. `reserved_*` are the requests of pods this pass sent to the node."""

    load: NodeLoad
    capacity: Amounts
    low: Amounts
    high: Amounts
    prod_low: Amounts
    prod_high: Amounts
    reserved_requests: Amounts = field(default_factory=dict)
    reserved_pods: int = 0

    @property
    def name(self) -> str:
        return self.load.name

    @property
    def node(self) -> Node:
        return self.load.node

    @property
    def usage(self) -> Amounts:
        return self.load.usage

    @property
    def prod_usage(self) -> Amounts:
        return self.load.prod_usage


def over(usage: Mapping[str, int], limits: Mapping[str, int]) -> list[str]:
    """Resources strictly above their threshold."""
    return [name for name, limit in limits.items() if name in usage and usage[name] > limit]


def under(usage: Mapping[str, int], limits: Mapping[str, int]) -> bool:
    """Every resource at or below its threshold."""
    return all(usage[name] <= limit for name, limit in limits.items() if name in usage)


@dataclass
class Classes:
    low: list[NodeInfo] = field(default_factory=list)
    sources: list[NodeInfo] = field(default_factory=list)
    prod_low: list[NodeInfo] = field(default_factory=list)
    prod_high: list[NodeInfo] = field(default_factory=list)
    both_low: list[NodeInfo] = field(default_factory=list)


def classify(infos: Sequence[NodeInfo]) -> Classes:
    """classifyNodes: an unschedulable node is never low (nor prod-low) but may be hot; a hot
    node's prod usage is not looked at."""
    out = Classes()
    for info in infos:
        schedulable = not info.node.spec.unschedulable
        if schedulable and under(info.usage, info.low):
            if over(info.prod_usage, info.prod_high):
                out.prod_high.append(info)
            elif under(info.prod_usage, info.prod_low):
                out.both_low.append(info)
            else:
                out.low.append(info)
        elif over(info.usage, info.high):
            out.sources.append(info)
        elif over(info.prod_usage, info.prod_high):
            out.prod_high.append(info)
        elif schedulable and under(info.prod_usage, info.prod_low):
            out.prod_low.append(info)
    return out


def _pct(amount: int, capacity: int) -> float:
    return 100.0 * amount / capacity if capacity else 0.0


def _show(name: str, amount: int, capacity: int) -> str:
    if capacity > 0:
        return f"{_pct(amount, capacity):.2f}%"
    return format_amount(name, amount)


def describe_over(info: NodeInfo, prod: bool) -> str:
    """"cpu 68.53% > 50.00%" for each resource above its (prod) high threshold, as shares of
    the node's capacity."""
    usage, limits = (info.prod_usage, info.prod_high) if prod else (info.usage, info.high)
    label = "prod " if prod else ""
    return ", ".join(
        f"{label}{name} {_show(name, usage[name], info.capacity.get(name, 0))} > "
        f"{_show(name, limits[name], info.capacity.get(name, 0))}"
        for name in over(usage, limits))


def describe_under(info: NodeInfo, prod: bool) -> str:
    """"cpu 10.00% <= 20.00%" for each resource against its (prod) low threshold."""
    usage, limits = (info.prod_usage, info.prod_low) if prod else (info.usage, info.low)
    label = "prod " if prod else ""
    return ", ".join(
        f"{label}{name} {_show(name, usage[name], info.capacity.get(name, 0))} <= "
        f"{_show(name, limit, info.capacity.get(name, 0))}"
        for name, limit in limits.items() if name in usage)


# -- the plugin ----------------------------------------------------------------------------------


class _Detectors(NamedTuple):
    node: DetectorCache
    prod: DetectorCache


class LowNodeLoad:
    def __init__(self, args: LowNodeLoadArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.pools = build_pools(args)
        errs = validate(args, self.pools)
        if errs:
            # Koordinator validates the args when it builds the plugin.
            raise InputError("", f'initializing plugin "LowNodeLoad": {aggregate(errs)}')
        self.pods = PodFilter(handle, args.evictable_namespaces,
                              [ps.selector for ps in args.pod_selectors or []])
        ttl = seconds(args.detector_cache_timeout)
        # One cache for node-level hot nodes and one for prod-hot nodes, shared by all pools.
        self.node_detectors = DetectorCache(ttl)
        self.prod_detectors = DetectorCache(ttl)
        self.number_of_nodes = args.number_of_nodes or 0
        self.expiration = args.node_metric_expiration_seconds
        self.node_fit = args.node_fit is not False
        self.dry_run = bool(args.dry_run)
        # Koordinator #2626 (fixed after v1.8.0 by raising the timeout): detectors that expire
        # between passes never see a streak. Kept, but said every cycle.
        interval = float(getattr(getattr(handle, "policy", None), "descheduling_interval", 0.0))
        self.interval_warning = ""
        if 0 < ttl < interval:
            self.interval_warning = (
                f"detectorCacheTimeout ({args.detector_cache_timeout}) is shorter than "
                f"deschedulingInterval ({interval:g}s): the anomaly detectors expire between "
                f"passes and no node is ever acted on")
        # Per cycle: detector states already marked (by (prod, node)) and notes already recorded.
        self.marked: dict[tuple[bool, str], State] = {}
        self.marked_normal: set[tuple[bool, str]] = set()
        self._noted: set[tuple[str, str]] = set()
        # This cycle's measured nodes, as pods move: what PingPongGuard asks about a target.
        self.measured: dict[str, NodeInfo] = {}
        # This cycle's classification of each node, as `explain --node` tells it.
        self.roles: dict[str, str] = {}

    def note(self, text: str, node: str = "") -> None:
        """A reason about a node (or the run) rather than a pod. Once per cycle."""
        if (node, text) in self._noted:
            return
        self._noted.add((node, text))
        self.handle.note(text, node)

    def over_thresholds_after(self, node: str, pod: Pod) -> str | None:
        """Whether `node` would be over its high thresholds with `pod`'s measured usage added
        (PingPongGuard's question); None when it would not, or was not measured this cycle."""
        target = self.measured.get(node)
        if target is None:
            return None
        source = self.measured.get(pod.node_name)
        moved = source.load.pod_usage.get(pod.key, {}) if source is not None else {}
        usage = {name: amount + moved.get(name, 0) for name, amount in target.usage.items()}
        usage[PODS] = usage.get(PODS, 0) + 1
        hot = over(usage, target.high)
        if not hot:
            return None
        shown = ", ".join(f"{name} {_show(name, usage[name], target.capacity.get(name, 0))}"
                          for name in hot)
        return f"LowNodeLoad would find it over its high thresholds ({shown})"

    def node_role(self, node: str) -> str | None:
        return self.roles.get(node)

    # The anomaly detectors outlive the cycle (CarriesState) and, for a CronJob, the run
    # (PersistsState); the persisted entries keep their attribute names as keys.
    def carried_state(self) -> object:
        return _Detectors(self.node_detectors, self.prod_detectors)

    def adopt_state(self, state: object) -> None:
        if isinstance(state, _Detectors):
            self.node_detectors, self.prod_detectors = state

    def dump_state(self, now: datetime) -> dict[str, object]:
        return {"node_detectors": self.node_detectors.dump(now),
                "prod_detectors": self.prod_detectors.dump(now)}

    def load_state(self, entries: dict[str, object], now: datetime) -> None:
        for key, cache in (("node_detectors", self.node_detectors),
                           ("prod_detectors", self.prod_detectors)):
            found = entries.get(key)
            if isinstance(found, dict):
                cache.load(found, now)

    def balance(self, nodes: list[Node]) -> None:
        if self.args.paused:
            self._noted.clear()
            self.note("LowNodeLoad is paused and will do nothing")
            return
        self.marked.clear()
        self.marked_normal.clear()
        self._noted.clear()
        self.measured.clear()
        self.roles.clear()
        if self.interval_warning:
            self.note(self.interval_warning)
        processed: set[str] = set()
        for pool in self.pools:
            # Koordinator keeps earlier pools' sources in a pool without selector; not here.
            members = [n for n in nodes if n.name not in processed
                       and (pool.matcher is None or pool.matcher(n.metadata.labels))]
            try:
                processed |= _PoolRun(self, pool, members).run()
            except _Stop:
                return


class _PoolRun:
    """processOneNodePool for one pool in one cycle."""

    def __init__(self, plugin: LowNodeLoad, pool: Pool, nodes: list[Node]) -> None:
        self.plugin = plugin
        self.pool = pool
        self.nodes = nodes
        self.handle = plugin.handle
        self.now = plugin.handle.now
        self.names, self.low_pct, self.high_pct, self.prod_low_pct, self.prod_high_pct = \
            fill_thresholds(pool)
        self.condition = pool.condition()
        self._fits: dict[tuple[bytes, str], str | None] = {}
        # For the explained nodes' roles: their classes as found (node -> (text, prod-hot or
        # None)), why a hot node is not acted on yet (by (prod, node)), whether pods moved.
        self.found: dict[str, tuple[str, bool | None]] = {}
        self.waiting: dict[tuple[bool, str], str] = {}
        self.moved = False

    # -- measuring --------------------------------------------------------------------------------

    def measure(self) -> list[NodeInfo]:
        plugin = self.plugin
        loads: list[NodeLoad] = []
        for node in self.nodes:
            got = read_node_load(node, self.handle.snapshot, self.names, self.now,
                                 plugin.expiration)
            if isinstance(got, str):
                plugin.note(got, node.name)
                continue
            for text in got.notes:
                plugin.note(text, node.name)
            loads.append(got)
        capacities = {load.name: raw_allocatable(load.node) for load in loads}
        avg: dict[str, float] = {}
        prod_avg: dict[str, float] = {}
        if self.pool.deviation:
            avg = average_percentages(loads, capacities, prod=False)
            prod_avg = average_percentages(loads, capacities, prod=True)
        infos = []
        for load in loads:
            capacity = capacities[load.name]
            low: Amounts = {}
            high: Amounts = {}
            prod_low: Amounts = {}
            prod_high: Amounts = {}
            for name in self.names:
                cap = capacity.get(name, 0)
                if not self.pool.deviation:
                    low[name] = threshold_amount(self.low_pct[name], cap)
                    high[name] = threshold_amount(self.high_pct.get(name, 0.0), cap)
                    prod_low[name] = threshold_amount(self.prod_low_pct[name], cap)
                    prod_high[name] = threshold_amount(self.prod_high_pct.get(name, 0.0), cap)
                    continue
                # Deviation: around the pool's mean usage; a 0 span means "never triggers".
                if self.low_pct[name] == 0:
                    low[name] = high[name] = cap
                else:
                    mean = avg.get(name, 0.0)
                    low[name] = threshold_amount(_clamp(mean - self.low_pct[name]), cap)
                    high[name] = threshold_amount(
                        _clamp(mean + self.high_pct.get(name, 0.0)), cap)
                if self.prod_low_pct[name] == 0:
                    prod_low[name] = prod_high[name] = cap
                else:
                    mean = prod_avg.get(name, 0.0)
                    prod_low[name] = threshold_amount(_clamp(mean - self.prod_low_pct[name]), cap)
                    prod_high[name] = threshold_amount(
                        _clamp(mean + self.prod_high_pct.get(name, 0.0)), cap)
            infos.append(NodeInfo(load, capacity, low, high, prod_low, prod_high))
        plugin.measured.update((info.name, info) for info in infos)
        wanted = self.handle.log.explain_nodes
        self.found = {info.name: self.classified(info) for info in infos if info.name in wanted}
        return infos

    # -- the pool algorithm -----------------------------------------------------------------------

    def run(self) -> set[str]:
        """The names of the pool's node-level hot nodes when the pool ran to the end (later pools
        leave them out), else nothing. The explained nodes' roles are recorded, however it ends."""
        try:
            return self._run()
        finally:
            self.record_roles()

    def classified(self, info: NodeInfo) -> tuple[str, bool | None]:
        """An explained node's class as classify puts it, with the figures it went by (read
        before any pod moves), and for a hot node whether it is prod-hot."""
        one = classify([info])
        if one.low:
            return f"under its lowThresholds ({describe_under(info, False)}), a target", None
        if one.both_low:
            return (f"under its lowThresholds and prodLowThresholds "
                    f"({describe_under(info, False)}), a target", None)
        if one.prod_low:
            return (f"under its prodLowThresholds ({describe_under(info, True)}), a target for "
                    f"prod pods", None)
        if one.sources or one.prod_high:
            prod = not one.sources
            return f"{'prod-hot' if prod else 'hot'} ({describe_over(info, prod)})", prod
        shown = ", ".join(f"{name} {_show(name, info.usage[name], info.capacity.get(name, 0))}"
                          for name in info.low if name in info.usage)
        return f"neither hot nor under its lowThresholds ({shown})", None

    def record_roles(self) -> None:
        """The explained nodes' roles in this pool's run: their class, and for a hot node
        whether the run acted on it."""
        pool = "" if self.pool.name == DEFAULT_POOL else f"in node pool {self.pool.name}: "
        found = self.plugin.roles
        for name, (text, prod) in self.found.items():
            if prod is not None:
                wait = self.waiting.get((prod, name))
                text += (f", not yet a source: {wait}" if wait is not None
                         else ", a source of evictions" if self.moved
                         else ", a source, but the run stopped before evicting")
            # A node in several pools is classified in each.
            found[name] = f"{found[name]}; {pool}{text}" if name in found else pool + text

    def _run(self) -> set[str]:
        plugin = self.plugin
        pool_name = self.pool.name
        if not self.nodes:
            plugin.note(f"No nodes to process LowNodeLoad (node pool {pool_name})")
            return set()
        classes = classify(self.measure())
        if not classes.sources and not classes.prod_high:
            plugin.note(f"All nodes are under target utilization, nothing to do here (node pool "
                        f"{pool_name})")
            return set()
        abnormal = self.detect(classes.sources, prod=False)
        abnormal_prod = self.detect(classes.prod_high, prod=True)
        if not abnormal and not abnormal_prod:
            return set()
        all_low = len(classes.low) + len(classes.prod_low) + len(classes.both_low)
        if all_low == 0:
            for info in abnormal:
                plugin.note(f"node {info.name} is hot ({describe_over(info, False)}) but no "
                            f"node of pool {pool_name} is under its lowThresholds: nowhere to "
                            f"move pods to", info.name)
            for info in abnormal_prod:
                plugin.note(f"node {info.name} is prod-hot ({describe_over(info, True)}) but no "
                            f"node of pool {pool_name} is under its low thresholds: nowhere to "
                            f"move pods to", info.name)
            return set()
        for info in (*classes.low, *classes.both_low):
            self.reset(info, prod=False)
        for info in classes.prod_low:
            self.reset(info, prod=True)
        if all_low <= plugin.number_of_nodes:
            for info in (*abnormal, *abnormal_prod):
                plugin.note(f"node {info.name} is hot but pool {pool_name} has only {all_low} "
                            f"underutilized node(s), not more than numberOfNodes "
                            f"({plugin.number_of_nodes})", info.name)
            return set()
        if all_low == len(self.nodes):
            plugin.note(f"All nodes are underutilized, nothing to do here (node pool "
                        f"{pool_name})")
            return set()

        weights = self.pool.weights
        abnormal.sort(key=lambda i: -node_score(i.usage, i.capacity, weights))
        abnormal_prod.sort(key=lambda i: -node_score(i.prod_usage, i.capacity, weights))

        self.moved = True
        try:
            self.move(classes, abnormal, abnormal_prod)
        finally:
            # One normal observation for every abnormal node, also when a global limit ended
            # the run (Koordinator's limiter refuses evictions without stopping the plugin).
            for info in abnormal:
                self.mark_normal(info, prod=False)
            for info in abnormal_prod:
                self.mark_normal(info, prod=True)
        return {info.name for info in classes.sources}

    def move(self, classes: Classes, abnormal: list[NodeInfo],
             abnormal_prod: list[NodeInfo]) -> None:
        """The node-level pass into low and both-low nodes, then the prod pass into prod-low and
        both-low nodes."""
        targets = [*classes.low, *classes.both_low]
        both_room = self.room(classes.both_low, prod=False)
        total = self.room(targets, prod=False)
        self.balance(abnormal, targets, total, prod=False)

        prod_targets = [*classes.prod_low, *classes.both_low]
        if self.plugin.node_fit:
            # Exact: each target's room under both its prod and its node-level high thresholds,
            # after what the node-level pass sent to it.
            prod_total = dict.fromkeys(self.names, 0)
            for info in prod_targets:
                for name in self.names:
                    prod_total[name] += min(info.prod_high[name] - info.prod_usage[name],
                                            info.high[name] - info.usage[name])
        else:
            # Koordinator's estimate: both-low nodes lend what the node-level pass left of them.
            prod_room = self.room(classes.prod_low, prod=True)
            both_prod_room = self.room(classes.both_low, prod=True)
            prod_total = {name: prod_room[name] + min(both_prod_room[name],
                                                      min(both_room[name], total[name]))
                          for name in self.names}
        self.balance(abnormal_prod, prod_targets, prod_total, prod=True)

    def room(self, infos: Sequence[NodeInfo], prod: bool) -> Amounts:
        """Σ (high threshold - usage) per resource; negative terms included, as Koordinator."""
        out = dict.fromkeys(self.names, 0)
        for info in infos:
            usage, limits = (info.prod_usage, info.prod_high) if prod else (info.usage, info.high)
            for name in self.names:
                out[name] += limits[name] - usage[name]
        return out

    # -- the anomaly detector ---------------------------------------------------------------------

    def _cache(self, prod: bool) -> DetectorCache:
        return self.plugin.prod_detectors if prod else self.plugin.node_detectors

    def detect(self, infos: list[NodeInfo], prod: bool) -> list[NodeInfo]:
        """filterRealAbnormalNodes: mark each hot node abnormal once per cycle and keep those in
        the Anomaly state. Without a condition, or with consecutiveAbnormalities 1, every hot node
        is abnormal at once."""
        cond = self.condition
        if cond is None or cond.bypass:
            return list(infos)
        plugin = self.plugin
        cache = self._cache(prod)
        abnormal = []
        for info in infos:
            key = (prod, info.name)
            state = plugin.marked.get(key)
            detector = cache.get(info.name, self.now)
            if state is None:
                if detector is None:
                    detector = Detector(info.name, cond)
                state = detector.mark(False, self.now)
                cache.store(detector, self.now)
                plugin.marked[key] = state
            if state is State.ANOMALY:
                abnormal.append(info)
            elif detector is not None:
                kind = "prod-hot" if prod else "hot"
                wait = self.waiting[key] = (
                    f"on {detector.abnormalities} consecutive pass(es); LowNodeLoad acts after "
                    f"more than {detector.condition.consecutive_abnormalities} "
                    f"(anomalyCondition.consecutiveAbnormalities)")
                plugin.note(f"node {info.name} is {kind} ({describe_over(info, prod)}) {wait}",
                            info.name)
        return abnormal

    def reset(self, info: NodeInfo, prod: bool) -> None:
        detector = self._cache(prod).get(info.name, self.now)
        if detector is not None:
            detector.reset(self.now)

    def mark_normal(self, info: NodeInfo, prod: bool) -> None:
        key = (prod, info.name)
        if key in self.plugin.marked_normal:
            return
        self.plugin.marked_normal.add(key)
        detector = self._cache(prod).get(info.name, self.now)
        if detector is not None:
            detector.mark(True, self.now)

    # -- moving pods ------------------------------------------------------------------------------

    def balance(self, sources: list[NodeInfo], targets: list[NodeInfo], total: Amounts,
                prod: bool) -> None:
        if not sources:
            return
        if not targets:
            for info in sources:
                kind = "prod-hot" if prod else "hot"
                self.plugin.note(
                    f"node {info.name} is {kind} ({describe_over(info, prod)}) but pool "
                    f"{self.pool.name} has no {'prod-' if prod else ''}underutilized node to "
                    f"take its pods", info.name)
            return
        chooser = _Targets(self, targets, prod)
        for source in sources:
            try:
                self.drain(source, chooser, total, prod)
            except EvictionLimitError as err:
                if err.scope == "total":
                    raise _Stop from None
                # the node limit: on to the next hot node

    def stop_reason(self, source: NodeInfo, total: Amounts, prod: bool) -> str | None:
        """continueEviction: "" when the node is no longer hot (its detector is reset), a reason
        when the targets' aggregate room is used up, None to go on."""
        usage, limits = (source.prod_usage, source.prod_high) if prod else \
            (source.usage, source.high)
        if not over(usage, limits):
            self.reset(source, prod)
            return ""
        full = [name for name in self.names if total[name] <= 0]
        if full:
            return (f"the underutilized nodes have no room left under their high thresholds "
                    f"for {', '.join(full)}")
        return None

    def eviction_reason(self, source: NodeInfo, prod: bool) -> str:
        """Koordinator's reason: each resource above its threshold, in name order, as usage
        share and configured percentage (the keys are always highThresholds')."""
        usage, limits = (source.prod_usage, source.prod_high) if prod else \
            (source.usage, source.high)
        configured = self.prod_high_pct if prod else self.high_pct
        label = "prod" if prod else "node"
        parts = [
            f"{label} {name} usage({_pct(usage[name], source.capacity.get(name, 0)):.2f}%)"
            f">threshold({configured.get(name, 0.0):.2f}%)"
            for name in sorted(self.high_pct)
            if name in limits and usage[name] > limits[name]]
        return "node is overutilized, " + ", ".join(parts)

    def drain(self, source: NodeInfo, chooser: _Targets, total: Amounts, prod: bool) -> None:
        """balancePods + evictPods for one hot node: filter, sort, then evict in order while
        the node is hot and the targets have room, each pod onto a target that can take it."""
        plugin = self.plugin
        handle = self.handle
        snapshot = handle.snapshot
        pods = source.load.prod_pods if prod else source.load.pods
        kind = "prod-hot" if prod else "hot"
        hot = describe_over(source, prod)
        candidates = []
        for pod in pods:
            if snapshot.pods.get(pod.key) is not pod or not plugin.pods.passes(pod):
                continue
            if plugin.node_fit and pod.key not in source.load.pod_usage:
                handle.skip(pod, f"NodeMetric {source.name} reports no usage for it: nodeFit "
                                 f"cannot tell whether a target has room")
                continue
            candidates.append(pod)
        if not candidates:
            plugin.note(f"node {source.name} is {kind} ({hot}) but none of its {len(pods)} "
                        f"{'prod ' if prod else ''}pod(s) may be evicted (see the pods' "
                        f"reasons)", source.name)
            return

        usage, limits = (source.prod_usage, source.prod_high) if prod else \
            (source.usage, source.high)
        excess = {name: usage[name] - limits[name] for name in over(usage, limits)}
        ordered = sort_pods_for_eviction(candidates, source.load.pod_usage, excess,
                                         self.pool.weights)
        moved = 0
        stopped: str | None = None
        first_unplaced = ""
        for pod in ordered:
            stopped = self.stop_reason(source, total, prod)
            if stopped is not None:
                break
            # Re-asked, as Koordinator does: an evict filter may have state (migration limits).
            if not handle.filter(pod):
                continue
            pod_usage = source.load.pod_usage.get(pod.key)
            target: NodeInfo | None = None
            if plugin.node_fit and pod_usage is not None:
                target, why = chooser.choose(pod, pod_usage)
                if target is None:
                    handle.skip(pod, why)
                    first_unplaced = first_unplaced or f"{pod.key}: {why}"
                    continue
            reason = self.eviction_reason(source, prod)
            if target is not None:
                # Where it fits now, not where it goes: the scheduler places the replacement.
                reason += f"; fits now on {target.name}"
            if plugin.dry_run:
                handle.skip(pod, f"dryRun: would be evicted: {reason}")
            else:
                if snapshot.pods.get(pod.key) is not pod:
                    continue
                try:
                    if not handle.evict(pod, reason):
                        continue
                except EvictionLimitError as err:
                    if err.scope == "namespace":
                        continue
                    raise
            moved += 1
            if pod_usage is not None:
                self.account(source, target, pod, pod_usage, total, prod)
                if target is not None:
                    chooser.changed()

        if over(usage, limits) and stopped != "":
            if stopped:
                why = stopped
            elif first_unplaced:
                why = f"no target node can take the remaining pods; first: {first_unplaced}"
            else:
                why = "no other pod could be evicted"
            head = (f"node {source.name} is {kind} ({describe_over(source, prod)})" if moved
                    else f"node {source.name} is {kind} ({hot})")
            done = f"after {moved} eviction(s)" if moved else "but nothing was evicted"
            plugin.note(f"{head} {done}: {why}", source.name)

    def account(self, source: NodeInfo, target: NodeInfo | None, pod: Pod, pod_usage: Amounts,
                total: Amounts, prod: bool) -> None:
        """The pod left `source` (and, with nodeFit, landed on `target`): move its usage."""
        pod_is_prod = prod or is_prod(pod)
        for name in {*total, PODS}:
            amount = 1 if name == PODS else pod_usage.get(name, 0)
            if name in total:
                total[name] -= amount
            source.usage[name] -= amount
            if pod_is_prod:
                source.prod_usage[name] -= amount
            if target is not None:
                target.usage[name] += amount
                if pod_is_prod:
                    target.prod_usage[name] += amount
        if target is not None:
            target.reserved_pods += 1
            for name, amount in pod.requests.items():
                target.reserved_requests[name] = target.reserved_requests.get(name, 0) + amount

    def room_problem(self, target: NodeInfo, pod_usage: Mapping[str, int],
                     prod: bool) -> str | None:
        """Why adding the pod's usage would take the target above a high threshold (in the prod
        pass: its prod and its node-level high thresholds)."""
        checks = [(target.usage, target.high, "")]
        if prod:
            checks.insert(0, (target.prod_usage, target.prod_high, "prod "))
        for usage, limits, label in checks:
            for name, limit in limits.items():
                if name not in usage:
                    continue
                after = usage[name] + (1 if name == PODS else pod_usage.get(name, 0))
                if after > limit:
                    cap = target.capacity.get(name, 0)
                    return (f"{label}{name} would reach {_show(name, after, cap)} > "
                            f"{_show(name, limit, cap)}")
        return None

    def fit_problem(self, pod: Pod, target: NodeInfo) -> str | None:
        """NodeFit (memoized per placement class: targets lose no pods during the pass), then the
        requests of the pods already sent to the target in this pass."""
        key = (placement_signature(pod), target.name)
        if key in self._fits:
            why = self._fits[key]
        else:
            why = self._fits[key] = node_fit(pod, target.node, self.handle.snapshot)
        if why is not None or not target.reserved_pods:
            return why
        allocatable = target.node.allocatable
        used = self.handle.snapshot.node_requested(target.name)
        sent = f"with the {target.reserved_pods} pod(s) already sent there"
        for name, request in pod.requests.items():
            free = allocatable.get(name, 0) - used.get(name, 0) - \
                target.reserved_requests.get(name, 0)
            if request > free:
                return f"insufficient {name} {sent}"
        if allocatable.get(PODS, 0) - used.get(PODS, 0) - target.reserved_pods <= 0:
            return f"insufficient pods {sent}"
        return None


class _Targets:
    """Picks the target for a pod: the least loaded target (weighted usage score, pods sent in
    this pass included) whose room and NodeFit allow it."""

    MAX_REASONS = 3

    def __init__(self, run: _PoolRun, infos: list[NodeInfo], prod: bool) -> None:
        self.run = run
        self.infos = infos
        self.prod = prod
        self._ranked: list[NodeInfo] | None = None

    def changed(self) -> None:
        self._ranked = None

    def ranked(self) -> list[NodeInfo]:
        if self._ranked is None:
            weights = self.run.pool.weights
            self._ranked = sorted(self.infos,
                                  key=lambda i: node_score(i.usage, i.capacity, weights))
        return self._ranked

    def choose(self, pod: Pod, pod_usage: Mapping[str, int]) -> tuple[NodeInfo | None, str]:
        failures: list[str] = []
        refused = 0
        for info in self.ranked():
            why = self.run.room_problem(info, pod_usage, self.prod) or \
                self.run.fit_problem(pod, info)
            if why is None:
                return info, ""
            refused += 1
            if len(failures) < self.MAX_REASONS:
                failures.append(f"{info.name}: {why}")
        more = f"; and {refused - len(failures)} more" if refused > len(failures) else ""
        return None, f"no target node can take it: {'; '.join(failures)}{more}"


def role_thresholds(args: LowNodeLoadArgs) -> list[RoleThreshold]:
    """lowThresholds and highThresholds on usage, per node pool (the top-level ones are the
    default pool's); none for a pool in deviation mode, nor a high threshold without its low
    (fill_thresholds makes both 100 %). The prod thresholds bound the prod pods' usage, a series
    the reports do not have."""
    out = []
    for pool in build_pools(args):
        if pool.deviation:
            continue
        name = "" if pool.name == DEFAULT_POOL else pool.name
        high = {resource: v for resource, v in pool.high.items() if resource in pool.low}
        out += [RoleThreshold(f"{r} usage", float(v), "low", "lowThresholds", name,
                              pool.node_selector) for r, v in pool.low.items()]
        out += [RoleThreshold(f"{r} usage", float(v), "high", "highThresholds", name,
                              pool.node_selector) for r, v in high.items()]
    return out


def scope(args: LowNodeLoadArgs) -> Scope:
    """NodeMetric (usage), evictableNamespaces and each node pool's nodeSelector."""
    pools = tuple(
        NodeScope(("" if pool.name == DEFAULT_POOL else f"nodePools {quote(pool.name)} ")
                  + "nodeSelector", format_selector(pool.node_selector),
                  compile_selector(pool.node_selector))
        for pool in build_pools(args) if pool.node_selector is not None)
    return Scope(reads=(Reads(("NodeMetric",), "LowNodeLoad (node and pod usage)"),),
                 namespaces=namespace_scope("evictableNamespaces", args.evictable_namespaces),
                 nodes=pools)


SPEC = PluginSpec(
    name="LowNodeLoad",
    extension_points=frozenset({"balance"}),
    args_type=LowNodeLoadArgs,
    factory=LowNodeLoad,
    default=default,
    args_kind="LowNodeLoadArgs",
    role_thresholds=role_thresholds,
    purpose="balance",
    scope=scope,
)

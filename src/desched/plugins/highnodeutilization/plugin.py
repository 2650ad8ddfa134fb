"""HighNodeUtilization (balance): empties nodes whose requests are at or below `thresholds` so
the scheduler (with a MostAllocated scoring strategy) can pack their pods onto fewer nodes.

Two args are desched's own (docs/compatibility.md); without them the plugin is upstream's:
- `metricsUtilization`, as LowNodeUtilization's (plugins/metrics_utilization.py, NodeMetric
  included): nodes are classified, ordered and drained by measured usage instead of requests.
  Upstream's HighNodeUtilization had it in v0.32 (metricsServer) and dropped it;
- `drainWhenAllUnderutilized`: when every node is underutilized, upstream does nothing; with it
  the emptiest nodes whose pods all fit on the others are drained (drain.py)."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from desched.decoding.go import Int64
from desched.framework.registry import PluginSpec, RoleThreshold, Scope
from desched.framework.types import Handle
from desched.model.node import Node
from desched.model.pod import Pod
from desched.plugins.highnodeutilization.drain import Drain, DrainFindings
from desched.plugins.metrics_utilization import (
    SOURCE_NOTE,
    MetricsUtilization,
    UsageSources,
    metrics_scope,
    validate_metrics_utilization,
)
from desched.plugins.nodeutilization_common import (
    MAX_PERCENTAGE,
    EvictionRun,
    NodeInfo,
    Percentages,
    RunFindings,
    below_threshold,
    classify_and_build,
    describe_under,
    nothing_to_do,
    pool_has_room,
    sort_by_total_usage,
    threshold_roles,
    validate_thresholds,
)
from desched.policy_files.args import Namespaces
from desched.usage.prometheus import PrometheusUsage

ONLY_THRESHOLDING_RESOURCES = "OnlyThresholdingResources"
EVICTION_MODES = frozenset({ONLY_THRESHOLDING_RESOURCES})


class HighNodeUtilizationArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    thresholds: dict[str, float] = {}
    number_of_nodes: Int64 = 0
    eviction_modes: list[str] = []
    evictable_namespaces: Namespaces | None = None
    # desched's own (None: unset, so a converted policy does not grow them).
    metrics_utilization: MetricsUtilization | None = None
    drain_when_all_underutilized: bool | None = None


def validate(args: HighNodeUtilizationArgs) -> list[str]:
    """Upstream's ValidateHighNodeUtilizationArgs: the first problem only, and no
    'thresholds config is not valid: ' prefix (unlike LowNodeUtilization)."""
    ns = args.evictable_namespaces
    if ns is not None and ns.include:
        return ["only Exclude namespaces can be set, inclusion is not supported"]
    err = validate_thresholds(args.thresholds)
    if err is not None:
        return [err]
    for mode in args.eviction_modes:
        if mode not in EVICTION_MODES:
            return [f"invalid eviction mode {mode}"]
    err = validate_metrics_utilization(args.metrics_utilization)
    return [err] if err is not None else []



def _findings() -> RunFindings:
    return RunFindings("underutilized", "schedulable", "under", "over-low",
                       "neither underutilized nor schedulable")


class HighNodeUtilization:
    def __init__(self, args: HighNodeUtilizationArgs, handle: Handle) -> None:
        self.sources = UsageSources(handle, "HighNodeUtilization", args.metrics_utilization,
                                    (("thresholds", args.thresholds),))
        self.args = args
        self.handle = handle
        self.threshold_names = frozenset(args.thresholds)
        self.high = dict.fromkeys(args.thresholds, float(MAX_PERCENTAGE))
        self.mode, self.names = self.sources.mode, self.sources.names
        self.drain = bool(args.drain_when_all_underutilized)
        self.drained: DrainFindings | None = None  # the last run's, when it drained
        ns = args.evictable_namespaces
        self.excluded = frozenset(ns.exclude) if ns is not None else frozenset()
        self.only_thresholding = ONLY_THRESHOLDING_RESOURCES in args.eviction_modes
        self.findings = _findings()

    def _thresholds(self, _: dict[str, Percentages]) -> tuple[Percentages, Percentages]:
        return dict(self.args.thresholds), self.high

    def _removable(self, pod: Pod) -> bool:
        if not self.handle.filter(pod):
            return False
        if self.only_thresholding and not pod.request_keys & self.threshold_names:
            listed = ", ".join(self.args.thresholds)
            self.handle.skip(pod, f"pod requests none of the threshold resources ({listed}); "
                                  f"evictionModes has {ONLY_THRESHOLDING_RESOURCES}")
            return False
        return True

    def queried_usage(self) -> PrometheusUsage | None:
        """The Prometheus source runs ask (for a report's usage figures), once one has."""
        return self.sources.queried_usage()

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        drained = self.drained
        if drained is not None and pod.namespace not in self.excluded:
            return drained.verdict(pod)
        return self.findings.verdict(pod, self.excluded)

    def node_role(self, node: str) -> str | None:
        if self.drained is not None:
            return self.drained.role(node)
        return self.findings.role(node)

    def balance(self, nodes: list[Node]) -> None:
        args = self.args
        findings = self.findings = _findings()
        self.drained = None
        measured = self.sources.measure(nodes)
        if measured is None:
            return
        usage, nodes = measured
        low, schedulable = classify_and_build(
            nodes, usage, self.names, self._thresholds,
            # Unschedulable nodes may be underutilized (and are then drained) ...
            lambda node, pct, lo: below_threshold(pct, lo),
            # ... but only schedulable ones take the pods.
            lambda node, pct, hi: not node.spec.unschedulable, findings)
        findings.classified(low, schedulable)
        if self.drain and len(low) == len(nodes) > max(args.number_of_nodes, 0):
            drain = Drain(self.handle, low, self._removable, self.excluded, SOURCE_NOTE[self.mode])
            self.drained = drain.findings
            drain.run()
            return
        idle = nothing_to_do(len(low), len(nodes), args.number_of_nodes, len(schedulable),
                             "No schedulable node can take the pods, nothing to do here")
        if idle is not None:
            self.handle.note(idle)
            return
        count = len(schedulable)
        targets = f"{count} schedulable node" + ("s" if count != 1 else "")

        detail = SOURCE_NOTE[self.mode]

        def reason(source: NodeInfo, pool: Mapping[str, int]) -> str:
            state = " (unschedulable)" if source.node.spec.unschedulable else ""
            return (f"node {source.name}{state} is underutilized ({describe_under(source)}"
                    f"{detail}); evicting so its pods can be packed onto the {targets}")

        EvictionRun(
            handle=self.handle, usage=usage, names=self.names, removable=self._removable,
            # No per-source stop: drain each underutilized node while the pool has room.
            continue_eviction=lambda info, pool: pool_has_room(pool),
            reason=reason, excluded_namespaces=self.excluded, node_limit=None,
            findings=findings,
        ).run(sort_by_total_usage(low, ascending=True), schedulable)


def role_thresholds(args: HighNodeUtilizationArgs) -> list[RoleThreshold]:
    """`thresholds`, on requests (or usage with metricsUtilization): the nodes at or below them
    are emptied (low)."""
    return threshold_roles(args.thresholds, args.metrics_utilization is not None, "low",
                           "thresholds")


def scope(args: HighNodeUtilizationArgs) -> Scope:
    return metrics_scope("HighNodeUtilization", args.metrics_utilization, args.evictable_namespaces)


SPEC = PluginSpec(
    name="HighNodeUtilization",
    extension_points=frozenset({"balance"}),
    args_type=HighNodeUtilizationArgs,
    factory=HighNodeUtilization,
    validate=validate,
    role_thresholds=role_thresholds,
    purpose="balance",
    scope=scope,
)

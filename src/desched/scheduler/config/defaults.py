"""kube-scheduler's defaults (`pkg/scheduler/apis/config/v1/default_plugins.go`, `defaults.go`;
v1beta2's from v1.28): the plugins a profile runs before the file changes them, and each
plugin's args turned into the profile's value with every unset field defaulted
(koord-scheduler's LoadAwareScheduling: load_aware_args.py). Validation (validation.py) has
passed when these run."""

from __future__ import annotations

from typing import Any, Literal, cast

from desched.model.meta import Shared, shared_hook
from desched.model.pod import TopologySpreadConstraint
from desched.scheduler.config.types import (
    InterPodAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
    ScoringResource,
)
from desched.scheduler.profile import (
    DEFAULT_PLUGINS,
    DEFAULT_RESOURCES,
    DEFAULT_SCORE_WEIGHTS,
    FitScoring,
    ResourceSpec,
    ShapePoint,
    SpreadDefaults,
)

# v1's one multiPoint list: (plugin, weight) in kube-scheduler's order.
V1_MULTI_POINT = tuple((n, DEFAULT_SCORE_WEIGHTS.get(n)) for n in DEFAULT_PLUGINS)

# v1beta2's, per extension point (kube-scheduler v1.28 apis/config/v1beta2).
V1BETA2_FILTERS = ("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity",
                   "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "EBSLimits",
                   "GCEPDLimits", "NodeVolumeLimits", "AzureDiskLimits", "VolumeBinding",
                   "VolumeZone", "PodTopologySpread", "InterPodAffinity")
V1BETA2_SCORES = (("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
                  ("InterPodAffinity", 1), ("NodeResourcesFit", 1), ("NodeAffinity", 1),
                  ("PodTopologySpread", 2), ("TaintToleration", 1))


def scoring_resources(specs: list[ScoringResource]) -> tuple[ResourceSpec, ...]:
    """Resources a score weighs: the default pair when none, weight 0 -> 1."""
    if not specs:
        return DEFAULT_RESOURCES
    return tuple(ResourceSpec(spec.name, spec.weight or 1) for spec in specs)


def fit_scoring(args: NodeResourcesFitArgs) -> FitScoring:
    strategy = args.scoring_strategy
    if strategy is None:
        return FitScoring()
    ratio = strategy.requested_to_capacity_ratio
    shape: tuple[ShapePoint, ...] = ()
    if strategy.type == "RequestedToCapacityRatio" and ratio is not None:
        shape = tuple(ShapePoint(p.utilization, p.score) for p in ratio.shape)
    return FitScoring(type=cast(Any, strategy.type),
                      resources=scoring_resources(strategy.resources), shape=shape)


def balanced_resources(args: NodeResourcesBalancedAllocationArgs) -> tuple[ResourceSpec, ...]:
    return scoring_resources(args.resources)


def spread_defaults(args: PodTopologySpreadArgs) -> SpreadDefaults:
    kind: Literal["System", "List"] = "List" if args.defaulting_type == "List" else "System"
    return SpreadDefaults(defaulting_type=kind, constraints=tuple(
        TopologySpreadConstraint(
            max_skew=c.max_skew, topology_key=shared_hook(Shared, c.topology_key),
            when_unsatisfiable=cast(Any, c.when_unsatisfiable), min_domains=c.min_domains,
            node_affinity_policy=cast(Any, c.node_affinity_policy),
            node_taints_policy=cast(Any, c.node_taints_policy),
            match_label_keys=tuple(c.match_label_keys))
        for c in args.default_constraints))


def hard_pod_affinity_weight(args: InterPodAffinityArgs) -> int:
    return 1 if args.hard_pod_affinity_weight is None else args.hard_pod_affinity_weight


def inter_pod_affinity(args: InterPodAffinityArgs) -> tuple[int, bool]:
    """(hardPodAffinityWeight, ignorePreferredTermsOfExistingPods)."""
    return hard_pod_affinity_weight(args), args.ignore_preferred_terms_of_existing_pods

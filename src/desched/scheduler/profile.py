"""A scheduler profile as kube-scheduler runs it: which filters and scores are on, the score
weights, and the plugin arguments the scheduler models use. `DEFAULT` is kube-scheduler's
default profile (v1.36); `scheduler/config/` builds others from a user's
KubeSchedulerConfiguration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from desched.model.meta import Shared
from desched.model.pod import NodeAffinity, Pod, TopologySpreadConstraint

DEFAULT_SCHEDULER_NAME = "default-scheduler"

# Filters the models evaluate (volume and port plugins need objects a snapshot does not hold).
FILTERS = ("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodeResourcesFit",
           "PodTopologySpread", "InterPodAffinity")
# Scores of the default profile, with their default weights.
DEFAULT_SCORE_WEIGHTS: Mapping[str, int] = MappingProxyType({
    "TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
    "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1})
# Every plugin of kube-scheduler's default set (a configuration may name any of them).
DEFAULT_PLUGINS = ("SchedulingGates", "PrioritySort", "NodeUnschedulable", "NodeName",
                   "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
                   "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone",
                   "PodTopologySpread", "InterPodAffinity", "DefaultPreemption",
                   "NodeResourcesBalancedAllocation", "ImageLocality", "DefaultBinder")

ScoringType = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]
SCORING_TYPES: tuple[ScoringType, ...] = ("LeastAllocated", "MostAllocated",
                                          "RequestedToCapacityRatio")


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int = 1


@dataclass(frozen=True, slots=True)
class ShapePoint:
    utilization: int  # 0-100
    score: int  # 0-10 (MaxCustomPriorityScore), scaled to 0-100 when scoring


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


@dataclass(frozen=True, slots=True)
class FitScoring:
    """NodeResourcesFitArgs.scoringStrategy."""
    type: ScoringType = "LeastAllocated"
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    shape: tuple[ShapePoint, ...] = ()  # RequestedToCapacityRatio only


# PodTopologySpread's system default constraints (defaultingType: System).
SYSTEM_DEFAULT_CONSTRAINTS = (
    TopologySpreadConstraint(max_skew=3, topology_key=Shared("kubernetes.io/hostname"),
                             when_unsatisfiable="ScheduleAnyway"),
    TopologySpreadConstraint(max_skew=5, topology_key=Shared("topology.kubernetes.io/zone"),
                             when_unsatisfiable="ScheduleAnyway"),
)


@dataclass(frozen=True, slots=True)
class SpreadDefaults:
    """PodTopologySpreadArgs: constraints given to pods that have none of their own."""
    defaulting_type: Literal["System", "List"] = "System"
    constraints: tuple[TopologySpreadConstraint, ...] = ()

    @property
    def effective(self) -> tuple[TopologySpreadConstraint, ...]:
        return SYSTEM_DEFAULT_CONSTRAINTS if self.defaulting_type == "System" else self.constraints

    @property
    def system(self) -> bool:
        return self.defaulting_type == "System"


@dataclass(frozen=True, slots=True)
class LoadAwareArgs:
    """koord-scheduler's LoadAwareSchedulingArgs (percentages; seconds)."""
    usage_thresholds: Mapping[str, int] = field(
        default_factory=lambda: MappingProxyType({"cpu": 65, "memory": 95}))
    prod_usage_thresholds: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    resource_weights: Mapping[str, int] = field(
        default_factory=lambda: MappingProxyType({"cpu": 1, "memory": 1}))
    estimated_scaling_factors: Mapping[str, int] = field(
        default_factory=lambda: MappingProxyType({"cpu": 85, "memory": 70}))
    node_metric_expiration_seconds: int = 180
    filter_expired_node_metrics: bool = True


@dataclass(frozen=True, slots=True)
class Profile:
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    filters: frozenset[str] = frozenset(FILTERS)
    # enabled score plugin -> weight
    scores: Mapping[str, int] = field(default_factory=lambda: DEFAULT_SCORE_WEIGHTS)
    fit: FitScoring = FitScoring()
    balanced_resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    spread: SpreadDefaults = SpreadDefaults()
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False
    added_affinity: NodeAffinity | None = None  # NodeAffinityArgs.addedAffinity
    percentage_of_nodes_to_score: int | None = None  # None: the configuration's
    load_aware: LoadAwareArgs | None = None  # LoadAwareScheduling enabled (koord-scheduler)

    def weight(self, plugin: str) -> int:
        return self.scores.get(plugin, 0)


DEFAULT = Profile()


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """A KubeSchedulerConfiguration: its profiles by schedulerName."""
    profiles: Mapping[str, Profile] = field(
        default_factory=lambda: MappingProxyType({DEFAULT_SCHEDULER_NAME: DEFAULT}))
    percentage_of_nodes_to_score: int = 0  # 0: adaptive, max(5, 50 - nodes/125) %
    source: str = ""  # the file it came from ("" for the built-in default)

    def profile_for(self, pod: Pod) -> Profile | None:
        """The profile that schedules `pod` (its spec.schedulerName, default-scheduler when
        empty); None when no profile of this configuration does."""
        return self.profiles.get(pod.spec.scheduler_name or DEFAULT_SCHEDULER_NAME)

    def nodes_to_score(self, profile: Profile, total: int) -> int:
        """How many feasible nodes kube-scheduler looks for before it stops filtering and
        scores them (numFeasibleNodesToFind): all below 100 nodes, else a percentage, at
        least 100."""
        if total < 100:
            return total
        percentage = profile.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.percentage_of_nodes_to_score
        if percentage == 0:
            percentage = max(5, 50 - total // 125)
        return max(100, total * percentage // 100)


DEFAULT_CONFIG = SchedulerConfig()

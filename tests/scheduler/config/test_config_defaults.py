"""Plugin args defaulted into the profile (scheduler/config/defaults.py): kube-scheduler's
NodeResourcesFit, NodeResourcesBalancedAllocation, PodTopologySpread, InterPodAffinity and
NodeAffinity args, koord-scheduler's LoadAwareScheduling."""

from __future__ import annotations

from desched.model.meta import Shared
from desched.model.pod import (
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
)
from desched.scheduler.config.defaults import (
    fit_scoring,
    scoring_resources,
)
from desched.scheduler.config.types import (
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ScoringResource,
    ScoringStrategy,
    UtilizationShapePoint,
)
from desched.scheduler.profile import DEFAULT, FitScoring, ResourceSpec, ShapePoint
from scheduler_config_builders import args, profile


def test_args_given_empty_take_every_default() -> None:
    body = """\
        profiles:
        - pluginConfig:
          - {name: NodeResourcesFit, args: {}}
          - {name: NodeResourcesBalancedAllocation, args: {}}
          - {name: PodTopologySpread, args: {}}
          - {name: InterPodAffinity, args: {}}
          - {name: NodeAffinity, args: {}}
          - {name: DefaultPreemption}
        """
    assert profile(body) == DEFAULT


def test_most_allocated_with_resources_and_weights() -> None:
    p = profile(args("NodeResourcesFit", """\
        scoringStrategy:
          type: MostAllocated
          resources:
          - {name: cpu, weight: 3}
          - {name: memory}
          - {name: nvidia.com/gpu, weight: 0}
        """))
    assert p.fit == FitScoring("MostAllocated", (ResourceSpec("cpu", 3), ResourceSpec("memory", 1),
                                                 ResourceSpec("nvidia.com/gpu", 1)), ())


def test_a_scoring_strategy_without_resources_scores_cpu_and_memory() -> None:
    p = profile(args("NodeResourcesFit", "scoringStrategy: {type: MostAllocated}\n"))
    assert p.fit == FitScoring("MostAllocated", (ResourceSpec("cpu", 1),
                                                 ResourceSpec("memory", 1)), ())


def test_requested_to_capacity_ratio_with_its_shape() -> None:
    p = profile(args("NodeResourcesFit", """\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: NodeResourcesFitArgs
        scoringStrategy:
          type: RequestedToCapacityRatio
          resources: [{name: cpu, weight: 2}]
          requestedToCapacityRatio:
            shape:
            - {utilization: 0, score: 0}
            - {utilization: 80, score: 10}
            - {utilization: 100, score: 2}
        """))
    assert p.fit == FitScoring("RequestedToCapacityRatio", (ResourceSpec("cpu", 2),),
                               (ShapePoint(0, 0), ShapePoint(80, 10), ShapePoint(100, 2)))


def test_balanced_allocation_resources() -> None:
    p = profile(args("NodeResourcesBalancedAllocation", """\
        resources: [{name: cpu, weight: 1}, {name: memory}, {name: example.com/foo}]
        """))
    assert p.balanced_resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1),
                                    ResourceSpec("example.com/foo", 1))


def test_pod_topology_spread_list_defaulting_with_constraints() -> None:
    p = profile(args("PodTopologySpread", """\
        defaultingType: List
        defaultConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone,
           whenUnsatisfiable: ScheduleAnyway}
        - {maxSkew: 4, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,
           nodeTaintsPolicy: Honor, matchLabelKeys: [app]}
        """))
    assert p.spread.defaulting_type == "List"
    assert p.spread.effective == (
        TopologySpreadConstraint(max_skew=1, topology_key=Shared("topology.kubernetes.io/zone"),
                                 when_unsatisfiable="ScheduleAnyway"),
        TopologySpreadConstraint(max_skew=4, topology_key=Shared("kubernetes.io/hostname"),
                                 when_unsatisfiable="DoNotSchedule", node_taints_policy="Honor",
                                 match_label_keys=("app",)))


def test_list_defaulting_without_constraints_spreads_nothing_by_default() -> None:
    p = profile(args("PodTopologySpread", "defaultingType: List\n"))
    assert (p.spread.defaulting_type, p.spread.effective) == ("List", ())


def test_inter_pod_affinity_args() -> None:
    p = profile(args("InterPodAffinity", """\
        hardPodAffinityWeight: 0
        ignorePreferredTermsOfExistingPods: true
        """))
    assert (p.hard_pod_affinity_weight, p.ignore_preferred_terms_of_existing_pods) == (0, True)


def test_node_affinity_added_affinity() -> None:
    p = profile(args("NodeAffinity", """\
        addedAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: pool, operator: In, values: [batch]}
              - {key: cpus, operator: Gt, values: ["8"]}
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 20
            preference:
              matchFields: [{key: metadata.name, operator: NotIn, values: [n1]}]
        """))
    assert p.added_affinity == NodeAffinity(
        required_during_scheduling_ignored_during_execution=NodeSelector(node_selector_terms=(
            NodeSelectorTerm(match_expressions=(
                NodeSelectorRequirement(key=Shared("pool"), operator="In",
                                        values=(Shared("batch"),)),
                NodeSelectorRequirement(key=Shared("cpus"), operator="Gt",
                                        values=(Shared("8"),)))),)),
        preferred_during_scheduling_ignored_during_execution=(PreferredSchedulingTerm(
            weight=20, preference=NodeSelectorTerm(match_fields=(NodeSelectorRequirement(
                key=Shared("metadata.name"), operator="NotIn", values=(Shared("n1"),)),))),))


# -- defaulting decoded args -------------------------------------------------------------------

def test_scoring_resources_default_to_cpu_and_memory_and_weigh_0_as_1() -> None:
    assert scoring_resources([]) == DEFAULT.fit.resources
    assert scoring_resources([ScoringResource("cpu", 0), ScoringResource("gpu", 4)]) == (
        ResourceSpec("cpu", 1), ResourceSpec("gpu", 4))


def test_a_shape_is_read_only_for_requested_to_capacity_ratio() -> None:
    ratio = RequestedToCapacityRatioParam(shape=[UtilizationShapePoint(0, 10)])
    most = fit_scoring(NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(
        type="MostAllocated", requested_to_capacity_ratio=ratio)))
    assert most.shape == ()
    ratio_fit = fit_scoring(NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(
        type="RequestedToCapacityRatio", requested_to_capacity_ratio=ratio)))
    assert ratio_fit.shape == (ShapePoint(0, 10),)

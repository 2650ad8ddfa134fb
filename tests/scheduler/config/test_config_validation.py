"""kube-scheduler's validation and its wording (scheduler/config/validation.py, field_errors.py,
and the plugin-set and decode errors the reader reports): one line naming the file and the field."""

from __future__ import annotations

import msgspec
import pytest

from desched.scheduler.config.field_errors import go, msgspec_error
from desched.scheduler.config.types import (
    V1,
    V1BETA3,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ScoringStrategy,
    UtilizationShapePoint,
)
from desched.scheduler.config.validation import (
    validate_fit_args,
    validate_percentage,
    validate_plugin_name,
)
from scheduler_config_builders import args, error, plugins

P0 = "profiles[0].pluginConfig[0].args"


@pytest.mark.parametrize(("body", "message"), [
    (args("NodeResourcesFit", "scoringStrategy: {type: Fancy}\n"),
     f'{P0}.scoringStrategy.type: Unsupported value: "Fancy": supported values: '
     f'"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'),
    (args("NodeResourcesFit", "scoringStrategy: {resources: [{name: cpu}]}\n"),
     f'{P0}.scoringStrategy.type: Unsupported value: "": supported values: '
     f'"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'),
    (args("NodeResourcesFit", "scoringStrategy: {type: MostAllocated, resources: "
                              "[{name: cpu, weight: -1}]}\n"),
     f"{P0}.scoringStrategy.resources[0].weight: Invalid value: -1: resource weight of cpu not "
     f"in valid range (0, 100]"),
    (args("NodeResourcesFit", "scoringStrategy: {type: MostAllocated, resources: "
                              "[{name: memory, weight: 101}]}\n"),
     f"{P0}.scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of memory "
     f"not in valid range (0, 100]"),
    (args("NodeResourcesFit", "scoringStrategy: {type: RequestedToCapacityRatio}\n"),
     f"{P0}.scoringStrategy.requestedToCapacityRatio: Required value: must be specified when "
     f"type is RequestedToCapacityRatio"),
    (args("NodeResourcesFit", "scoringStrategy: {type: RequestedToCapacityRatio, "
                              "requestedToCapacityRatio: {shape: []}}\n"),
     f"{P0}.scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point "
     f"must be specified"),
    (args("NodeResourcesFit", "scoringStrategy: {type: RequestedToCapacityRatio, "
                              "requestedToCapacityRatio: {shape: [{utilization: 101, "
                              "score: 5}]}}\n"),
     f"{P0}.scoringStrategy.requestedToCapacityRatio.shape[0].utilization: Invalid value: "
     f"101: not in valid range [0, 100]"),
    (args("NodeResourcesFit", "scoringStrategy: {type: RequestedToCapacityRatio, "
                              "requestedToCapacityRatio: {shape: [{utilization: 10, "
                              "score: 11}]}}\n"),
     f"{P0}.scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: 11: not in "
     f"valid range [0, 10]"),
    (args("NodeResourcesFit", "scoringStrategy: {type: RequestedToCapacityRatio, "
                              "requestedToCapacityRatio: {shape: [{utilization: 50, score: 1},"
                              " {utilization: 50, score: 2}]}}\n"),
     f"{P0}.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 50: "
     f"values must be sorted in increasing order"),
    (args("NodeResourcesFit", "scoringStrategy: {type: LeastAllocated, "
                              "requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}]}}"
                              "\n"),
     f"{P0}.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not "
     f"RequestedToCapacityRatio"),
    (args("NodeResourcesBalancedAllocation", "resources: [{name: cpu, weight: 2}]\n"),
     f"{P0}.resources[0].weight: Invalid value: 2: must be 1"),
    (args("NodeResourcesBalancedAllocation", "resources: [{name: cpu}, {name: cpu}]\n"),
     f'{P0}.resources[1].name: Duplicate value: "cpu"'),
    (args("PodTopologySpread", "defaultingType: Sometimes\n"),
     f'{P0}.defaultingType: Unsupported value: "Sometimes": supported values: "System", "List"'),
    (args("PodTopologySpread", "defaultConstraints: [{maxSkew: 1, topologyKey: zone, "
                               "whenUnsatisfiable: DoNotSchedule}]\n"),
     f'{P0}.defaultingType: Invalid value: "System": when .defaultConstraints are not empty'),
    (args("PodTopologySpread", "defaultingType: List\ndefaultConstraints: [{topologyKey: zone, "
                               "whenUnsatisfiable: DoNotSchedule}]\n"),
     f"{P0}.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
    (args("PodTopologySpread", "defaultingType: List\ndefaultConstraints: [{maxSkew: 1, "
                               "whenUnsatisfiable: DoNotSchedule}]\n"),
     f"{P0}.defaultConstraints[0].topologyKey: Required value: can not be empty"),
    (args("PodTopologySpread", "defaultingType: List\ndefaultConstraints: [{maxSkew: 1, "
                               "topologyKey: zone, whenUnsatisfiable: Never}]\n"),
     f'{P0}.defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Never": supported '
     f'values: "DoNotSchedule", "ScheduleAnyway"'),
    (args("PodTopologySpread", "defaultingType: List\ndefaultConstraints: [{maxSkew: 1, "
                               "topologyKey: zone, whenUnsatisfiable: DoNotSchedule, "
                               "labelSelector: {}}]\n"),
     f"{P0}.defaultConstraints[0].labelSelector: Forbidden: constraint must not define a "
     f"selector, as they deduced for each pod"),
    (args("PodTopologySpread", "defaultingType: List\ndefaultConstraints:\n"
                               "- {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}"
                               "\n- {maxSkew: 2, topologyKey: zone, whenUnsatisfiable: "
                               "DoNotSchedule}\n"),
     f'{P0}.defaultConstraints[1]: Duplicate value: "{{zone, DoNotSchedule}}"'),
    (args("InterPodAffinity", "hardPodAffinityWeight: 101\n"),
     f"{P0}.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"),
    (args("InterPodAffinity", "hardPodAffinityWeight: -1\n"),
     f"{P0}.hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"),
    (args("NodeAffinity", "addedAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                          "{nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: "
                          "In}]}]}}\n"),
     f"{P0}.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     f".matchExpressions[0].values: Invalid value: null: for 'in', 'notin' operators, values "
     f"set can't be empty"),
    (args("NodeAffinity", "addedAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
                          "[{weight: 1, preference: {matchExpressions: [{key: cpus, operator: "
                          "Gt, values: [many]}]}}]}\n"),
     f"{P0}.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchExpressions"
     f"[0].values[0]: Invalid value: \"many\": for 'Gt', 'Lt' operators, the value must be an "
     f"integer"),
    (args("NodeAffinity", "addedAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                          "{nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: "
                          "Within, values: [a]}]}]}}\n"),
     f"{P0}.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     f'.matchExpressions[0].operator: Unsupported value: "Within": supported values: "In", '
     f'"NotIn", "Exists", "DoesNotExist", "Gt", "Lt"'),
    (args("NodeAffinity", "addedAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                          "{nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: "
                          "Exists}]}]}}\n"),
     f"{P0}.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     f'.matchFields[0].operator: Unsupported value: "Exists": supported values: "In", "NotIn"'),
    (args("NodeResourcesFit", "kind: NodeResourcesBalancedAllocationArgs\n"),
     "profiles[0].pluginConfig[0]: args for plugin NodeResourcesFit were not of type "
     "NodeResourcesFitArgs.kubescheduler.config.k8s.io, got "
     "NodeResourcesBalancedAllocationArgs.kubescheduler.config.k8s.io"),
    (args("InterPodAffinity", "hardPodAffinityWeight: heavy\n"),
     f"{P0}.hardPodAffinityWeight: Expected `int | null`, got `str`"),
    (args("InterPodAffinity", "[1]\n"),
     f"{P0}: expected an object, got list"),
    ("percentageOfNodesToScore: 101\n",
     "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"),
    ("profiles:\n- percentageOfNodesToScore: -5\n",
     "profiles[0].percentageOfNodesToScore: Invalid value: -5: not in valid range [0-100]"),
    ("profiles:\n- schedulerName: a\n- schedulerName: a\n",
     'profiles[1].schedulerName: Duplicate value: "a"'),
    ("profiles:\n- schedulerName: a\n- {}\n",
     "profiles[1].schedulerName: Required value"),
    (plugins("score:\n  enabled: [{name: NodeName}]\n"),
     'profiles[0].plugins.score.enabled[0]: plugin "NodeName" does not extend ScorePlugin '
     'plugin'),
    (plugins("filter:\n  enabled: [{name: ImageLocality}]\n"),
     'profiles[0].plugins.filter.enabled[0]: plugin "ImageLocality" does not extend '
     'FilterPlugin plugin'),
    (plugins("score:\n  enabled: [{name: ImageLocality}, {name: ImageLocality}]\n"),
     'profiles[0].plugins.score.enabled[1]: plugin "ImageLocality" already registered as '
     '"ScorePlugin"'),
    (plugins("filter:\n  enabled: [{name: EBSLimits}]\n"),
     'profiles[0].plugins.filter.enabled[0]: Invalid value: "EBSLimits": was invalid in '
     'version "kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is version '
     '"kubescheduler.config.k8s.io/v1")'),
    ("profiles:\n- pluginConfig:\n  - {name: InterPodAffinity}\n  - {name: InterPodAffinity}\n",
     'profiles[0].pluginConfig[1]: Duplicate value: "InterPodAffinity"'),
    (args("LoadAwareScheduling", "usageThresholds: {cpu: 120}\n"),
     f'{P0}.usageThresholds: Invalid value: {{"cpu":120}}: resource Threshold of cpu should be '
     f'less than 100, got 120'),
    (args("LoadAwareScheduling", "resourceWeights: {cpu: 0}\n"),
     f'{P0}.resourceWeights: Invalid value: {{"cpu":0}}: resource Weight of cpu should be a '
     f'positive value, got 0'),
    (args("LoadAwareScheduling", "estimatedScalingFactors: {cpu: 0}\n"),
     f'{P0}.estimatedScalingFactors: Invalid value: {{"cpu":0}}: estimated resource '
     f'ScalingFactor of cpu should be a positive value, got 0'),
    (args("LoadAwareScheduling", "nodeMetricExpirationSeconds: 0\n"),
     f"{P0}.nodeMetricExpiredSeconds: Invalid value: 0: nodeMetricExpiredSeconds should be a "
     f"positive value"),
    (args("LoadAwareScheduling", "resourceWeights: {nvidia.com/gpu: 1}\n"),
     f'{P0}.estimatedScalingFactors: Not found: "nvidia.com/gpu"'),
])
def test_invalid_values_are_one_line_naming_the_file_and_the_field(body: str,
                                                                   message: str) -> None:
    assert error(body) == f"sched.yaml: {message}"


# -- the checks on decoded args ----------------------------------------------------------------

def test_an_unsorted_shape_is_reported_once_then_each_point_out_of_range() -> None:
    strategy = ScoringStrategy(type="RequestedToCapacityRatio",
                               requested_to_capacity_ratio=RequestedToCapacityRatioParam(shape=[
                                   UtilizationShapePoint(50, 1), UtilizationShapePoint(10, 11),
                                   UtilizationShapePoint(5, 2)]))
    at = "a.scoringStrategy.requestedToCapacityRatio.shape"
    assert validate_fit_args("a", NodeResourcesFitArgs(scoring_strategy=strategy)) == [
        f"{at}[1].utilization: Invalid value: 10: values must be sorted in increasing order",
        f"{at}[1].score: Invalid value: 11: not in valid range [0, 10]"]


def test_plugins_v1_no_longer_has_are_refused_by_v1_only() -> None:
    assert validate_plugin_name("p", "EBSLimits", V1BETA3) == []
    assert validate_plugin_name("p", "EBSLimits", V1) == [
        'p: Invalid value: "EBSLimits": was invalid in version '
        '"kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is version '
        '"kubescheduler.config.k8s.io/v1")']


@pytest.mark.parametrize("value", [None, 0, 100])
def test_a_percentage_in_range_is_valid(value: int | None) -> None:
    assert validate_percentage("p", value) == []


@pytest.mark.parametrize(("value", "shown"), [
    (True, "true"), (False, "false"), (3, "3"), (1.5, "1.5"), ("é", '"é"'), (None, "null"),
    ({"a": [1, "b"]}, '{"a":[1,"b"]}'),
])
def test_a_bad_value_is_printed_as_field_error_prints_it(value: object, shown: str) -> None:
    assert go(value) == shown


def test_a_decode_error_names_the_place_under_the_given_one() -> None:
    with pytest.raises(msgspec.ValidationError) as err:
        msgspec.convert({"scoringStrategy": {"resources": [{"weight": "x"}]}},
                        NodeResourcesFitArgs)
    assert msgspec_error(err.value, "p.args") == (
        "p.args.scoringStrategy.resources[0].weight: Expected `int`, got `str`")

"""Reading a KubeSchedulerConfiguration (scheduler/config_file.py): every field into the profile,
kube-scheduler's plugin merging and weights, its defaults, its validation wording, warnings for
unknown fields and plugins, profiles by schedulerName, koord-scheduler's LoadAwareScheduling."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from types import MappingProxyType

import pytest

from builders import pod
from desched.errors import InputError
from desched.model.meta import Shared
from desched.model.pod import (
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
)
from desched.scheduler.config import load_scheduler_config, parse_scheduler_config
from desched.scheduler.profile import (
    DEFAULT,
    DEFAULT_SCORE_WEIGHTS,
    FILTERS,
    SYSTEM_DEFAULT_CONSTRAINTS,
    FitScoring,
    LoadAwareArgs,
    Profile,
    ResourceSpec,
    SchedulerConfig,
    ShapePoint,
)

V1 = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
V1BETA3 = "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n"
V1BETA2 = "apiVersion: kubescheduler.config.k8s.io/v1beta2\nkind: KubeSchedulerConfiguration\n"


def read(body: str, head: str = V1) -> tuple[SchedulerConfig, list[str]]:
    return parse_scheduler_config("sched.yaml", head + textwrap.dedent(body))


def profile(body: str, head: str = V1, name: str = "default-scheduler") -> Profile:
    config, warnings = read(body, head)
    assert warnings == []
    return config.profiles[name]


def error(body: str, head: str = V1) -> str:
    with pytest.raises(InputError) as err:
        read(body, head)
    text = str(err.value)
    assert "\n" not in text
    return text


def plugins(section: str) -> str:
    return "profiles:\n- plugins:\n" + textwrap.indent(textwrap.dedent(section), "    ")


def args(name: str, body: str) -> str:
    return (f"profiles:\n- pluginConfig:\n  - name: {name}\n    args:\n"
            + textwrap.indent(textwrap.dedent(body), "      "))


# -- the default profile ---------------------------------------------------------------------

def test_a_configuration_without_profiles_is_the_default_profile() -> None:
    config, warnings = read("")
    assert warnings == []
    assert dict(config.profiles) == {"default-scheduler": DEFAULT}
    assert config.percentage_of_nodes_to_score == 0
    assert config.source == "sched.yaml"


@pytest.mark.parametrize("head", [V1, V1BETA3])
def test_one_profile_without_a_name_is_default_scheduler_with_every_default(head: str) -> None:
    p = profile("profiles:\n- {}\n", head)
    assert p == DEFAULT
    assert p.filters == frozenset(FILTERS)
    assert dict(p.scores) == dict(DEFAULT_SCORE_WEIGHTS)
    assert p.fit == FitScoring("LeastAllocated", (ResourceSpec("cpu", 1),
                                                  ResourceSpec("memory", 1)), ())
    assert p.balanced_resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
    assert p.spread.defaulting_type == "System"
    assert p.spread.effective == SYSTEM_DEFAULT_CONSTRAINTS
    assert (p.hard_pod_affinity_weight, p.ignore_preferred_terms_of_existing_pods) == (1, False)
    assert p.added_affinity is None
    assert p.percentage_of_nodes_to_score is None
    assert p.load_aware is None


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


# -- plugin sets: merging and expansion --------------------------------------------------------

def test_multipoint_disabled_star_keeps_only_the_plugins_enabled_there() -> None:
    p = profile(plugins("""\
        multiPoint:
          disabled: [{name: "*"}]
          enabled:
          - {name: NodeResourcesFit, weight: 5}
          - {name: NodeName}
          - {name: PrioritySort}
          - {name: DefaultBinder}
        """))
    assert p.filters == {"NodeResourcesFit", "NodeName"}
    assert dict(p.scores) == {"NodeResourcesFit": 5}


def test_multipoint_disabled_by_name_drops_the_filter_and_the_score() -> None:
    p = profile(plugins("multiPoint:\n  disabled: [{name: TaintToleration}, "
                        "{name: ImageLocality}]\n"))
    assert p.filters == frozenset(FILTERS) - {"TaintToleration"}
    assert dict(p.scores) == {k: v for k, v in DEFAULT_SCORE_WEIGHTS.items()
                              if k not in ("TaintToleration", "ImageLocality")}


def test_a_filter_disabled_by_name_still_scores() -> None:
    p = profile(plugins("filter:\n  disabled: [{name: NodeAffinity}]\n"))
    assert p.filters == frozenset(FILTERS) - {"NodeAffinity"}
    assert p.weight("NodeAffinity") == 2


def test_a_score_disabled_by_name_still_filters() -> None:
    p = profile(plugins("score:\n  disabled: [{name: PodTopologySpread}]\n"))
    assert "PodTopologySpread" in p.filters
    assert "PodTopologySpread" not in p.scores
    assert p.weight("PodTopologySpread") == 0


def test_filter_disabled_star_runs_only_the_filters_enabled_there() -> None:
    p = profile(plugins("""\
        filter:
          disabled: [{name: "*"}]
          enabled: [{name: NodeResourcesFit}, {name: TaintToleration}]
        """))
    assert p.filters == {"NodeResourcesFit", "TaintToleration"}
    assert dict(p.scores) == dict(DEFAULT_SCORE_WEIGHTS)


def test_score_disabled_star_scores_only_the_plugins_enabled_there() -> None:
    p = profile(plugins("""\
        score:
          disabled: [{name: "*"}]
          enabled: [{name: NodeResourcesBalancedAllocation, weight: 4}]
        """))
    assert dict(p.scores) == {"NodeResourcesBalancedAllocation": 4}
    assert p.filters == frozenset(FILTERS)


def test_a_default_re_enabled_in_multipoint_takes_its_new_weight() -> None:
    p = profile(plugins("multiPoint:\n  enabled: [{name: InterPodAffinity, weight: 7}]\n"))
    assert p.weight("InterPodAffinity") == 7
    assert list(p.scores) == list(DEFAULT_SCORE_WEIGHTS)  # replaced in place, order kept


def test_a_default_re_enabled_in_multipoint_without_a_weight_weighs_1() -> None:
    """mergePluginSet puts the user's entry in the default's place: its weight is gone."""
    p = profile(plugins("multiPoint:\n  enabled: [{name: TaintToleration}]\n"))
    assert p.weight("TaintToleration") == 1
    assert p.weight("NodeAffinity") == 2


def test_a_disabled_default_re_enabled_in_multipoint_with_a_new_weight() -> None:
    p = profile(plugins("""\
        multiPoint:
          disabled: [{name: NodeResourcesFit}]
          enabled: [{name: NodeResourcesFit, weight: 9}]
        """))
    assert p.weight("NodeResourcesFit") == 9
    assert "NodeResourcesFit" in p.filters
    assert list(p.scores)[-1] == "NodeResourcesFit"  # appended, not in the default's place


def test_a_score_enabled_weight_beats_the_multipoint_weight() -> None:
    p = profile(plugins("score:\n  enabled: [{name: NodeAffinity, weight: 9}]\n"))
    assert p.weight("NodeAffinity") == 9
    assert p.filters == frozenset(FILTERS)
    assert {k: v for k, v in p.scores.items() if k != "NodeAffinity"} == {
        k: v for k, v in DEFAULT_SCORE_WEIGHTS.items() if k != "NodeAffinity"}


def test_a_score_enabled_without_a_weight_weighs_1_not_its_multipoint_weight() -> None:
    p = profile(plugins("score:\n  enabled: [{name: PodTopologySpread}]\n"))
    assert p.weight("PodTopologySpread") == 1


@pytest.mark.parametrize("section", [
    "multiPoint:\n  enabled: [{name: NodeAffinity, weight: 0}]\n",
    "score:\n  enabled: [{name: NodeAffinity, weight: 0}]\n",
])
def test_weight_0_means_1(section: str) -> None:
    assert profile(plugins(section)).weight("NodeAffinity") == 1


def test_a_negative_weight_is_kept_as_kube_scheduler_keeps_it_with_a_warning() -> None:
    config, warnings = read(plugins("score:\n  enabled: [{name: ImageLocality, weight: -2}]\n"))
    assert config.profiles["default-scheduler"].weight("ImageLocality") == -2
    assert warnings == [
        'sched.yaml: profiles[0].plugins.score.enabled[0]: score plugin "ImageLocality" has a '
        "negative weight (-2); kube-scheduler accepts it, and it turns the plugin's preference "
        "around"]


def test_a_score_plugin_enabled_as_a_filter_only_filters() -> None:
    p = profile(plugins("""\
        multiPoint:
          disabled: [{name: "*"}]
        filter:
          enabled: [{name: TaintToleration}]
        """))
    assert p.filters == {"TaintToleration"}
    assert dict(p.scores) == {}


def test_volume_and_port_plugins_are_accepted_without_a_word() -> None:
    config, warnings = read(plugins("""\
        filter:
          enabled: [{name: VolumeBinding}, {name: NodePorts}, {name: VolumeZone}]
        score:
          enabled: [{name: VolumeBinding, weight: 3}]
        """))
    assert warnings == []
    assert config.profiles["default-scheduler"] == DEFAULT


# -- plugin args -------------------------------------------------------------------------------

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


def test_percentage_of_nodes_to_score_top_level_and_per_profile() -> None:
    config, _ = read("""\
        percentageOfNodesToScore: 30
        profiles:
        - schedulerName: a
          percentageOfNodesToScore: 70
        - schedulerName: b
        """)
    a, b = config.profiles["a"], config.profiles["b"]
    assert config.percentage_of_nodes_to_score == 30
    assert (a.percentage_of_nodes_to_score, b.percentage_of_nodes_to_score) == (70, None)
    assert config.nodes_to_score(a, 1000) == 700
    assert config.nodes_to_score(b, 1000) == 300


# -- profiles by schedulerName -----------------------------------------------------------------

def test_two_profiles_and_pods_choosing_by_scheduler_name() -> None:
    config, warnings = read("""\
        profiles:
        - schedulerName: default-scheduler
        - schedulerName: bin-packing
          plugins:
            score:
              disabled: [{name: NodeResourcesBalancedAllocation}]
          pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy: {type: MostAllocated}
        """)
    assert warnings == []
    assert list(config.profiles) == ["default-scheduler", "bin-packing"]
    plain = pod("plain")
    packed = pod("packed", spec={"schedulerName": "bin-packing"})
    other = pod("other", spec={"schedulerName": "volcano"})
    assert config.profile_for(plain) == DEFAULT
    chosen = config.profile_for(packed)
    assert chosen is not None
    assert chosen.scheduler_name == "bin-packing"
    assert chosen.fit.type == "MostAllocated"
    assert "NodeResourcesBalancedAllocation" not in chosen.scores
    assert config.profile_for(other) is None


# -- koord-scheduler ---------------------------------------------------------------------------

KOORD = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: koord-scheduler-config, namespace: koordinator-system}
data:
  koord-scheduler-config: |
    apiVersion: kubescheduler.config.k8s.io/v1beta3
    kind: KubeSchedulerConfiguration
    leaderElection: {leaderElect: true, resourceLock: leases}
    profiles:
    - schedulerName: koord-scheduler
      pluginConfig:
      - name: LoadAwareScheduling
        args:
          apiVersion: kubescheduler.config.k8s.io/v1beta3
          kind: LoadAwareSchedulingArgs
          filterExpiredNodeMetrics: false
          nodeMetricExpirationSeconds: 300
          resourceWeights: {cpu: 2, memory: 1}
          usageThresholds: {cpu: 75, memory: 85}
          prodUsageThresholds: {cpu: 55}
          estimatedScalingFactors: {cpu: 80}
      plugins:
        filter:
          enabled: [{name: LoadAwareScheduling}, {name: Reservation}]
        score:
          enabled:
          - {name: LoadAwareScheduling, weight: 3}
          - {name: Reservation, weight: 5000}
        reserve:
          enabled: [{name: LoadAwareScheduling}, {name: Reservation}]
"""


def test_a_koord_scheduler_config_map_with_load_aware_scheduling(tmp_path: Path) -> None:
    path = tmp_path / "koord.yaml"
    path.write_text(KOORD)
    config, warnings = load_scheduler_config(str(path))
    p = config.profiles["koord-scheduler"]
    assert p.load_aware == LoadAwareArgs(
        usage_thresholds=MappingProxyType({"cpu": 75, "memory": 85}),
        prod_usage_thresholds=MappingProxyType({"cpu": 55}),
        resource_weights=MappingProxyType({"cpu": 2, "memory": 1}),
        estimated_scaling_factors=MappingProxyType({"cpu": 80, "memory": 70}),
        node_metric_expiration_seconds=300, filter_expired_node_metrics=False)
    assert p.weight("LoadAwareScheduling") == 3
    assert "Reservation" not in p.scores
    assert p.filters == frozenset(FILTERS)
    assert config.source == f"{path}[koord-scheduler-config]"
    assert warnings == [
        f'{path}[koord-scheduler-config]: profiles[0].plugins.filter.enabled[1]: plugin '
        f'"Reservation" (koord-scheduler) filters and scores nodes; desched does not model it, '
        f"so placements may differ"]


def test_load_aware_scheduling_enabled_without_args_takes_koord_defaults() -> None:
    p = profile(plugins("""\
        filter:
          enabled: [{name: LoadAwareScheduling}]
        score:
          enabled: [{name: LoadAwareScheduling, weight: 1}]
        """))
    assert p.load_aware == LoadAwareArgs()
    assert p.load_aware.usage_thresholds == {"cpu": 65, "memory": 95}
    assert p.load_aware.estimated_scaling_factors == {"cpu": 85, "memory": 70}
    assert (p.load_aware.node_metric_expiration_seconds,
            p.load_aware.filter_expired_node_metrics) == (180, True)


def test_load_aware_args_without_the_plugin_enabled_are_read_with_a_warning() -> None:
    config, warnings = read(args("LoadAwareScheduling", "usageThresholds: {cpu: 50}\n"))
    p = config.profiles["default-scheduler"]
    assert p.load_aware is not None
    assert p.load_aware.usage_thresholds == {"cpu": 50}
    assert warnings == [
        "sched.yaml: profiles[0].pluginConfig: LoadAwareScheduling has args but no extension "
        "point enables it (koord-scheduler would not run it); desched models it as enabled"]


def test_a_dominant_resource_weight_leaves_resource_weights_empty() -> None:
    config, warnings = read(args("LoadAwareScheduling", "dominantResourceWeight: 5\n"))
    p = config.profiles["default-scheduler"]
    assert p.load_aware is not None
    assert p.load_aware.resource_weights == {}
    assert ("sched.yaml: profiles[0].pluginConfig[0].args.dominantResourceWeight: desched's "
            "LoadAwareScheduling model does not model this; it is ignored") in warnings


def test_load_aware_args_desched_does_not_model_are_warned_about() -> None:
    _, warnings = read(args("LoadAwareScheduling", """\
        aggregated: {usageThresholds: {cpu: 60}, usageAggregationType: p95}
        scoreAccordingProdUsage: true
        estimator: defaultEstimator
        """))
    assert warnings[:2] == [
        f"sched.yaml: profiles[0].pluginConfig[0].args.{name}: desched's LoadAwareScheduling "
        f"model does not model this; it is ignored"
        for name in ("scoreAccordingProdUsage", "aggregated")]
    assert len(warnings) == 3  # and the plugin is not enabled


# -- v1beta2 -----------------------------------------------------------------------------------

def test_v1beta2_defaults_weigh_every_score_1_but_spreading() -> None:
    p = profile("", V1BETA2)
    assert p.filters == frozenset(FILTERS)
    assert dict(p.scores) == {"NodeResourcesBalancedAllocation": 1, "ImageLocality": 1,
                              "InterPodAffinity": 1, "NodeResourcesFit": 1, "NodeAffinity": 1,
                              "PodTopologySpread": 2, "TaintToleration": 1}


def test_v1beta2_merges_per_extension_point_and_drops_multipoint() -> None:
    config, warnings = read(plugins("""\
        multiPoint:
          disabled: [{name: "*"}]
        score:
          disabled: [{name: ImageLocality}]
          enabled: [{name: NodeResourcesFit, weight: 4}]
        filter:
          disabled: [{name: "*"}]
          enabled: [{name: NodeName}]
        """), V1BETA2)
    p = config.profiles["default-scheduler"]
    assert p.filters == {"NodeName"}
    assert p.weight("NodeResourcesFit") == 4
    assert "ImageLocality" not in p.scores
    assert p.weight("TaintToleration") == 1
    assert warnings == ["sched.yaml: profiles[0].plugins.multiPoint: kube-scheduler's "
                        "kubescheduler.config.k8s.io/v1beta2 defaulting drops multiPoint; it "
                        "is ignored"]


def test_only_v1_profiles_have_a_percentage() -> None:
    config, warnings = read("profiles:\n- percentageOfNodesToScore: 20\n", V1BETA3)
    assert config.profiles["default-scheduler"].percentage_of_nodes_to_score is None
    assert warnings == ['sched.yaml: unknown field "profiles[0].percentageOfNodesToScore"; it '
                        'is ignored']


def test_v1beta2_top_level_bind_addresses_are_known() -> None:
    _, warnings = read("healthzBindAddress: 0.0.0.0:10251\n", V1BETA2)
    assert warnings == []
    _, warnings = read("healthzBindAddress: 0.0.0.0:10251\n")
    assert warnings == ['sched.yaml: unknown field "healthzBindAddress"; it is ignored']


# -- warnings ------------------------------------------------------------------------------------

def test_an_unknown_plugin_is_one_warning_naming_the_place_and_the_likely_name() -> None:
    config, warnings = read(plugins("""\
        score:
          enabled:
          - {name: ImageLocality, weight: 2}
          - {name: NodeResourcesFitt, weight: 3}
        """))
    assert warnings == ['sched.yaml: profiles[0].plugins.score.enabled[1]: unknown plugin '
                        '"NodeResourcesFitt" (did you mean NodeResourcesFit?)']
    assert dict(config.profiles["default-scheduler"].scores) == {
        **DEFAULT_SCORE_WEIGHTS, "ImageLocality": 2}


def test_unknown_plugins_everywhere_they_are_named() -> None:
    _, warnings = read("""\
        profiles:
        - plugins:
            multiPoint:
              disabled: [{name: taintToleration}]
            preFilter:
              enabled: [{name: MyQuota}]
          pluginConfig:
          - name: PodTopologySpred
            args: {}
        """)
    assert warnings == [
        'sched.yaml: profiles[0].plugins.preFilter.enabled[0]: unknown plugin "MyQuota"',
        'sched.yaml: profiles[0].plugins.multiPoint.disabled[0]: unknown plugin '
        '"taintToleration" (did you mean TaintToleration?)',
        'sched.yaml: profiles[0].pluginConfig[0]: unknown plugin "PodTopologySpred" (did you '
        'mean PodTopologySpread?)']


def test_known_plugins_desched_does_not_model_are_warned_about_when_they_filter_or_score() -> None:
    _, warnings = read(plugins("""\
        multiPoint:
          enabled: [{name: DynamicResources}, {name: GangScheduling}]
        score:
          enabled: [{name: NodeResourcesFitPlus, weight: 2}]
        """))
    assert warnings == [
        'sched.yaml: profiles[0].plugins.multiPoint.enabled[0]: plugin "DynamicResources" '
        "filters and scores nodes; desched does not model it, so placements may differ",
        'sched.yaml: profiles[0].plugins.score.enabled[0]: plugin "NodeResourcesFitPlus" '
        "(koord-scheduler) scores nodes; desched does not model it, so placements may differ"]


def test_unknown_fields_are_one_warning_each() -> None:
    config, warnings = read("""\
        percentageOfNodesToScor: 10
        profiles:
        - schedulerName: default-scheduler
          plugin:
            score: {}
          pluginConfig:
          - name: InterPodAffinity
            args: {hardPodAffinityWeigth: 5}
          - name: NodeResourcesFit
            args:
              scoringStrategy: {type: MostAllocated, resource: [{name: cpu}]}
        """)
    assert warnings == [
        'sched.yaml: unknown field "percentageOfNodesToScor" (did you mean '
        '"percentageOfNodesToScore"?); it is ignored',
        'sched.yaml: unknown field "profiles[0].plugin" (did you mean "plugins"?); it is ignored',
        'sched.yaml: unknown field "profiles[0].pluginConfig[0].args.hardPodAffinityWeigth" '
        '(did you mean "hardPodAffinityWeight"?); it is ignored',
        'sched.yaml: unknown field "profiles[0].pluginConfig[1].args.scoringStrategy.resource" '
        '(did you mean "resources"?); it is ignored']
    assert config.percentage_of_nodes_to_score == 0


def test_extenders_are_warned_about() -> None:
    _, warnings = read("extenders:\n- {urlPrefix: 'http://ext:8888', filterVerb: filter}\n")
    assert warnings == ['sched.yaml: extenders[0]: scheduler extender "http://ext:8888" filters '
                        "and scores nodes out of process; desched does not model it, so "
                        "placements may differ"]


def test_ignored_resources_are_warned_about() -> None:
    _, warnings = read(args("NodeResourcesFit", "ignoredResources: [example.com/foo]\n"))
    assert warnings == ["sched.yaml: profiles[0].pluginConfig[0].args: ignoredResources and "
                        "ignoredResourceGroups make NodeResourcesFit skip those resources; "
                        "desched's fit still checks them"]


# -- errors --------------------------------------------------------------------------------------

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


def test_several_errors_are_aggregated_on_one_line() -> None:
    text = error("""\
        percentageOfNodesToScore: 200
        profiles:
        - pluginConfig:
          - name: InterPodAffinity
            args: {hardPodAffinityWeight: 500}
        """)
    assert text == ("sched.yaml: [percentageOfNodesToScore: Invalid value: 200: not in valid "
                    "range [0-100], profiles[0].pluginConfig[0].args.hardPodAffinityWeight: "
                    "Invalid value: 500: not in valid range [0, 100]]")


@pytest.mark.parametrize(("text", "message"), [
    ("kind: [\n", "sched.yaml: invalid YAML: line 2: "),
    ("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n",
     'sched.yaml: no kind "DeschedulerPolicy" is registered for version "descheduler/v1alpha2"'
     "; expected kubescheduler.config.k8s.io/v1 (or v1beta3, v1beta2) "
     "KubeSchedulerConfiguration, or a ConfigMap holding one"),
    ("apiVersion: kubescheduler.config.k8s.io/v2\nkind: KubeSchedulerConfiguration\n",
     'sched.yaml: no kind "KubeSchedulerConfiguration" is registered for version '
     '"kubescheduler.config.k8s.io/v2"'),
    ("profiles: []\n", "sched.yaml: Object 'Kind' is missing or 'apiVersion' is missing"),
    ("- 1\n", "sched.yaml: expected a KubeSchedulerConfiguration object, got list"),
    (V1 + "---\n" + V1, "sched.yaml: expected one KubeSchedulerConfiguration document, found 2"),
    ("apiVersion: v1\nkind: ConfigMap\ndata: {a: x, b: y}\n",
     "sched.yaml: ConfigMap has several data keys (a, b); expected one holding the "
     "KubeSchedulerConfiguration"),
    ("apiVersion: v1\nkind: ConfigMap\ndata: {config.yaml: 'kind: ['}\n",
     "sched.yaml[config.yaml]: invalid YAML: "),
    (V1 + "profiles: {}\n", "sched.yaml: profiles: Expected `array`, got `object`"),
])
def test_files_that_are_no_scheduler_configuration(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        parse_scheduler_config("sched.yaml", text)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_a_file_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as err:
        load_scheduler_config(str(missing))
    assert str(err.value) == (f"{missing}: failed to read the scheduler configuration: No such "
                              f"file or directory")


def test_a_config_map_with_several_keys_picks_the_configuration(tmp_path: Path) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(textwrap.dedent("""\
        apiVersion: v1
        kind: ConfigMap
        data:
          README: see the chart
          scheduler-config.yaml: |
            apiVersion: kubescheduler.config.k8s.io/v1
            kind: KubeSchedulerConfiguration
            percentageOfNodesToScore: 40
        """))
    config, warnings = load_scheduler_config(str(path))
    assert (config.percentage_of_nodes_to_score, warnings) == (40, [])
    assert config.source == f"{path}[scheduler-config.yaml]"


def test_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (V1 + "percentageOfNodesToScore: 25\nprofil: []\n").encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    config, warnings = load_scheduler_config("-")
    assert config.percentage_of_nodes_to_score == 25
    assert config.source == "<stdin>"
    assert warnings == ['<stdin>: unknown field "profil" (did you mean "profiles"?); it is '
                        'ignored']

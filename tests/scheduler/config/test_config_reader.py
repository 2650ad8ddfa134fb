"""Reading a KubeSchedulerConfiguration (scheduler/config/reader.py): the default profile, profiles
by schedulerName, the percentage of nodes to score, versions, unknown fields, ConfigMaps, files
and standard input, and errors aggregated on one line naming the file."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from types import MappingProxyType

import pytest

from builders import pod
from desched.errors import InputError
from desched.scheduler.config import load_scheduler_config, parse_scheduler_config
from desched.scheduler.profile import (
    DEFAULT,
    DEFAULT_SCORE_WEIGHTS,
    FILTERS,
    SYSTEM_DEFAULT_CONSTRAINTS,
    FitScoring,
    LoadAwareArgs,
    ResourceSpec,
)
from scheduler_config_builders import V1, V1BETA2, V1BETA3, error, profile, read


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

"""Warnings about what desched does not model (scheduler/config/unmodelled.py): unknown and
unmodelled plugins, extenders, ignored resources, LoadAwareScheduling args."""

from __future__ import annotations

from desched.scheduler.config import unmodelled
from desched.scheduler.profile import DEFAULT_SCORE_WEIGHTS
from scheduler_config_builders import args, plugins, read


def test_load_aware_args_without_the_plugin_enabled_are_read_with_a_warning() -> None:
    config, warnings = read(args("LoadAwareScheduling", "usageThresholds: {cpu: 50}\n"))
    p = config.profiles["default-scheduler"]
    assert p.load_aware is not None
    assert p.load_aware.usage_thresholds == {"cpu": 50}
    assert warnings == [
        "sched.yaml: profiles[0].pluginConfig: LoadAwareScheduling has args but no extension "
        "point enables it (koord-scheduler would not run it); desched models it as enabled"]


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


def test_only_known_plugins_desched_does_not_model_are_noted_once_each() -> None:
    notes = unmodelled.plugins({"DynamicResources": "f[0]", "NodePorts": "f[1]",
                                "NodeName": "f[2]", "Mystery": "f[3]"},
                               {"DynamicResources": "s[0]", "Coscheduling": "s[1]"})
    assert notes == [
        ("f[0]", 'plugin "DynamicResources" filters and scores nodes; desched does not model '
                 "it, so placements may differ"),
        ("s[1]", 'plugin "Coscheduling" (koord-scheduler) scores nodes; desched does not model '
                 "it, so placements may differ")]


def test_an_unknown_plugin_is_noted_with_the_likely_name() -> None:
    assert unmodelled.unknown_plugin("p", "NodeAffinity") == []
    assert unmodelled.unknown_plugin("p", "NodeAfinity") == [
        ("p", 'unknown plugin "NodeAfinity" (did you mean NodeAffinity?)')]

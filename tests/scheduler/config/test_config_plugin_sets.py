"""Which plugins a profile runs (scheduler/config/plugin_sets.py): kube-scheduler's plugin-set
merging, multiPoint expansion and score weights, v1 and v1beta2."""

from __future__ import annotations

import pytest

from desched.scheduler.config.findings import Findings
from desched.scheduler.config.plugin_sets import (
    Entry,
    filters_and_scores,
    merge,
    named_plugins,
    weights,
)
from desched.scheduler.config.types import (
    V1,
    KubeSchedulerProfile,
    Plugin,
    PluginConfig,
    Plugins,
    PluginSet,
)
from desched.scheduler.profile import DEFAULT, DEFAULT_SCORE_WEIGHTS, FILTERS
from scheduler_config_builders import V1BETA2, plugins, profile, read


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


# -- the merging itself, on entries ------------------------------------------------------------

def _names(entries: list[Entry]) -> list[tuple[str, int | None]]:
    return [(e.name, e.weight) for e in entries]


_DEFAULTS = [Entry("A", None, ""), Entry("B", 2, ""), Entry("C", None, "")]


@pytest.mark.parametrize(("custom", "disabled", "expected"), [
    ([], set(), [("A", None), ("B", 2), ("C", None)]),
    ([], {"B"}, [("A", None), ("C", None)]),
    ([("X", 1)], {"*"}, [("X", 1)]),
    ([("B", 5)], set(), [("A", None), ("B", 5), ("C", None)]),
    ([("X", None), ("A", 3)], set(), [("A", 3), ("B", 2), ("C", None), ("X", None)]),
    # A disabled default enabled again goes to the end, with the new weight.
    ([("B", 3)], {"B"}, [("A", None), ("C", None), ("B", 3)]),
    # A name enabled twice: the last replaces the default, the first is appended.
    ([("B", 1), ("B", 7)], set(), [("A", None), ("B", 7), ("C", None), ("B", 1)]),
])
def test_merge_is_kube_schedulers_merge_plugin_set(custom: list[tuple[str, int | None]],
                                                    disabled: set[str],
                                                    expected: list[tuple[str, int | None]]) -> None:
    entries = [Entry(name, weight, f"enabled[{k}]") for k, (name, weight) in enumerate(custom)]
    assert _names(merge(_DEFAULTS, entries, disabled)) == expected


def test_named_plugins_are_every_place_a_profile_names_one_but_a_disabled_star() -> None:
    raw = KubeSchedulerProfile(
        plugins=Plugins(filter=PluginSet(enabled=[Plugin("X")],
                                         disabled=[Plugin("*"), Plugin("Y")]),
                        multi_point=PluginSet(enabled=[Plugin("*")])),
        plugin_config=[PluginConfig("Z")])
    assert list(named_plugins("p", raw)) == [
        ("p.plugins.filter.enabled[0]", "X"), ("p.plugins.filter.disabled[1]", "Y"),
        ("p.plugins.multiPoint.enabled[0]", "*"), ("p.pluginConfig[0]", "Z")]


def test_a_plugin_enabled_where_it_does_not_extend_is_an_error_and_left_out() -> None:
    found = Findings()
    plugins = Plugins(filter=PluginSet(enabled=[Plugin("ImageLocality"), Plugin("NodeName"),
                                                Plugin("NodeName")]),
                      score=PluginSet(disabled=[Plugin("*")]))
    filters, scores = filters_and_scores(found, V1, "p", plugins)
    assert found.errors == [
        'p.plugins.filter.enabled[0]: plugin "ImageLocality" does not extend FilterPlugin plugin',
        'p.plugins.filter.enabled[2]: plugin "NodeName" already registered as "FilterPlugin"']
    assert "ImageLocality" not in filters and filters["NodeName"].place.endswith("enabled[1]")
    assert scores == {}


def test_a_negative_weight_is_kept_and_noted_where_it_is_set() -> None:
    found = Findings()
    weights_ = weights(found, {"ImageLocality": Entry("ImageLocality", -2, "p.x[0]"),
                               "TaintToleration": Entry("TaintToleration", 0, "")})
    assert weights_ == {"ImageLocality": -2, "TaintToleration": 1}
    assert found.warnings("f.yaml") == [
        'f.yaml: p.x[0]: score plugin "ImageLocality" has a negative weight (-2); '
        "kube-scheduler accepts it, and it turns the plugin's preference around"]

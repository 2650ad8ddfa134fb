"""LowNodeLoadArgs: strict decoding by kind, Koordinator's defaults (quirks included), the node
pools built from them (the default pool first) and ValidateLowLoadUtilizationArgs' messages,
raised when the plugin is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builders import NOW, args, handle_for, node, snapshot
from desched.errors import InputError
from desched.plugins.catalog import PLUGINS
from desched.plugins.lownodeload.args import (
    DEFAULT_POOL,
    LoadAnomalyCondition,
    LowNodeLoadArgs,
    build_pools,
    default,
    go_selector,
)
from desched.plugins.lownodeload.plugin import LowNodeLoad
from desched.policy_files.errors import DecodeError
from desched.policy_files.loader import policy_from_document
from desched.simulate.simulation import run_simulation
from desched.util.gofloat import go_float

PATH = "koord.yaml"


def defaulted(raw: dict[str, Any]) -> LowNodeLoadArgs:
    a: LowNodeLoadArgs = args(LowNodeLoadArgs, raw)
    default(a)
    return a


def build(raw: dict[str, Any]) -> LowNodeLoad:
    handle, _ = handle_for(snapshot(node("n1"), node("n2")), plugin="LowNodeLoad")
    return LowNodeLoad(defaulted(raw), handle)


def koord_policy(ln_args: dict[str, Any] | None, enable: bool = True) -> dict[str, Any]:
    de = {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}
    plugins: dict[str, Any] = {"evict": de, "filter": de}
    if enable:
        plugins["balance"] = {"enabled": [{"name": "LowNodeLoad"}]}
    profile: dict[str, Any] = {"name": "p", "plugins": plugins}
    if ln_args is not None:
        profile["pluginConfig"] = [{"name": "LowNodeLoad", "args": ln_args}]
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration",
            "profiles": [profile]}


# -- defaults --------------------------------------------------------------------------------


def test_defaults_of_empty_args() -> None:
    a = defaulted({})
    assert a.node_fit is True
    assert a.anomaly_condition == LoadAnomalyCondition("1m", 5, 3)
    assert a.detector_cache_timeout == "5m"
    assert a.node_metric_expiration_seconds == 180
    assert a.resource_weights == {"cpu": 1, "memory": 1}
    assert a.paused is None and a.dry_run is None and a.number_of_nodes is None


@pytest.mark.parametrize(("given", "expected"), [
    # the `else if`: only the first zero is defaulted, and the timeout stays unset
    ({}, LoadAnomalyCondition(None, 5, 0)),
    ({"consecutiveAbnormalities": 2}, LoadAnomalyCondition(None, 2, 3)),
    ({"consecutiveNormalities": 7}, LoadAnomalyCondition(None, 5, 7)),
    ({"timeout": "30s", "consecutiveAbnormalities": 3, "consecutiveNormalities": 1},
     LoadAnomalyCondition("30s", 3, 1)),
])
def test_anomaly_condition_defaulting_quirk(given: dict[str, Any],
                                            expected: LoadAnomalyCondition) -> None:
    assert defaulted({"anomalyCondition": given}).anomaly_condition == expected


@pytest.mark.parametrize(("raw", "expected"), [
    ({"lowThresholds": {"cpu": 10, "pods": 5}, "highThresholds": {"nvidia.com/gpu": 50}},
     {"cpu": 1, "memory": 1, "pods": 1, "nvidia.com/gpu": 1}),
    # resources only in the prod thresholds get no default weight
    ({"prodLowThresholds": {"pods": 5}}, {"cpu": 1, "memory": 1}),
    # configured weights <= 0 of default resources are reset; others are kept as given
    ({"resourceWeights": {"cpu": 0, "memory": 4, "pods": -1}},
     {"cpu": 1, "memory": 4, "pods": -1}),
    ({"resourceWeights": {"cpu": 3}, "lowThresholds": {"pods": 5}},
     {"cpu": 3, "memory": 1, "pods": 1}),
])
def test_resource_weight_defaults(raw: dict[str, Any], expected: dict[str, int]) -> None:
    assert defaulted(raw).resource_weights == expected


def test_pools_inherit_and_the_default_pool_comes_first() -> None:
    a = defaulted({
        "nodeSelector": {"matchLabels": {"tier": "general"}},
        "useDeviationThresholds": True,
        "lowThresholds": {"cpu": 10}, "highThresholds": {"cpu": 20},
        "prodLowThresholds": {"cpu": 5}, "prodHighThresholds": {"cpu": 15},
        "resourceWeights": {"cpu": 2},
        "anomalyCondition": {"consecutiveAbnormalities": 4, "consecutiveNormalities": 2,
                             "timeout": "2m"},
        "nodePools": [
            {"name": "inherits"},
            {"name": "own", "nodeSelector": {"matchLabels": {"tier": "gpu"}},
             "lowThresholds": {"memory": 30}, "highThresholds": {"memory": 70},
             "resourceWeights": {"memory": 5},
             "anomalyCondition": {"consecutiveNormalities": 9}},
        ]})
    pools = build_pools(a)
    assert [p.name for p in pools] == [DEFAULT_POOL, "inherits", "own"]
    top, inherits, own = pools
    assert top.deviation is True and top.low == {"cpu": 10} and top.prod_high == {"cpu": 15}
    assert top.node_selector is not None and top.node_selector.match_labels == {"tier": "general"}
    assert top.weights == {"cpu": 2, "memory": 1}
    # useDeviationThresholds and nodeSelector are not inherited; thresholds and weights are
    assert inherits.deviation is False and inherits.node_selector is None
    assert (inherits.low, inherits.high, inherits.prod_low, inherits.prod_high) == (
        {"cpu": 10}, {"cpu": 20}, {"cpu": 5}, {"cpu": 15})
    assert inherits.weights == {"cpu": 2, "memory": 1}
    assert inherits.anomaly == LoadAnomalyCondition("2m", 4, 2)
    # a pool's own anomaly condition inherits zero counts but not the timeout
    assert own.anomaly == LoadAnomalyCondition(None, 4, 9)
    assert own.low == {"memory": 30} and own.prod_low == {"cpu": 5}
    assert own.weights == {"memory": 5}
    # each pool has its own copies of the maps
    top.low["memory"] = 100.0
    assert inherits.low == {"cpu": 10}


# -- validation when the plugin is built -------------------------------------------------------

POOL0 = "nodePools[0]"


@pytest.mark.parametrize(("raw", "messages"), [
    ({"numberOfNodes": -1}, ["numberOfNodes: Invalid value: -1: must be greater than or equal "
                             "to 0"]),
    ({"nodeMetricExpirationSeconds": 0},
     ["nodeMetricExpiredSeconds: Invalid value: 0: nodeMetricExpiredSeconds should be a "
      "positive value"]),
    ({"nodeMetricExpirationSeconds": -5},
     ["nodeMetricExpiredSeconds: Invalid value: -5: nodeMetricExpiredSeconds should be a "
      "positive value"]),
    ({"evictableNamespaces": {"include": ["a"], "exclude": ["b", "c"]}},
     ['evictableNamespaces: Invalid value: config.Namespaces{Include:[]string{"a"}, '
      'Exclude:[]string{"b", "c"}}: only one of Include/Exclude namespaces can be set']),
    ({"podSelectors": [{"name": "ok", "selector": {"matchLabels": {"a": "b"}}},
                       {"name": "bad", "selector": {"matchExpressions": [
                           {"key": "k", "operator": "Foo"}]}}]},
     ['podSelectors[1]: Invalid value: config.LowNodeLoadPodSelector{Name:"bad", '
      'Selector:(*v1.LabelSelector)(...)}: "Foo" is not a valid label selector operator']),
    ({"highThresholds": {"cpu": -1}, "lowThresholds": {"cpu": -2}},
     [f"{POOL0}.highThresholds[cpu]: Invalid value: -1: percentage must be greater than or "
      f"equal to 0",
      f"{POOL0}.lowThresholds[cpu]: Invalid value: -2: percentage must be greater than or "
      f"equal to 0"]),
    ({"lowThresholds": {"cpu": 60.5, "memory": 10}, "highThresholds": {"cpu": 50}},
     [f"{POOL0}.lowThresholds[cpu]: Invalid value: 60.5: low percentage must be less than or "
      f"equal to highThresholds"]),
    # values above 100 are accepted
    ({"lowThresholds": {"cpu": 150}, "highThresholds": {"cpu": 200}}, []),
    ({"highThresholds": {"cpu": 50}, "prodHighThresholds": {"cpu": 60},
      "prodLowThresholds": {"cpu": 70}},
     [f"{POOL0}.prodHighThresholds[cpu]: Invalid value: 60: prod high percentage must be less "
      f"than or equal to highThresholds",
      f"{POOL0}.prodLowThresholds[cpu]: Invalid value: 70: prod low percentage must be less "
      f"than or equal to prodHighThresholds"]),
    ({"prodHighThresholds": {"cpu": -3}, "prodLowThresholds": {"memory": -4}},
     [f"{POOL0}.prodHighThresholds[cpu]: Invalid value: -3: percentage must be greater than "
      f"or equal to 0",
      f"{POOL0}.prodLowThresholds[memory]: Invalid value: -4: percentage must be greater than "
      f"or equal to 0"]),
    # anomalyCondition: {} leaves consecutiveNormalities at 0: the plugin cannot be built
    ({"anomalyCondition": {}},
     [f"{POOL0}.anomalyDetectionThresholds.consecutiveNormalities: Invalid value: 0: "
      f"consecutiveNormalities must be greater than 0"]),
    ({"nodeSelector": {"matchExpressions": [{"key": "zone", "operator": "In"}]}},
     [f'{POOL0}.nodeSelector: Invalid value: v1.LabelSelector{{MatchLabels:map[string]string'
      f'(nil), MatchExpressions:[]v1.LabelSelectorRequirement{{v1.LabelSelectorRequirement'
      f'{{Key:"zone", Operator:"In", Values:[]string(nil)}}}}}}: values: Invalid value: '
      f"null: for 'in', 'notin' operators, values set can't be empty"]),
    # a user pool is nodePools[1]: the default pool is prepended
    ({"nodePools": [{"name": "gpu", "lowThresholds": {"cpu": 90}, "highThresholds": {"cpu": 80},
                     "anomalyCondition": {"consecutiveAbnormalities": 2,
                                          "consecutiveNormalities": 1}}]},
     ["nodePools[1].lowThresholds[cpu]: Invalid value: 90: low percentage must be less than "
      "or equal to highThresholds"]),
], ids=["numberOfNodes", "expiration 0", "expiration negative", "namespaces",
        "podSelectors", "negative thresholds", "low above high", "above 100 accepted",
        "prod above", "negative prod", "empty anomalyCondition", "nodeSelector",
        "second pool"])
def test_validation_messages(raw: dict[str, Any], messages: list[str]) -> None:
    if not messages:
        build(raw)
        return
    with pytest.raises(InputError) as info:
        build(raw)
    body = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    assert str(info.value) == f'initializing plugin "LowNodeLoad": {body}'


def test_inherited_thresholds_are_validated_in_every_pool() -> None:
    with pytest.raises(InputError) as info:
        build({"lowThresholds": {"cpu": 60}, "highThresholds": {"cpu": 50},
               "nodePools": [{"name": "a"}]})
    assert str(info.value) == (
        'initializing plugin "LowNodeLoad": [nodePools[0].lowThresholds[cpu]: Invalid value: 60: '
        "low percentage must be less than or equal to highThresholds, nodePools[1]."
        "lowThresholds[cpu]: Invalid value: 60: low percentage must be less than or equal to "
        "highThresholds]")


@pytest.mark.parametrize(("value", "text"), [
    (80.0, "80"), (-1.0, "-1"), (45.5, "45.5"), (0.0, "0"), (100000.0, "100000"),
    (1234567.0, "1.234567e+06"), (0.0001, "0.0001"), (0.00001, "1e-05"), (1e21, "1e+21"),
    (float("nan"), "NaN"), (float("-inf"), "-Inf"),
])
def test_go_float(value: float, text: str) -> None:
    assert go_float(value) == text


def test_go_selector_with_labels() -> None:
    a = defaulted({"nodeSelector": {"matchLabels": {"b": "2", "a": "1"}}})
    assert a.node_selector is not None
    assert go_selector(a.node_selector) == (
        'v1.LabelSelector{MatchLabels:map[string]string{"a":"1", "b":"2"}, '
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}")


# -- through the policy loader and the simulation ----------------------------------------------


def test_policy_decodes_by_kind_and_defaults() -> None:
    policy = policy_from_document(PATH, koord_policy({
        "apiVersion": "descheduler/v1alpha2", "kind": "LowNodeLoadArgs",
        "lowThresholds": {"cpu": 20}, "highThresholds": {"cpu": 50}}), PLUGINS)
    ln = policy.profiles[0].args["LowNodeLoad"]
    assert isinstance(ln, LowNodeLoadArgs)
    assert ln.node_fit is True and ln.anomaly_condition == LoadAnomalyCondition("1m", 5, 3)
    assert policy.profiles[0].enabled["balance"] == ["LowNodeLoad"]


def test_args_without_plugin_config_are_defaulted() -> None:
    policy = policy_from_document(PATH, koord_policy(None), PLUGINS)
    ln = policy.profiles[0].args["LowNodeLoad"]
    assert ln.node_metric_expiration_seconds == 180


@pytest.mark.parametrize(("ln_args", "message"), [
    ({"lowThreshold": {"cpu": 1}}, 'strict decoding error: unknown field "lowThreshold"'),
    ({"anomalyCondition": {"consecutive": 1}},
     'strict decoding error: unknown field "anomalyCondition.consecutive"'),
    ({"nodePools": [{"name": "a", "deviation": True}]},
     'strict decoding error: unknown field "nodePools[0].deviation"'),
    ({"anomalyCondition": {"consecutiveAbnormalities": -1}}, "Expected `int` >= 0"),
    ({"highThresholds": {"cpu": "50"}}, "Expected `float`, got `str`"),
])
def test_strict_decoding(ln_args: dict[str, Any], message: str) -> None:
    with pytest.raises(DecodeError) as info:
        policy_from_document(PATH, koord_policy(ln_args), PLUGINS)
    assert message in str(info.value)


@pytest.mark.parametrize(("ln_args", "message"), [
    ({"detectorCacheTimeout": "5 minutes"},
     'time: unknown unit " minutes" in duration "5 minutes" - at `$.ARGS.detectorCacheTimeout`'),
    ({"anomalyCondition": {"timeout": "10", "consecutiveAbnormalities": 2,
                           "consecutiveNormalities": 2}},
     'time: missing unit in duration "10" - at `$.ARGS.anomalyCondition.timeout`'),
    ({"nodePools": [{"name": "a", "anomalyCondition": {"timeout": "x"}}]},
     'time: invalid duration "x" - at `$.ARGS.nodePools[0].anomalyCondition.timeout`'),
])
def test_durations_are_checked_when_the_policy_loads(ln_args: dict[str, Any],
                                                     message: str) -> None:
    # metav1.Duration: Koordinator's decoder parses the text, so a bad one is a decode error.
    with pytest.raises(DecodeError) as info:
        policy_from_document(PATH, koord_policy(ln_args), PLUGINS)
    assert info.value.detail == message.replace("ARGS", "profiles[0].pluginConfig[0].args")


def test_invalid_args_of_a_plugin_that_is_not_enabled_are_never_validated() -> None:
    # Koordinator validates LowNodeLoadArgs only when it builds the plugin.
    policy_from_document(PATH, koord_policy({"numberOfNodes": -1}, enable=False), PLUGINS)


def test_invalid_args_fail_the_simulation(tmp_path: Path) -> None:
    import yaml

    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(koord_policy({"anomalyCondition": {}})))
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Node",
                                       "metadata": {"name": "n1"}}))
    policy_from_document(str(policy), yaml.safe_load(policy.read_text()), PLUGINS)  # loads fine
    with pytest.raises(InputError) as info:
        run_simulation(str(policy), [str(cluster)], NOW, 1, False)
    assert str(info.value) == (
        f'{policy}: initializing plugin "LowNodeLoad": nodePools[0].anomalyDetectionThresholds.'
        "consecutiveNormalities: Invalid value: 0: consecutiveNormalities must be greater "
        "than 0")

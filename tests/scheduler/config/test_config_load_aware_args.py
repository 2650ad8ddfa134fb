"""koord-scheduler's LoadAwareScheduling args (scheduler/config/load_aware_args.py): defaulted as
koord-scheduler defaults them, validated with its wording."""

from __future__ import annotations

from desched.scheduler.config.load_aware_args import defaulted, scaling_factors, validate
from desched.scheduler.config.types import LoadAwareSchedulingArgs
from desched.scheduler.profile import LoadAwareArgs
from scheduler_config_builders import args, plugins, profile, read


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


def test_a_dominant_resource_weight_leaves_resource_weights_empty() -> None:
    config, warnings = read(args("LoadAwareScheduling", "dominantResourceWeight: 5\n"))
    p = config.profiles["default-scheduler"]
    assert p.load_aware is not None
    assert p.load_aware.resource_weights == {}
    assert ("sched.yaml: profiles[0].pluginConfig[0].args.dominantResourceWeight: desched's "
            "LoadAwareScheduling model does not model this; it is ignored") in warnings


def test_scaling_factors_keep_the_files_and_add_koords_default_for_the_rest() -> None:
    default = dict(LoadAwareArgs().estimated_scaling_factors)
    assert scaling_factors(LoadAwareSchedulingArgs()) == default
    assert scaling_factors(LoadAwareSchedulingArgs(estimated_scaling_factors={"cpu": 80,
                                                                              "gpu": 10})) \
        == {**default, "cpu": 80, "gpu": 10}


def test_load_aware_defaults_what_the_file_leaves_unset() -> None:
    got = defaulted(LoadAwareSchedulingArgs(node_metric_expiration_seconds=60,
                                             filter_expired_node_metrics=False,
                                             usage_thresholds={"cpu": 70}))
    default = LoadAwareArgs()
    assert got.node_metric_expiration_seconds == 60
    assert got.filter_expired_node_metrics is False
    assert got.usage_thresholds == {"cpu": 70}
    assert got.resource_weights == default.resource_weights
    assert defaulted(LoadAwareSchedulingArgs()) == default


def test_load_aware_reports_the_first_bad_value_of_a_map_with_the_whole_map() -> None:
    args_ = LoadAwareSchedulingArgs(resource_weights={"cpu": 1, "memory": 0, "gpu": 101},
                                    usage_thresholds={"cpu": 101, "memory": -1})
    assert validate("a", args_) == [
        'a.resourceWeights: Invalid value: {"cpu":1,"memory":0,"gpu":101}: resource Weight of '
        "memory should be a positive value, got 0",
        'a.usageThresholds: Invalid value: {"cpu":101,"memory":-1}: resource Threshold of cpu '
        "should be less than 100, got 101",
        'a.estimatedScalingFactors: Not found: "gpu"']


def test_a_threshold_of_0_is_valid_a_weight_of_0_is_not() -> None:
    assert validate("a", LoadAwareSchedulingArgs(usage_thresholds={"cpu": 0})) \
        == []
    assert validate("a", LoadAwareSchedulingArgs(
        estimated_scaling_factors={"cpu": 0})) == [
        'a.estimatedScalingFactors: Invalid value: {"cpu":0}: estimated resource ScalingFactor '
        "of cpu should be a positive value, got 0"]

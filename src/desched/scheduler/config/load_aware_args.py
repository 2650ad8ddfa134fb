"""koord-scheduler's LoadAwareSchedulingArgs (`pkg/scheduler/apis/config/v1` defaults.go,
`validation/validation_pluginargs.go`): the defaulting into the model's LoadAwareArgs and the
validation with koord-scheduler's wording (paths under the plugin's args)."""

from __future__ import annotations

from types import MappingProxyType

from desched.scheduler.config.field_errors import go, invalid, unsupported
from desched.scheduler.config.types import LoadAwareSchedulingArgs
from desched.scheduler.profile import LoadAwareArgs


def scaling_factors(args: LoadAwareSchedulingArgs) -> dict[str, int]:
    """estimatedScalingFactors with koord's default for each resource the file leaves out."""
    defaults = LoadAwareArgs().estimated_scaling_factors
    if args.estimated_scaling_factors is None:
        return dict(defaults)
    factors = dict(args.estimated_scaling_factors)
    for name, factor in defaults.items():
        factors.setdefault(name, factor)
    return factors


def defaulted(args: LoadAwareSchedulingArgs) -> LoadAwareArgs:
    """koord-scheduler's SetDefaults_LoadAwareSchedulingArgs, for what desched models."""
    defaults = LoadAwareArgs()
    weights = dict(args.resource_weights)
    if not weights and args.dominant_resource_weight == 0:
        weights = dict(defaults.resource_weights)
    expiration = args.node_metric_expiration_seconds
    return LoadAwareArgs(
        usage_thresholds=MappingProxyType(dict(args.usage_thresholds)
                                          or dict(defaults.usage_thresholds)),
        prod_usage_thresholds=MappingProxyType(dict(args.prod_usage_thresholds)),
        resource_weights=MappingProxyType(weights),
        estimated_scaling_factors=MappingProxyType(scaling_factors(args)),
        node_metric_expiration_seconds=(defaults.node_metric_expiration_seconds
                                        if expiration is None else expiration),
        filter_expired_node_metrics=(True if args.filter_expired_node_metrics is None
                                     else args.filter_expired_node_metrics),
    )


def validate(at: str, args: LoadAwareSchedulingArgs) -> list[str]:
    """ValidateLoadAwareSchedulingArgs (paths under the plugin's args)."""
    errors: list[str] = []
    expiration = args.node_metric_expiration_seconds
    if expiration is not None and expiration <= 0:
        errors.append(invalid(f"{at}.nodeMetricExpiredSeconds", expiration,
                              "nodeMetricExpiredSeconds should be a positive value"))
    errors.extend(_bounded(f"{at}.resourceWeights", args.resource_weights,
                           "resource Weight", strict=True))
    dominant = args.dominant_resource_weight
    if dominant < 0:
        errors.append(invalid(f"{at}.dominantResourceWeight", dominant,
                              "dominantResourceWeight should not be a negative value"))
    if dominant > 100:
        errors.append(invalid(f"{at}.dominantResourceWeight", dominant,
                              "dominantResourceWeight should be less than 100"))
    errors.extend(_bounded(f"{at}.usageThresholds", args.usage_thresholds, "resource Threshold"))
    errors.extend(_bounded(f"{at}.estimatedScalingFactors",
                           dict(args.estimated_scaling_factors or {}),
                           "estimated resource ScalingFactor", strict=True))
    factors = scaling_factors(args)
    for name in args.resource_weights:
        if name not in factors:
            errors.append(f"{at}.estimatedScalingFactors: Not found: {go(name)}")
            break
    if args.aggregated is not None:
        errors.extend(_bounded(f"{at}.aggregated.usageThresholds",
                               args.aggregated.usage_thresholds, "resource Threshold"))
        supported = ("avg", "p50", "p90", "p95", "p99")
        for field, value in (("usageAggregationType", args.aggregated.usage_aggregation_type),
                             ("scoreAggregationType", args.aggregated.score_aggregation_type)):
            if value and value not in supported:
                errors.append(unsupported(f"{at}.aggregated.{field}", value, supported))
    return errors


def _bounded(at: str, values: dict[str, int], what: str, strict: bool = False) -> list[str]:
    """The first value out of (0, 100] (`strict`) or [0, 100], reported with the whole map."""
    for name, value in values.items():
        problem = ("should be a positive value" if value < 0 or (strict and value == 0)
                   else "should be less than 100" if value > 100 else "")
        if problem:
            return [invalid(at, values, f"{what} of {name} {problem}, got {value}")]
    return []

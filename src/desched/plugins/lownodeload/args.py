"""LowNodeLoadArgs (descheduler/v1alpha2, docs/lownodeload.md): the strict wire types,
Koordinator's defaulting (quirks included), the conversion into node pools (the top-level
thresholds become the pool `__default_node_pool__`, always first) and ValidateLowLoadUtilizationArgs
with Koordinator's messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import msgspec

from desched.decoding.go import Int64
from desched.model.labels import Matcher, SelectorError, compile_selector
from desched.model.meta import LabelSelector
from desched.plugins.lownodeload.detector import Condition
from desched.policy_files.args import Namespaces
from desched.util.duration import Duration, parse_duration
from desched.util.gofloat import go_float

DEFAULT_POOL = "__default_node_pool__"
DEFAULT_NODE_METRIC_EXPIRATION_SECONDS = 180
DEFAULT_DETECTOR_CACHE_TIMEOUT = "5m"
DEFAULT_ANOMALY_TIMEOUT = "1m"
DEFAULT_CONSECUTIVE_ABNORMALITIES = 5
DEFAULT_CONSECUTIVE_NORMALITIES = 3

Thresholds = dict[str, float]
Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
UInt32 = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]
Weights = dict[str, Int64]


class LoadAnomalyCondition(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                           omit_defaults=True):
    timeout: Duration | None = None  # nil reads as 0, which the detector makes 60s
    consecutive_abnormalities: UInt32 = 0
    consecutive_normalities: UInt32 = 0


class LowNodeLoadPodSelector(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: str = ""
    selector: LabelSelector | None = None


class LowNodeLoadNodePool(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                          omit_defaults=True):
    name: str = ""
    node_selector: LabelSelector | None = None
    use_deviation_thresholds: bool = False  # a plain bool: not inherited from the top level
    high_thresholds: Thresholds | None = None
    low_thresholds: Thresholds | None = None
    prod_high_thresholds: Thresholds | None = None
    prod_low_thresholds: Thresholds | None = None
    resource_weights: Weights | None = None
    anomaly_condition: LoadAnomalyCondition | None = None


class LowNodeLoadArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                      omit_defaults=True):
    paused: bool | None = None
    dry_run: bool | None = None
    number_of_nodes: Int32 | None = None
    node_metric_expiration_seconds: Int64 | None = None
    evictable_namespaces: Namespaces | None = None
    node_selector: LabelSelector | None = None
    pod_selectors: list[LowNodeLoadPodSelector] | None = None
    node_fit: bool | None = None
    use_deviation_thresholds: bool | None = None
    high_thresholds: Thresholds | None = None
    low_thresholds: Thresholds | None = None
    prod_high_thresholds: Thresholds | None = None
    prod_low_thresholds: Thresholds | None = None
    resource_weights: Weights | None = None
    anomaly_condition: LoadAnomalyCondition | None = None
    detector_cache_timeout: Duration | None = None
    node_pools: list[LowNodeLoadNodePool] | None = None


# -- defaulting (SetDefaults_LowNodeLoadArgs) ---------------------------------------------------


def default(args: LowNodeLoadArgs) -> None:
    """Koordinator's defaults, in place. Quirks kept: with anomalyCondition given, only the first
    zero of consecutiveAbnormalities / consecutiveNormalities is defaulted (an `else if`), and its
    timeout is left unset; configured weights <= 0 of the default resources are reset to 1."""
    if args.node_fit is None:
        args.node_fit = True
    cond = args.anomaly_condition
    if cond is None:
        args.anomaly_condition = LoadAnomalyCondition(
            DEFAULT_ANOMALY_TIMEOUT, DEFAULT_CONSECUTIVE_ABNORMALITIES,
            DEFAULT_CONSECUTIVE_NORMALITIES)
    elif cond.consecutive_abnormalities == 0:
        cond.consecutive_abnormalities = DEFAULT_CONSECUTIVE_ABNORMALITIES
    elif cond.consecutive_normalities == 0:
        cond.consecutive_normalities = DEFAULT_CONSECUTIVE_NORMALITIES
    if args.detector_cache_timeout is None:
        args.detector_cache_timeout = DEFAULT_DETECTOR_CACHE_TIMEOUT
    if args.node_metric_expiration_seconds is None:
        args.node_metric_expiration_seconds = DEFAULT_NODE_METRIC_EXPIRATION_SECONDS

    # Resources named only in the prod thresholds get no default weight.
    defaults: Weights = {"cpu": 1, "memory": 1}
    for name in (*(args.low_thresholds or {}), *(args.high_thresholds or {})):
        defaults[name] = 1
    if args.resource_weights is None:
        args.resource_weights = defaults
    else:
        for name, weight in defaults.items():
            if args.resource_weights.get(name, 0) <= 0:
                args.resource_weights[name] = weight

    top = args.anomaly_condition
    for pool in args.node_pools or []:
        if pool.high_thresholds is None:
            pool.high_thresholds = args.high_thresholds
        if pool.low_thresholds is None:
            pool.low_thresholds = args.low_thresholds
        if pool.prod_high_thresholds is None:
            pool.prod_high_thresholds = args.prod_high_thresholds
        if pool.prod_low_thresholds is None:
            pool.prod_low_thresholds = args.prod_low_thresholds
        if pool.resource_weights is None:
            pool.resource_weights = args.resource_weights
        if pool.anomaly_condition is None:
            pool.anomaly_condition = top
        elif top is not None:
            # Zero counts are inherited; the timeout is not.
            if pool.anomaly_condition.consecutive_abnormalities == 0:
                pool.anomaly_condition.consecutive_abnormalities = top.consecutive_abnormalities
            if pool.anomaly_condition.consecutive_normalities == 0:
                pool.anomaly_condition.consecutive_normalities = top.consecutive_normalities


def seconds(text: str | None) -> float:
    """A duration the policy decoder has checked; nil is 0."""
    return parse_duration(text) if text else 0.0


# -- conversion to pools -------------------------------------------------------------------------


@dataclass
class Pool:
    """One node pool as the plugin runs it. The threshold maps are the pool's own copies."""

    name: str
    node_selector: LabelSelector | None
    deviation: bool
    low: Thresholds
    high: Thresholds
    prod_low: Thresholds
    prod_high: Thresholds
    weights: Weights
    anomaly: LoadAnomalyCondition | None
    matcher: Matcher | None = None  # compiled node_selector; None selects every node

    def condition(self) -> Condition | None:
        if self.anomaly is None:
            return None
        return Condition(seconds(self.anomaly.timeout), self.anomaly.consecutive_abnormalities,
                         self.anomaly.consecutive_normalities)


def build_pools(args: LowNodeLoadArgs) -> list[Pool]:
    """The internal form: `__default_node_pool__` (the top-level selector, thresholds, weights
    and anomaly condition) first, then the configured pools in order."""
    default_pool = Pool(
        DEFAULT_POOL, args.node_selector, bool(args.use_deviation_thresholds),
        dict(args.low_thresholds or {}), dict(args.high_thresholds or {}),
        dict(args.prod_low_thresholds or {}), dict(args.prod_high_thresholds or {}),
        dict(args.resource_weights or {}), args.anomaly_condition)
    pools = [default_pool]
    for pool in args.node_pools or []:
        pools.append(Pool(
            pool.name, pool.node_selector, pool.use_deviation_thresholds,
            dict(pool.low_thresholds or {}), dict(pool.high_thresholds or {}),
            dict(pool.prod_low_thresholds or {}), dict(pool.prod_high_thresholds or {}),
            dict(pool.resource_weights or {}), pool.anomaly_condition))
    return pools


# -- validation (ValidateLowLoadUtilizationArgs) -------------------------------------------------


def _go_strings(values: list[str] | tuple[str, ...] | None) -> str:
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def go_selector(selector: LabelSelector) -> str:
    """metav1.LabelSelector as Go's %#v prints it."""
    labels = selector.match_labels
    if labels is None:
        ml = "map[string]string(nil)"
    else:
        ml = "map[string]string{" + ", ".join(
            f'"{k}":"{v}"' for k, v in sorted(labels.items())) + "}"
    exprs = selector.match_expressions
    if exprs is None:
        me = "[]v1.LabelSelectorRequirement(nil)"
    else:
        me = "[]v1.LabelSelectorRequirement{" + ", ".join(
            f'v1.LabelSelectorRequirement{{Key:"{e.key}", Operator:"{e.operator}", '
            f"Values:{_go_strings(list(e.values) if e.values else None)}}}"
            for e in exprs) + "}"
    return f"v1.LabelSelector{{MatchLabels:{ml}, MatchExpressions:{me}}}"


def _invalid(path: str, value: str, detail: str) -> str:
    return f"{path}: Invalid value: {value}: {detail}"


def validate(args: LowNodeLoadArgs, pools: list[Pool]) -> list[str]:
    """Koordinator's messages, deduplicated as field.ErrorList.ToAggregate does. Paths are those
    of the internal args: the default pool is nodePools[0]."""
    errs: list[str] = []
    if args.number_of_nodes is not None and args.number_of_nodes < 0:
        errs.append(_invalid("numberOfNodes", str(args.number_of_nodes),
                             "must be greater than or equal to 0"))
    expiration = args.node_metric_expiration_seconds
    if expiration is not None and expiration <= 0:
        errs.append(_invalid("nodeMetricExpiredSeconds", str(expiration),
                             "nodeMetricExpiredSeconds should be a positive value"))
    ns = args.evictable_namespaces
    if ns is not None and ns.include and ns.exclude:
        shown = f"config.Namespaces{{Include:{_go_strings(ns.include)}, " \
                f"Exclude:{_go_strings(ns.exclude)}}}"
        errs.append(_invalid("evictableNamespaces", shown,
                             "only one of Include/Exclude namespaces can be set"))
    for i, ps in enumerate(args.pod_selectors or []):
        if ps.selector is None:
            continue
        try:
            compile_selector(ps.selector, validate=True)
        except SelectorError as err:
            # Go prints the selector pointer's address here; it is not reproducible.
            shown = f'config.LowNodeLoadPodSelector{{Name:"{ps.name}", ' \
                    f"Selector:(*v1.LabelSelector)(...)}}"
            errs.append(_invalid(f"podSelectors[{i}]", shown, str(err)))
    for i, pool in enumerate(pools):
        errs.extend(_validate_pool(f"nodePools[{i}]", pool))
    return list(dict.fromkeys(errs))


def _validate_pool(path: str, pool: Pool) -> list[str]:
    errs: list[str] = []
    if pool.node_selector is not None:
        try:
            pool.matcher = compile_selector(pool.node_selector, validate=True)
        except SelectorError as err:
            errs.append(_invalid(f"{path}.nodeSelector", go_selector(pool.node_selector),
                                 str(err)))
    negative = "percentage must be greater than or equal to 0"
    # Each threshold map: not negative, and not above the map it must stay under (if any).
    bounded: tuple[tuple[str, Thresholds, Thresholds | None, str], ...] = (
        ("highThresholds", pool.high, None, ""),
        ("lowThresholds", pool.low, pool.high,
         "low percentage must be less than or equal to highThresholds"),
        ("prodHighThresholds", pool.prod_high, pool.high,
         "prod high percentage must be less than or equal to highThresholds"),
        ("prodLowThresholds", pool.prod_low, pool.prod_high,
         "prod low percentage must be less than or equal to prodHighThresholds"),
    )
    for key, values, ceiling, above in bounded:
        for name, pct in values.items():
            if pct < 0:
                errs.append(_invalid(f"{path}.{key}[{name}]", go_float(pct), negative))
            if ceiling is not None and name in ceiling and pct > ceiling[name]:
                errs.append(_invalid(f"{path}.{key}[{name}]", go_float(pct), above))
    cond = pool.anomaly
    if cond is not None:
        where = f"{path}.anomalyDetectionThresholds"
        if cond.consecutive_abnormalities <= 0:
            errs.append(_invalid(f"{where}.consecutiveAbnormalities",
                                 str(cond.consecutive_abnormalities),
                                 "consecutiveAbnormalities must be greater than 0"))
        if cond.consecutive_normalities <= 0:
            errs.append(_invalid(f"{where}.consecutiveNormalities",
                                 str(cond.consecutive_normalities),
                                 "consecutiveNormalities must be greater than 0"))
    return errs

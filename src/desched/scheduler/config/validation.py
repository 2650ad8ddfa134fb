"""kube-scheduler's validation of a profile's values and plugin args
(`pkg/scheduler/apis/config/validation/validation.go`, `validation_pluginargs.go`), with its
wording (koord-scheduler's LoadAwareScheduling: load_aware_args.py). Each function returns the
errors it finds, in the order kube-scheduler reports them; `at` is the args' place in the file."""

from __future__ import annotations

from desched.model.labels import label_key_problem, label_value_problem
from desched.model.pod import NodeSelectorRequirement
from desched.scheduler.config.defaults import hard_pod_affinity_weight
from desched.scheduler.config.field_errors import (
    duplicate,
    forbidden,
    go,
    invalid,
    required,
    unsupported,
)
from desched.scheduler.config.known_plugins import V1_INVALID
from desched.scheduler.config.types import (
    V1,
    InterPodAffinityArgs,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
    ScoringResource,
    SpreadConstraint,
    UtilizationShapePoint,
)
from desched.scheduler.profile import SCORING_TYPES


def validate_percentage(where: str, value: int | None) -> list[str]:
    if value is not None and not 0 <= value <= 100:
        return [invalid(where, value, "not in valid range [0-100]")]
    return []


def validate_plugin_name(place: str, name: str, version: str) -> list[str]:
    """A plugin v1 no longer has (invalidPluginsByVersion)."""
    if version == V1 and name in V1_INVALID:
        return [invalid(place, name, f"was invalid in version {go(V1)} (KubeSchedulerConfiguration "
                                     f"is version {go(version)})")]
    return []


# -- NodeResourcesFit, NodeResourcesBalancedAllocation ------------------------------------------


def validate_fit_args(at: str, args: NodeResourcesFitArgs) -> list[str]:
    errors: list[str] = []
    for k, name in enumerate(args.ignored_resources):
        problem = label_key_problem(name)
        if problem:
            errors.append(invalid(f"{at}.ignoredResources[{k}]", name, problem))
    for k, group in enumerate(args.ignored_resource_groups):
        path = f"{at}.ignoredResourceGroups[{k}]"
        if "/" in group:
            errors.append(invalid(path, group, "resource group name can't contain '/'"))
        problem = label_key_problem(group)
        if problem:
            errors.append(invalid(path, group, problem))
    strategy = args.scoring_strategy
    if strategy is None:
        return errors
    at = f"{at}.scoringStrategy"
    if strategy.type not in SCORING_TYPES:
        errors.append(unsupported(f"{at}.type", strategy.type, sorted(SCORING_TYPES)))
    errors.extend(_scoring_resources(f"{at}.resources", strategy.resources))
    ratio = strategy.requested_to_capacity_ratio
    if strategy.type == "RequestedToCapacityRatio":
        if ratio is None:
            errors.append(required(f"{at}.requestedToCapacityRatio",
                                   "must be specified when type is RequestedToCapacityRatio"))
        else:
            errors.extend(_shape(f"{at}.requestedToCapacityRatio.shape", ratio.shape))
    elif ratio is not None:
        errors.append(forbidden(f"{at}.requestedToCapacityRatio",
                                "must be nil when type is not RequestedToCapacityRatio"))
    return errors


def _scoring_resources(at: str, specs: list[ScoringResource]) -> list[str]:
    """Each weight (0 meaning 1) in (0, 100]."""
    return [invalid(f"{at}[{k}].weight", spec.weight or 1,
                    f"resource weight of {spec.name} not in valid range (0, 100]")
            for k, spec in enumerate(specs) if not 0 < (spec.weight or 1) <= 100]


def _shape(at: str, points: list[UtilizationShapePoint]) -> list[str]:
    """validateFunctionShape: at least one point, utilizations increasing, each in [0, 100],
    scores in [0, 10]."""
    if not points:
        return [required(at, "at least one point must be specified")]
    errors: list[str] = []
    for k in range(1, len(points)):
        if points[k - 1].utilization >= points[k].utilization:
            errors.append(invalid(f"{at}[{k}].utilization", points[k].utilization,
                                  "values must be sorted in increasing order"))
            break
    for k, point in enumerate(points):
        if not 0 <= point.utilization <= 100:
            errors.append(invalid(f"{at}[{k}].utilization", point.utilization,
                                  "not in valid range [0, 100]"))
        if not 0 <= point.score <= 10:
            errors.append(invalid(f"{at}[{k}].score", point.score, "not in valid range [0, 10]"))
    return errors


def validate_balanced_args(at: str, args: NodeResourcesBalancedAllocationArgs) -> list[str]:
    """Resource names unique, each weight (0 meaning 1) exactly 1."""
    errors: list[str] = []
    seen: set[str] = set()
    for k, spec in enumerate(args.resources):
        if spec.name in seen:
            errors.append(duplicate(f"{at}.resources[{k}].name", spec.name))
        seen.add(spec.name)
        weight = spec.weight or 1
        if weight != 1:
            errors.append(invalid(f"{at}.resources[{k}].weight", weight, "must be 1"))
    return errors


# -- PodTopologySpread, InterPodAffinity ----------------------------------------------------------


def validate_spread_args(at: str, args: PodTopologySpreadArgs) -> list[str]:
    errors: list[str] = []
    defaulting = args.defaulting_type or "System"
    path = f"{at}.defaultingType"
    if defaulting not in ("System", "List"):
        errors.append(unsupported(path, defaulting, ("System", "List")))
    elif defaulting == "System" and args.default_constraints:
        errors.append(invalid(path, defaulting, "when .defaultConstraints are not empty"))
    for k, c in enumerate(args.default_constraints):
        errors.extend(_spread_constraint(f"{at}.defaultConstraints[{k}]", c))
        for other in args.default_constraints[:k]:
            if (other.topology_key, other.when_unsatisfiable) == (c.topology_key,
                                                                  c.when_unsatisfiable):
                errors.append(duplicate(f"{at}.defaultConstraints[{k}]",
                                        f"{{{c.topology_key}, {c.when_unsatisfiable}}}"))
                break
    return errors


def _spread_constraint(p: str, c: SpreadConstraint) -> list[str]:
    errors: list[str] = []
    if c.max_skew <= 0:
        errors.append(invalid(f"{p}.maxSkew", c.max_skew, "not in valid range (0, inf)"))
    if not c.topology_key:
        errors.append(required(f"{p}.topologyKey", "can not be empty"))
    else:
        problem = label_key_problem(c.topology_key)
        if problem:
            errors.append(invalid(f"{p}.topologyKey", c.topology_key, problem))
    if not c.when_unsatisfiable:
        errors.append(required(f"{p}.whenUnsatisfiable", "can not be empty"))
    elif c.when_unsatisfiable not in ("DoNotSchedule", "ScheduleAnyway"):
        errors.append(unsupported(f"{p}.whenUnsatisfiable", c.when_unsatisfiable,
                                  ("DoNotSchedule", "ScheduleAnyway")))
    if c.label_selector is not None:
        errors.append(forbidden(f"{p}.labelSelector", "constraint must not define a selector, "
                                                      "as they deduced for each pod"))
    for policy, value in (("nodeAffinityPolicy", c.node_affinity_policy),
                          ("nodeTaintsPolicy", c.node_taints_policy)):
        if value is not None and value not in ("Honor", "Ignore"):
            errors.append(unsupported(f"{p}.{policy}", value, ("Honor", "Ignore")))
    return errors


def validate_inter_pod_affinity_args(at: str, args: InterPodAffinityArgs) -> list[str]:
    weight = hard_pod_affinity_weight(args)
    if not 0 <= weight <= 100:
        return [invalid(f"{at}.hardPodAffinityWeight", weight, "not in valid range [0, 100]")]
    return []


# -- NodeAffinity ---------------------------------------------------------------------------------


def validate_node_affinity_args(at: str, args: NodeAffinityArgs) -> list[str]:
    affinity = args.added_affinity
    if affinity is None:
        return []
    errors: list[str] = []
    at = f"{at}.addedAffinity"
    required_terms = affinity.required_during_scheduling_ignored_during_execution
    if required_terms is not None:
        for k, term in enumerate(required_terms.node_selector_terms):
            place = f"{at}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{k}]"
            errors.extend(_term(place, term.match_expressions, term.match_fields))
    for k, pref in enumerate(affinity.preferred_during_scheduling_ignored_during_execution):
        if pref.weight != 0:
            errors.extend(_term(f"{at}.preferredDuringSchedulingIgnoredDuringExecution[{k}]",
                                pref.preference.match_expressions, pref.preference.match_fields))
    return errors


def _term(at: str, expressions: tuple[NodeSelectorRequirement, ...],
          fields: tuple[NodeSelectorRequirement, ...]) -> list[str]:
    """nodeaffinity.NewNodeSelector's checks of one term (labels.NewRequirement's)."""
    errors: list[str] = []
    for k, req in enumerate(expressions):
        errors.extend(_expression(f"{at}.matchExpressions[{k}]", req))
    for k, req in enumerate(fields):
        p = f"{at}.matchFields[{k}]"
        if req.operator not in ("In", "NotIn"):
            errors.append(unsupported(f"{p}.operator", req.operator, ("In", "NotIn")))
        elif len(req.values) != 1:
            errors.append(invalid(f"{p}.values", list(req.values) or None,
                                  "must have one element"))
    return errors


def _expression(p: str, req: NodeSelectorRequirement) -> list[str]:
    errors: list[str] = []
    problem = label_key_problem(req.key)
    if problem:
        errors.append(invalid(f"{p}.key", req.key, problem))
    values = list(req.values)
    if req.operator in ("In", "NotIn") and not values:
        errors.append(invalid(f"{p}.values", None,
                              "for 'in', 'notin' operators, values set can't be empty"))
    elif req.operator in ("Exists", "DoesNotExist") and values:
        errors.append(invalid(f"{p}.values", values,
                              "values set must be empty for exists and does not exist"))
    elif req.operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(invalid(f"{p}.values", values or None,
                                  "for 'Gt', 'Lt' operators, exactly one value is required"))
        for v, value in enumerate(values):
            try:
                int(value, 10)
            except ValueError:
                errors.append(invalid(f"{p}.values[{v}]", value,
                                      "for 'Gt', 'Lt' operators, the value must be an integer"))
    for v, value in enumerate(values):
        problem = label_value_problem(value)
        if problem:
            errors.append(invalid(f"{p}.values[{v}]", value, problem))
    return errors

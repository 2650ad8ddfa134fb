"""CustomPriorityArgs (descheduler/v1alpha2, docs/custompriority.md): the strict wire types,
Koordinator's defaulting (nodeFit true, mode BestEffort), the tiers as the plugin runs them,
and the checks Koordinator makes when it builds the plugin, with its messages.

Koordinator v1.8.0 builds the plugin after its own check (at least two tiers, each named once
and with a nodeSelector, then the podSelectors) and never calls the validator its config API
also has (ValidateCustomPriorityArgs: the mode, thresholds within 0..100). desched makes both
sets of checks, so a misspelt mode is refused rather than run as BestEffort.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from desched.errors import quote
from desched.model.labels import Matcher, SelectorError, compile_selector, format_selector
from desched.model.meta import LabelSelector
from desched.policy_files.args import Namespaces

BEST_EFFORT = "BestEffort"
DRAIN_NODE = "DrainNode"
MODES = (BEST_EFFORT, DRAIN_NODE)

Thresholds = dict[str, float]


class ResourcePriority(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                       omit_defaults=True):
    """One tier of evictionOrder, from the most expensive to the cheapest."""

    name: str = ""
    node_selector: LabelSelector | None = None
    keep_threshold: Thresholds | None = None
    reject_threshold: Thresholds | None = None


class CustomPriorityPodSelector(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: str = ""
    selector: LabelSelector | None = None


class CustomPriorityArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                         omit_defaults=True):
    paused: bool | None = None
    dry_run: bool | None = None
    evictable_namespaces: Namespaces | None = None
    node_selector: LabelSelector | None = None
    pod_selectors: list[CustomPriorityPodSelector] | None = None
    node_fit: bool | None = None
    eviction_order: list[ResourcePriority] | None = None
    mode: str = ""
    auto_cordon: bool | None = None


def default(args: CustomPriorityArgs) -> None:
    """SetDefaults_CustomPriorityArgs, in place."""
    if args.node_fit is None:
        args.node_fit = True
    if not args.mode:
        args.mode = BEST_EFFORT


@dataclass(frozen=True)
class Tier:
    """One evictionOrder tier as the plugin runs it; `matcher` is None when its nodeSelector
    does not compile (Koordinator then puts no node in it, and so does desched, saying so)."""

    name: str
    node_selector: LabelSelector
    matcher: Matcher | None
    problem: str  # why the selector does not compile, or ""
    keep: Thresholds
    reject: Thresholds

    @property
    def selector_text(self) -> str:
        return format_selector(self.node_selector)


def build_tiers(args: CustomPriorityArgs) -> list[Tier]:
    """The tiers, in order; one without a nodeSelector is left out (check() refuses it)."""
    tiers = []
    for priority in args.eviction_order or []:
        if priority.node_selector is None:
            continue
        try:
            matcher: Matcher | None = compile_selector(priority.node_selector, validate=True)
            problem = ""
        except SelectorError as err:
            matcher, problem = None, str(err)
        tiers.append(Tier(priority.name, priority.node_selector, matcher, problem,
                          dict(priority.keep_threshold or {}),
                          dict(priority.reject_threshold or {})))
    return tiers


def _go_percent(value: float) -> str:
    """Go's %f."""
    return f"{value:f}"


def check(args: CustomPriorityArgs) -> str | None:
    """The first problem Koordinator finds when it builds the plugin (validateCustomPriorityArgs,
    then the podSelectors), then those of its config API's validator (thresholds, mode);
    None when the args are usable."""
    order = args.eviction_order or []
    if len(order) < 2:
        return "CustomPriority requires at least 2 resource priority levels"
    names: set[str] = set()
    for priority in order:
        if not priority.name:
            return "priority name cannot be empty"
        if priority.name in names:
            return f"duplicate priority name: {priority.name}"
        names.add(priority.name)
        if priority.node_selector is None:
            return f"priority {priority.name} must have a nodeSelector"
    if args.node_selector is not None:
        try:
            compile_selector(args.node_selector, validate=True)
        except SelectorError as err:
            # Koordinator's Balance fails with this on every pass; desched refuses it up front.
            return f"invalid nodeSelector: {err}"
    for ps in args.pod_selectors or []:
        if ps.selector is None:
            continue
        try:
            compile_selector(ps.selector, validate=True)
        except SelectorError as err:
            return (f"error initializing pod selector filter: invalid labelSelector {ps.name}, "
                    f"{err}")
    for i, priority in enumerate(order):
        for field, thresholds in (("keepThreshold", priority.keep_threshold),
                                  ("rejectThreshold", priority.reject_threshold)):
            for resource, value in (thresholds or {}).items():
                if value < 0 or value > 100:
                    return (f"priority[{i}].{field} is invalid: resource threshold for "
                            f"{resource} must be between 0 and 100, got {_go_percent(value)}")
    if args.mode not in ("", *MODES):
        return f"invalid mode: {args.mode}, supported: {', '.join(MODES)}"
    return None


def warnings(args: CustomPriorityArgs) -> list[str]:
    """Valid args that may not do what the user means, one line each."""
    out = []
    for tier in build_tiers(args) if check(args) is None else []:
        if tier.matcher is None:
            out.append(f"evictionOrder tier {quote(tier.name)} has a nodeSelector that "
                       f"selects no node ({tier.problem}); Koordinator runs without the tier, "
                       f"and so does desched")
    if args.auto_cordon and args.mode != DRAIN_NODE:
        out.append(f"autoCordon applies to mode {DRAIN_NODE} only; mode {args.mode} "
                   f"cordons nothing")
    return out

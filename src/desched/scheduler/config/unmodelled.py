"""Where desched departs from kube-scheduler, as warnings (place, text): what a file sets that
the scheduler models do not model, so placements may differ from the real scheduler's. Unknown
fields and plugins are warnings, not errors (koord-scheduler and other schedulers built on the
framework add plugins); plugins desched does not model are left out of the profile, with a
warning when they filter or score nodes (the volume and port filters are left out silently: a
snapshot holds no volumes or ports)."""

from __future__ import annotations

from collections.abc import Mapping

from desched.errors import quote
from desched.scheduler.config.field_errors import go
from desched.scheduler.config.known_plugins import KNOWN, KOORD_PLUGINS, MODELLED_SCORES, SILENT
from desched.scheduler.config.types import (
    LOAD_AWARE,
    Extender,
    LoadAwareSchedulingArgs,
    NodeResourcesFitArgs,
)
from desched.scheduler.profile import FILTERS
from desched.util.names import nearest

Note = tuple[str, str]  # the place in the file, the warning


def extenders(found: list[Extender]) -> list[Note]:
    return [(f"extenders[{i}]", f"scheduler extender {go(str(ext.url_prefix or ''))} filters "
                                f"and scores nodes out of process; desched does not model it, "
                                f"so placements may differ")
            for i, ext in enumerate(found)]


def unknown_plugin(place: str, name: str) -> list[Note]:
    """A name no scheduler desched knows has, with the likely one."""
    if name in KNOWN:
        return []
    near = nearest(name, KNOWN)
    return [(place, f"unknown plugin {quote(name)}" + (f" (did you mean {near}?)" if near else ""))]


def plugins(filters: Mapping[str, str], scores: Mapping[str, str]) -> list[Note]:
    """One warning per known plugin that filters or scores (name -> the place enabling it) and
    that desched does not model (unknown names have theirs already)."""
    notes = []
    for name in dict.fromkeys([*filters, *scores]):
        if name not in KNOWN or name in SILENT or name in FILTERS or name in MODELLED_SCORES:
            continue
        does = ("filters and scores" if name in filters and name in scores
                else "filters" if name in filters else "scores")
        owner = " (koord-scheduler)" if name in KOORD_PLUGINS else ""
        place = filters[name] if name in filters else scores[name]
        notes.append((place, f"plugin {quote(name)}{owner} {does} nodes; desched does not model "
                             f"it, so placements may differ"))
    return notes


def fit_args(at: str, args: NodeResourcesFitArgs) -> list[Note]:
    if args.ignored_resources or args.ignored_resource_groups:
        return [(at, "ignoredResources and ignoredResourceGroups make NodeResourcesFit skip "
                     "those resources; desched's fit still checks them")]
    return []


def load_aware_args(at: str, args: LoadAwareSchedulingArgs) -> list[Note]:
    """Each LoadAwareScheduling arg set to change what koord-scheduler does in a way desched
    does not model."""
    changed = {
        "dominantResourceWeight": args.dominant_resource_weight != 0,
        "enableScheduleWhenNodeMetricsExpired":
            bool(args.enable_schedule_when_node_metrics_expired),
        "prodUsageIncludeSys": args.prod_usage_include_sys,
        "scoreAccordingProdUsage": bool(args.score_according_prod_usage),
        "estimatedSecondsAfterPodScheduled": args.estimated_seconds_after_pod_scheduled is not None,
        "estimatedSecondsAfterInitialized": args.estimated_seconds_after_initialized is not None,
        "allowCustomizeEstimation": args.allow_customize_estimation,
        "aggregated": args.aggregated is not None,
        "supportedResources": bool(args.supported_resources),
    }
    return [(f"{at}.{name}", "desched's LoadAwareScheduling model does not model this; it is "
                             "ignored") for name, is_set in changed.items() if is_set]


def load_aware_not_enabled(where: str) -> Note:
    return (f"{where}.pluginConfig", f"{LOAD_AWARE} has args but no extension point enables it "
                                     f"(koord-scheduler would not run it); desched models it as "
                                     f"enabled")

"""What a plugin declares: its name, args type, defaulting, validation, extension points and
factory. The plugins themselves sit above the framework; the catalog lists them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from desched.framework.types import Handle
from desched.model.meta import LabelSelector

# What a plugin's evictions exist for, by which a report judges them (churn, docs/report.md):
# - "balance": spread or pack utilization (LowNodeUtilization, HighNodeUtilization,
#   LowNodeLoad): an eviction that moved no balance figure bought nothing, a replacement back
#   on its node undid the eviction;
# - "relocate": take the pod off a node it must not be on (a taint, an affinity, a spread): a
#   replacement placed back there brings the violation back;
# - "replace": a fresh pod instead of an old, failed or crash-looping one, wherever it lands.
Purpose = Literal["balance", "relocate", "replace"]


@dataclass(frozen=True)
class RoleThreshold:
    """A threshold that decides a node's role in a utilization plugin's run (source, target),
    in percent of allocatable, on a series of the reports ("cpu requests", "memory usage",
    "pods"): LowNodeUtilization's `thresholds` (low) and `targetThresholds` (high)."""

    series: str
    percent: float
    role: Literal["low", "high"]
    arg: str  # the args' field that sets it: "thresholds", "targetThresholds", ...
    # A node pool's name (LowNodeLoad's nodePools) and the nodes it applies to; "" and None:
    # every node the plugin reads.
    pool: str = ""
    node_selector: LabelSelector | None = None
    plugin: str = ""  # the plugin's name (utilization.role_thresholds sets it)


@dataclass(frozen=True)
class PluginSpec:
    name: str
    extension_points: frozenset[str]
    args_type: type
    factory: Callable[[Any, Handle], object]
    validate: Callable[[Any], list[str]] = lambda args: []
    # Notes about args that are valid but may not do what the user means, one line each: the
    # policy loader adds them to the policy's warnings.
    warnings: Callable[[Any], list[str]] = lambda args: []
    default: Callable[[Any], None] = lambda args: None
    # Koordinator decodes args of its own plugins by the kind "<Name>Args"; upstream names them too.
    args_kind: str = ""
    # Every threshold its args set that decides a node's role, low and high, per series and
    # node pool, for the reports' balance figures and plots; none when they are relative
    # (deviation thresholds) or the plugin has none.
    role_thresholds: Callable[[Any], list[RoleThreshold]] = lambda args: []
    # What its evictions exist for (see Purpose). Unknown plugins are taken to relocate.
    purpose: Purpose = "relocate"


# Plugin name -> spec: what a policy is decoded against and its profiles are built from
# (desched.plugins.catalog.PLUGINS is every plugin desched has).
Plugins = Mapping[str, PluginSpec]

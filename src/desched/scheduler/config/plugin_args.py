"""The plugin args desched reads, registered explicitly as kube-scheduler registers them: each
plugin's args type, its validation, its defaulting into the profile's value, and the warnings
about what desched does not model of it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from desched.scheduler.config import defaults, load_aware_args, unmodelled, validation
from desched.scheduler.config.types import (
    LOAD_AWARE,
    InterPodAffinityArgs,
    LoadAwareSchedulingArgs,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
)
from desched.scheduler.config.unmodelled import Note

A = TypeVar("A")


def _no_notes(at: str, args: object) -> list[Note]:
    return []


@dataclass(frozen=True, slots=True)
class PluginArgs(Generic[A]):
    type: type[A]
    validate: Callable[[str, A], list[str]]  # (the args' place, the args) -> errors
    default: Callable[[A], object]  # the profile's value, defaulted
    warnings: Callable[[str, A], list[Note]] = _no_notes


def _added_affinity(args: NodeAffinityArgs) -> object:
    return args.added_affinity


PLUGIN_ARGS: Mapping[str, PluginArgs[Any]] = MappingProxyType({
    "NodeResourcesFit": PluginArgs(NodeResourcesFitArgs, validation.validate_fit_args,
                                   defaults.fit_scoring, unmodelled.fit_args),
    "NodeResourcesBalancedAllocation": PluginArgs(NodeResourcesBalancedAllocationArgs,
                                                  validation.validate_balanced_args,
                                                  defaults.balanced_resources),
    "PodTopologySpread": PluginArgs(PodTopologySpreadArgs, validation.validate_spread_args,
                                    defaults.spread_defaults),
    "InterPodAffinity": PluginArgs(InterPodAffinityArgs,
                                   validation.validate_inter_pod_affinity_args,
                                   defaults.inter_pod_affinity),
    "NodeAffinity": PluginArgs(NodeAffinityArgs, validation.validate_node_affinity_args,
                               _added_affinity),
    LOAD_AWARE: PluginArgs(LoadAwareSchedulingArgs, load_aware_args.validate,
                           load_aware_args.defaulted, unmodelled.load_aware_args),
})

"""Every plugin desched has, listed by hand: the policy loaders decode against this table and
the runner builds profiles from it, so a plugin exists when it is listed here."""

from __future__ import annotations

from types import MappingProxyType

from desched.framework.registry import Plugins
from desched.plugins import (
    defaultevictor,
    highnodeutilization,
    lownodeload,
    lownodeutilization,
    migrationcontroller,
    pingpongguard,
    podlifetime,
    removeduplicates,
    removefailedpods,
    removepodshavingtoomanyrestarts,
    removepodsviolatinginterpodantiaffinity,
    removepodsviolatingnodeaffinity,
    removepodsviolatingnodetaints,
    removepodsviolatingtopologyspreadconstraint,
)

PLUGINS: Plugins = MappingProxyType({spec.name: spec for spec in (
    defaultevictor.SPEC,
    highnodeutilization.SPEC,
    lownodeload.SPEC,
    lownodeutilization.SPEC,
    migrationcontroller.SPEC,
    pingpongguard.SPEC,
    podlifetime.SPEC,
    removeduplicates.SPEC,
    removefailedpods.SPEC,
    removepodshavingtoomanyrestarts.SPEC,
    removepodsviolatinginterpodantiaffinity.SPEC,
    removepodsviolatingnodeaffinity.SPEC,
    removepodsviolatingnodetaints.SPEC,
    removepodsviolatingtopologyspreadconstraint.SPEC,
)})

"""Every plugin desched runs: the built-ins, listed here by hand, and those of installed packages,
found through the Python entry-point group `desched.plugins` (docs/writing-plugins.md). Both are
the same typed PluginSpec; the policy loaders decode against this table and the runner builds
profiles from it, so a plugin exists when it is listed here or installed.

The installed plugins are loaded once, on first use of PLUGINS (a command's policy load): a
package that fails to import, or declares a name desched already has, is an InputError (one
line, exit code 2) naming the package and the entry point."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from types import MappingProxyType

import msgspec

from desched.errors import InputError, quote
from desched.framework.registry import Plugins, PluginSpec
from desched.framework.types import EXTENSION_POINTS
from desched.migration.args import MigrationControllerArgs
from desched.model.meta import keep_annotations
from desched.plugins import (
    defaultevictor,
    highnodeutilization,
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
from desched.plugins.custompriority import plugin as custompriority
from desched.plugins.lownodeload import plugin as lownodeload

# The entry-point group an installed package declares its plugins in: one entry point per
# plugin, named as the plugin, whose object is its PluginSpec
# (`[project.entry-points."desched.plugins"]` `MyPlugin = "my_package.plugin:SPEC"`).
ENTRY_POINT_GROUP = "desched.plugins"

BUILT_IN: Plugins = MappingProxyType({spec.name: spec for spec in (
    custompriority.SPEC,
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


@dataclass(frozen=True)
class Source:
    """Where a plugin comes from: desched itself, or an installed distribution (its name and
    version, and the entry point that names the plugin's spec)."""

    distribution: str = ""  # "" for a built-in
    version: str = ""
    entry_point: str = ""  # "MyPlugin = my_package.plugin:SPEC"

    @property
    def built_in(self) -> bool:
        return not self.distribution

    def __str__(self) -> str:
        return "built-in" if self.built_in else f"{self.distribution} {self.version}"


BUILT_IN_SOURCE = Source()


class Catalog(Mapping[str, PluginSpec]):
    """The built-ins and, loaded on first use, the plugins of the installed packages
    (`entry_points`: what to load instead of the group's installed entry points, for tests)."""

    def __init__(self, entry_points: Iterable[metadata.EntryPoint] | None = None) -> None:
        self._entry_points = entry_points
        self._specs: dict[str, PluginSpec] | None = None
        self._sources: dict[str, Source] = {}

    def _load(self) -> dict[str, PluginSpec]:
        if self._specs is None:
            specs = dict(BUILT_IN)
            sources = dict.fromkeys(BUILT_IN, BUILT_IN_SOURCE)
            found = self._entry_points
            if found is None:
                found = metadata.entry_points(group=ENTRY_POINT_GROUP)
            for entry_point in sorted(found, key=lambda ep: ep.name):
                spec, source = _load_entry_point(entry_point)
                if spec.name in specs:
                    raise InputError("", _clash(spec.name, source, sources[spec.name]))
                specs[spec.name] = spec
                sources[spec.name] = source
            keep_annotations(prefix for spec in specs.values() for prefix in spec.annotations)
            self._specs, self._sources = specs, sources
        return self._specs

    def __getitem__(self, name: str) -> PluginSpec:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def source(self, name: str) -> Source:
        """Where plugin `name` comes from (KeyError for a name no plugin has)."""
        self._load()
        return self._sources[name]


def _describe(entry_point: metadata.EntryPoint) -> tuple[Source, str]:
    dist = entry_point.dist
    source = Source(dist.name if dist is not None else "an unknown package",
                    dist.version if dist is not None else "",
                    f"{entry_point.name} = {entry_point.value}")
    where = (f"plugin package {str(source).strip()} (entry point {quote(source.entry_point)} "
             f"in {ENTRY_POINT_GROUP})")
    return source, where


def _load_entry_point(entry_point: metadata.EntryPoint) -> tuple[PluginSpec, Source]:
    """The spec an installed package's entry point names, checked: InputError (one line, no
    traceback) when it does not import or is not a usable PluginSpec."""
    source, where = _describe(entry_point)
    try:
        spec = entry_point.load()
    except Exception as err:  # whatever the package's import raises: said in one line
        raise InputError("", f"{where} failed to load: {type(err).__name__}: {err}") from None
    if not isinstance(spec, PluginSpec):
        raise InputError("", f"{where} names a {type(spec).__name__}, not a PluginSpec "
                             f"(desched.plugin_api.PluginSpec)")
    problem = _problem(entry_point.name, spec)
    if problem:
        raise InputError("", f"{where}: {problem}")
    return spec, source


def _problem(name: str, spec: PluginSpec) -> str:
    """What makes an installed spec unusable, or ""."""
    if spec.name != name:
        return (f"the entry point is named {quote(name)} and its PluginSpec "
                f"{quote(spec.name)}: name both the same")
    unknown = sorted(spec.extension_points - set(EXTENSION_POINTS))
    if unknown or not spec.extension_points:
        return (f"extension_points {sorted(spec.extension_points)}: each must be one of "
                f"{', '.join(EXTENSION_POINTS)}")
    try:
        msgspec.convert({}, spec.args_type)
    except Exception as err:  # not a type msgspec decodes, or one that needs a key
        return (f"args_type {getattr(spec.args_type, '__name__', spec.args_type)} does not "
                f"decode the empty args of a policy that gives none ({type(err).__name__}: "
                f"{err}): make it a msgspec.Struct whose fields all have defaults")
    if spec.evicts_through_migration_jobs and not (
            isinstance(spec.args_type, type)
            and issubclass(spec.args_type, MigrationControllerArgs)):
        return ("evicts_through_migration_jobs needs args of type MigrationControllerArgs "
                "(the migration controller's settings)")
    return ""


def _clash(name: str, source: Source, earlier: Source) -> str:
    if earlier.built_in:
        return (f"plugin package {source} declares plugin {quote(name)} (entry point "
                f"{quote(source.entry_point)} in {ENTRY_POINT_GROUP}), a built-in plugin's "
                f"name: rename the package's plugin, or uninstall it")
    return (f"plugin {quote(name)} is declared by two installed packages, {earlier} and "
            f"{source}: uninstall one")


# Every plugin desched runs: the built-ins and the installed packages' (loaded on first use).
PLUGINS = Catalog()

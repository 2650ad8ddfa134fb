"""What a plugin declares: its name, args type, defaulting, validation, extension points and
factory. The plugins themselves sit above the framework; the catalog lists them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from desched.framework.types import Handle


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
    # The utilization series its args bound ("cpu requests", "memory usage", "pods") and the
    # high threshold on each, in percent, for the reports' balance figures; none when they are
    # relative (deviation thresholds) or the plugin has none.
    high_thresholds: Callable[[Any], dict[str, float]] = lambda args: {}


# Plugin name -> spec: what a policy is decoded against and its profiles are built from
# (desched.plugins.catalog.PLUGINS is every plugin desched has).
Plugins = Mapping[str, PluginSpec]

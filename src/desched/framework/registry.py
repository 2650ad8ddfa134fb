"""The plugin registry: name -> args type, defaulting, validation, extension points, factory."""

from __future__ import annotations

from collections.abc import Callable
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


REGISTRY: dict[str, PluginSpec] = {}


def register(spec: PluginSpec) -> PluginSpec:
    REGISTRY[spec.name] = spec
    return spec


def registry() -> dict[str, PluginSpec]:
    """Every plugin, with the plugin modules imported (they register themselves)."""
    import desched.plugins  # noqa: F401  (import registers)

    return REGISTRY

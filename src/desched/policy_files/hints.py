"""How to fix a plugin name: the registered name it most likely misspells, or the extension point
a registered plugin belongs to. Appended to upstream's messages on the same line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from desched.decoding.go import aggregate
from desched.errors import quote, shown
from desched.framework.registry import PluginSpec
from desched.util.names import nearest


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean "X"?)` for the known name `name` most likely misspells, else ""."""
    near = nearest(name, known)
    return f' (did you mean "{near}"?)' if near else ""


def plugin_config_hint(name: str, profile: str, fails: list[str]) -> str:
    """How to add the pluginConfig entry an enabled plugin lacks, and whether its args may be
    left out: `fails`, the errors of its args left empty (upstream validates before
    defaulting)."""
    entry = f'add "- name: {name}"'
    where = f"to the pluginConfig of profile {quote(profile)}"
    if fails:
        return f"{entry} with its args {where} (without args: {aggregate(fails)})"
    return f"{entry} {where} (its args may be left out)"


def plugin_hint(name: str, plugins: Mapping[str, PluginSpec], points: tuple[str, ...]) -> str:
    """Where plugin `name` belongs among a format's extension points `points` (keys as the file
    spells them), or the registered name it misspells; "" when there is nothing to say."""
    spec = plugins.get(name)
    if spec is None:
        near = did_you_mean(name, plugins)
        return f"{shown(name)} is not a registered plugin{near}" if near else ""
    fits = [ep for ep in points if ep in spec.extension_points]
    if not fits:
        return ""
    article = "an" if fits[0][0] in "aeiou" else "a"
    return (f"{shown(name)} is {article} {' and '.join(fits)} plugin: enable it under "
            f"{' or '.join(f'plugins.{ep}' for ep in fits)}")

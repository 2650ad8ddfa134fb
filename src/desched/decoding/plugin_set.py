"""kube-scheduler's mergePluginSet, which koord-descheduler's profiles reuse for their plugin
sets and kube-scheduler's configuration for its extension points."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

T = TypeVar("T")


def merge_plugin_set(defaults: Sequence[T], enabled: Sequence[T], disabled: Collection[str],
                     name: Callable[[T], str]) -> list[T]:
    """The defaults less those `disabled` names (`"*"`: all of them), an enabled plugin with a
    default's name taking that default's place (the last of a repeated name), then the other
    enabled plugins in order. Repeated names are kept: the callers refuse them."""
    last = {name(p): k for k, p in enumerate(enabled)}
    replaced: set[int] = set()
    out: list[T] = []
    if "*" not in disabled:
        for plugin in defaults:
            if name(plugin) in disabled:
                continue
            k = last.get(name(plugin))
            if k is not None:
                plugin = enabled[k]
                replaced.add(k)
            out.append(plugin)
    out.extend(p for k, p in enumerate(enabled) if k not in replaced)
    return out

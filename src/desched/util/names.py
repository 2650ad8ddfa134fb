"""The known name a mistyped one most likely means: policy keys, pods, nodes."""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterable

# Beyond this many names only the neighbours of the typo are compared: difflib over 150,000 pod
# names takes seconds.
_WINDOW = 2_000


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` most likely misspells: the same name in another case, else the
    closest by difflib's ratio (0.6 or better), else None. Among many names, the candidates are
    those sorting next to it, forwards (a typo late in the name) or read backwards (a typo early
    in it)."""
    by_lower = {k.lower(): k for k in known}
    lowered = name.lower()
    if lowered in by_lower:
        return by_lower[lowered]
    candidates = list(by_lower)
    if len(candidates) > _WINDOW:
        candidates = _neighbours(lowered, candidates)
    close = difflib.get_close_matches(lowered, candidates, n=1)
    return by_lower[close[0]] if close else None


def _forwards(text: str) -> str:
    return text


def _backwards(text: str) -> str:
    return text[::-1]


def _neighbours(name: str, names: list[str]) -> list[str]:
    near: set[str] = set()
    for key in (_forwards, _backwards):
        ordered = sorted(names, key=key)
        at = bisect.bisect_left(ordered, key(name), key=key)
        near.update(ordered[max(0, at - _WINDOW // 4): at + _WINDOW // 4])
    return sorted(near)

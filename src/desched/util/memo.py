"""Memo tables for a process that runs for months.

`desched run` keeps meeting values it has never seen: usage quantities change every scrape, each
Job and each rollout brings new owner names and UIDs, autoscaled nodes new names. A memo table
keyed by such values grows for as long as the process lives, so every one is bounded: at its
limit it is emptied (a hit stays one dict lookup, and a value already handed out stays valid).
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

# Larger than what one snapshot of a 5,000-node / 150,000-pod cluster fills, so a cycle never
# empties a table it is still filling.
DEFAULT_LIMIT = 500_000


def remember(table: dict[K, V], key: K, value: V, limit: int | None = None) -> V:
    """Store `value` under `key` and return it; a table at `limit` entries (DEFAULT_LIMIT when
    not given) is emptied first."""
    if len(table) >= (limit or DEFAULT_LIMIT):
        table.clear()
    table[key] = value
    return value

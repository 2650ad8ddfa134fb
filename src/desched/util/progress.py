"""Progress on stderr for steps that can take seconds (loading a snapshot, listing a cluster).

Shown only when stderr is a terminal and the step has run for more than a second: a redirected
or quick run prints nothing, so logs and test output stay clean. One line, rewritten in place.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

DELAY = 1.0  # seconds before the first line
EVERY = 0.25  # seconds between updates


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if count < 1024:
            return f"{count:.0f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


class Progress:
    """Counts of a long step; `update` is cheap enough to call per batch of objects."""

    def __init__(self, label: str, stream: TextIO | None = None, *,
                 force: bool | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = force if force is not None else bool(isatty and isatty())
        self.started = time.monotonic()
        self._next = self.started + DELAY
        self._shown = False

    def update(self, objects: int, done: int = 0, total: int = 0) -> None:
        """`objects` read so far; `done` of `total` bytes when the size is known."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + EVERY
        text = f"{self.label}: {objects:,} objects"
        if total:
            text += f", {_size(done)} of {_size(total)} ({100 * done // total}%)"
        text += f", {now - self.started:.0f} s"
        self.stream.write(f"\r\x1b[K{text}")
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        """Clear the line, if one was shown."""
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

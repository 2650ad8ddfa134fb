"""Bounded exponential backoff with jitter: how the informers, the Eviction-API executor and
the migration controller space their retries."""

from __future__ import annotations

import random


class Backoff:
    """Bounded exponential backoff with jitter (so many informers do not retry in step)."""

    def __init__(self, initial: float = 0.5, maximum: float = 30.0, factor: float = 2.0,
                 jitter: float = 0.2) -> None:
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self._next = initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self._next * self.factor, self.maximum)
        return delay * (1 + random.uniform(-self.jitter, self.jitter))

    def reset(self) -> None:
        self._next = self.initial

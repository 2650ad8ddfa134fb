"""A clock that moves only when a test moves it, for code that takes `clock`, `wall_clock` and
`sleep` callables (LeaseElector): timings are then exact, however slow the machine is.

Sleepers wait on the fake clock; `advance` moves it, wakes the sleepers whose time has come and
returns once the tasks it woke are asleep again, so every step of a test sees the code at rest.
Requests the code makes in between still go over real HTTP; only waiting is simulated."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

T = TypeVar("T")

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self, start: datetime = START) -> None:
        self.now = 0.0  # seconds since `start`
        self._start = start
        self._sleepers: list[tuple[float, asyncio.Future[None], asyncio.Task[Any] | None]] = []
        self._running: set[asyncio.Task[Any]] = set()  # woken or spawned, not asleep yet

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return self._start + timedelta(seconds=self.now)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """A task that `advance` waits for until it sleeps or ends."""
        task = asyncio.create_task(coro)
        self._running.add(task)
        return task

    async def sleep(self, seconds: float) -> None:
        task = asyncio.current_task()
        waker: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self.now + max(seconds, 0.0), waker, task)
        self._sleepers.append(entry)
        if task is not None:
            self._running.discard(task)
        try:
            await waker
        finally:
            if entry in self._sleepers:  # cancelled while asleep
                self._sleepers.remove(entry)

    async def settle(self) -> None:
        """Wait (in real time, bounded by the test's timeout) until every task woken or spawned
        sleeps again or has ended, and the tasks they started have had their first turn."""
        while any(not t.done() for t in self._running):
            await asyncio.sleep(0.001)
        self._running.clear()
        for _ in range(3):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move the clock by `seconds`, waking sleepers in time order as it passes their wake-up
        times and letting the woken tasks run until they sleep again."""
        end = self.now + seconds
        while True:
            await self.settle()
            due = min((e[0] for e in self._sleepers), default=None)
            if due is None or due > end:
                break
            self.now = max(self.now, due)
            for entry in [e for e in self._sleepers if e[0] <= self.now]:
                self._sleepers.remove(entry)
                if entry[1].done():  # its task was cancelled and has not run its finally yet
                    continue
                entry[1].set_result(None)
                if entry[2] is not None:
                    self._running.add(entry[2])
        self.now = end

    async def run_until(self, done: Callable[[], bool], step: float = 0.01,
                        limit: float = 60.0) -> float:
        """Advance in steps until done(); the fake seconds that took."""
        started = self.now
        await self.settle()
        while not done():
            if self.now - started > limit:
                raise AssertionError(f"not done after {limit:g} fake seconds")
            await self.advance(step)
        return self.now - started

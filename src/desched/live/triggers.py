"""Cycles beside the schedule (issue 37 item 10; upstream #696, #1857): on node events
(`--trigger-on`) and on request (`POST /cycles/run`, live/on_demand.py).

- Node events come from the node informer's handlers (live/informer.py), compared with what was
  last seen of each node: a node added (once it is Ready: a kubelet registers its node NotReady,
  and a cycle before would not count it), a node Ready again, a node uncordoned, its taints or its
  labels changed. Heartbeats and other status changes are not events.
- Debounced: a burst of events is one cycle, `debounce` seconds after its last event, or
  `max(60 s, debounce)` after its first when events keep coming.
- Bounded: cycles started by events and by requests together, at most `per_minute` in any 60 s;
  a burst due beyond the bound waits, a request beyond it is refused with when to ask again.
- One at a time: the loop runs every cycle; a request while one runs or another request waits is
  refused, not queued. Any cycle that starts serves the events seen before it.

The loop (live/run.py) waits on `wait(timeout)`, which returns the cause of an unscheduled cycle
or None when the schedule's time has come, and tells `started` and `finished` around each cycle.
Times are the injected `clock` and `sleep`, so tests move a fake clock."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from desched.errors import InputError
from desched.live import logging as desched_logging

if TYPE_CHECKING:
    from desched.live.cycle_facts import CycleReport
    from desched.live.informer import Informer
    from desched.model.node import Node

log = desched_logging.get_logger("desched.run")

# --trigger-on's names, and how a cycle's cause says each.
EVENTS = {
    "node-added": "node added",
    "node-ready": "node Ready again",
    "node-uncordoned": "node uncordoned",
    "node-taints": "node taints changed",
    "node-labels": "node labels changed",
}
DEFAULT_DEBOUNCE = 10.0
DEFAULT_PER_MINUTE = 4
WINDOW = 60.0  # the bound is per minute
MAX_BURST = 60.0  # a burst that goes on is served this long after its first event
NAMES_SHOWN = 5  # node names a cause lists per event, then "and N more"


def parse_trigger_on(values: Iterable[str]) -> tuple[str, ...]:
    """--trigger-on's events (comma-separated, the flag repeatable), in EVENTS' order."""
    wanted: set[str] = set()
    for value in values:
        for name in (v.strip() for v in value.split(",")):
            if not name:
                continue
            if name == "all":
                wanted.update(EVENTS)
            elif name in EVENTS:
                wanted.add(name)
            else:
                raise InputError("--trigger-on", f"unknown event {name!r}: give one or more of "
                                                 f"{', '.join(EVENTS)} (or all)")
    return tuple(e for e in EVENTS if e in wanted)


def check_triggers(events: Sequence[str], debounce: float, per_minute: int, *,
                   looping: bool) -> None:
    """The trigger flags, before connecting (one line and exit 2 otherwise)."""
    if events and not looping:
        raise InputError("--trigger-on", "starts cycles beside a loop's schedule: give "
                                         "--interval or --cron too (e.g. --interval 24h)")
    if per_minute < 1:
        raise InputError("--trigger-max-per-minute", f"must be at least 1, got {per_minute}")
    if not 0 <= debounce <= 3600:
        raise InputError("--trigger-debounce", f"must be between 0s and 1h, got {debounce:g}s")


@dataclass(frozen=True)
class Request:
    """A cycle asked for by `user` (POST /cycles/run): `started` is set to (cycle number,
    start) and `finished` to its report; both raise Closed if no cycle will run for it."""

    user: str
    started: asyncio.Future[tuple[int, datetime]]
    finished: asyncio.Future[CycleReport]


@dataclass(frozen=True)
class Cause:
    """Why a cycle runs: "schedule", "events" or "request"; `text` goes to the log and
    /cycles."""

    kind: str
    text: str
    request: Request | None = field(default=None, compare=False)


SCHEDULED = Cause("schedule", "schedule")


class Closed(Exception):
    """No cycle will run for a request: the process is stopping or no longer leads."""


@dataclass(frozen=True)
class Refusal:
    """Why a request starts no cycle: `status` 409 (one runs or waits) or 429 (the bound;
    `retry_after` seconds)."""

    status: int
    message: str
    retry_after: float = 0.0


# -- node events -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Seen:
    """What a node event is judged on, as last seen."""

    ready: bool
    unschedulable: bool
    taints: tuple[Any, ...]
    labels: Mapping[str, str]
    joined: bool  # added while watched, and not Ready since: its "added" is still to come


def _seen(node: Node, joined: bool) -> _Seen:
    ready = node.ready
    return _Seen(ready, node.spec.unschedulable, node.spec.taints, node.metadata.labels,
                 joined and not ready)


class NodeEvents:
    """The wanted events among the node informer's, as (event, node name) pairs."""

    def __init__(self, wanted: Iterable[str], emit: Callable[[list[tuple[str, str]]], None]):
        self.wanted = frozenset(wanted)
        self.emit = emit
        self.nodes: dict[str, _Seen] = {}

    def watch(self, informers: Sequence[Informer]) -> bool:
        """Follow the node informer (synced: its store is the starting point); False if none."""
        for informer in informers:
            if informer.resource.kind == "Node":
                self.nodes = {n.name: _seen(n, False) for n in informer.store.values()}
                informer.handlers.append(functools.partial(self.on_event, informer=informer))
                return True
        return False

    def on_event(self, kind: str, node: Node | None, *, informer: Informer) -> None:
        if kind == "SYNC":  # listed again (after a 410): what changed meanwhile
            found = [e for n in informer.store.values() for e in self._changed(n)]
            for name in set(self.nodes) - set(informer.store):
                del self.nodes[name]
        elif node is None:
            return
        elif kind == "DELETED":
            self.nodes.pop(node.name, None)
            return
        else:
            found = self._changed(node)
        found = [e for e in found if e[0] in self.wanted]
        if found:
            self.emit(found)

    def _changed(self, node: Node) -> list[tuple[str, str]]:
        name = node.name
        old = self.nodes.get(name)
        new = _seen(node, old.joined if old is not None else True)
        self.nodes[name] = new
        if old is None:
            return [("node-added", name)] if new.ready else []
        found = []
        if new.ready and not old.ready:
            found.append(("node-added" if old.joined else "node-ready", name))
        if old.unschedulable and not new.unschedulable:
            found.append(("node-uncordoned", name))
        if new.taints != old.taints:
            found.append(("node-taints", name))
        if new.labels != old.labels:
            found.append(("node-labels", name))
        return found


def describe(events: Mapping[str, Sequence[str]]) -> str:
    """'node added: a, b; node uncordoned: c' (at most NAMES_SHOWN names per event)."""
    parts = []
    for event, names in events.items():
        shown = ", ".join(names[:NAMES_SHOWN])
        more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
        parts.append(f"{EVENTS[event]}: {shown}{more}")
    return "; ".join(parts)


# -- the bound ---------------------------------------------------------------------------------


class StartLimit:
    """At most `per_minute` starts in any 60 s."""

    def __init__(self, per_minute: int, clock: Callable[[], float]) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self.starts: deque[float] = deque()

    def wait_time(self) -> float:
        """Seconds until a start is allowed (0: now)."""
        now = self.clock()
        while self.starts and self.starts[0] <= now - WINDOW:
            self.starts.popleft()
        if len(self.starts) < self.per_minute:
            return 0.0
        return self.starts[0] + WINDOW - now

    def take(self) -> None:
        self.starts.append(self.clock())


# -- the triggers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Running:
    number: int
    cause: Cause
    started: datetime


class Triggers:
    """Node events and requests, turned into the causes of unscheduled cycles (see the
    module's docstring)."""

    def __init__(self, events: Iterable[str] = (), *, debounce: float = DEFAULT_DEBOUNCE,
                 per_minute: int = DEFAULT_PER_MINUTE,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.nodes = NodeEvents(events, self._add)
        self.debounce = debounce
        self.max_burst = max(MAX_BURST, debounce)
        self.limit = StartLimit(per_minute, clock)
        self.clock = clock
        self.sleep = sleep
        self.accepting = False  # requests are taken (set by the loop while it runs)
        self.running: Running | None = None
        self._pending: dict[str, list[str]] = {}  # event -> node names, in arrival order
        self._first = self._last = 0.0  # when the pending burst began, and its last event
        self._request: Request | None = None
        self._taken: Request | None = None  # handed to the loop, not started yet
        self._changed = asyncio.Event()
        self._held = False  # a due burst waits for the bound (logged once)

    # -- inputs ------------------------------------------------------------------------------
    def watch(self, informers: Sequence[Informer]) -> None:
        """Follow the node informer's events (when --trigger-on names any)."""
        if self.nodes.wanted and not self.nodes.watch(informers):
            log.warning("--trigger-on: nodes are not watched; no cycle on node events")

    def _add(self, found: list[tuple[str, str]]) -> None:
        now = self.clock()
        if not self._pending:
            self._first = now
        self._last = now
        for event, name in found:
            names = self._pending.setdefault(event, [])
            if name not in names:
                names.append(name)
            log.debug("trigger event", trigger=event, node=name)
        self._changed.set()

    def request(self, user: str) -> Request | Refusal:
        """Ask for a cycle now (the caller checked that the loop takes requests)."""
        running = self.running
        if running is not None:
            return Refusal(409, f"cycle {running.number} is running (cause: "
                                f"{running.cause.text}; started "
                                f"{running.started.isoformat(timespec='seconds')}): no second "
                                f"cycle is started; ask again when it has ended (/cycles.json)")
        waiting = self._request or self._taken
        if waiting is not None:
            return Refusal(409, f"a cycle requested by {waiting.user} is about to start: no "
                                f"second cycle is started; ask again when it has ended")
        wait = self.limit.wait_time()
        if wait > 0:
            return Refusal(429, f"at most {self.limit.per_minute} cycles a minute start on "
                                f"events or requests (--trigger-max-per-minute): ask again in "
                                f"{wait:.0f}s", retry_after=wait)
        self.limit.take()
        loop = asyncio.get_running_loop()
        self._request = Request(user, loop.create_future(), loop.create_future())
        self._changed.set()
        return self._request

    # -- the loop's side ---------------------------------------------------------------------
    async def wait(self, timeout: float) -> Cause | None:
        """Wait up to `timeout` seconds (the schedule's next time) for an unscheduled cycle:
        its cause, or None when the time is up."""
        end = self.clock() + timeout
        while True:
            now = self.clock()
            cause, check_at = self._due(now)
            if cause is not None:
                return cause
            if now >= end:
                return None
            self._changed.clear()
            await self._first_of(self._changed.wait(), self._until(min(end, check_at or end)))

    def _due(self, now: float) -> tuple[Cause | None, float | None]:
        """A cause due now, or when to look again (None: at an event or a request)."""
        request = self._request
        if request is not None:
            self._request, self._taken = None, request
            return Cause("request", f"request by {request.user}", request), None
        if not self._pending:
            return None, None
        due = min(self._last + self.debounce, self._first + self.max_burst)
        if now < due:
            return None, due
        wait = self.limit.wait_time()
        if wait > 0:
            if not self._held:
                self._held = True
                log.info("cycle on node events waits for the bound", seconds=round(wait, 1),
                         per_minute=self.limit.per_minute, events=describe(self._pending))
            return None, now + wait
        self.limit.take()
        return Cause("events", describe(self._pending)), None

    async def _until(self, at: float) -> None:
        # The time left is read when the sleep starts (a task's first step), not when asked.
        await self.sleep(max(0.0, at - self.clock()))

    @staticmethod
    async def _first_of(*waits: Awaitable[Any]) -> None:
        tasks = [asyncio.ensure_future(w) for w in waits]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()

    def started(self, number: int, cause: Cause, at: datetime) -> None:
        """A cycle starts: it serves the events seen so far (its snapshot holds them)."""
        self.running = Running(number, cause, at)
        self._pending = {}
        self._held = False
        request = cause.request
        if request is not None:
            if self._request is request:  # started without passing through wait()
                self._request = None
            self._taken = None
            if not request.started.done():
                request.started.set_result((number, at))

    def finished(self, report: CycleReport) -> None:
        running, self.running = self.running, None
        request = running.cause.request if running is not None else None
        if request is not None and not request.finished.done():
            request.finished.set_result(report)

    def close(self, why: str) -> None:
        """No more cycles: requests waiting for one are told why."""
        self.accepting = False
        for request in (self._request, self._taken,
                        self.running.cause.request if self.running else None):
            if request is None:
                continue
            for future in (request.started, request.finished):
                if not future.done():
                    future.set_exception(Closed(why))
                    future.exception()  # retrieved here: a caller that left never reads it
        self._request = self._taken = None

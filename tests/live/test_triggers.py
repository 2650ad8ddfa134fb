"""Cycles beside the schedule (live/triggers.py): which node changes are events, the debounce
and the bound on a fake clock, requests one at a time, and the flags' checks."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import Emulator, FakeApiServer
from fake_apiserver import node as fake_node
from fake_clock import FakeClock
from test_run import background, cluster, config, runner_for, until

from builders import node
from desched.errors import InputError
from desched.live.cycle_facts import CycleReport
from desched.live.triggers import (
    SCHEDULED,
    Cause,
    Closed,
    NodeEvents,
    Refusal,
    Request,
    Triggers,
    check_triggers,
    describe,
    parse_trigger_on,
)
from desched.model.node import Node

ALL = ("node-added", "node-ready", "node-uncordoned", "node-taints", "node-labels")
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def unfreeze() -> Iterator[None]:
    """A run freezes the heap after its caches sync (gc.freeze); give it back."""
    yield
    gc.unfreeze()


@dataclass
class Resource:
    kind: str = "Node"
    label: str = "nodes"


@dataclass
class FakeInformer:
    """What NodeEvents reads of an informer: its resource, store and handlers."""

    resource: Resource = field(default_factory=Resource)
    store: dict[str, Any] = field(default_factory=dict)
    handlers: list[Any] = field(default_factory=list)

    def send(self, kind: str, obj: Node | None) -> None:
        if obj is not None:
            if kind == "DELETED":
                self.store.pop(obj.name, None)
            else:
                self.store[obj.name] = obj
        for handler in self.handlers:
            handler(kind, obj)


def watched(*nodes: Node, events: tuple[str, ...] = ALL,
            ) -> tuple[FakeInformer, list[tuple[str, str]]]:
    informer = FakeInformer(store={n.name: n for n in nodes})
    found: list[tuple[str, str]] = []
    assert NodeEvents(events, found.extend).watch([informer])  # type: ignore[list-item]
    return informer, found


# -- the flags -----------------------------------------------------------------------------------

def test_trigger_on_names_events() -> None:
    assert parse_trigger_on(["node-labels,node-added", " node-ready "]) == (
        "node-added", "node-ready", "node-labels")
    assert parse_trigger_on(["all"]) == ALL
    assert parse_trigger_on([]) == ()
    with pytest.raises(InputError, match="unknown event 'pod-added': give one or more of "
                                         "node-added, node-ready"):
        parse_trigger_on(["node-added,pod-added"])


def test_trigger_flags_are_checked_before_connecting() -> None:
    check_triggers(("node-added",), 10.0, 4, looping=True)
    check_triggers((), 10.0, 4, looping=False)  # nothing asked of a single run
    with pytest.raises(InputError, match="--trigger-on: starts cycles beside a loop's schedule"):
        check_triggers(("node-added",), 10.0, 4, looping=False)
    with pytest.raises(InputError, match="--trigger-max-per-minute: must be at least 1"):
        check_triggers((), 10.0, 0, looping=True)
    with pytest.raises(InputError, match="--trigger-debounce: must be between 0s and 1h"):
        check_triggers((), 7200.0, 4, looping=True)


# -- node events ---------------------------------------------------------------------------------

def test_which_node_changes_are_events() -> None:
    informer, found = watched(node("a"), node("b", unschedulable=True))
    informer.send("MODIFIED", node("a"))  # a heartbeat: nothing the events look at changed
    informer.send("ADDED", node("c", ready=False))  # registered NotReady: not yet
    assert found == []
    informer.send("MODIFIED", node("c"))  # Ready: the node has joined
    informer.send("MODIFIED", node("c", ready=False))
    informer.send("MODIFIED", node("c"))  # Ready again
    informer.send("MODIFIED", node("b"))  # uncordoned
    informer.send("MODIFIED", node("b", unschedulable=True))  # cordoned: not an event
    informer.send("MODIFIED", node("a", taints=[TAINT]))
    informer.send("MODIFIED", node("a", taints=[TAINT], labels={"zone": "x"}))
    informer.send("ADDED", node("d"))  # added Ready
    assert found == [("node-added", "c"), ("node-ready", "c"), ("node-uncordoned", "b"),
                     ("node-taints", "a"), ("node-labels", "a"), ("node-added", "d")]


def test_a_node_known_at_the_start_is_ready_again_not_added() -> None:
    informer, found = watched(node("a", ready=False))
    informer.send("MODIFIED", node("a"))
    assert found == [("node-ready", "a")]


def test_only_the_wanted_events() -> None:
    informer, found = watched(node("a"), events=("node-added",))
    informer.send("MODIFIED", node("a", labels={"zone": "x"}))
    informer.send("MODIFIED", node("a", ready=False))
    informer.send("MODIFIED", node("a", labels={"zone": "x"}))
    informer.send("ADDED", node("b"))
    assert found == [("node-added", "b")]


def test_a_relist_tells_what_changed_meanwhile() -> None:
    """After a 410 the informer lists again and says SYNC: the store is compared with what was
    seen; a deleted node is forgotten, so its return is an addition."""
    informer, found = watched(node("a"), node("b"), node("c", unschedulable=True))
    informer.store = {"a": node("a"), "c": node("c"), "d": node("d")}
    informer.send("SYNC", None)
    assert sorted(found) == [("node-added", "d"), ("node-uncordoned", "c")]
    found.clear()
    informer.send("DELETED", node("a"))
    informer.send("ADDED", node("a"))
    assert found == [("node-added", "a")]


def test_describe_names_a_few_nodes_per_event() -> None:
    names = [f"n{i}" for i in range(8)]
    assert describe({"node-added": names, "node-uncordoned": ["x"]}) == (
        "node added: n0, n1, n2, n3, n4 and 3 more; node uncordoned: x")


# -- debounce and bound, on a fake clock ---------------------------------------------------------

def triggers(clock: FakeClock, **options: Any) -> tuple[Triggers, FakeInformer]:
    t = Triggers(ALL, clock=clock.monotonic, sleep=clock.sleep, **options)
    informer = FakeInformer(store={"a": node("a")})
    t.watch([informer])  # type: ignore[list-item]
    return t, informer


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


class Waiter:
    """Triggers.wait as a task, and when (fake seconds) it returned what."""

    def __init__(self, t: Triggers, clock: FakeClock, timeout: float = 3600.0) -> None:
        self.clock = clock
        self.task = asyncio.ensure_future(t.wait(timeout))
        self.task.add_done_callback(lambda _: setattr(self, "at", clock.now))
        self.at: float | None = None

    async def after(self, seconds: float) -> Cause | str | None:
        await self.clock.advance(seconds)
        await settle()
        return self.task.result() if self.task.done() else "waiting"


@pytest.mark.asyncio
async def test_a_burst_is_one_cycle_after_its_last_event() -> None:
    clock = FakeClock()
    t, informer = triggers(clock, debounce=10.0)
    waiter = Waiter(t, clock)
    await settle()
    for name in ("b", "c", "d"):  # a burst: three nodes join, 3 s apart
        informer.send("ADDED", node(name))
        assert await waiter.after(3) == "waiting"
    assert await waiter.after(6.5) == "waiting"  # 9.5 s after the last event
    cause = await waiter.after(1)
    assert cause == Cause("events", "node added: b, c, d")
    assert waiter.at == pytest.approx(16.0)  # the last event at 6 s, plus 10 s


@pytest.mark.asyncio
async def test_events_that_keep_coming_are_served_a_minute_after_the_first() -> None:
    clock = FakeClock()
    t, informer = triggers(clock, debounce=10.0)
    waiter = Waiter(t, clock)
    await settle()
    labels = 0
    while not waiter.task.done():
        labels += 1
        informer.send("MODIFIED", node("a", labels={"rev": str(labels)}))
        await waiter.after(5)
    assert waiter.at == pytest.approx(60.0)
    assert waiter.task.result() == Cause("events", "node labels changed: a")


@pytest.mark.asyncio
async def test_the_schedule_time_comes_first_when_nothing_happens() -> None:
    clock = FakeClock()
    t, _ = triggers(clock)
    waiter = Waiter(t, clock, timeout=30.0)
    assert await waiter.after(29) == "waiting"
    assert await waiter.after(1) is None
    assert waiter.at == pytest.approx(30.0)


@pytest.mark.asyncio
async def test_the_bound_holds_bursts_back_per_minute() -> None:
    """At most 2 a minute: the third burst, due at 40 s, waits until the first start (at 10 s)
    is a minute old."""
    clock = FakeClock()
    t, informer = triggers(clock, debounce=10.0, per_minute=2)
    starts: list[float] = []
    for name in ("b", "c", "d"):
        waiter = Waiter(t, clock)
        await settle()
        informer.send("ADDED", node(name))
        while not waiter.task.done():
            await waiter.after(1)
        cause = waiter.task.result()
        assert isinstance(cause, Cause) and cause.text == f"node added: {name}"
        t.started(len(starts) + 1, cause, AT)
        t.finished(CycleReport(len(starts) + 1, "completed", 0, 0, None))  # type: ignore[arg-type]
        starts.append(clock.now)
    assert starts == [pytest.approx(10.0), pytest.approx(20.0), pytest.approx(70.0)]


@pytest.mark.asyncio
async def test_a_cycle_serves_the_events_seen_before_it() -> None:
    clock = FakeClock()
    t, informer = triggers(clock)
    informer.send("ADDED", node("b"))
    t.started(1, SCHEDULED, AT)  # the scheduled cycle's snapshot holds node b
    t.finished(CycleReport(1, "completed", 0, 0, None))  # type: ignore[arg-type]
    waiter = Waiter(t, clock, timeout=120.0)
    assert await waiter.after(120) is None


# -- requests ------------------------------------------------------------------------------------

def report(number: int) -> CycleReport:
    return CycleReport(number, "completed", 2, 0, None)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_request_runs_at_once_and_one_at_a_time() -> None:
    clock = FakeClock()
    t, _ = triggers(clock, per_minute=2)
    waiter = Waiter(t, clock)
    asked = t.request("alice")
    assert isinstance(asked, Request)
    cause = await waiter.after(0)
    assert isinstance(cause, Cause) and cause.kind == "request"
    assert cause.text == "request by alice" and cause.request is asked
    second = t.request("bob")  # handed to the loop, not started yet
    assert isinstance(second, Refusal) and second.status == 409
    assert "a cycle requested by alice is about to start" in second.message
    t.started(7, cause, AT)
    assert asked.started.result() == (7, AT)
    busy = t.request("bob")
    assert isinstance(busy, Refusal) and busy.status == 409
    assert busy.message.startswith("cycle 7 is running (cause: request by alice; started "
                                   "2026-03-01T12:00:00+00:00): no second cycle is started")
    t.finished(report(7))
    assert asked.finished.result().number == 7
    again = t.request("bob")  # the second of two a minute
    assert isinstance(again, Request)
    await clock.advance(20)
    limited = t.request("carol")  # bob's is pending: 409 before the bound is asked
    assert isinstance(limited, Refusal) and limited.status == 409
    t.started(8, Cause("request", "request by bob", again), AT)
    t.finished(report(8))
    limited = t.request("carol")
    assert isinstance(limited, Refusal) and limited.status == 429
    assert limited.retry_after == pytest.approx(40.0)
    assert "at most 2 cycles a minute" in limited.message and "in 40s" in limited.message
    waiter.task.cancel()


@pytest.mark.asyncio
async def test_requests_waiting_when_the_loop_stops_are_told() -> None:
    clock = FakeClock()
    t, _ = triggers(clock)
    asked = t.request("alice")
    assert isinstance(asked, Request)
    t.close("desched is stopping")
    with pytest.raises(Closed, match="desched is stopping"):
        asked.started.result()
    assert not t.accepting


# -- in a run, against kmock -----------------------------------------------------------------------

@pytest.mark.asyncio
async def test_a_run_starts_a_cycle_when_nodes_join(tmp_path: Path, emulator: Emulator,
                                                    api: FakeApiServer) -> None:
    """Two nodes added together are one cycle, its cause logged and kept; a label change
    (not asked for) starts none; the hourly schedule would not have run it."""
    cluster(api)
    runner = runner_for(config(tmp_path, emulator, interval="1h", dry_run=True,
                               trigger_on=("node-added",), trigger_debounce=0.3))
    async with background(runner):
        await until(lambda: len(runner.reports) == 1)
        await api.add("Node", fake_node("n3"), fake_node("n4"))
        await until(lambda: len(runner.reports) == 2)
        facts = runner.reports[1].facts
        assert facts is not None and facts.cause == "node added: n3, n4"
        assert facts.nodes == 4  # the cycle's snapshot holds them
        relabelled = fake_node("n3")
        relabelled["metadata"]["labels"]["zone"] = "b"
        await api.modify("Node", relabelled)
        await asyncio.sleep(1.0)  # three debounces: a cycle would have started
        assert len(runner.reports) == 2

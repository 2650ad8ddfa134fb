"""Evictions in background (upstream's EvictionsInBackground gate): what is in progress, how long
an answered request counts before the annotation confirms it (a fake clock), how the limits
count the pods in progress, and that a pod in progress is not requested again."""

from __future__ import annotations

from typing import Any

import pytest

from builders import NOW, node, pod, snapshot
from desched.executors.simulation import SimulationExecutor
from desched.framework.background import (
    EVICTION_IN_PROGRESS,
    REQUEST_EVICT_ONLY,
    Ended,
    InBackground,
)
from desched.framework.decisions import DecisionLog
from desched.framework.evictor import (
    ALREADY_IN_BACKGROUND,
    EvictionLimitError,
    Evictor,
    ExecutionResult,
    Limits,
)
from desched.framework.policy import Policy
from desched.framework.runner import BACKGROUND_NOTE, Descheduler
from desched.framework.types import Clock as FrameworkClock
from desched.model.pod import Pod

REQUEST = {REQUEST_EVICT_ONLY: ""}
MIGRATING = {REQUEST_EVICT_ONLY: "", EVICTION_IN_PROGRESS: ""}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def vm(name: str, node: str = "n1", namespace: str = "vms", annotations: dict[str, str] | None
       = None, phase: str = "Running", uid: str | None = None) -> Pod:
    return pod(name, node, namespace=namespace, annotations=REQUEST if annotations is None
               else annotations, phase=phase, meta={"uid": uid} if uid else None)


def pods_of(*pods: Pod) -> dict[str, Pod]:
    return {p.key: p for p in pods}


def tracker() -> tuple[InBackground, Clock, list[Ended]]:
    clock, ended = Clock(), []
    return InBackground(clock=clock, on_end=ended.append), clock, ended


# -- what is in progress ------------------------------------------------------------------------

OBSERVED: list[tuple[str, dict[str, str], str, bool]] = [
    ("both annotations", MIGRATING, "Running", True),
    ("both annotations, pending", MIGRATING, "Pending", True),
    ("in progress without request-evict-only", {EVICTION_IN_PROGRESS: ""}, "Running", False),
    ("request-evict-only alone", REQUEST, "Running", False),
    ("both, but Succeeded", MIGRATING, "Succeeded", False),
    ("both, but Failed", MIGRATING, "Failed", False),
    ("neither", {}, "Running", False),
]


@pytest.mark.parametrize(("annotations", "phase", "counted"), [c[1:] for c in OBSERVED],
                         ids=[c[0] for c in OBSERVED])
def test_observed_in_progress(annotations: dict[str, str], phase: str, counted: bool) -> None:
    bg, _, _ = tracker()
    p = vm("a", annotations=annotations, phase=phase)
    bg.observe(pods_of(p))
    assert bg.has(p) is counted
    assert (bg.total, bg.by_node, bg.by_namespace) == (
        (1, {"n1": 1}, {"vms": 1}) if counted else (0, {}, {}))


def test_counts_per_node_and_namespace() -> None:
    bg, _, _ = tracker()
    bg.observe(pods_of(vm("a", "n1", "x", MIGRATING), vm("b", "n1", "y", MIGRATING),
                       vm("c", "n2", "x", MIGRATING), vm("d", "n2", "x", REQUEST),
                       pod("e", "n2", namespace="x")))
    assert (bg.total, bg.by_node, bg.by_namespace) == (3, {"n1": 2, "n2": 1},
                                                        {"x": 2, "y": 1})
    bg.observe(pods_of(vm("a", "n1", "x", MIGRATING)))  # the others left
    assert (bg.total, bg.by_node, bg.by_namespace) == (1, {"n1": 1}, {"x": 1})


# -- what desched requested: from the answer until the pod leaves --------------------------------

def test_assumed_counts_from_the_answer_and_is_confirmed_by_the_annotation() -> None:
    bg, clock, ended = tracker()
    a = vm("a")
    bg.observe(pods_of(a))
    assert bg.total == 0
    bg.assume(a, "p", "PodLifeTime")
    assert (bg.total, bg.has(a)) == (1, True)
    bg.assume(a, "p", "Other")  # the first request wins; counted once
    assert (bg.total, bg.requested[a.metadata.uid].plugin) == (1, "PodLifeTime")
    clock.now += 599
    bg.observe(pods_of(a))  # not annotated yet, within the timeout: still counted
    assert bg.has(a)
    clock.now += 2
    migrating = vm("a", annotations=MIGRATING)
    bg.observe(pods_of(migrating))  # confirmed: no timeout applies any more
    assert bg.has(migrating) and bg.requested[a.metadata.uid].confirmed
    clock.now += 3600
    bg.observe(pods_of(migrating))
    assert bg.has(migrating) and ended == []


def test_assumed_expires_unconfirmed_after_the_timeout() -> None:
    bg, clock, ended = tracker()
    a = vm("a")
    bg.assume(a, "p", "PodLifeTime")
    clock.now += 600
    bg.observe(pods_of(a))
    assert bg.has(a)  # 600 s is not more than the timeout
    clock.now += 1
    bg.observe(pods_of(a))
    assert (bg.has(a), bg.total, bg.requested) == (False, 0, {})
    assert [(e.how, e.request.name, e.request.plugin) for e in ended] == [
        ("error", "a", "PodLifeTime")]
    assert "not confirmed" in ended[0].why


ENDINGS: list[tuple[str, list[Pod], str]] = [
    ("deleted", [], "success"),
    ("replaced by a new pod of the name", [vm("a", uid="uid-new", annotations=MIGRATING)],
     "success"),
    ("Succeeded", [vm("a", annotations=MIGRATING, phase="Succeeded")], "success"),
    ("Failed", [vm("a", annotations=MIGRATING, phase="Failed")], "error"),
    ("in-progress annotation removed", [vm("a", annotations=REQUEST)], "cancelled"),
    ("request-evict-only removed", [vm("a", annotations={})], "cancelled"),
]


@pytest.mark.parametrize(("after", "how"), [c[1:] for c in ENDINGS], ids=[c[0] for c in ENDINGS])
def test_how_a_request_ends(after: list[Pod], how: str) -> None:
    bg, _, ended = tracker()
    a = vm("a")
    bg.assume(a, "p", "PodLifeTime")
    bg.observe(pods_of(vm("a", annotations=MIGRATING)))
    bg.observe(pods_of(*after))
    assert [e.how for e in ended] == [how]
    assert bg.requested == {} and not bg.has(a)
    # A new pod of the name, migrating, is in progress of its own (not desched's request).
    assert bg.total == (1 if after and after[0].metadata.uid == "uid-new" else 0)


def test_annotation_absent_before_confirmation_keeps_the_request() -> None:
    """Upstream drops a request on the annotation's removal only: never having had it is the
    time between the answer and the controller's first write."""
    bg, _, ended = tracker()
    a = vm("a")
    bg.assume(a, "p", "X")
    bg.observe(pods_of(a))
    assert bg.has(a) and ended == []


# -- the Evictor --------------------------------------------------------------------------------

class Answering:
    """An executor answering each pod as told (default: evicted)."""

    def __init__(self, answers: dict[str, ExecutionResult] | None = None) -> None:
        self.answers = answers or {}
        self.asked: list[str] = []

    def evict(self, p: Pod, profile: str, plugin: str, reason: str) -> ExecutionResult:
        self.asked.append(p.name)
        return self.answers.get(p.name, ExecutionResult(True))


BACKGROUND = ExecutionResult(False, "background", "429 Eviction triggered evacuation")


def evictor(limits: Limits, executor: Answering, bg: InBackground | None) -> Evictor:
    return Evictor(limits, executor, DecisionLog(), background=bg)


def attempt(ev: Evictor, p: Pod) -> str:
    try:
        return "yes" if ev.evict(p, "default", "Test", "r") else "no"
    except EvictionLimitError as err:
        return err.scope


LIMITS: list[tuple[str, Limits, list[Pod], list[str]]] = [
    ("total counts the pods in progress", Limits(total=2),
     [pod("x", "n2"), pod("y", "n2")], ["yes", "total"]),
    ("per node counts those on the node", Limits(per_node=1),
     [pod("x", "n1", namespace="vms"), pod("y", "n2", namespace="vms")], ["node", "yes"]),
    ("per namespace counts those of the namespace", Limits(per_namespace=1),
     [pod("x", "n2", namespace="vms"), pod("y", "n2", namespace="web")], ["namespace", "yes"]),
    ("no limits: nothing refused", Limits(), [pod("x", "n1"), pod("y", "n1")], ["yes", "yes"]),
]


@pytest.mark.parametrize(("limits", "pods", "expected"), [c[1:] for c in LIMITS],
                         ids=[c[0] for c in LIMITS])
def test_limits_count_the_pods_in_progress(limits: Limits, pods: list[Pod],
                                           expected: list[str]) -> None:
    bg, _, _ = tracker()
    bg.observe(pods_of(vm("m", "n1", "vms", MIGRATING)))
    ev = evictor(limits, Answering(), bg)
    assert [attempt(ev, p) for p in pods] == expected
    # Not the evictor's own counters: the pods in progress are counted once, by the tracker.
    assert ev.total == expected.count("yes")


def test_gate_off_counts_nothing_in_progress() -> None:
    ev = evictor(Limits(total=1), Answering(), None)
    assert attempt(ev, vm("m", annotations=MIGRATING)) == "yes"


def test_a_pod_in_progress_is_not_requested_again() -> None:
    bg, _, _ = tracker()
    m = vm("m", annotations=MIGRATING)
    bg.observe(pods_of(m))
    executor = Answering()
    ev = evictor(Limits(total=1), executor, bg)  # the limit is used up by m itself
    assert attempt(ev, m) == "yes"  # the plugin is told it succeeded, as upstream tells it
    assert executor.asked == [] and ev.total == 0
    assert [(d.outcome, d.pod, d.reason) for d in ev.log.decisions] == [
        ("skipped", "m", ALREADY_IN_BACKGROUND)]


def test_an_answer_in_background_is_counted_once_until_the_pod_leaves() -> None:
    bg, _, _ = tracker()
    a, b = vm("a"), vm("b")
    executor = Answering({"a": BACKGROUND})
    ev = evictor(Limits(total=2), executor, bg)
    assert attempt(ev, a) == "yes"
    assert (ev.total, bg.total, bg.has(a)) == (0, 1, True)
    assert [(d.outcome, d.pod) for d in ev.log.decisions] == [("background", "a")]
    assert attempt(ev, a) == "yes"  # another plugin picks it: not requested twice
    assert executor.asked == ["a"]
    assert attempt(ev, b) == "yes"
    assert attempt(ev, vm("c")) == "total"  # a in background and b evicted: two
    # The next cycle: the evictor's counters reset, a (still there, now annotated) counts on.
    ev.new_cycle()
    bg.observe(pods_of(vm("a", annotations=MIGRATING)))
    assert attempt(ev, vm("c")) == "yes"
    assert attempt(ev, vm("d")) == "total"
    bg.observe({})  # a left
    ev.new_cycle()
    assert [attempt(ev, vm(n)) for n in "def"] == ["yes", "yes", "total"]


def test_an_answer_in_background_with_the_gate_off_is_an_error() -> None:
    executor = Answering({"a": BACKGROUND})
    ev = evictor(Limits(), executor, None)
    assert attempt(ev, vm("a")) == "no"
    assert [(d.outcome, d.reason) for d in ev.log.decisions] == [
        ("failed", BACKGROUND.message)]


def test_an_answer_in_background_for_an_ended_pod_is_let_be() -> None:
    bg, _, _ = tracker()
    done = vm("a", phase="Succeeded")
    ev = evictor(Limits(), Answering({"a": BACKGROUND}), bg)
    assert attempt(ev, done) == "yes"
    assert bg.total == 0 and ev.total == 0
    assert [d.outcome for d in ev.log.decisions] == ["skipped"]


def test_a_cycle_observes_the_snapshot_and_notes_what_is_in_progress() -> None:
    """Descheduler.run_cycle observes before its plugins run (simulate and desched run)."""
    snap = snapshot(node("n1"), node("n2"), vm("m", annotations=MIGRATING), pod("p"))
    bg = InBackground()
    d = Descheduler(Policy("p.yaml", "v1alpha2", []), snap, SimulationExecutor(snap),
                    FrameworkClock(NOW), background=bg)
    assert d.run_cycle(1) is None
    assert bg.total == 1
    notes: list[Any] = [(n.plugin, n.text) for n in d.log.notes]
    assert notes == [(BACKGROUND_NOTE, "1 pod(s) with an eviction in background in progress "
                                       "count against the eviction limits and are not "
                                       "evicted again: vms/m")]

"""The property pacing promises (moves.maxUnavailablePerWorkload = N): across cycles, a paced
workload never has more than N pods unavailable because of desched — a cycle that finds u pods
unavailable evicts at most N - u of them, and leaves at most max(N, u) unavailable — however
long its replacements take to become Ready and whichever pods were unready to begin with."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from builders import NOW
from moves_builders import Run, cluster, policy, replica, statefulset

CYCLES = 6


@dataclass
class Member:
    name: str
    node: str
    ready_from: int  # the first cycle it is Ready in


@st.composite
def worlds(draw: st.DrawFn) -> tuple[int, int, list[Member], list[int]]:
    replicas = draw(st.integers(1, 6))
    limit = draw(st.integers(1, 3))
    members = []
    for i in range(replicas):
        node = draw(st.sampled_from(["n1", "n1", "n2"]))  # n1 is tainted: its pods must move
        members.append(Member(f"db-{i}", node, draw(st.sampled_from([1, 1, 1, 2, 4]))))
    # How many cycles each replacement takes to become Ready (0: by the next cycle).
    delays = draw(st.lists(st.integers(0, 2), min_size=replicas, max_size=replicas))
    return replicas, limit, members, delays


@settings(max_examples=60, deadline=None)
@given(worlds())
def test_a_paced_workload_never_has_more_than_n_unavailable(
        world: tuple[int, int, list[Member], list[int]]) -> None:
    replicas, limit, members, delays = world
    run = Run(policy({"maxUnavailablePerWorkload": limit}))
    sts = statefulset("db", replicas)
    replaced = 0
    for cycle in range(1, CYCLES + 1):
        pods = [replica(m.name, m.node, owner="db", kind="StatefulSet",
                        ready=m.ready_from <= cycle) for m in members]
        before = replicas - sum(1 for m in members if m.ready_from <= cycle)
        run.cycle(cluster(sts, *pods), cycle, NOW + timedelta(seconds=10 * cycle))
        evicted = {d.pod for d in run.log.decisions
                   if d.cycle == cycle and d.outcome == "evicted"}
        assert len(evicted) <= max(0, limit - before), (cycle, before, evicted)
        for m in [m for m in members if m.name in evicted]:
            members.remove(m)
            members.append(Member(f"{m.name}-r{cycle}", "n2",
                                  cycle + 1 + delays[replaced % len(delays)]))
            replaced += 1
        after = replicas - sum(1 for m in members if m.ready_from <= cycle)
        assert after <= max(limit, before), (cycle, before, after)
        # Nothing is lost: what was not moved was deferred (or not planned at all).
        assert all(d.outcome in ("evicted", "deferred") for d in run.log.decisions
                   if d.cycle == cycle)

"""The floor (tune/floor.py): on small clusters it equals the optimum found by trying every
placement of every pod; an unreachable goal names what stops it; a solver stopped by its time
limit reports the bound it proved; the snapshot is left as it was."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import NOW, decode, node, pod, snapshot
from desched.framework.policy import Policy
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import policy_from_document
from desched.snapshot.cluster import ClusterSnapshot
from desched.tune import floor as floor_module
from desched.tune.floor import floor
from desched.tune.goals import Goal, figure_of, parse_goal, parse_goals

TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}


def policy() -> Policy:
    doc: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "profiles": [{"name": "p", "pluginConfig": [{"name": "RemovePodsViolatingNodeTaints"}],
                      "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}}}]}
    return policy_from_document("policy.yaml", doc, PLUGINS)


def budget(app: str, min_available: int) -> Any:
    return decode("PodDisruptionBudget", {
        "metadata": {"name": f"pdb-{app}", "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}})


@dataclass(frozen=True)
class PodSpec:
    node: int
    cpu: int  # millicores
    app: str
    tolerates: bool
    zone: str | None  # nodeSelector zone
    anti: bool  # required anti-affinity to its own app, per hostname
    protected: bool  # a DaemonSet pod


@dataclass(frozen=True)
class NodeSpec:
    cpu: int  # millicores
    zone: str
    tainted: bool


@dataclass(frozen=True)
class Case:
    nodes: tuple[NodeSpec, ...]
    pods: tuple[PodSpec, ...]
    min_available: int | None  # a budget over app "a"
    goals: tuple[str, ...]
    cycles: int


def build(case: Case) -> ClusterSnapshot:
    objects: list[Any] = []
    for i, n in enumerate(case.nodes):
        objects.append(node(f"n{i}", cpu=f"{n.cpu}m",
                            labels={"kubernetes.io/hostname": f"n{i}", "zone": n.zone},
                            taints=[TAINT] if n.tainted else None))
    for j, p in enumerate(case.pods):
        spec: dict[str, Any] = {}
        if p.tolerates:
            spec["tolerations"] = [TOLERATION]
        if p.zone is not None:
            spec["nodeSelector"] = {"zone": p.zone}
        if p.anti:
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuring"
                                                    "Execution": [{
                "labelSelector": {"matchLabels": {"app": p.app}},
                "topologyKey": "kubernetes.io/hostname"}]}}
        objects.append(pod(f"p{j}", node_name=f"n{p.node}", cpu=f"{p.cpu}m", memory="64Mi",
                           labels={"app": p.app}, spec=spec,
                           owner=("DaemonSet", "ds") if p.protected else ("ReplicaSet", p.app)))
    if case.min_available is not None:
        objects.append(budget("a", case.min_available))
    return snapshot(*objects)


def brute_force(case: Case) -> int | None:
    """The fewest moves over every placement of every pod, None when none meets the goals."""
    goals = [parse_goal(g) for g in case.goals]
    allowed = None
    if case.min_available is not None:
        members = sum(1 for p in case.pods if p.app == "a")
        allowed = max(0, members - case.min_available) * case.cycles
    best: int | None = None
    for placement in itertools.product(range(len(case.nodes)), repeat=len(case.pods)):
        moved = [j for j, d in enumerate(placement) if d != case.pods[j].node]
        if best is not None and len(moved) >= best:
            continue
        if _allowed(case, placement, moved, allowed) and _meets(case, placement, goals):
            best = len(moved)
    return best


def _allowed(case: Case, placement: tuple[int, ...], moved: list[int],
             allowed: int | None) -> bool:
    if any(case.pods[j].protected for j in moved):
        return False
    if allowed is not None and sum(1 for j in moved if case.pods[j].app == "a") > allowed:
        return False
    for j in moved:
        p, dest = case.pods[j], case.nodes[placement[j]]
        if dest.tainted and not p.tolerates:
            return False
        if p.zone is not None and dest.zone != p.zone:
            return False
        for k, q in enumerate(case.pods):
            if k == j or placement[k] != placement[j]:
                continue
            if (p.anti and q.app == p.app) or (q.anti and p.app == q.app):
                return False
    used = [0] * len(case.nodes)
    for j, d in enumerate(placement):
        used[d] += case.pods[j].cpu
    receiving = {placement[j] for j in moved}
    return all(used[d] <= case.nodes[d].cpu for d in receiving)


def _meets(case: Case, placement: tuple[int, ...], goals: list[Goal]) -> bool:
    used = [0] * len(case.nodes)
    count = [0] * len(case.nodes)
    for j, d in enumerate(placement):
        used[d] += case.pods[j].cpu
        count[d] += 1
    series = {"cpu requests": [u * 100.0 / n.cpu for u, n in zip(used, case.nodes, strict=True)],
              "pods": [c * 100.0 / 110 for c in count]}
    return all(g.met(figure_of(g.stat, series[g.series], g.level)) for g in goals)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    count = draw(st.integers(2, 4))
    nodes = tuple(NodeSpec(draw(st.sampled_from([1000, 2000, 3000])),
                           draw(st.sampled_from(["a", "b"])), draw(st.booleans()))
                  for _ in range(count))
    most = 7 if count <= 3 else 6
    pods = tuple(PodSpec(draw(st.integers(0, count - 1)),
                         draw(st.sampled_from([100, 250, 400, 500, 700, 900])),
                         draw(st.sampled_from(["a", "b"])), draw(st.booleans()),
                         draw(st.sampled_from([None, None, "a", "b"])),
                         draw(st.booleans()) and draw(st.booleans()),
                         draw(st.integers(0, 9)) == 0)
                 for _ in range(draw(st.integers(1, most))))
    goal_text = draw(st.sampled_from([
        "max cpu requests <= {}%", "max cpu requests < {}%", "min cpu requests >= {}%",
        "nodes over {}% cpu requests <= 0", "nodes over {}% cpu requests == 1",
        "mean cpu requests <= {}", "max cpu requests >= {}%", "min cpu requests <= {}%"]))
    goals = [goal_text.format(draw(st.sampled_from([10, 25, 40, 50, 60, 75, 90])))]
    if draw(st.booleans()):
        goals.append(f"max pods <= {draw(st.sampled_from([2, 3]))}%")
    return Case(nodes, pods, draw(st.sampled_from([None, 0, 1, 2])), tuple(goals),
                draw(st.integers(1, 2)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_floor_equals_the_brute_force_optimum(case: Case) -> None:
    snap = build(case)
    found = floor(snap, policy(), parse_goals(case.goals), cycles=case.cycles, now=NOW,
                  time_limit=30)
    expected = brute_force(case)
    assert found.model.startswith("exact")
    if expected is None:
        assert found.status == "infeasible", (found, case)
        assert found.reason
    else:
        assert found.status == "optimal", (found, case)
        assert found.moves == expected == found.bound, (found, case)


def _hot(extra: list[Any], pods_on_hot: list[Any], second: Any | None = None) -> ClusterSnapshot:
    """n1 at 90% cpu (4 pods of 900m on 4 cores), n2 empty."""
    return snapshot(node("n1"), second if second is not None else node("n2"),
                    *pods_on_hot, *extra)


GOAL = parse_goals(["max cpu requests <= 50%"])


def _pods(**kw: Any) -> list[Any]:
    return [pod(f"p{i}", node_name="n1", cpu="900m", labels={"app": "a"}, **kw)
            for i in range(4)]


def test_moves_for_a_hot_node() -> None:
    found = floor(_hot([], _pods()), policy(), GOAL, cycles=1, now=NOW, time_limit=10)
    assert (found.status, found.moves, found.bound) == ("optimal", 2, 2)
    assert found.solver.startswith("HiGHS")


def test_without_highs_the_floor_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The image `desched run` ships in leaves the tune extra out.
    monkeypatch.setattr(floor_module, "available", lambda: False)
    found = floor(_hot([], _pods()), policy(), GOAL, cycles=1, now=NOW, time_limit=10)
    assert (found.status, found.moves, found.solver) == ("not modelled", None, "HiGHS")
    assert found.reason is not None and "pip install 'desched[tune]'" in found.reason


def test_a_budget_that_allows_too_few_disruptions_is_named() -> None:
    snap = _hot([budget("a", 3)], _pods())
    found = floor(snap, policy(), GOAL, cycles=1, now=NOW, time_limit=10)
    assert found.status == "infeasible"
    assert found.reason is not None and found.reason.startswith("PodDisruptionBudgets")
    # Two cycles allow the two moves.
    again = floor(snap, policy(), GOAL, cycles=2, now=NOW, time_limit=10)
    assert (again.status, again.moves) == ("optimal", 2)


def test_protected_pods_are_named() -> None:
    found = floor(_hot([], _pods(owner=("DaemonSet", "ds"))), policy(), GOAL, cycles=1,
                  now=NOW, time_limit=10)
    assert found.status == "infeasible"
    assert found.reason is not None and found.reason.startswith("protected pods")


def test_taints_are_named() -> None:
    found = floor(_hot([], _pods(), node("n2", taints=[TAINT])), policy(), GOAL, cycles=1,
                  now=NOW, time_limit=10)
    assert found.status == "infeasible"
    assert found.reason is not None and found.reason.startswith("taints/affinity")


def test_capacity_is_named() -> None:
    found = floor(_hot([], _pods()), policy(), parse_goals(["max cpu requests <= 30%"]),
                  cycles=1, now=NOW, time_limit=10)
    assert found.status == "infeasible"
    assert found.reason is not None and found.reason.startswith("capacity")


def test_usage_without_metrics_is_not_modelled() -> None:
    found = floor(_hot([], _pods()), policy(), parse_goals(["max cpu usage <= 50%"]),
                  cycles=1, now=NOW, time_limit=10)
    assert found.status == "not modelled"
    assert found.reason is not None and "measures no usage" in found.reason


def test_std_is_a_lower_bound_and_says_so() -> None:
    found = floor(_hot([], _pods()), policy(), parse_goals(["std cpu requests <= 5"]),
                  cycles=1, now=NOW, time_limit=10)
    # Two pods each side give std 0; one move leaves 67.5% against 22.5%: std 22.5.
    assert (found.status, found.moves) == ("optimal", 2)
    assert "tangents" in found.model and "lower bound" in found.model


def test_the_time_limit_reports_the_proven_bound() -> None:
    # 60 nodes, 360 pods of many sizes packed under a tight cap: no solver proves this in
    # a hundredth of a second.
    nodes = [node(f"n{i}", cpu="8") for i in range(60)]
    pods = [pod(f"p{i}", node_name=f"n{i % 20}", cpu=f"{300 + 7 * (i % 97)}m",
                labels={"app": f"a{i % 97}"}, owner=("ReplicaSet", f"rs{i % 97}"))
            for i in range(360)]
    snap = snapshot(*nodes, *pods)
    found = floor(snap, policy(), parse_goals(["max cpu requests <= 35%"]), cycles=1,
                  now=NOW, time_limit=0.01)
    assert found.status == "time limit"
    assert isinstance(found.bound, int) and found.bound >= 0
    assert found.moves is None or found.moves >= found.bound


def test_the_snapshot_is_left_as_it_was() -> None:
    snap = _hot([budget("a", 2)], _pods())
    before = ({k: p.node_name for k, p in snap.pods.items()},
              {n: dict(snap.node_requested(n)) for n in snap.nodes})
    floor(snap, policy(), GOAL, cycles=1, now=NOW, time_limit=10)
    after = ({k: p.node_name for k, p in snap.pods.items()},
             {n: dict(snap.node_requested(n)) for n in snap.nodes})
    assert before == after


STD_GOALS = st.sampled_from([5, 10, 20, 30]).map(lambda b: f"std cpu requests <= {b}")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), STD_GOALS)
def test_std_gives_a_lower_bound(case: Case, goal: str) -> None:
    """Tangent cuts under-estimate the squares: never more moves than the true optimum."""
    case = Case(case.nodes, case.pods, case.min_available, (goal,), case.cycles)
    found = floor(build(case), policy(), parse_goals(case.goals), cycles=case.cycles, now=NOW,
                  time_limit=30)
    expected = brute_force(case)
    if found.status == "infeasible":
        assert expected is None, (found, case)
    else:
        assert found.status == "optimal"
        assert expected is None or found.bound <= expected, (found, expected, case)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_aggregated_nodes_give_a_lower_bound(case: Case) -> None:
    """Past EXACT_COLUMNS arrivals are counted per group of alike nodes: a relaxation, so its
    optimum never exceeds the true one, and a goal it finds unreachable is unreachable."""
    saved = floor_module.EXACT_COLUMNS
    floor_module.EXACT_COLUMNS = -1
    try:
        found = floor(build(case), policy(), parse_goals(case.goals), cycles=case.cycles,
                      now=NOW, time_limit=30)
    finally:
        floor_module.EXACT_COLUMNS = saved
    expected = brute_force(case)
    if found.status == "infeasible":
        assert expected is None, (found, case)
    else:
        assert found.status == "optimal"
        assert found.model.startswith("relaxation (a lower bound)")
        assert expected is None or found.bound <= expected, (found, expected, case)


def _metrics(kind: str, name: str, cpu: str, memory: str = "64Mi") -> Any:
    usage = {"cpu": cpu, "memory": memory}
    if kind == "NodeMetrics":
        return decode("NodeMetrics", {"metadata": {"name": name}, "usage": usage,
                                      "timestamp": "2026-11-22T11:59:30Z"})
    return decode("PodMetrics", {"metadata": {"name": name, "namespace": "default"},
                                 "timestamp": "2026-11-22T11:59:30Z",
                                 "containers": [{"name": "c", "usage": usage}]})


def test_usage_moves_with_the_pod() -> None:
    """n1 measured at 3.6 cores of 4 (90%): 0.4 of its own, four pods using 0.8 each (their
    requests say 100m); n2 idle. At most 50%: two pods must go (n1 2.0 cores, n2 1.6)."""
    pods = [pod(f"p{i}", node_name="n1", cpu="100m", labels={"app": "a"}) for i in range(4)]
    metrics = [_metrics("NodeMetrics", "n1", "3600m"), _metrics("NodeMetrics", "n2", "0"),
               *(_metrics("PodMetrics", f"p{i}", "800m") for i in range(4))]
    snap = snapshot(node("n1"), node("n2"), *pods, *metrics)
    found = floor(snap, policy(), parse_goals(["max cpu usage <= 50%"]), cycles=1, now=NOW,
                  time_limit=10)
    assert (found.status, found.moves) == ("optimal", 2)
    # The requests alone would need no move at all.
    none = floor(snap, policy(), parse_goals(["max cpu requests <= 50%"]), cycles=1, now=NOW,
                 time_limit=10)
    assert none.moves == 0

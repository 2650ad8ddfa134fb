"""The floor (issue 34 item 3): the fewest pod moves with which any descheduler could meet the
goals on this snapshot, whatever its policy, as a mixed-integer model solved by HiGHS.

Pods equal in everything the model reads (namespace, labels, requests, measured usage when a
goal reads usage, tolerations, node affinity, anti-affinity, budget, protection) form a pod
type; per type there is an integer count leaving each node it runs on and one arriving at each
node it may go to. Any set of moves gives such counts and any counts give moves (the pods of
one type are interchangeable), so at up to EXACT_COLUMNS arrival counts the model is exact;
beyond it, arrivals are counted per group of nodes that look alike to the pods (taints, the
labels pods select on, allocatable), with every per-node rule summed over the group: a
relaxation, whose optimum is still a valid lower bound, and `Floor.model` says so.

What a move must honour: the destination is Ready and schedulable, its NoSchedule/NoExecute
taints tolerated, its labels matching the pod's nodeSelector and required node affinity, its
allocatable (every resource, and pods) not exceeded after the arrivals; required pod
anti-affinity in both directions between an arriving pod and the pods ending on its node; each
PodDisruptionBudget's disruptions allowed (as simulate's executor counts them) times the
cycles; pods every profile's filters protect never move. Usage goals assume the measured pod
usage moves with the pod and the node's own usage stays.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version

from desched.framework.policy import Policy
from desched.simulate.frames import MeasuredUsage
from desched.snapshot.cluster import ClusterSnapshot
from desched.tune.floor_cluster import Cluster, Relax, node_groups, places, read_cluster
from desched.tune.floor_goals import REQUESTS, USAGE, goal_rows, individual_nodes
from desched.tune.floor_model import Built, Terms, anti_affinity, capacity
from desched.tune.goals import Goal
from desched.tune.milp import Model, available, solve

SOLVER = "HiGHS"
_MISSING = ("the floor needs HiGHS, in desched's tune extra: pip install 'desched[tune]' (the "
            "image `desched run` ships in leaves it out)")


def solver_name() -> str:
    return f"HiGHS {version('highspy')}"
# Arrival counts per (pod type, node) above which destinations are aggregated (a relaxation).
EXACT_COLUMNS = 200_000


@dataclass
class Floor:
    moves: int | None
    bound: int
    status: str  # "optimal" | "time limit" | "infeasible" | "not modelled"
    reason: str | None
    solver: str
    seconds: float
    model: str



def floor(snapshot: ClusterSnapshot, policy: Policy, goals: list[Goal], *, cycles: int,
          now: datetime, time_limit: float) -> Floor:
    """The fewest pod moves that meet every goal; the snapshot is not modified."""
    started = time.monotonic()
    if not available():
        return Floor(None, 0, "not modelled", _MISSING, SOLVER, 0.0, "")
    unmodelled = _unmodelled(snapshot, goals, now)
    if unmodelled is not None:
        return Floor(None, 0, "not modelled", unmodelled, solver_name(), 0.0, "")
    usage = any(g.usage for g in goals)
    cluster = read_cluster(snapshot, policy, goals, cycles, now, usage, Relax())
    model, text = build(cluster, goals, Relax())
    solution = solve(model, time_limit)
    if solution.status == "infeasible":
        reason = _why_infeasible(snapshot, policy, goals, cycles, now, usage,
                                 started + time_limit)
        return Floor(None, 0, "infeasible", reason, solver_name(), time.monotonic() - started,
                     text)
    moves = round(solution.objective) if solution.objective is not None else None
    bound = max(0, math.ceil(solution.bound - 1e-6))
    if solution.status == "optimal" and moves is not None:
        bound = moves
    return Floor(moves, bound, solution.status, None, solver_name(), time.monotonic() - started,
                 text)


def _unmodelled(snapshot: ClusterSnapshot, goals: list[Goal], now: datetime) -> str | None:
    for goal in goals:
        if goal.series not in REQUESTS and goal.series not in USAGE:
            return f"{goal.text}: the floor models requests, pods and cpu/memory usage only"
    if any(g.usage for g in goals) and not MeasuredUsage(snapshot, now).read(now):
        goal = next(g for g in goals if g.usage)
        return f"{goal.text}: the snapshot measures no usage (no NodeMetric nor NodeMetrics)"
    return None


def _why_infeasible(snapshot: ClusterSnapshot, policy: Policy, goals: list[Goal], cycles: int,
                    now: datetime, usage: bool, deadline: float) -> str:
    """Leave constraint families out one after another; the first whose absence lets the goals
    be met is what stops them. The solves share what is left of the time limit (at least a
    second each: a reason is worth that much)."""
    steps = [
        (Relax(budgets=True), "PodDisruptionBudgets: the goals need more disruptions than the "
                               f"budgets allow in {cycles} cycle{'s' if cycles != 1 else ''}"),
        (Relax(budgets=True, protections=True),
         "protected pods: only pods the policy's evictor filters protect (DaemonSet, mirror, "
         "system-critical, local storage, bare pods, ...) could be moved to meet the goals"),
        (Relax(budgets=True, protections=True, placement=True),
         "taints/affinity: the pods that would have to move tolerate, select or (anti-)affine "
         "too few nodes with room"),
    ]
    undecided = None
    for left, (relax, reason) in zip(range(len(steps), 0, -1), steps, strict=True):
        cluster = read_cluster(snapshot, policy, goals, cycles, now, usage, relax)
        model, _ = build(cluster, goals, relax, feasibility=True)
        # The linear relaxation first: infeasible, so is the model, and it is quick to prove.
        limit = max(1.0, (deadline - time.monotonic()) / left)
        if solve(model, limit, continuous=True).status == "infeasible":
            continue
        found = solve(model, max(1.0, (deadline - time.monotonic()) / left))
        if found.objective is not None:
            return reason
        if found.status != "infeasible" and undecided is None:
            undecided = reason
    if undecided is not None:
        return (f"{undecided} (the fractional relaxation says so; the solver did not decide "
                f"the whole model within the time limit)")
    return ("capacity: no placement of the pods meets the goals even with budgets, protections "
            "and placement rules left out")


def _poolable(cluster: Cluster, goals: list[Goal]) -> set[str]:
    """The nodes whose leaving pods may be counted per group with aggregated arrivals: no goal
    caps them below what they hold now, and they are within their allocatable."""
    bound = individual_nodes(cluster, goals)
    resources = {r for k in cluster.types if k.movable for r in k.requests}
    pool = set()
    for node in cluster.nodes:
        name = node.name
        if name in bound:
            continue
        allocatable, load = node.allocatable, cluster.load[name]
        if all(load.get(r, 0) <= allocatable.get(r, 0) for r in resources):
            pool.add(name)
    return pool


def build(cluster: Cluster, goals: list[Goal], relax: Relax,
           feasibility: bool = False) -> tuple[Model, str]:
    model = Model()
    built = Built(model)
    allocatable = {n.name: n.allocatable for n in cluster.nodes}
    groups = node_groups(cluster, allocatable, relax)
    where = places(cluster, relax, groups)
    arrivals = sum(len(p) for p in where.values())
    exact = arrivals <= EXACT_COLUMNS
    cost = 0.0 if feasibility else 1.0
    budget_terms: list[Terms] = [{} for _ in cluster.budgets]
    # Aggregated: the groups a type may arrive in, those holding a node it may go to (one
    # answer per list of nodes: types share them).
    reach: dict[int, list[int]] = {}
    group_of: dict[str, int] = {}
    pool: set[str] = set()
    if not exact:
        for members in node_groups(cluster, allocatable, relax, coarse=True).values():
            for node in members:
                group_of[node.name] = len(built.groups)
            built.groups.append((members, []))
        for nodes in where.values():
            if id(nodes) not in reach:
                reach[id(nodes)] = list(dict.fromkeys(group_of[n.name] for n in nodes))
        if not any(g.usage for g in goals):
            pool = _poolable(cluster, goals)
    for kind in cluster.types:
        if not kind.movable:
            continue
        flow: Terms = {}
        total = sum(kind.counts.values())
        pooled: dict[int, int] = {}
        for name, count in kind.counts.items():
            if name in pool:
                pooled[group_of[name]] = pooled.get(group_of[name], 0) + count
                continue
            column = model.var(0, count, cost)
            built.out.setdefault(name, []).append((kind, column))
            flow[column] = 1.0
            if kind.budget is not None:
                budget_terms[kind.budget][column] = 1.0
        for group, count in pooled.items():
            column = model.var(0, count, cost)
            built.pooled.setdefault(group, []).append((kind, column))
            flow[column] = 1.0
            if kind.budget is not None:
                budget_terms[kind.budget][column] = 1.0
        if exact:
            for node in where[id(kind)]:
                column = model.var(0, total)
                built.arrive.setdefault(node.name, []).append((kind, column))
                flow[column] = -1.0
        else:
            for group in reach[id(where[id(kind)])]:
                column = model.var(0, total)
                built.groups[group][1].append((kind, column))
                flow[column] = -1.0
        model.row(flow, 0.0, 0.0, "flow")
    for terms, allowed in zip(budget_terms, cluster.budgets, strict=True):
        if not relax.budgets and terms:
            model.row(terms, upper=allowed, family="budgets")
    capacity(cluster, built, allocatable, exact)
    if exact and not relax.placement:
        anti_affinity(cluster, built)
    for goal in goals:
        goal_rows(cluster, built, goal, exact)
    if exact:
        text = (f"exact: every node, {len(cluster.types):,} pod types; {model.size()}")
    else:
        text = (f"relaxation (a lower bound): arrivals counted per group of alike nodes "
                f"({len(built.groups):,} groups for {len(cluster.nodes):,} nodes), per-node "
                f"rules summed over each group, anti-affinity left out, what leaves the "
                f"{len(pool):,} nodes no rule of their own binds counted per group; "
                f"{len(cluster.types):,} pod types; {model.size()}")
    notes = list(dict.fromkeys(built.notes))
    return model, text + "".join(f"; {n}" for n in notes)


__all__ = ["EXACT_COLUMNS", "Floor", "floor"]

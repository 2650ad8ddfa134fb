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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from importlib.metadata import version

import msgspec

from desched.executors.pdb import BudgetTracker
from desched.framework.decisions import DecisionLog
from desched.framework.evictor import Evictor, ExecutionResult, Limits, ProfileEvictor
from desched.framework.policy import Policy
from desched.framework.types import Clock, Handle, Protects
from desched.model.labels import Matcher
from desched.model.node import Node
from desched.model.objects import PodDisruptionBudget
from desched.model.pod import Pod
from desched.predicates.nodeaffinity import required_affinity_matcher
from desched.predicates.podaffinity import AntiAffinityTerm, compile_anti_affinity
from desched.predicates.taints import SCHEDULING_EFFECTS, first_untolerated
from desched.simulate.frames import MeasuredUsage
from desched.snapshot.cluster import ClusterSnapshot
from desched.tune.goals import EPSILON, Goal
from desched.tune.milp import INF, Model, Solution, solve
from desched.usage.metrics_server import moved_usage
from desched.usage.nodemetric import NodeLoad, read_node_load

SOLVER = f"HiGHS {version('highspy')}"
# Arrival counts per (pod type, node) above which destinations are aggregated (a relaxation).
EXACT_COLUMNS = 200_000
HOSTNAME = "kubernetes.io/hostname"
_REQUESTS = {"cpu requests": "cpu", "memory requests": "memory", "pods": "pods"}
_USAGE = {"cpu usage": "cpu", "memory usage": "memory"}
_EPS = Fraction(EPSILON)


@dataclass
class Floor:
    moves: int | None
    bound: int
    status: str  # "optimal" | "time limit" | "infeasible" | "not modelled"
    reason: str | None
    solver: str
    seconds: float
    model: str


@dataclass
class _Type:
    pod: Pod  # one of them: every pod of the type reads alike to the model
    requests: dict[str, int]  # with pods = 1
    usage: dict[str, int]  # cpu, memory: what moves with the pod (usage goals only)
    movable: bool
    budget: int | None  # index into _Cluster.budgets
    counts: dict[str, int] = field(default_factory=dict)  # node -> pods of the type there
    anti: tuple[AntiAffinityTerm, ...] = ()


@dataclass
class _Cluster:
    nodes: list[Node]
    load: dict[str, dict[str, int]]  # node -> requested per resource (pods = count)
    usage: dict[str, dict[str, int]]  # measured nodes -> cpu, memory
    types: list[_Type]
    budgets: list[int]  # moves allowed per budget over the run
    schedulable: dict[str, bool]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Relax:
    """Constraint families left out, to find which one makes a goal unreachable."""

    budgets: bool = False
    protections: bool = False
    placement: bool = False


def floor(snapshot: ClusterSnapshot, policy: Policy, goals: list[Goal], *, cycles: int,
          now: datetime, time_limit: float) -> Floor:
    """The fewest pod moves that meet every goal; the snapshot is not modified."""
    started = time.monotonic()
    unmodelled = _unmodelled(snapshot, goals, now)
    if unmodelled is not None:
        return Floor(None, 0, "not modelled", unmodelled, SOLVER, 0.0, "")
    usage = any(g.usage for g in goals)
    cluster = _cluster(snapshot, policy, goals, cycles, now, usage, _Relax())
    model, text = _build(cluster, goals, _Relax())
    solution = solve(model, time_limit)
    if solution.status == "infeasible":
        reason = _why_infeasible(snapshot, policy, goals, cycles, now, usage,
                                 max(1.0, time_limit / 3))
        return Floor(None, 0, "infeasible", reason, SOLVER, time.monotonic() - started, text)
    moves = round(solution.objective) if solution.objective is not None else None
    bound = max(0, math.ceil(solution.bound - 1e-6))
    if solution.status == "optimal" and moves is not None:
        bound = moves
    return Floor(moves, bound, solution.status, None, SOLVER, time.monotonic() - started, text)


def _unmodelled(snapshot: ClusterSnapshot, goals: list[Goal], now: datetime) -> str | None:
    for goal in goals:
        if goal.series not in _REQUESTS and goal.series not in _USAGE:
            return f"{goal.text}: the floor models requests, pods and cpu/memory usage only"
    if any(g.usage for g in goals) and not MeasuredUsage(snapshot, now).read(now):
        goal = next(g for g in goals if g.usage)
        return f"{goal.text}: the snapshot measures no usage (no NodeMetric nor NodeMetrics)"
    return None


def _why_infeasible(snapshot: ClusterSnapshot, policy: Policy, goals: list[Goal], cycles: int,
                    now: datetime, usage: bool, limit: float) -> str:
    """Leave constraint families out one after another; the first whose absence lets the goals
    be met is what stops them."""
    steps = [
        (_Relax(budgets=True), "PodDisruptionBudgets: the goals need more disruptions than the "
                               f"budgets allow in {cycles} cycle{'s' if cycles != 1 else ''}"),
        (_Relax(budgets=True, protections=True),
         "protected pods: only pods the policy's evictor filters protect (DaemonSet, mirror, "
         "system-critical, local storage, bare pods, ...) could be moved to meet the goals"),
        (_Relax(budgets=True, protections=True, placement=True),
         "taints/affinity: the pods that would have to move tolerate, select or (anti-)affine "
         "too few nodes with room"),
    ]
    undecided = None
    for relax, reason in steps:
        cluster = _cluster(snapshot, policy, goals, cycles, now, usage, relax)
        model, _ = _build(cluster, goals, relax, feasibility=True)
        # The linear relaxation first: infeasible, so is the model, and it is quick to prove.
        if solve(model, limit, continuous=True).status == "infeasible":
            continue
        found = solve(model, limit)
        if found.objective is not None:
            return reason
        if found.status != "infeasible" and undecided is None:
            undecided = reason
    if undecided is not None:
        return (f"{undecided} (the fractional relaxation says so; the solver did not decide "
                f"the whole model within the time limit)")
    return ("capacity: no placement of the pods meets the goals even with budgets, protections "
            "and placement rules left out")


# -- the cluster as the model reads it ---------------------------------------------------------

def _protection(snapshot: ClusterSnapshot, policy: Policy,
                now: datetime) -> Callable[[Pod], bool]:
    """Whether every profile protects the pod: its filters that protect whichever plugin asks
    (framework.types.Protects), and the namespaces its evictor's namespaceLabelSelector leaves
    out. A pod only a plugin's own scope excludes is not protected: another policy may move
    it."""
    profiles: list[tuple[list[Protects], list[Matcher]]] = []
    log = DecisionLog()
    clock = Clock(now)
    evictor = Evictor(Limits(), _NoExecutor(), log)
    for profile in policy.profiles:
        evictor_view = ProfileEvictor(evictor, profile.name)
        checks: list[Protects] = []
        namespaces: list[Matcher] = []
        for name in dict.fromkeys(profile.enabled.get("filter", []) +
                                  profile.enabled.get("preevictionfilter", [])):
            spec = policy.plugins.get(name)
            if spec is None:
                continue
            handle = Handle(snapshot, evictor_view, clock, log, profile.name, name, policy)
            plugin = spec.factory(profile.args[name], handle)
            if isinstance(plugin, Protects) and name in profile.enabled.get("filter", []):
                checks.append(plugin)
            # DefaultEvictor's namespaceLabelSelector (a pre-eviction filter) keeps whole
            # namespaces out for every plugin of the profile.
            matcher = getattr(plugin, "namespace_matcher", None)
            if callable(matcher):
                namespaces.append(matcher)
        profiles.append((checks, namespaces))
    if not profiles:
        return lambda pod: False
    cache: dict[str, bool] = {}

    def protected(pod: Pod) -> bool:
        for checks, namespaces in profiles:
            ns_ok = cache.get(pod.namespace)
            if ns_ok is None:
                labels = snapshot.namespace_labels(pod.namespace)
                ns_ok = cache[pod.namespace] = all(m(labels) for m in namespaces)
            if ns_ok and all(c.protection(pod) is None for c in checks):
                return False
        return True

    return protected


class _NoExecutor:
    """The protections are asked, never an eviction."""

    def evict(self, pod: Pod, profile: str, plugin: str, reason: str) -> ExecutionResult:
        raise AssertionError("the floor evicts nothing")


def _plain(value: object) -> object:
    """What the type key's encoder makes of the model's shared strings and read-only maps."""
    return dict(value) if isinstance(value, Mapping) else str(value)


_encode = msgspec.json.Encoder(enc_hook=_plain).encode


def _cluster(snapshot: ClusterSnapshot, policy: Policy, goals: list[Goal], cycles: int,
             now: datetime, usage: bool, relax: _Relax) -> _Cluster:
    protected = _protection(snapshot, policy, now)
    tracker = BudgetTracker(snapshot)
    budget_index: dict[int, int] = {}
    budgets: list[int] = []
    measured: dict[str, dict[str, int]] = {}
    pod_usage: dict[str, dict[str, int]] = {}
    if usage:
        for name, read in MeasuredUsage(snapshot, now).read(now).items():
            measured[name] = {r: round(a) for r, a in read.items()}
        for name, node in snapshot.nodes.items():
            if name in snapshot.node_metrics:
                found = read_node_load(node, snapshot, ("cpu", "memory"), now, None)
                if isinstance(found, NodeLoad):
                    pod_usage.update(found.pod_usage)
    types: dict[tuple[object, ...], _Type] = {}
    nodes = list(snapshot.nodes.values())
    load: dict[str, dict[str, int]] = {}
    for node in nodes:
        name = node.name
        load[name] = dict(snapshot.node_requested(name))
        for pod in snapshot.pods_on_node(name):
            movable = relax.protections or not protected(pod)
            budget: int | None = None
            if movable and not relax.budgets:
                pdbs = snapshot.pdbs_for_pod(pod)
                if len(pdbs) > 1:
                    movable = False  # the Eviction API refuses a pod with two budgets
                elif pdbs:
                    # An unready pod passes a healthy budget, or one that lets unhealthy pods
                    # go, without using it up (the Eviction API's rule, as the executor's).
                    pdb: PodDisruptionBudget | None = pdbs[0]
                    if not pod.ready and tracker.check(pod) == (None, None):
                        pdb = None
                    if pdb is not None:
                        index = budget_index.get(id(pdb))
                        if index is None:
                            index = budget_index[id(pdb)] = len(budgets)
                            budgets.append(max(0, tracker.allowed(pdb)) * cycles)
                        budget = index
            requests = dict(pod.requests)
            requests["pods"] = 1
            amounts: dict[str, int] = {}
            if usage:
                if name in snapshot.node_metrics:
                    amounts = dict(pod_usage.get(pod.key, {}))
                else:
                    amounts = moved_usage(pod, snapshot.metrics_pods.get(pod.key))
            spec = pod.spec
            key = (movable, budget, pod.namespace, tuple(sorted(pod.metadata.labels.items())),
                   tuple(sorted(requests.items())), tuple(sorted(amounts.items())),
                   _encode((spec.tolerations, spec.affinity, spec.node_selector)))
            kind = types.get(key)
            if kind is None:
                kind = types[key] = _Type(pod, requests, amounts, movable, budget,
                                          anti=compile_anti_affinity(pod))
            kind.counts[name] = kind.counts.get(name, 0) + 1
    schedulable = {n.name: n.ready and not n.spec.unschedulable for n in nodes}
    return _Cluster(nodes, load, measured, list(types.values()), budgets, schedulable)


def _fits(kind: _Type, allocatable: dict[str, int]) -> bool:
    return all(amount <= allocatable.get(r, 0) for r, amount in kind.requests.items())


def _placement(cluster: _Cluster, kind: _Type, relax: _Relax,
               allocatable: dict[str, dict[str, int]],
               groups: dict[tuple[object, ...], list[Node]]) -> list[Node]:
    """The nodes the type may arrive at: checked once per group of nodes that look alike."""
    matcher = required_affinity_matcher(kind.pod)
    tolerations = kind.pod.spec.tolerations
    out: list[Node] = []
    for members in groups.values():
        first = members[0]
        if not cluster.schedulable[first.name]:
            continue
        if not _fits(kind, allocatable[first.name]):
            continue
        if not relax.placement and (
                first_untolerated(first.spec.taints, tolerations, SCHEDULING_EFFECTS) is not None
                or not matcher(first)):
            continue
        out.extend(members)
    return out


def _places(cluster: _Cluster, relax: _Relax, allocatable: dict[str, dict[str, int]],
            groups: dict[tuple[object, ...], list[Node]]) -> dict[int, list[Node]]:
    """Per movable type, the nodes it may arrive at; types alike in tolerations, node affinity
    and requests (the replicas of a workload, whatever their labels) share one answer."""
    known: dict[tuple[object, ...], list[Node]] = {}
    out: dict[int, list[Node]] = {}
    for kind in cluster.types:
        if not kind.movable:
            continue
        spec = kind.pod.spec
        node_affinity = spec.affinity.node_affinity if spec.affinity is not None else None
        key = (_encode((spec.tolerations, node_affinity, spec.node_selector)),
               tuple(sorted(kind.requests.items())))
        found = known.get(key)
        if found is None:
            found = known[key] = _placement(cluster, kind, relax, allocatable, groups)
        out[id(kind)] = found
    return out


def _node_groups(cluster: _Cluster, allocatable: dict[str, dict[str, int]], relax: _Relax
                 ) -> dict[tuple[object, ...], list[Node]]:
    """Nodes by what a pod's placement reads of them: the label keys pods select on (the name
    when a pod selects by field), taints, allocatable and schedulability."""
    keys: set[str] = set()
    by_name = False
    for kind in cluster.types if not relax.placement else ():
        if not kind.movable:
            continue
        spec = kind.pod.spec
        keys.update(spec.node_selector)
        affinity = spec.affinity
        required = (affinity.node_affinity.required_during_scheduling_ignored_during_execution
                    if affinity is not None and affinity.node_affinity is not None else None)
        for term in required.node_selector_terms if required is not None else ():
            keys.update(r.key for r in term.match_expressions)
            by_name = by_name or bool(term.match_fields)
    groups: dict[tuple[object, ...], list[Node]] = {}
    for node in cluster.nodes:
        labels = node.metadata.labels
        key = (node.name if by_name else "",
               tuple(sorted((k, labels[k]) for k in keys if k in labels)),
               tuple((t.key, t.value, t.effect) for t in node.spec.taints
                     if not relax.placement),
               tuple(sorted(allocatable[node.name].items())), cluster.schedulable[node.name])
        groups.setdefault(key, []).append(node)
    return groups


# -- the model ---------------------------------------------------------------------------------

Terms = dict[int, float]


def _add(terms: Terms, column: int, coef: float) -> None:
    terms[column] = terms.get(column, 0.0) + coef


def _series_amounts(cluster: _Cluster, goal: Goal) -> tuple[dict[str, int], Callable[
        [_Type], int], dict[str, int]]:
    """(node -> amount now, a type's amount, node -> capacity) of the goal's series, over the
    nodes the frame has a value for."""
    if goal.usage:
        resource = _USAGE[goal.series]
        now = {n: u.get(resource, 0) for n, u in cluster.usage.items()}
        return now, lambda k: k.usage.get(resource, 0), {
            n.name: n.allocatable.get(resource, 0) for n in cluster.nodes if n.name in now}
    resource = _REQUESTS[goal.series]
    return ({n.name: cluster.load[n.name].get(resource, 0) for n in cluster.nodes},
            lambda k: k.requests.get(resource, 0),
            {n.name: n.allocatable.get(resource, 0) for n in cluster.nodes})


def _at_most(percent: float, cap: int, strict: bool) -> int:
    """The greatest amount whose percent of `cap` is <= (or <) `percent`, as Goal.met reads it."""
    if strict:
        return math.ceil(Fraction(percent) * cap / 100) - 1
    return math.floor((Fraction(percent) + _EPS) * cap / 100)


def _at_least(percent: float, cap: int, strict: bool) -> int:
    if strict:
        return math.floor(Fraction(percent) * cap / 100) + 1
    return math.ceil((Fraction(percent) - _EPS) * cap / 100)


@dataclass
class _Built:
    model: Model
    # node -> (terms, constant) of each resource's amount after the moves, for exact nodes.
    out: dict[str, list[tuple[_Type, int]]] = field(default_factory=dict)
    arrive: dict[str, list[tuple[_Type, int]]] = field(default_factory=dict)
    # aggregated: group id -> (its nodes, arrivals into it)
    groups: list[tuple[list[Node], list[tuple[_Type, int]]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _build(cluster: _Cluster, goals: list[Goal], relax: _Relax,
           feasibility: bool = False) -> tuple[Model, str]:
    model = Model()
    built = _Built(model)
    allocatable = {n.name: n.allocatable for n in cluster.nodes}
    groups = _node_groups(cluster, allocatable, relax)
    places = _places(cluster, relax, allocatable, groups)
    arrivals = sum(len(p) for p in places.values())
    exact = arrivals <= EXACT_COLUMNS
    cost = 0.0 if feasibility else 1.0
    budget_terms: list[Terms] = [{} for _ in cluster.budgets]
    group_of: dict[str, int] = {}
    if not exact:
        for members in groups.values():
            for node in members:
                group_of[node.name] = len(built.groups)
            built.groups.append((members, []))
    for kind in cluster.types:
        if not kind.movable:
            continue
        flow: Terms = {}
        total = sum(kind.counts.values())
        for name, count in kind.counts.items():
            column = model.var(0, count, cost)
            built.out.setdefault(name, []).append((kind, column))
            flow[column] = 1.0
            if kind.budget is not None:
                budget_terms[kind.budget][column] = 1.0
        if exact:
            for node in places[id(kind)]:
                column = model.var(0, total)
                built.arrive.setdefault(node.name, []).append((kind, column))
                flow[column] = -1.0
        else:
            for group in dict.fromkeys(group_of[n.name] for n in places[id(kind)]):
                column = model.var(0, total)
                built.groups[group][1].append((kind, column))
                flow[column] = -1.0
        model.row(flow, 0.0, 0.0, "flow")
    for terms, allowed in zip(budget_terms, cluster.budgets, strict=True):
        if not relax.budgets and terms:
            model.row(terms, upper=allowed, family="budgets")
    _capacity(cluster, built, allocatable, exact)
    if exact and not relax.placement:
        _anti_affinity(cluster, built)
    for goal in goals:
        _goal(cluster, built, goal, exact)
    if exact:
        text = (f"exact: every node, {len(cluster.types):,} pod types; {model.size()}")
    else:
        text = (f"relaxation (a lower bound): arrivals counted per group of alike nodes "
                f"({len(built.groups):,} groups for {len(cluster.nodes):,} nodes), per-node "
                f"rules summed over each group, anti-affinity left out; "
                f"{len(cluster.types):,} pod types; {model.size()}")
    notes = list(dict.fromkeys(built.notes))
    return model, text + "".join(f"; {n}" for n in notes)


def _node_terms(built: _Built, name: str, amount: Callable[[_Type], int]) -> Terms:
    terms: Terms = {}
    for kind, column in built.out.get(name, ()):
        a = amount(kind)
        if a:
            _add(terms, column, -a)
    for kind, column in built.arrive.get(name, ()):
        a = amount(kind)
        if a:
            _add(terms, column, a)
    return terms


def _group_terms(built: _Built, members: Iterable[Node], arrivals: list[tuple[_Type, int]],
                 amount: Callable[[_Type], int]) -> Terms:
    terms: Terms = {}
    for node in members:
        terms.update(_node_terms(built, node.name, amount))
    for kind, column in arrivals:
        a = amount(kind)
        if a:
            _add(terms, column, a)
    return terms


def _capacity(cluster: _Cluster, built: _Built, allocatable: dict[str, dict[str, int]],
              exact: bool) -> None:
    """A node receiving pods ends within its allocatable, every resource a type requests."""
    model = built.model
    resources = sorted({r for k in cluster.types if k.movable for r in k.requests})
    for resource in resources:
        def amount(k: _Type, r: str = resource) -> int:
            return k.requests.get(r, 0)
        if exact:
            for node in cluster.nodes:
                name = node.name
                if not built.arrive.get(name):
                    continue
                have = cluster.load[name].get(resource, 0)
                cap = allocatable[name].get(resource, 0)
                terms = _node_terms(built, name, amount)
                if not any(c > 0 for c in terms.values()):
                    continue
                if have <= cap:
                    model.row(terms, upper=cap - have, family="capacity")
                    continue
                # Already over: a pod may arrive only once enough have left.
                landing = model.var(0, 1)
                high = model.bounds_of(terms)[1]
                landed = {c: 1.0 for _, c in built.arrive[name]}
                landed[landing] = -float(sum(model.upper[c] for c in landed))
                model.row(landed, upper=0.0, family="capacity")
                terms[landing] = high + have - cap
                model.row(terms, upper=high, family="capacity")
        else:
            for members, into in built.groups:
                if not any(amount(k) for k, _ in into):
                    continue
                room = 0
                terms = _group_terms(built, members, into, amount)
                for node in members:
                    have = cluster.load[node.name].get(resource, 0)
                    cap = allocatable[node.name].get(resource, 0)
                    if have <= cap:
                        room += cap - have
                    else:
                        # Over already: at most what leaves it can come back (relaxed).
                        for column, coef in _node_terms(built, node.name, amount).items():
                            terms[column] = terms.get(column, 0.0) - coef
                model.row(terms, upper=room, family="capacity")


def _anti_affinity(cluster: _Cluster, built: _Built) -> None:
    """Required anti-affinity, both ways: a pod arriving at a node ends with no pod there that
    its terms select, nor one whose terms select it (other pods of its own type included)."""
    selects: list[tuple[_Type, _Type, str]] = []
    for a in cluster.types:
        for term in a.anti:
            if term.selector is None:
                continue
            for b in cluster.types:
                if b.pod.namespace in term.namespaces and term.selector(b.pod.metadata.labels):
                    selects.append((a, b, term.topology_key))
            if term.topology_key != HOSTNAME:
                built.notes.append(f"anti-affinity over {term.topology_key} checked per node "
                                   f"(a relaxation)")
    if not selects:
        return
    for node in cluster.nodes:
        if built.arrive.get(node.name):
            _NodeAntiAffinity(built, node).state(selects)


class _NodeAntiAffinity:
    """One receiving node's anti-affinity rows: a flag per type arriving, set by its arrivals."""

    def __init__(self, built: _Built, node: Node) -> None:
        self.model = built.model
        self.name = node.name
        self.labels = node.metadata.labels
        self.arriving = {id(k): c for k, c in built.arrive.get(node.name, ())}
        self.leaving = {id(k): c for k, c in built.out.get(node.name, ())}
        self.landed: dict[int, int] = {}

    def lands(self, kind: _Type) -> int | None:
        column = self.arriving.get(id(kind))
        if column is None:
            return None
        flag = self.landed.get(id(kind))
        if flag is None:
            model = self.model
            flag = self.landed[id(kind)] = model.var(0, 1)
            model.row({column: 1.0, flag: -model.upper[column]}, upper=0.0,
                      family="anti-affinity")
        return flag

    def count(self, kind: _Type) -> Terms:
        terms: Terms = {}
        if id(kind) in self.leaving:
            terms[self.leaving[id(kind)]] = -1.0
        if id(kind) in self.arriving:
            terms[self.arriving[id(kind)]] = 1.0
        return terms

    def state(self, selects: list[tuple[_Type, _Type, str]]) -> None:
        model = self.model
        for a, b, key in selects:
            if key not in self.labels:
                continue
            for mover, other in ((a, b), (b, a)):
                flag = self.lands(mover)
                if flag is None:
                    continue
                terms = self.count(other)
                now = other.counts.get(self.name, 0)
                keep = 1 if mover is other else 0  # the arriving pod itself
                high = now + model.bounds_of(terms)[1]
                if high <= keep:
                    continue
                # Landed: the other type's count ends at most `keep`.
                terms[flag] = high - keep
                model.row(terms, upper=high - now, family="anti-affinity")


def _goal(cluster: _Cluster, built: _Built, goal: Goal, exact: bool) -> None:
    now, amount, caps = _series_amounts(cluster, goal)
    model = built.model
    names = list(now)
    if not exact:
        _goal_relaxed(cluster, built, goal, now, amount, caps)
        return
    exprs = {n: _node_terms(built, n, amount) for n in names}
    op, bound, stat = goal.op, goal.bound, goal.stat
    if stat in ("max", "min"):
        # max <= b: every node at most b; max >= b: some node at least b; == both. The min
        # the other way round.
        caps_every = (stat == "max") == (op in ("<=", "<", "=="))
        every = op == "==" or caps_every
        if every:
            strict = op in ("<", ">")
            for n in names:
                cap = caps[n]
                if cap <= 0:
                    # The frame reads 0% whatever the node holds.
                    if not goal.met(0.0) and op != "==":
                        model.row({}, lower=1.0, family="goal")
                    continue
                if stat == "max":
                    model.row(exprs[n], upper=_at_most(bound, cap, strict) - now[n],
                              family="goal")
                else:
                    model.row(exprs[n], lower=_at_least(bound, cap, strict) - now[n],
                              family="goal")
        if op == "==" or not caps_every:
            _some(built, names, exprs, now, caps, bound, op in ("<", ">"), stat == "min")
        return
    if stat == "over":
        _over(built, names, exprs, now, caps, goal)
        return
    if stat == "mean":
        terms: Terms = {}
        constant = 0.0
        for n in names:
            if caps[n] <= 0:
                continue
            scale = 100.0 / caps[n] / len(names)
            constant += now[n] * scale
            for column, coef in exprs[n].items():
                _add(terms, column, coef * scale)
        low, high = _interval(op, bound)
        model.row(terms, low - constant, high - constant, family="goal")
        return
    _std(built, names, exprs, now, caps, goal)


def _interval(op: str, bound: float) -> tuple[float, float]:
    slack = EPSILON
    return {"<=": (-INF, bound + slack), "<": (-INF, bound - slack),
            ">=": (bound - slack, INF), ">": (bound + slack, INF),
            "==": (bound - slack, bound + slack)}[op]


def _some(built: _Built, names: list[str], exprs: dict[str, Terms], now: dict[str, int],
          caps: dict[str, int], bound: float, strict: bool, under: bool) -> None:
    """At least one node's amount is at most (`under`) or at least the bound."""
    model = built.model
    flags: Terms = {}
    for n in names:
        cap = caps[n]
        low, high = model.bounds_of(exprs[n])
        low, high = low + now[n], high + now[n]
        if cap <= 0:
            ok = goal_met_at_zero(bound, under)
            if ok:
                return  # met whatever moves
            continue
        if under:
            level = _at_most(bound, cap, strict)
            if high <= level:
                return
            if low > level:
                continue
            flag = model.var(0, 1)
            terms = dict(exprs[n])
            terms[flag] = high - level
            model.row(terms, upper=high - now[n], family="goal")
        else:
            level = _at_least(bound, cap, strict)
            if low >= level:
                return
            if high < level:
                continue
            flag = model.var(0, 1)
            terms = dict(exprs[n])
            terms[flag] = -(level - low)
            model.row(terms, lower=low - now[n], family="goal")
        flags[flag] = 1.0
    model.row(flags, lower=1.0, family="goal")


def goal_met_at_zero(bound: float, under: bool) -> bool:
    """Whether a node the frame reads as 0% (no allocatable) is at most (`under`) or at least
    the bound."""
    return bound + EPSILON >= 0 if under else bound - EPSILON <= 0


def _over(built: _Built, names: list[str], exprs: dict[str, Terms], now: dict[str, int],
          caps: dict[str, int], goal: Goal) -> None:
    """Nodes above the level: a flag per node that can be either, fixed by the amount."""
    model = built.model
    flags: Terms = {}
    fixed = 0
    for n in names:
        cap = caps[n]
        if cap <= 0:
            fixed += goal.level + EPSILON < 0
            continue
        level = _at_most(goal.level, cap, False)  # above it: over
        low, high = model.bounds_of(exprs[n])
        low, high = low + now[n], high + now[n]
        if high <= level or low > level:
            fixed += low > level
            continue
        flag = model.var(0, 1)
        flags[flag] = 1.0
        # flag 0: amount <= level; flag 1: amount >= level + 1.
        terms = dict(exprs[n])
        terms[flag] = -(high - level)
        model.row(terms, upper=level - now[n], family="goal")
        terms = dict(exprs[n])
        terms[flag] = -(level + 1 - low)
        model.row(terms, lower=low - now[n], family="goal")
    low, high = _count_interval(goal.op, goal.bound)
    model.row(flags, low - fixed, high - fixed, family="goal")


def _count_interval(op: str, bound: float) -> tuple[float, float]:
    return {"<=": (-INF, math.floor(bound)), "<": (-INF, math.ceil(bound) - 1),
            ">=": (math.ceil(bound), INF), ">": (math.floor(bound) + 1, INF),
            "==": (bound, bound) if bound == int(bound) else (1.0, 0.0)}[op]


# Points (as multiples of the bound) where the square is cut by its tangent.
_TANGENTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0)


def _std(built: _Built, names: list[str], exprs: dict[str, Terms], now: dict[str, int],
         caps: dict[str, int], goal: Goal) -> None:
    """std <= b: the variance is at most b², and the variance is the least mean square distance
    to any centre c (the mean minimizes it), so: some c with sum (v_n - c)² <= N b². Each
    square is bounded below by tangent lines (under-estimators): a relaxation."""
    model = built.model
    if goal.op not in ("<=", "<"):
        built.notes.append(f"{goal.text}: a lower limit on std is not modelled (left out: a "
                           f"relaxation)")
        return
    built.notes.append(f"{goal.text}: squares cut by tangents (a relaxation, a lower bound)")
    centre = model.var(-INF, INF, integer=False)
    spread: Terms = {}
    b = goal.bound
    for n in names:
        cap = caps[n]
        scale = 100.0 / cap if cap > 0 else 0.0
        square = model.var(0, INF, integer=False)
        spread[square] = 1.0
        for point in sorted({p * b for p in _TANGENTS} | {-p * b for p in _TANGENTS} | {100.0}):
            # square >= 2a (v - c) - a², v = scale * (now + expr)
            terms: Terms = {square: 1.0, centre: 2 * point}
            for column, coef in exprs[n].items():
                _add(terms, column, -2 * point * scale * coef)
            model.row(terms, lower=2 * point * scale * now[n] - point * point, family="std")
    model.row(spread, upper=len(names) * b * b + EPSILON, family="goal")


def _goal_relaxed(cluster: _Cluster, built: _Built, goal: Goal, now: dict[str, int],
                  amount: Callable[[_Type], int], caps: dict[str, int]) -> None:
    """The goal over aggregated arrivals: a node's own rule without arrivals where that can
    only relax it, and every rule summed over its group."""
    model = built.model
    op, stat = goal.op, goal.stat
    caps_ok = {n: c for n, c in caps.items() if c > 0}
    cap_rule = (stat == "max" and op in ("<=", "<", "==")) or (stat == "over" and op in ("<=",
                                                                                         "<"))
    floor_rule = stat == "min" and op in (">=", ">", "==")
    if stat == "mean":
        terms: Terms = {}
        constant = 0.0
        for members, arrivals in built.groups:
            seen = [m for m in members if m.name in caps_ok]
            if seen and len(seen) < len([m for m in members if m.name in now]):
                built.notes.append(f"{goal.text}: left out (a relaxation)")
                return
            for node in seen:
                n = node.name
                scale = 100.0 / caps_ok[n] / len(now)
                constant += now[n] * scale
                for column, coef in _node_terms(built, n, amount).items():
                    _add(terms, column, coef * scale)
            if seen and len(seen) == len(members):
                # One allocatable per group: the arrivals' share of the mean is known.
                scale = 100.0 / caps_ok[seen[0].name] / len(now)
                for kind, column in arrivals:
                    _add(terms, column, amount(kind) * scale)
            elif seen:
                built.notes.append(f"{goal.text}: left out (a relaxation)")
                return
        low, high = _interval(op, goal.bound)
        model.row(terms, low - constant, high - constant, family="goal")
        return
    if not (cap_rule or floor_rule) and stat != "std":
        built.notes.append(f"{goal.text}: left out with aggregated nodes (a relaxation)")
        return
    if stat == "std":
        _std_relaxed(cluster, built, goal, now, amount, caps)
        return
    strict = op in ("<", ">")
    flags: Terms = {}
    for members, arrivals in built.groups:
        limit_sum = 0
        group: Terms = {}
        constant = 0
        seen = [m for m in members if m.name in now]
        if not seen:
            continue
        for node in seen:
            n = node.name
            cap = caps[n]
            terms = _node_terms(built, n, amount)
            if cap_rule and stat == "max":
                level = _at_most(goal.bound, cap, strict) if cap > 0 else 0
                model.row(terms, upper=level - now[n], family="goal")
                limit_sum += level
            elif cap_rule:  # over, counted down: flag per node lets it exceed the level
                level = _at_most(goal.level, cap, False) if cap > 0 else 0
                high = now[n] + model.bounds_of(terms)[1] + sum(
                    model.upper[c] * amount(k) for k, c in arrivals)
                flag = model.var(0, 1)
                flags[flag] = 1.0
                one = dict(terms)
                one[flag] = -(high - level)
                model.row(one, upper=level - now[n], family="goal")
                _add(group, flag, -(high - level))
                limit_sum += level
            else:
                limit_sum += _at_least(goal.bound, cap, strict) if cap > 0 else 0
            constant += now[n]
            for column, coef in terms.items():
                _add(group, column, coef)
        if len(seen) == len(members):
            for kind, column in arrivals:
                _add(group, column, amount(kind))
        if cap_rule:
            model.row(group, upper=limit_sum - constant, family="goal")
        elif len(seen) == len(members):
            model.row(group, lower=limit_sum - constant, family="goal")
    if stat == "over":
        low, high = _count_interval(op, goal.bound)
        model.row(flags, low, high, family="goal")


def _std_relaxed(cluster: _Cluster, built: _Built, goal: Goal, now: dict[str, int],
                 amount: Callable[[_Type], int], caps: dict[str, int]) -> None:
    """std <= b over aggregated arrivals: by convexity a group's squares sum to at least its
    size times the square of its mean distance, cut by tangents (a relaxation)."""
    model = built.model
    if goal.op not in ("<=", "<"):
        built.notes.append(f"{goal.text}: a lower limit on std is not modelled (left out: a "
                           f"relaxation)")
        return
    built.notes.append(f"{goal.text}: squares cut by tangents per node group (a relaxation)")
    centre = model.var(-INF, INF, integer=False)
    spread: Terms = {}
    b = goal.bound
    for members, arrivals in built.groups:
        seen = [m for m in members if m.name in now]
        if not seen or caps[seen[0].name] <= 0:
            continue
        size = len(seen)
        scale = 100.0 / caps[seen[0].name] / size  # the group's mean percent per unit
        mean_terms: Terms = {}
        constant = 0.0
        for node in seen:
            constant += now[node.name]
            for column, coef in _node_terms(built, node.name, amount).items():
                _add(mean_terms, column, coef)
        if size == len(members):
            for kind, column in arrivals:
                _add(mean_terms, column, amount(kind))
        square = model.var(0, INF, integer=False)
        spread[square] = 1.0
        for point in sorted({p * b for p in _TANGENTS} | {-p * b for p in _TANGENTS} | {100.0}):
            # square >= size (2a (mean - c) - a²)
            terms: Terms = {square: 1.0, centre: 2 * point * size}
            for column, coef in mean_terms.items():
                _add(terms, column, -2 * point * size * scale * coef)
            model.row(terms, lower=size * (2 * point * scale * constant - point * point),
                      family="std")
    model.row(spread, upper=len(now) * b * b + EPSILON, family="goal")


__all__ = ["EXACT_COLUMNS", "Floor", "Solution", "floor"]

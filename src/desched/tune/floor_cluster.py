"""The cluster as the floor's model reads it (tune/floor.py): pod types, what protects them,
the budgets they draw on, and where each type may go.

Pods equal in everything the model reads (namespace, labels, requests, measured usage when a
goal reads usage, tolerations, node affinity, anti-affinity, budget, protection) form a pod
type: its pods are interchangeable, so the model counts them per node instead of placing each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

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
from desched.tune.goals import Goal
from desched.usage.metrics_server import moved_usage
from desched.usage.nodemetric import NodeLoad, read_node_load

HOSTNAME = "kubernetes.io/hostname"


@dataclass
class PodType:
    pod: Pod  # one of them: every pod of the type reads alike to the model
    requests: dict[str, int]  # with pods = 1
    usage: dict[str, int]  # cpu, memory: what moves with the pod (usage goals only)
    movable: bool
    budget: int | None  # index into Cluster.budgets
    counts: dict[str, int] = field(default_factory=dict)  # node -> pods of the type there
    anti: tuple[AntiAffinityTerm, ...] = ()


@dataclass
class Cluster:
    nodes: list[Node]
    load: dict[str, dict[str, int]]  # node -> requested per resource (pods = count)
    usage: dict[str, dict[str, int]]  # measured nodes -> cpu, memory
    types: list[PodType]
    budgets: list[int]  # moves allowed per budget over the run
    schedulable: dict[str, bool]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Relax:
    """Constraint families left out, to find which one makes a goal unreachable."""

    budgets: bool = False
    protections: bool = False
    placement: bool = False

def protection(snapshot: ClusterSnapshot, policy: Policy,
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


def read_cluster(snapshot: ClusterSnapshot, policy: Policy, goals: list[Goal], cycles: int,
             now: datetime, usage: bool, relax: Relax) -> Cluster:
    protected = protection(snapshot, policy, now)
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
    types: dict[tuple[object, ...], PodType] = {}
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
            labels = tuple(sorted(pod.metadata.labels.items()))
            if movable:
                key: tuple[object, ...] = (
                    True, budget, pod.namespace, labels, tuple(sorted(requests.items())),
                    tuple(sorted(amounts.items())),
                    _encode((spec.tolerations, spec.affinity, spec.node_selector)))
            else:
                # A pod that stays is in the model only as a neighbour other pods' anti-
                # affinity reads (its amounts are in its node's): DaemonSet pods, pinned by
                # name to their node, make one type, not one per node.
                anti = spec.affinity.pod_anti_affinity if spec.affinity is not None else None
                key = (False, pod.namespace, labels, _encode(anti))
            kind = types.get(key)
            if kind is None:
                kind = types[key] = PodType(pod, requests, amounts, movable, budget,
                                          anti=compile_anti_affinity(pod))
            kind.counts[name] = kind.counts.get(name, 0) + 1
    schedulable = {n.name: n.ready and not n.spec.unschedulable for n in nodes}
    return Cluster(nodes, load, measured, list(types.values()), budgets, schedulable)


def _placement(cluster: Cluster, kind: PodType, relax: Relax,
               groups: dict[tuple[object, ...], list[Node]]) -> list[Node]:
    """The nodes the type may arrive at: checked once per group of nodes that look alike.
    Whether the pod fits the node's allocatable is the capacity rows' to say."""
    matcher = required_affinity_matcher(kind.pod)
    tolerations = kind.pod.spec.tolerations
    out: list[Node] = []
    for members in groups.values():
        first = members[0]
        if not cluster.schedulable[first.name]:
            continue
        if not relax.placement and (
                first_untolerated(first.spec.taints, tolerations, SCHEDULING_EFFECTS) is not None
                or not matcher(first)):
            continue
        out.extend(members)
    return out


def places(cluster: Cluster, relax: Relax,
           groups: dict[tuple[object, ...], list[Node]]) -> dict[int, list[Node]]:
    """Per movable type, the nodes it may arrive at; types alike in tolerations and node
    affinity (the replicas of a workload, whatever their labels) share one answer (one list)."""
    known: dict[bytes, list[Node]] = {}
    out: dict[int, list[Node]] = {}
    for kind in cluster.types:
        if not kind.movable:
            continue
        spec = kind.pod.spec
        node_affinity = spec.affinity.node_affinity if spec.affinity is not None else None
        key = _encode((spec.tolerations, node_affinity, spec.node_selector))
        found = known.get(key)
        if found is None:
            found = known[key] = _placement(cluster, kind, relax, groups)
        out[id(kind)] = found
    return out


def node_groups(cluster: Cluster, allocatable: dict[str, dict[str, int]], relax: Relax,
                coarse: bool = False) -> dict[tuple[object, ...], list[Node]]:
    """Nodes by what a pod's placement reads of them: the label keys pods select on (the name
    when a pod selects by field), taints, allocatable and schedulability. `coarse`: not by
    name nor hostname (the groups arrivals are aggregated over)."""
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
    if coarse:
        keys.discard(HOSTNAME)
        by_name = False
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

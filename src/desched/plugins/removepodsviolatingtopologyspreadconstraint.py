"""RemovePodsViolatingTopologySpreadConstraint (balance): for every distinct topology spread
constraint of the evictable pods of a namespace, counts the matching pods per topology domain
and, when the largest and smallest domains differ by more than maxSkew, picks pods from the large
domains towards the ideal average with upstream's two-pointer algorithm, then evicts them
.

Only pods passing the plugin's pod filter (DefaultEvictor Filter, namespaces, labelSelector) are
counted, so non-evictable pods do not weigh in a domain. minDomains is ignored, as upstream.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import msgspec

from desched.framework.evictor import EvictionLimitError
from desched.framework.registry import PluginSpec, Scope
from desched.framework.types import Handle
from desched.framework.verdicts import RUN_ENDED, listing_scope
from desched.model.labels import (
    Matcher,
    SelectorError,
    compile_selector,
    matcher_unless_empty,
)
from desched.model.meta import LabelSelector, json_encoder
from desched.model.node import Node
from desched.model.pod import Pod, TopologySpreadConstraint
from desched.policy_files.args import (
    Namespaces,
    namespace_allowed,
    namespace_scope,
    validate_label_selector,
    validate_namespaces,
)
from desched.predicates.nodeaffinity import NodeMatcher, required_affinity_matcher
from desched.predicates.nodefit import (
    placement_signature,
    pod_fits_any_other_node,
    taint_free_signature,
)
from desched.predicates.nodeindex import node_index
from desched.predicates.taints import SCHEDULING_EFFECTS, first_untolerated
from desched.snapshot.cluster import ClusterSnapshot

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
_SUPPORTED = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)
HONOR = "Honor"
IGNORE = "Ignore"


class RemovePodsViolatingTopologySpreadConstraintArgs(msgspec.Struct, rename="camel",
                                                      forbid_unknown_fields=True):
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    constraints: list[str] = []
    topology_balance_node_fit: bool | None = None


def validate(args: RemovePodsViolatingTopologySpreadConstraintArgs) -> list[str]:
    errs = validate_namespaces(args.namespaces) + validate_label_selector(args.label_selector)
    for constraint in args.constraints:
        if constraint not in _SUPPORTED:
            # Go prints the sets.Set as a map with sorted keys.
            errs.append(f"constraint {constraint} is not one of "
                        f"map[{DO_NOT_SCHEDULE}:{{}} {SCHEDULE_ANYWAY}:{{}}]")
    return errs


def default(args: RemovePodsViolatingTopologySpreadConstraintArgs) -> None:
    if not args.constraints:
        args.constraints = [DO_NOT_SCHEDULE]
    if args.topology_balance_node_fit is None:
        args.topology_balance_node_fit = True


@dataclass(frozen=True)
class _Constraint:
    """A pod's constraint with its selector merged (matchLabelKeys) and its inclusion policies
    resolved. `key` stands for upstream's reflect.DeepEqual over the internal constraint."""

    max_skew: int
    topology_key: str
    matcher: Matcher
    affinity: NodeMatcher | None  # the pod's required node affinity, when Honor
    tolerations_pod: Pod | None  # whose tolerations count, when Honor
    key: tuple[object, ...]
    eligibility_key: tuple[object, ...]
    # Label pairs every matching pod carries (matchLabels and matchLabelKeys): an index key.
    equalities: tuple[tuple[str, str], ...] = ()
    # The pod whose nodeSelector and required affinity `affinity` matches, when Honor: the node
    # label index narrows the nodes to try from it.
    affinity_pod: Pod | None = None

    def describe(self) -> str:
        return f"topologyKey {self.topology_key} (maxSkew {self.max_skew})"


def _selector_requirements(selector: LabelSelector) -> list[tuple[str, str, tuple[str, ...]]]:
    """The requirements LabelSelectorAsSelector builds (matchLabels as `=`), for comparison."""
    reqs: list[tuple[str, str, tuple[str, ...]]] = [
        (k, "=", (v,)) for k, v in (selector.match_labels or {}).items()]
    reqs.extend((r.key, r.operator, tuple(sorted(r.values)))
                for r in selector.match_expressions or [])
    return reqs


def _with_labels(base: Matcher, pairs: tuple[tuple[str, str], ...]) -> Matcher:
    """The selector ANDed with the pod's own values of the constraint's matchLabelKeys."""

    def match(labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in pairs) and base(labels)

    return match


_Key = tuple[tuple[object, ...], tuple[object, ...], dict[str, str]]


def _key_inputs(pod: Pod, tscs: tuple[TopologySpreadConstraint, ...]) -> tuple[object, ...]:
    """Everything _constraint_key reads of these constraints of the pod and of the pod."""
    spec = pod.spec
    affinity = spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    required = (node_affinity.required_during_scheduling_ignored_during_execution
                if node_affinity is not None else None)
    labels = pod.metadata.labels
    label_values = tuple([labels.get(k) for tsc in tscs for k in tsc.match_label_keys])
    return tscs, label_values, spec.node_selector, required, spec.tolerations


def _constraint_key(tsc: TopologySpreadConstraint, pod: Pod) -> _Key:
    """(key, eligibility key, matchLabelKeys values) of upstream's internal constraint. The key
    stands for reflect.DeepEqual over {maxSkew, topologyKey, selector, policies, pod node
    affinity (Honor only), pod tolerations (Honor only)}; cheap enough to compute per pod."""
    extra: dict[str, str] = {}
    if tsc.label_selector is None:
        # LabelSelectorAsSelector(nil) is "nothing", and merging matchLabelKeys keeps it so.
        selector_key: object = ("nothing",)
    else:
        labels = pod.metadata.labels
        extra = {k: labels[k] for k in tsc.match_label_keys if k in labels}
        reqs = _selector_requirements(tsc.label_selector)
        reqs.extend((k, "=", (v,)) for k, v in extra.items())
        selector_key = tuple(sorted(reqs))
    honor_affinity = (tsc.node_affinity_policy or HONOR) == HONOR
    honor_taints = (tsc.node_taints_policy or IGNORE) == HONOR
    affinity_key: object = None
    if honor_affinity:
        spec_affinity = pod.spec.affinity
        node_affinity = spec_affinity.node_affinity if spec_affinity is not None else None
        required = (node_affinity.required_during_scheduling_ignored_during_execution
                    if node_affinity is not None else None)
        affinity_key = (tuple(sorted(pod.spec.node_selector.items())),
                        json_encoder.encode(required) if required is not None else None)
    tolerations_key = json_encoder.encode(pod.spec.tolerations) if honor_taints else None
    eligibility_key = (tsc.topology_key, honor_affinity, affinity_key, honor_taints,
                       tolerations_key)
    return (tsc.max_skew, selector_key, *eligibility_key), eligibility_key, extra


def _build_constraint(tsc: TopologySpreadConstraint, pod: Pod, key: tuple[object, ...],
                      eligibility_key: tuple[object, ...], extra: dict[str, str]) -> _Constraint:
    """Upstream's newTopologySpreadConstraint. Raises SelectorError for an invalid selector."""
    base = compile_selector(tsc.label_selector)
    honor_affinity = bool(eligibility_key[1])
    honor_taints = bool(eligibility_key[3])
    return _Constraint(
        max_skew=tsc.max_skew, topology_key=tsc.topology_key,
        matcher=_with_labels(base, tuple(extra.items())) if extra else base,
        affinity=required_affinity_matcher(pod) if honor_affinity else None,
        tolerations_pod=pod if honor_taints else None,
        key=key, eligibility_key=eligibility_key,
        equalities=(*(tsc.label_selector.match_labels or {}).items(), *extra.items())
        if tsc.label_selector is not None else (),
        affinity_pod=pod if honor_affinity else None)


def _count_domains(constraint: _Constraint, pods: Iterable[Pod],
                   node_map: Mapping[str, Node]) -> tuple[dict[str, list[Pod]], int]:
    """The pods the constraint counts (not terminating, selected by it) per domain value of
    their node, in the order met, and how many they are."""
    counted: dict[str, list[Pod]] = {}
    total = 0
    key = constraint.topology_key
    for pod in pods:
        if pod.terminating or not constraint.matcher(pod.metadata.labels):
            continue
        value = node_map[pod.spec.node_name].metadata.labels.get(key)
        if value is None:
            continue
        in_domain = counted.get(value)
        if in_domain is None:
            in_domain = counted[value] = []
        in_domain.append(pod)
        total += 1
    return counted, total


def _node_eligible(constraint: _Constraint, node: Node) -> bool:
    """matchNodeInclusionPolicies: the pod's required node affinity (Honor) and its tolerations
    of NoSchedule/NoExecute taints (Honor)."""
    if constraint.affinity is not None and not constraint.affinity(node):
        return False
    pod = constraint.tolerations_pod
    return pod is None or not node.spec.taints or first_untolerated(
        node.spec.taints, pod.spec.tolerations, SCHEDULING_EFFECTS) is None


def _has_selector_or_affinity(pod: Pod) -> bool:
    affinity = pod.spec.affinity
    return bool(pod.spec.node_selector) or (affinity is not None
                                            and affinity.node_affinity is not None)


def _domain_order_key(pod: Pod) -> tuple[int, int, int]:
    """sortDomains within a domain: pods with a nodeSelector/node affinity first, then the
    others; within a class ascending priority, nil first. Eviction takes from the back, so the
    highest-priority pod without a selector goes first (upstream's inverted comparator)."""
    prio = pod.spec.priority
    return (0 if _has_selector_or_affinity(pod) else 1, 0 if prio is None else 1, prio or 0)


def _by_value(index: dict[str, dict[str, list[Pod]]], pods: list[Pod],
              name: str) -> dict[str, list[Pod]]:
    """The pods carrying label `name`, by value, in `pods` order; built on first use."""
    by_value = index.get(name)
    if by_value is None:
        by_value = index[name] = {}
        for pod in pods:
            value = pod.metadata.labels.get(name)
            if value is not None:
                bucket = by_value.get(value)
                if bucket is None:
                    bucket = by_value[value] = []
                bucket.append(pod)
    return by_value


class _Eligible:
    """The nodes a constraint's inclusion policies admit, grouped by topology value (node order);
    shared by every constraint with the same eligibility key."""

    __slots__ = ("index", "nodes_by_value", "values")

    def __init__(self, topology_key: str, admitted: Iterable[Node]) -> None:
        self.nodes_by_value: dict[str, list[Node]] = {}
        for n in admitted:
            value = n.metadata.labels.get(topology_key)
            if value is not None:
                self.nodes_by_value.setdefault(value, []).append(n)
        self.values = list(self.nodes_by_value)
        self.index = {v: i for i, v in enumerate(self.values)}


class _Admitted:
    """The nodes of one node list each constraint's inclusion policies admit, in the list's
    order, and the _Eligible groupings of them: built once per inclusion policy (the
    eligibility key without the topology key) and per eligibility key. Constraints of many
    workloads share a policy (a pool's nodeSelector), and the node label index gives the nodes
    a nodeSelector or required affinity may match, so only those are matched in full."""

    def __init__(self, nodes: list[Node], snapshot: ClusterSnapshot) -> None:
        self.nodes = nodes
        self.snapshot = snapshot
        self._position: dict[str, int] | None = None
        self._by_policy: dict[tuple[object, ...], list[Node]] = {}
        self._eligible: dict[tuple[object, ...], _Eligible] = {}

    def eligible(self, constraint: _Constraint) -> _Eligible:
        key = constraint.eligibility_key
        found = self._eligible.get(key)
        if found is None:
            policy = key[1:]
            admitted = self._by_policy.get(policy)
            if admitted is None:
                admitted = self._by_policy[policy] = self._admit(constraint)
            found = self._eligible[key] = _Eligible(constraint.topology_key, admitted)
        return found

    def _admit(self, constraint: _Constraint) -> list[Node]:
        """matchNodeInclusionPolicies over the list's nodes."""
        nodes: Iterable[Node] = self.nodes
        pod = constraint.affinity_pod
        if pod is not None:
            narrowed = node_index(self.snapshot).candidates(pod, taint_free_signature(pod)[0])
            if narrowed is not None:
                position = self._position
                if position is None:
                    position = self._position = {n.metadata.name: i
                                                 for i, n in enumerate(self.nodes)}
                at = sorted(i for i in (position.get(n.metadata.name) for n in narrowed.nodes)
                            if i is not None)
                nodes = [self.nodes[i] for i in at]
        return [n for n in nodes if _node_eligible(constraint, n)]


class RemovePodsViolatingTopologySpreadConstraint:
    def __init__(self, args: RemovePodsViolatingTopologySpreadConstraintArgs,
                 handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.labels = matcher_unless_empty(args.label_selector)
        self.allowed = frozenset(args.constraints)
        self.node_fit = args.topology_balance_node_fit is not False
        # Under explain only: the last run's counted pods by namespace and the keys of the pods
        # it picked, for `verdict`.
        self._run: tuple[dict[str, list[Pod]], set[str]] | None = None

    def _pod_filter(self, pod: Pod) -> bool:
        namespaces = self.args.namespaces
        if namespaces is not None and not namespace_allowed(namespaces, pod.namespace):
            return False
        if self.labels is not None and not self.labels(pod.metadata.labels):
            return False
        return self.handle.filter(pod)

    def _counted(self, nodes: list[Node]) -> dict[str, list[Pod]]:
        """The pods passing the pod filter, by namespace (node order). _pod_filter inlined: it
        runs for every pod."""
        handle = self.handle
        pods_on_node = handle.snapshot.pods_on_node
        namespaces, labels = self.args.namespaces, self.labels
        evictor_filter, plugin = handle.evictor.filter, handle.plugin
        by_namespace: dict[str, list[Pod]] = {}
        for node in nodes:
            for pod in pods_on_node(node.metadata.name):
                namespace = pod.metadata.namespace
                if namespaces is not None and not namespace_allowed(namespaces, namespace):
                    continue
                if labels is not None and not labels(pod.metadata.labels):
                    continue
                if not evictor_filter(pod, plugin):
                    continue
                in_namespace = by_namespace.get(namespace)
                if in_namespace is None:
                    in_namespace = by_namespace[namespace] = []
                in_namespace.append(pod)
        return by_namespace

    def balance(self, nodes: list[Node]) -> None:
        handle = self.handle
        snapshot = handle.snapshot
        node_map = {n.metadata.name: n for n in nodes}
        by_namespace = self._counted(nodes)

        # Insertion-ordered set of pods to evict (upstream: a Go map, random order).
        selected: dict[str, tuple[Pod, str]] = {}
        admitted = _Admitted(nodes, snapshot)
        for namespace, pods in by_namespace.items():
            # label -> value -> the namespace's counted pods carrying it, built per label on
            # demand; lets a constraint look only at pods that can match its selector instead of
            # the whole namespace.
            label_index: dict[str, dict[str, list[Pod]]] = {}
            for constraint in self._namespace_constraints(pods):
                eligible = admitted.eligible(constraint)
                # Domains of eligible nodes exist even when empty; a pod on a node the
                # inclusion policies exclude creates its domain on demand.
                candidates = pods
                if constraint.equalities:
                    candidates = min((_by_value(label_index, pods, name).get(value, [])
                                      for name, value in constraint.equalities), key=len)
                counted, total = _count_domains(constraint, candidates, node_map)
                if not counted:
                    continue  # every domain is empty: balanced
                empty = len(eligible.values) - sum(1 for v in counted if v in eligible.index)
                smallest = 0 if empty else min(len(p) for p in counted.values())
                if max(len(p) for p in counted.values()) - smallest <= constraint.max_skew:
                    continue
                self._balance_domains(namespace, constraint, eligible, counted, total,
                                      selected)
        if handle.log.explaining:
            self._run = (by_namespace, set(selected))

        limited_nodes: set[str] = set()
        for pod, reason in selected.values():
            if pod.spec.node_name in limited_nodes:
                continue
            if snapshot.pods.get(pod.key) is not pod:
                continue
            if not self._pod_filter(pod) or not handle.pre_eviction_filter(pod):
                continue
            try:
                handle.evict(pod, reason)
            except EvictionLimitError as err:
                if err.scope == "total":
                    return
                if err.scope == "node":
                    limited_nodes.add(pod.spec.node_name)

    def verdict(self, pod: Pod, nodes: list[Node]) -> str | None:
        """Why this run passed the pod over (explain only): its labels, its constraints, or
        per constraint the domain counts the run found (within maxSkew, or the pod's domain not
        among those it moved pods from)."""
        scope = listing_scope(pod, self.labels, terminal=False)
        if scope is not None:
            return scope
        tscs = pod.spec.topology_spread_constraints
        if not tscs:
            return "pod has no topology spread constraints"
        mine = [tsc for tsc in tscs if tsc.when_unsatisfiable in self.allowed]
        if not mine:
            return (f"none of its topology spread constraints is of the kinds the plugin "
                    f"balances ({', '.join(sorted(self.allowed))})")
        if self._run is None:
            return None
        counted, selected = self._run
        if pod.key in selected:
            return RUN_ENDED
        node_map = {n.name: n for n in nodes}
        return "; ".join(self._constraint_verdict(tsc, pod, counted.get(pod.namespace, []),
                                                  node_map) for tsc in mine)

    def _constraint_verdict(self, tsc: TopologySpreadConstraint, pod: Pod, pods: list[Pod],
                            node_map: dict[str, Node]) -> str:
        """One constraint of an explained pod: its domains' counts as the run found them."""
        key, eligibility_key, extra = _constraint_key(tsc, pod)
        try:
            constraint = _build_constraint(tsc, pod, key, eligibility_key, extra)
        except SelectorError:
            return f"topologyKey {tsc.topology_key}: its labelSelector is invalid, not balanced"
        topology_key = constraint.topology_key
        own = node_map[pod.node_name].metadata.labels.get(topology_key)
        if own is None:
            return f"node {pod.node_name} has no label {topology_key}: in no domain"
        # Eligible domains count even when empty; others only when pods of them match.
        eligible = _Admitted(list(node_map.values()), self.handle.snapshot).eligible(constraint)
        sizes = dict.fromkeys(eligible.values, 0)
        for value, in_domain in _count_domains(constraint, pods, node_map)[0].items():
            sizes[value] = len(in_domain)
        found = (f"{constraint.describe()}: pods per domain "
                 f"{', '.join(f'{v} {n}' for v, n in sizes.items())}")
        skew = max(sizes.values()) - min(sizes.values())
        if skew <= constraint.max_skew:
            return f"{found}; skew {skew} is within maxSkew"
        ideal = sum(sizes.values()) / len(sizes)
        if sizes[own] <= ideal:
            return (f"{found}; skew {skew} is over maxSkew, but its domain {own} ({sizes[own]}) "
                    f"is not above the ideal average {ideal:.2f}: pods move out of the larger "
                    f"domains")
        return (f"{found}; skew {skew} is over maxSkew and its domain {own} ({sizes[own]}) is "
                f"above the ideal average {ideal:.2f}, but the pods picked to move out of it "
                f"were others")

    def _namespace_constraints(self, pods: list[Pod]) -> list[_Constraint]:
        """The distinct allowed constraints of the namespace's pods, in first-seen order."""
        seen: dict[tuple[object, ...], _Constraint | None] = {}
        # Owner UID -> what _constraint_key reads of the last of its pods, and the keys it gave:
        # a workload's pods share their constraints, and comparing is cheaper than recomputing.
        by_owner: dict[str, tuple[tuple[object, ...], list[_Key | None]]] = {}
        allowed = self.allowed
        for pod in pods:
            tscs = pod.spec.topology_spread_constraints
            if not tscs:
                continue
            inputs = _key_inputs(pod, tscs)
            refs = pod.metadata.owner_references
            owner = refs[0].uid if refs else ""
            last = by_owner.get(owner)
            if last is not None and last[0] == inputs:
                keys = last[1]
            else:
                keys = [_constraint_key(tsc, pod) if tsc.when_unsatisfiable in allowed else None
                        for tsc in tscs]
                by_owner[owner] = (inputs, keys)
            for tsc, computed in zip(tscs, keys, strict=True):
                if computed is None:
                    continue
                key, eligibility_key, extra = computed
                if key in seen:
                    continue
                try:
                    seen[key] = _build_constraint(tsc, pod, key, eligibility_key, extra)
                except SelectorError:
                    seen[key] = None  # upstream logs "cannot process topology spread constraint"
        return [c for c in seen.values() if c is not None]

    def _balance_domains(self, namespace: str, constraint: _Constraint, eligible: _Eligible,
                         counted: dict[str, list[Pod]], total: int,
                         selected: dict[str, tuple[Pod, str]]) -> None:
        """Upstream's balanceDomains. A domain is only ever the low side (i) or the high side
        (j) of the two pointers, and the low side is only measured, so only sizes are tracked
        for it; pod lists are sorted when a domain first becomes the high side."""
        snapshot = self.handle.snapshot
        # Domains ascending by size, ties in creation order (eligible nodes first, then the
        # on-demand ones): the empty ones, then the others.
        order = [v for v in eligible.values if v not in counted]
        first_extra = len(eligible.values)
        extra_pos = {v: first_extra + k for k, v in enumerate(
            v for v in counted if v not in eligible.index)}
        order.extend(sorted(counted, key=lambda v: (len(counted[v]),
                                                    eligible.index.get(v, extra_pos.get(v, 0)))))
        sizes = [len(counted.get(v, ())) for v in order]
        ideal = total / len(order)
        initial = list(sizes)
        below_nodes: list[Node] | None = None

        def below() -> list[Node]:
            """Eligible nodes of the domains below the ideal average, as the loop starts."""
            nonlocal below_nodes
            if below_nodes is None:
                by_value = eligible.nodes_by_value
                below_nodes = [n for v, size in zip(order, initial, strict=True) if size < ideal
                               for n in by_value.get(v, ())]
            return below_nodes

        # NodeFit once per placement signature (it is all NodeFit reads of a pod, and the pod's
        # own node is never among the candidates): the cluster does not change while the plan
        # is made, and pods of one workload share the answer.
        by_signature: dict[bytes, bool] = {}

        def fits(pod: Pod) -> bool:
            signature = placement_signature(pod)
            found = by_signature.get(signature)
            if found is None:
                candidates = below()
                found = by_signature[signature] = bool(candidates) and \
                    pod_fits_any_other_node(pod, candidates, snapshot)
            return found

        prepared: set[int] = set()
        key, skew_max = constraint.topology_key, constraint.max_skew
        i, j = 0, len(order) - 1
        while i < j:
            if sizes[j] <= ideal:
                j -= 1  # once per iteration, as upstream
            skew = sizes[j] - sizes[i]
            if skew <= skew_max:
                i += 1
                continue
            above_avg = math.ceil(sizes[j] - ideal)
            below_avg = math.ceil(ideal - sizes[i])
            half_skew = math.ceil((skew - skew_max) / 2)
            move = min(above_avg, below_avg, half_skew)
            if move <= 0:
                i += 1
                continue
            high = counted[order[j]]  # sizes[j] > ideal >= 0: a domain that had pods
            if j not in prepared:
                # Selector/affinity class, then priority (sortDomains); then the pods that fit
                # a below-average node go to the back, where pods are taken from. Taking from
                # the back keeps both orders, so one sort per domain is enough.
                high.sort(key=_domain_order_key)
                high.sort(key=fits)
                prepared.add(j)
            moving = high[-move:]
            reason = (f"topology spread constraint {constraint.describe()} in namespace "
                      f"{namespace} is unbalanced: domain {key}={order[j]} has {sizes[j]} "
                      f"matching pods, {key}={order[i]} has {sizes[i]}, ideal average "
                      f"{ideal:.2f}; moving {move} pod(s)")
            for pod in moving:
                if self.node_fit and not fits(pod):
                    # Still counted as moved, so the algorithm completes (upstream).
                    self.handle.skip(pod, f"would move out of {key}={order[j]} to balance "
                                          f"{constraint.describe()}, but fits none of the "
                                          f"{len(below())} node(s) in domains below the ideal "
                                          f"average {ideal:.2f}")
                    continue
                selected.setdefault(pod.key, (pod, reason))
            del high[-move:]
            sizes[j] -= move
            sizes[i] += move


SPEC = PluginSpec(
    name="RemovePodsViolatingTopologySpreadConstraint",
    extension_points=frozenset({"balance"}),
    args_type=RemovePodsViolatingTopologySpreadConstraintArgs,
    factory=RemovePodsViolatingTopologySpreadConstraint,
    validate=validate,
    scope=lambda args: Scope(namespaces=namespace_scope("namespaces", args.namespaces)),
    default=default,
)

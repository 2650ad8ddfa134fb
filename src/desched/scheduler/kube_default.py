"""`kube-default`: kube-scheduler (v1.36) with a profile: its default one, or one the user gives
in a KubeSchedulerConfiguration (scheduler/profile.py, scheduler/config_file.py).

Filters: NodeUnschedulable, NodeAffinity, TaintToleration, NodeResourcesFit, InterPodAffinity
(the pod's required affinity and anti-affinity over their topology domains, and running pods'
required anti-affinity against it), PodTopologySpread (DoNotSchedule constraints, the pod's own
or the profile's List defaults). Scores, number for number (scheduler/scores.py), each
normalized as kube-scheduler does and weighted by the profile: TaintToleration, NodeAffinity,
NodeResourcesFit (its scoring strategy, non-zero request defaults), NodeResourcesBalancedAllocation,
PodTopologySpread (the pod's ScheduleAnyway constraints, else the default constraints: the system
defaults {hostname, maxSkew 3} and {zone, maxSkew 5} for a pod a Service, ReplicaSet, StatefulSet
or ReplicationController selects), InterPodAffinity (the pod's preferred terms, and running
pods' preferred terms and required affinity toward it) and ImageLocality (node status.images).

Where kube-scheduler chooses at random the Placement says so: `tied` lists every node with the
winning score, and `why` notes when kube-scheduler would score only a sample of the feasible
nodes (percentageOfNodesToScore). desched takes the first tied node by name, so a simulation is
reproducible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import msgspec

from desched.model.meta import LabelSelector
from desched.model.node import Node
from desched.model.pod import Pod, PodAffinityTerm, Toleration, TopologySpreadConstraint
from desched.predicates.domains import blocked_by_existing_anti_affinity, domains_of
from desched.predicates.labels import Matcher, SelectorError, compile_selector
from desched.predicates.nodeaffinity import (
    compile_term,
    preferred_weigher,
    required_affinity_matcher,
)
from desched.predicates.nodefit import affinity_space, insufficient_resource
from desched.predicates.podaffinity import term_namespaces
from desched.predicates.taints import SCHEDULING_EFFECTS, first_untolerated, tolerates_taint
from desched.scheduler import scores as sc
from desched.scheduler.default_spread import default_selector
from desched.scheduler.model import KUBE_DEFAULT, Placement
from desched.scheduler.profile import (
    DEFAULT,
    DEFAULT_CONFIG,
    DEFAULT_RESOURCES,
    Profile,
    SchedulerConfig,
)
from desched.scheduler.ranking import Rankings
from desched.snapshot.cluster import ClusterSnapshot

_encoder = msgspec.json.Encoder(enc_hook=str)
_HOSTNAME = "kubernetes.io/hostname"
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_SCALAR_PREFIXES = ("hugepages-", "attachable-volumes-")
_NATIVE = ("cpu", "memory", "ephemeral-storage", "pods")


def _selector(selector: LabelSelector | None) -> Matcher | None:
    try:
        return compile_selector(selector)
    except SelectorError:
        return None  # an invalid selector selects nothing


def _scalar(resource: str) -> bool:
    """schedutil.IsScalarResourceName: extended resources, hugepages, attachable volumes."""
    return resource not in _NATIVE and (
        ("/" in resource and not resource.startswith("kubernetes.io/"))
        or resource.startswith(_SCALAR_PREFIXES))


# -- what the node holds, less a pod leaving it ----------------------------------------------------

def _node_amounts(pod: Pod, node: Node, snapshot: ClusterSnapshot, resources: Sequence[str],
                  non_zero: bool) -> tuple[list[int], list[int], list[int]]:
    """(allocated, pod request, allocatable) per resource, as resourceAllocationScorer reads
    them: with `non_zero`, cpu and memory count the scheduler's defaults for containers that
    request none. A pod still bound to the node is leaving it: its own requests are taken off."""
    name = node.metadata.name
    requested = snapshot.node_requested(name)
    zero_cpu, zero_memory = snapshot.node_non_zero_requested(name) if non_zero else (0, 0)
    own = pod.requests
    own_non_zero = pod.non_zero_requests if non_zero else own
    leaving = pod.spec.node_name == name
    allocatable = node.allocatable
    allocated_list, request_list, capacity_list = [], [], []
    for resource in resources:
        request = (own_non_zero if resource in ("cpu", "memory") else own).get(resource, 0)
        if request == 0 and _scalar(resource):
            allocated_list.append(0)
            request_list.append(0)
            capacity_list.append(0)
            continue
        if non_zero and resource == "cpu":
            allocated = zero_cpu
        elif non_zero and resource == "memory":
            allocated = zero_memory
        else:
            allocated = requested.get(resource, 0)
        if leaving:
            allocated -= request
        capacity = allocatable.get(resource, 0)
        allocated_list.append(allocated if capacity else 0)
        request_list.append(request if capacity else 0)
        capacity_list.append(capacity)
    return allocated_list, request_list, capacity_list


def fit_score(pod: Pod, node: Node, snapshot: ClusterSnapshot, profile: Profile) -> int:
    strategy = profile.fit
    allocated, request, capacity = _node_amounts(
        pod, node, snapshot, [r.name for r in strategy.resources], non_zero=True)
    return sc.fit_score(strategy, [a + r for a, r in zip(allocated, request, strict=True)],
                        capacity)


def balanced_score(pod: Pod, node: Node, snapshot: ClusterSnapshot, profile: Profile) -> int:
    allocated, request, capacity = _node_amounts(
        pod, node, snapshot, [r.name for r in profile.balanced_resources], non_zero=False)
    return sc.balanced_allocation([a + r for a, r in zip(allocated, request, strict=True)],
                                  allocated, capacity)


def default_resources(profile: Profile) -> bool:
    """Whether the profile scores resources as the default profile does (LeastAllocated and
    BalancedAllocation over cpu and memory, weight 1 each): resource_score's fast case."""
    return (profile.fit.type == "LeastAllocated" and profile.fit.resources == DEFAULT_RESOURCES
            and profile.balanced_resources == DEFAULT_RESOURCES)


def _balance(cpu: float, memory: float) -> int:
    """balanced_resource_score for the two fractions cpu and memory (same float steps)."""
    return int((1 - abs((min(1.0, cpu) - min(1.0, memory)) / 2)) * sc.MAX)


def resource_score(pod: Pod, node: Node, snapshot: ClusterSnapshot, profile: Profile,
                   balance: bool) -> int:
    """NodeResourcesFit's and (with `balance`) BalancedAllocation's scores, weighted: the same
    numbers as fit_score and balanced_score, computed without their generality for the
    default resources (a Ranking computes it for every node)."""
    fit_weight = profile.weight("NodeResourcesFit")
    balance_weight = profile.weight("NodeResourcesBalancedAllocation") if balance else 0
    if not default_resources(profile):
        return (fit_weight * fit_score(pod, node, snapshot, profile) if fit_weight else 0) + (
            balance_weight * balanced_score(pod, node, snapshot, profile)
            if balance_weight else 0)
    name = node.metadata.name
    allocatable = node.allocatable
    cpu_cap, memory_cap = allocatable.get("cpu", 0), allocatable.get("memory", 0)
    non_zero, requests = pod.non_zero_requests, pod.requests
    pod_cpu, pod_memory = non_zero.get("cpu", 0), non_zero.get("memory", 0)
    own_cpu, own_memory = requests.get("cpu", 0), requests.get("memory", 0)
    zero_cpu, zero_memory = snapshot.node_non_zero_requested(name)
    used = snapshot.node_requested(name)
    used_cpu, used_memory = used.get("cpu", 0), used.get("memory", 0)
    if pod.spec.node_name == name:  # leaving: its own requests no longer count
        zero_cpu -= pod_cpu
        zero_memory -= pod_memory
        used_cpu -= own_cpu
        used_memory -= own_memory
    total = 0
    if fit_weight:
        parts = [sc.least_requested(zero_cpu + pod_cpu, cpu_cap)] if cpu_cap else []
        if memory_cap:
            parts.append(sc.least_requested(zero_memory + pod_memory, memory_cap))
        total += fit_weight * (sum(parts) // len(parts) if parts else 0)
    if balance_weight:
        if cpu_cap and memory_cap:
            with_pod = _balance((used_cpu + own_cpu) / cpu_cap,
                                (used_memory + own_memory) / memory_cap)
            gain = with_pod - _balance(used_cpu / cpu_cap, used_memory / memory_cap)
        else:
            gain = 0  # one fraction or none: no deviation, with the pod or without
        total += balance_weight * (sc.MAX // 2 + sc._div(sc.MAX // 2 + gain, 2))
    return total


def best_effort(pod: Pod, profile: Profile) -> bool:
    """BalancedAllocation skips a pod that requests none of its resources."""
    requests = pod.requests
    return not any(requests.get(r.name, 0) for r in profile.balanced_resources)


def _prefer_no_schedule_tolerations(pod: Pod) -> tuple[Toleration, ...]:
    return tuple(t for t in pod.spec.tolerations if t.effect in ("", "PreferNoSchedule"))


def untolerated_soft_taints(tolerations: tuple[Toleration, ...], node: Node) -> int:
    return sum(1 for t in node.spec.taints
               if t.effect == "PreferNoSchedule" and not tolerates_taint(tolerations, t))


def node_affinity_weigher(pod: Pod, profile: Profile) -> Callable[[Node], int] | None:
    """The NodeAffinity score's raw value per node (the pod's preferred terms plus the
    profile's addedAffinity), or None when there is nothing to prefer (the plugin skips)."""
    weigh = preferred_weigher(pod)
    affinity = pod.spec.affinity
    own = (affinity is not None and affinity.node_affinity is not None and bool(
        affinity.node_affinity.preferred_during_scheduling_ignored_during_execution))
    added = profile.added_affinity
    extra = [(compile_term(t.preference), t.weight)
             for t in (added.preferred_during_scheduling_ignored_during_execution
                       if added is not None else ())]
    if not own and not extra:
        return None
    if not extra:
        return weigh
    return lambda node: weigh(node) + sum(w for term, w in extra if term(node))


# -- images ----------------------------------------------------------------------------------------

def _image_index(nodes: Sequence[Node], snapshot: ClusterSnapshot
                 ) -> dict[str, dict[str, int]] | None:
    """Image name -> node name -> size, over the nodes that report images (by each of an
    image's names, as kube-scheduler counts them); None when no node does."""
    key = ("images", id(nodes), len(nodes))
    cached = snapshot.caches.get("image-index")
    if cached is not None and cached[0] == key and cached[1] is nodes:
        found: dict[str, dict[str, int]] | None = cached[2]
        return found
    index: dict[str, dict[str, int]] = {}
    for node in nodes:
        for image in node.status.images:
            for name in image.names:
                index.setdefault(name, {})[node.metadata.name] = image.size_bytes
    snapshot.caches["image-index"] = (key, nodes, index or None)
    return index or None


def image_scores(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot) -> dict[str, int]:
    """ImageLocality's score on every node where it is not 0 (the nodes holding some of the
    pod's images enough to pass the 23 MB floor); every other node scores 0."""
    index = _image_index(nodes, snapshot)
    if index is None:
        return {}
    containers = (*pod.spec.init_containers, *pod.spec.containers)
    images = [sc.normalized_image(c.image) for c in containers]
    held = [(index[i], len(index[i])) for i in images if i in index]
    if not held:
        return {}
    sizes: dict[str, list[tuple[int, int]]] = {}
    for by_node, spread in held:
        for name, size in by_node.items():
            sizes.setdefault(name, []).append((size, spread))
    total = len(nodes)
    out = {}
    for name, found in sizes.items():
        score = sc.image_locality(found, total, len(containers))
        if score:
            out[name] = score
    return out


# -- topology spread -------------------------------------------------------------------------------

def _with_match_label_keys(c: TopologySpreadConstraint, pod: Pod) -> LabelSelector | None:
    """The constraint's selector with matchLabelKeys folded in (the pod's values of them)."""
    selector = c.label_selector
    if not c.match_label_keys:
        return selector
    extra = {k: pod.metadata.labels[k] for k in c.match_label_keys if k in pod.metadata.labels}
    if not extra:
        return selector
    base = selector or LabelSelector()
    return LabelSelector(match_labels={**(base.match_labels or {}), **extra},
                         match_expressions=base.match_expressions)


Spread = tuple[TopologySpreadConstraint, LabelSelector | None]


def spread_constraints(pod: Pod, snapshot: ClusterSnapshot, profile: Profile, action: str
                       ) -> tuple[list[Spread], bool]:
    """The pod's constraints with `action` (whenUnsatisfiable) and their selectors, and
    whether every node must carry all their topology keys (not so for the system defaults)."""
    own = pod.spec.topology_spread_constraints
    if own:
        return [(c, _with_match_label_keys(c, pod)) for c in own
                if (c.when_unsatisfiable or "DoNotSchedule") == action], True
    defaults = [c for c in profile.spread.effective
                if (c.when_unsatisfiable or "DoNotSchedule") == action]
    if not defaults:
        return [], False
    selector = default_selector(pod, snapshot)
    if selector is None:
        return [], False
    return [(c, selector) for c in defaults], not profile.spread.system


def _counted_nodes(pod: Pod, c: TopologySpreadConstraint, nodes: Sequence[Node],
                   keys: Sequence[str], require_all: bool) -> list[Node]:
    """The nodes whose pods count toward a constraint: nodeAffinityPolicy (Honor by default:
    nodes the pod's nodeSelector and required affinity match), nodeTaintsPolicy (Ignore by
    default), and every topology key present when that is required."""
    match = required_affinity_matcher(pod) if c.node_affinity_policy != "Ignore" else None
    honor_taints = c.node_taints_policy == "Honor"
    out = []
    for node in nodes:
        labels = node.metadata.labels
        if require_all and any(k not in labels for k in keys):
            continue
        if match is not None and not match(node):
            continue
        if honor_taints and node.spec.taints and first_untolerated(
                node.spec.taints, pod.spec.tolerations, SCHEDULING_EFFECTS) is not None:
            continue
        out.append(node)
    return out


def matching_per_node(pod: Pod, selector: LabelSelector | None,
                      snapshot: ClusterSnapshot) -> Counter[str]:
    """Pods of the pod's namespace that `selector` matches, per node (not the pod itself, which
    is leaving; not terminal or deleted ones)."""
    match = _selector(selector)
    per_node: Counter[str] = Counter()
    if match is None or selector is None or (
            not selector.match_labels and not selector.match_expressions):
        return per_node  # an empty selector counts nothing
    key = pod.key
    for _, other in snapshot.candidates(pod.namespace, selector):
        node = other.spec.node_name
        if (node and not other.terminal and other.metadata.deletion_timestamp is None
                and match(other.metadata.labels) and other.key != key):
            per_node[node] += 1
    return per_node


def spread_raw(pod: Pod, feasible: Sequence[Node], nodes: Sequence[Node],
               snapshot: ClusterSnapshot, profile: Profile
               ) -> tuple[dict[str, int], frozenset[str]] | None:
    """PodTopologySpread's raw scores over the feasible nodes and the nodes it ignores, or
    None when the plugin skips (no soft constraints, an empty default selector)."""
    constraints, require_all = spread_constraints(pod, snapshot, profile, "ScheduleAnyway")
    if not constraints:
        return None
    keys = [c.topology_key for c, _ in constraints]
    ignored = frozenset(n.metadata.name for n in feasible if require_all and any(
        k not in n.metadata.labels for k in keys))
    scored = [n for n in feasible if n.metadata.name not in ignored]
    raw = {n.metadata.name: 0.0 for n in feasible}
    for c, selector in constraints:
        per_node = matching_per_node(pod, selector, snapshot)
        key = c.topology_key
        if key == _HOSTNAME:
            weight = sc.topology_weight(len(scored))
            for n in scored:
                if key in n.metadata.labels:
                    raw[n.metadata.name] += sc.spread_part(
                        per_node.get(n.metadata.name, 0), c.max_skew, weight)
            continue
        domains = {n.metadata.labels.get(key, "") for n in scored}
        counts = dict.fromkeys(domains, 0)
        for node in _counted_nodes(pod, c, nodes, keys, require_all):
            value = node.metadata.labels.get(key, "")
            if value in counts:
                counts[value] += per_node.get(node.metadata.name, 0)
        weight = sc.topology_weight(len(domains))
        for n in scored:
            domain = n.metadata.labels.get(key)
            if domain is not None:
                raw[n.metadata.name] += sc.spread_part(counts[domain], c.max_skew, weight)
    return {name: sc.go_round(v) for name, v in raw.items()}, ignored


def spread_misses(pod: Pod, fits: Sequence[Node], nodes: Sequence[Node],
                  snapshot: ClusterSnapshot, profile: Profile) -> set[str]:
    """The nodes PodTopologySpread's filter refuses: a node without a constraint's topology
    key, or whose domain would exceed maxSkew over the least populated eligible domain (0 while
    fewer than minDomains domains exist)."""
    constraints, _ = spread_constraints(pod, snapshot, profile, "DoNotSchedule")
    misses: set[str] = set()
    keys = [c.topology_key for c, _ in constraints]
    for c, selector in constraints:
        key = c.topology_key
        per_node = matching_per_node(pod, selector, snapshot)
        counts: Counter[str] = Counter()
        domains: set[str] = set()
        for node in _counted_nodes(pod, c, nodes, keys, True):
            value = node.metadata.labels[key]
            domains.add(value)
            counts[value] += per_node.get(node.metadata.name, 0)
        lowest = min((counts[d] for d in domains), default=0)
        if c.min_domains is not None and len(domains) < c.min_domains:
            lowest = 0
        match = _selector(selector)
        own = 1 if match is not None and match(pod.metadata.labels) else 0
        for n in fits:
            domain = n.metadata.labels.get(key)
            if domain is None or counts.get(domain, 0) + own - lowest > c.max_skew:
                misses.add(n.metadata.name)
    return misses


# -- inter-pod affinity ----------------------------------------------------------------------------

def _has_pod_affinity(pod: Pod) -> bool:
    a = pod.spec.affinity
    return a is not None and (a.pod_affinity is not None or a.pod_anti_affinity is not None)


def _preferred(pod: Pod) -> tuple[list[tuple[PodAffinityTerm, int]], bool]:
    """The pod's preferred affinity (+weight) and anti-affinity (-weight) terms, and whether it
    has any."""
    a = pod.spec.affinity
    out: list[tuple[PodAffinityTerm, int]] = []
    if a is not None and a.pod_affinity is not None:
        out += [(t.pod_affinity_term, t.weight)
                for t in a.pod_affinity.preferred_during_scheduling_ignored_during_execution]
    if a is not None and a.pod_anti_affinity is not None:
        out += [(t.pod_affinity_term, -t.weight)
                for t in a.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution]
    return out, bool(out)


def _required_affinity(pod: Pod) -> tuple[PodAffinityTerm, ...]:
    a = pod.spec.affinity
    if a is None or a.pod_affinity is None:
        return ()
    return a.pod_affinity.required_during_scheduling_ignored_during_execution


def _term_matches(term: PodAffinityTerm, owner: Pod, other: Pod) -> bool:
    """Whether `other` is selected by `owner`'s term (its namespaces and label selector)."""
    if other.namespace not in term_namespaces(term, owner):
        return False
    match = _selector(term.label_selector)
    return match is not None and match(other.metadata.labels)


def pods_with_pod_affinity(snapshot: ClusterSnapshot) -> list[Pod]:
    """Running pods with any pod (anti-)affinity term, found once per snapshot state."""
    key = (id(snapshot), snapshot.additions, len(snapshot.pods))
    cached = snapshot.caches.get("pod-affinity-pods")
    if cached is not None and cached[0] == key:
        found: list[Pod] = cached[1]
        return found
    found = [p for p in snapshot.pods.values()
             if p.spec.node_name and not p.terminal and _has_pod_affinity(p)]
    snapshot.caches["pod-affinity-pods"] = (key, found)
    return found


def affinity_raw(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot, profile: Profile
                 ) -> dict[str, dict[str, int]] | None:
    """InterPodAffinity's PreScore: topology key -> domain value -> score, or None when it
    skips. Running pods count through the pod's preferred terms, and through their own
    preferred terms and (hardPodAffinityWeight) required affinity terms that select the pod."""
    own, has_own = _preferred(pod)
    if profile.ignore_preferred_terms_of_existing_pods and not has_own:
        return None
    by_name = {n.metadata.name: n for n in nodes}
    hard = profile.hard_pod_affinity_weight
    topology: dict[str, dict[str, int]] = {}

    def add(term: PodAffinityTerm, weight: int, node: Node) -> None:
        value = node.metadata.labels.get(term.topology_key)
        if value is not None:
            domain = topology.setdefault(term.topology_key, {})
            domain[value] = domain.get(value, 0) + weight

    if has_own:
        for other in snapshot.pods.values():
            node = by_name.get(other.spec.node_name) if other.spec.node_name else None
            if node is None or other.terminal or other.key == pod.key:
                continue
            for term, weight in own:
                if _term_matches(term, pod, other):
                    add(term, weight, node)
    for other in pods_with_pod_affinity(snapshot):
        node = by_name.get(other.spec.node_name)
        if node is None or other.key == pod.key or not node.metadata.labels:
            continue
        if hard > 0:
            for term in _required_affinity(other):
                if _term_matches(term, other, pod):
                    add(term, hard, node)
        for term, weight in _preferred(other)[0]:
            if _term_matches(term, other, pod):
                add(term, weight, node)
    return topology or None


def affinity_score(topology: Mapping[str, Mapping[str, int]], node: Node) -> int:
    labels = node.metadata.labels
    return sum(values.get(labels[key], 0) for key, values in topology.items() if key in labels)


def affinity_misses(pod: Pod, fits: Sequence[Node], nodes: Sequence[Node],
                    snapshot: ClusterSnapshot) -> set[str]:
    """The nodes InterPodAffinity's filter refuses for the pod's own required terms: affinity
    needs a matching pod in the node's domain (unless no pod anywhere matches and the pod
    matches its own term), anti-affinity needs none."""
    a = pod.spec.affinity
    misses: set[str] = set()
    if a is None:
        return misses
    for term in _required_affinity(pod):
        node_domain, counts = _term_counts(pod, term, nodes, snapshot)
        if not counts and _term_matches(term, pod, pod):
            continue  # the first pod of a group that selects itself may go anywhere
        misses.update(n.metadata.name for n in fits
                      if counts.get(node_domain.get(n.metadata.name, "\0"), 0) == 0)
    anti = (a.pod_anti_affinity.required_during_scheduling_ignored_during_execution
            if a.pod_anti_affinity is not None else ())
    for term in anti:
        node_domain, counts = _term_counts(pod, term, nodes, snapshot)
        misses.update(n.metadata.name for n in fits
                      if n.metadata.name in node_domain
                      and counts.get(node_domain[n.metadata.name], 0) > 0)
    return misses


def _term_counts(pod: Pod, term: PodAffinityTerm, nodes: Sequence[Node],
                 snapshot: ClusterSnapshot) -> tuple[dict[str, str], Counter[str]]:
    node_domain = domains_of(nodes, term.topology_key)
    counts: Counter[str] = Counter()
    match = _selector(term.label_selector)
    if match is None:
        return node_domain, counts
    for namespace in term_namespaces(term, pod):
        for other in snapshot.pods_by_namespace.get(namespace, {}).values():
            if other.key == pod.key or other.terminal or not other.spec.node_name:
                continue
            domain = node_domain.get(other.spec.node_name)
            if domain is not None and match(other.metadata.labels):
                counts[domain] += 1
    return node_domain, counts


# -- the model -------------------------------------------------------------------------------------

def simple_key(pod: Pod) -> bytes:
    """What a simple pod's filters and node-local scores depend on besides the node:
    nodeSelector, node affinity, tolerations, requests (not its namespace, name, owner or
    images: pods of different workloads with these equal share one Ranking)."""
    spec = pod.spec
    return _encoder.encode((spec.node_selector, spec.affinity, spec.tolerations, pod.requests,
                            pod.non_zero_requests))


def simple(pod: Pod) -> bool:
    """No filter of the pod depends on pods of other nodes (no topology spread, no pod
    (anti-)affinity of its own)."""
    affinity = pod.spec.affinity
    return not pod.spec.topology_spread_constraints and (
        affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None))


class KubeDefault:
    name = KUBE_DEFAULT

    def __init__(self, config: SchedulerConfig = DEFAULT_CONFIG) -> None:
        self.config = config
        self.rankings = Rankings()

    def profile(self, pod: Pod) -> Profile:
        """The profile named by the pod's schedulerName; kube-scheduler's default profile for a
        pod another scheduler places (koord-scheduler, say) that the configuration does not
        describe: the nearest prediction there is."""
        return self.config.profile_for(pod) or DEFAULT

    def place(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
              now: datetime) -> Placement:
        profile = self.profile(pod)
        if self.rankable(pod, snapshot, profile):
            from desched.scheduler import kube_ranked

            placed = kube_ranked.place(self, pod, nodes, snapshot, profile)
            if placed is not None:
                return placed
        return self.place_exact(pod, nodes, snapshot, now)

    @staticmethod
    def rankable(pod: Pod, snapshot: ClusterSnapshot, profile: Profile) -> bool:
        """Whether the Ranking answers for the pod (scheduler/kube_ranked.py): a simple pod no
        running pod's term scores, with no DoNotSchedule default constraints to filter by."""
        return (simple(pod) and snapshot.finished
                and not ("PodTopologySpread" in profile.filters and any(
                    (c.when_unsatisfiable or "DoNotSchedule") == "DoNotSchedule"
                    for c in profile.spread.effective))
                and not ("InterPodAffinity" in profile.scores
                         and not profile.ignore_preferred_terms_of_existing_pods
                         and running_terms_select(pod, snapshot, profile)))

    @staticmethod
    def space(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
              profile: Profile) -> Sequence[Node]:
        """The nodes worth filtering: those the pod's node selector and affinity may match."""
        return (affinity_space(pod, nodes, snapshot) if "NodeAffinity" in profile.filters
                else nodes)

    def place_exact(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
                    now: datetime) -> Placement:
        """Every feasible node scored in full, as kube-scheduler does."""
        profile = self.profile(pod)
        feasible, why = self.feasible(pod, nodes, snapshot, profile)
        if not feasible:
            return Placement(None, why)
        return self.choose(self.scores(pod, feasible, nodes, snapshot, profile), len(nodes),
                           profile)

    def choose(self, scores: Mapping[str, int], total: int, profile: Profile) -> Placement:
        top = max(scores.values())
        tied = tuple(sorted(n for n, s in scores.items() if s == top))
        return self.describe(top, tied[-1], tied, len(tied), len(scores), total, profile)

    def describe(self, score: int, chosen: str, tied: tuple[str, ...], ties: int, feasible: int,
                 total: int, profile: Profile) -> Placement:
        """The placement on `chosen` (the last by name of the `ties` nodes with the top score,
        `tied` those of them known by name), saying where kube-scheduler chooses at random."""
        why = f"score {score} of {feasible} feasible node(s)"
        if ties > 1:
            why += f"; one of {ties} nodes with that score (kube-scheduler picks at random)"
        sample = self.config.nodes_to_score(profile, total)
        sampled = sample if sample < feasible else 0
        if sampled:
            why += (f"; kube-scheduler scores only the first {sample} feasible node(s) it finds "
                    f"(percentageOfNodesToScore), so it may pick a lower score")
        return Placement(chosen, why, tied, ties, sampled)

    # -- filters -------------------------------------------------------------------------------

    def node_filter(self, pod: Pod, profile: Profile) -> Callable[[Node, ClusterSnapshot],
                                                                  str | None]:
        """The node-local filters of the profile, compiled for `pod`: why a node is refused,
        or None."""
        on = profile.filters
        unschedulable = "NodeUnschedulable" in on and not any(
            (t.key == _UNSCHEDULABLE_TAINT and t.effect in ("", "NoSchedule"))
            or (t.operator == "Exists" and not t.key) for t in pod.spec.tolerations)
        affinity = required_affinity_matcher(pod) if "NodeAffinity" in on else None
        added = profile.added_affinity
        added_required = (added.required_during_scheduling_ignored_during_execution
                          if added is not None else None)
        added_terms = ([compile_term(t) for t in added_required.node_selector_terms]
                       if added_required is not None and "NodeAffinity" in on else None)
        taints = "TaintToleration" in on
        resources = "NodeResourcesFit" in on
        tolerations = pod.spec.tolerations

        def refuse(node: Node, snapshot: ClusterSnapshot) -> str | None:
            if unschedulable and node.spec.unschedulable:
                return "node(s) were unschedulable"
            if affinity is not None and not affinity(node):
                return "node(s) didn't match Pod's node affinity/selector"
            if added_terms is not None and not any(t(node) for t in added_terms):
                return "node(s) didn't match Pod's node affinity/selector"
            if taints and node.spec.taints and first_untolerated(
                    node.spec.taints, tolerations, SCHEDULING_EFFECTS) is not None:
                return "node(s) had untolerated taint"
            if resources and pod.spec.node_name != node.metadata.name:
                problem = insufficient_resource(pod, node, snapshot)
                if problem is not None:
                    return problem.replace("insufficient", "Insufficient")
            return None
        return refuse

    def feasible(self, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
                 profile: Profile = DEFAULT) -> tuple[list[Node], str]:
        candidates = self.space(pod, nodes, snapshot, profile)
        refuse = self.node_filter(pod, profile)
        reasons: Counter[str] = Counter()
        fits: list[Node] = []
        for node in candidates:
            problem = refuse(node, snapshot)
            if problem is None:
                fits.append(node)
            else:
                reasons[problem] += 1
        checks: list[tuple[str, str, Callable[[list[Node]], set[str]]]] = [
            ("InterPodAffinity", "node(s) didn't satisfy existing pods anti-affinity rules",
             lambda ns: blocked_by_existing_anti_affinity(snapshot, pod, ns, pod)),
            ("InterPodAffinity", "node(s) didn't match pod affinity/anti-affinity rules",
             lambda ns: affinity_misses(pod, ns, nodes, snapshot)),
            ("PodTopologySpread", "node(s) didn't match pod topology spread constraints",
             lambda ns: spread_misses(pod, ns, nodes, snapshot, profile)),
        ]
        for plugin, label, check in checks:
            if not fits:
                break
            if plugin not in profile.filters:
                continue
            out = check(fits)
            if out:
                reasons[label] += sum(1 for n in fits if n.metadata.name in out)
                fits = [n for n in fits if n.metadata.name not in out]
        if fits:
            return fits, ""
        if not reasons:
            return [], "no node matches the pod's node selector and affinity"
        shown = ", ".join(f"{count} {reason}" for reason, count in reasons.most_common())
        return [], f"0/{len(candidates)} nodes are available: {shown}"

    # -- scores --------------------------------------------------------------------------------

    def scores(self, pod: Pod, feasible: Sequence[Node], nodes: Sequence[Node],
               snapshot: ClusterSnapshot, profile: Profile) -> dict[str, int]:
        """Each feasible node's weighted total, as kube-scheduler sums its score plugins."""
        names = [n.metadata.name for n in feasible]
        total = dict.fromkeys(names, 0)

        def add(plugin: str, normalized: Mapping[str, int]) -> None:
            weight = profile.weight(plugin)
            for name in names:
                total[name] += weight * normalized.get(name, 0)

        weights = profile.scores
        if "TaintToleration" in weights:
            tolerations = _prefer_no_schedule_tolerations(pod)
            add("TaintToleration", sc.default_normalize(
                {n.metadata.name: untolerated_soft_taints(tolerations, n) for n in feasible},
                reverse=True))
        if "NodeAffinity" in weights:
            weigh = node_affinity_weigher(pod, profile)
            if weigh is not None:
                add("NodeAffinity", sc.default_normalize(
                    {n.metadata.name: weigh(n) for n in feasible}, reverse=False))
        if "NodeResourcesFit" in weights:
            add("NodeResourcesFit", {n.metadata.name: fit_score(pod, n, snapshot, profile)
                                     for n in feasible})
        if "NodeResourcesBalancedAllocation" in weights and not best_effort(pod, profile):
            add("NodeResourcesBalancedAllocation",
                {n.metadata.name: balanced_score(pod, n, snapshot, profile) for n in feasible})
        if "ImageLocality" in weights:
            add("ImageLocality", image_scores(pod, nodes, snapshot))
        if "PodTopologySpread" in weights:
            spread = spread_raw(pod, feasible, nodes, snapshot, profile)
            if spread is not None:
                add("PodTopologySpread", sc.spread_normalize(*spread))
        if "InterPodAffinity" in weights:
            topology = affinity_raw(pod, nodes, snapshot, profile)
            if topology is not None:
                add("InterPodAffinity", sc.min_max_normalize(
                    {n.metadata.name: affinity_score(topology, n) for n in feasible}))
        return total


# -- running pods' terms, grouped --------------------------------------------------------------

# (kind, namespaces, label selector) -> a term of that shape and the running pods holding it.
TermGroups = dict[bytes, tuple[str, PodAffinityTerm, Pod, list[Pod]]]


def _terms_of(pod: Pod) -> list[tuple[str, PodAffinityTerm]]:
    """The pod's terms that can score another pod: preferred (anti-)affinity, required
    affinity (hardPodAffinityWeight)."""
    out = [("preferred", term) for term, _ in _preferred(pod)[0]]
    out += [("required", term) for term in _required_affinity(pod)]
    return out


def _group(groups: TermGroups, pod: Pod) -> None:
    for kind, term in _terms_of(pod):
        key = _encoder.encode((kind, sorted(term_namespaces(term, pod)), term.label_selector))
        group = groups.get(key)
        if group is None:
            groups[key] = (kind, term, pod, [pod])
        else:
            group[3].append(pod)


def term_groups(snapshot: ClusterSnapshot) -> TermGroups:
    """Running pods' scoring terms grouped by shape: built once, then caught up with the pods
    added since; a holder that left is skipped when read."""
    cached = snapshot.caches.get("affinity-term-groups")
    added = snapshot.added_since_finish
    if cached is None or (not snapshot.finished and cached[0] != snapshot.additions):
        groups: TermGroups = {}
        for p in snapshot.pods.values():
            if p.spec.node_name and _has_pod_affinity(p):
                _group(groups, p)
        cached = snapshot.caches["affinity-term-groups"] = [snapshot.additions, groups,
                                                            len(added)]
    elif cached[2] < len(added):
        for p in added[cached[2]:]:
            if p.spec.node_name and _has_pod_affinity(p):
                _group(cached[1], p)
        cached[2] = len(added)
    found: TermGroups = cached[1]
    return found


def running_terms_select(pod: Pod, snapshot: ClusterSnapshot, profile: Profile) -> bool:
    """Whether some running pod's term would score `pod` (InterPodAffinity would not skip)."""
    current = snapshot.pods
    for kind, term, owner, holders in term_groups(snapshot).values():
        if kind == "required" and profile.hard_pod_affinity_weight <= 0:
            continue
        if not _term_matches(term, owner, pod):
            continue
        if any(current.get(h.key) is h and h.key != pod.key and not h.terminal
               for h in holders):
            return True
    return False

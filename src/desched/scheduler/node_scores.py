"""kube-default's scores that depend on a node alone (its own pods and facts): resources
(NodeResourcesFit, NodeResourcesBalancedAllocation), TaintToleration, NodeAffinity and
ImageLocality, with the amounts kube-scheduler reads (scheduler/scores.py has the formulas)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from desched.model.node import Node
from desched.model.pod import Pod, Toleration
from desched.predicates.nodeaffinity import (
    compile_term,
    preferred_weigher,
)
from desched.predicates.taints import tolerates_taint
from desched.scheduler import scores as sc
from desched.scheduler.profile import DEFAULT_RESOURCES, Profile
from desched.snapshot.cluster import ClusterSnapshot

_SCALAR_PREFIXES = ("hugepages-", "attachable-volumes-")
_NATIVE = ("cpu", "memory", "ephemeral-storage", "pods")


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
    BalancedAllocation over cpu and memory, weight 1 each): resource_scorer's fast case."""
    return (profile.fit.type == "LeastAllocated" and profile.fit.resources == DEFAULT_RESOURCES
            and profile.balanced_resources == DEFAULT_RESOURCES)


def _balance(cpu: float, memory: float) -> int:
    """balanced_resource_score for the two fractions cpu and memory (same float steps)."""
    return int((1 - abs((min(1.0, cpu) - min(1.0, memory)) / 2)) * sc.MAX)


def resource_scorer(pod: Pod, profile: Profile, balance: bool
                    ) -> Callable[[Node, ClusterSnapshot], int]:
    """NodeResourcesFit's and (with `balance`) BalancedAllocation's scores, weighted, of a node
    for `pod`: the same numbers as fit_score and balanced_score, computed without their
    generality for the default resources, what it reads of the pod and the profile read once
    (a Ranking asks it of every node)."""
    fit_weight = profile.weight("NodeResourcesFit")
    balance_weight = profile.weight("NodeResourcesBalancedAllocation") if balance else 0
    if not default_resources(profile):
        def general(node: Node, snapshot: ClusterSnapshot) -> int:
            return (fit_weight * fit_score(pod, node, snapshot, profile) if fit_weight
                    else 0) + (balance_weight * balanced_score(pod, node, snapshot, profile)
                               if balance_weight else 0)
        return general
    non_zero, requests = pod.non_zero_requests, pod.requests
    pod_cpu, pod_memory = non_zero.get("cpu", 0), non_zero.get("memory", 0)
    own_cpu, own_memory = requests.get("cpu", 0), requests.get("memory", 0)
    bound = pod.spec.node_name

    def score(node: Node, snapshot: ClusterSnapshot) -> int:
        name = node.metadata.name
        allocatable = node.allocatable
        cpu_cap, memory_cap = allocatable.get("cpu", 0), allocatable.get("memory", 0)
        total = 0
        if fit_weight:
            zero_cpu, zero_memory = snapshot.node_non_zero_requested(name)
            if bound == name:  # leaving: its own requests no longer count
                zero_cpu -= pod_cpu
                zero_memory -= pod_memory
            parts = [sc.least_requested(zero_cpu + pod_cpu, cpu_cap)] if cpu_cap else []
            if memory_cap:
                parts.append(sc.least_requested(zero_memory + pod_memory, memory_cap))
            total += fit_weight * (sum(parts) // len(parts) if parts else 0)
        if balance_weight:
            if cpu_cap and memory_cap:
                used = snapshot.node_requested(name)
                used_cpu, used_memory = used.get("cpu", 0), used.get("memory", 0)
                if bound == name:
                    used_cpu -= own_cpu
                    used_memory -= own_memory
                gain = (_balance((used_cpu + own_cpu) / cpu_cap,
                                 (used_memory + own_memory) / memory_cap)
                        - _balance(used_cpu / cpu_cap, used_memory / memory_cap))
            else:
                gain = 0  # one fraction or none: no deviation, with the pod or without
            total += balance_weight * (sc.MAX // 2 + sc.go_div(sc.MAX // 2 + gain, 2))
        return total
    return score


def best_effort(pod: Pod, profile: Profile) -> bool:
    """BalancedAllocation skips a pod that requests none of its resources."""
    requests = pod.requests
    return not any(requests.get(r.name, 0) for r in profile.balanced_resources)


def prefer_no_schedule_tolerations(pod: Pod) -> tuple[Toleration, ...]:
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


"""Placing a pod: filter nodes with the shared NodeFit predicates, score by least allocated
(kube-scheduler's default NodeResourcesFit strategy over cpu and memory), ties by name."""

from __future__ import annotations

import msgspec

from desched.model.meta import Shared
from desched.model.node import Node
from desched.model.pod import Pod, PodCondition
from desched.predicates.nodefit import affinity_space, node_fit
from desched.snapshot.cluster import ClusterSnapshot


def _free_share(node: Node, snapshot: ClusterSnapshot, pod: Pod) -> float:
    used = snapshot.node_requested(node.name)
    score = 0.0
    for resource in ("cpu", "memory"):
        capacity = node.allocatable.get(resource, 0)
        if capacity > 0:
            after = used.get(resource, 0) + pod.requests.get(resource, 0)
            score += max(0.0, (capacity - after) / capacity)
    return score


def choose_node(pod: Pod, nodes: list[Node], snapshot: ClusterSnapshot) -> Node | None:
    feasible = [n for n in affinity_space(pod, nodes, snapshot)
                if node_fit(pod, n, snapshot) is None]
    if not feasible:
        return None
    return max(feasible, key=lambda n: (_free_share(n, snapshot, pod), n.name))


def replacement(pod: Pod, cycle: int) -> Pod:
    """The pod a controller would create for an evicted one: StatefulSet and DaemonSet pods keep
    their name, others get a new one; it is unscheduled and has no status yet."""
    kinds = {ref.kind for ref in pod.metadata.owner_references}
    name = pod.name if kinds & {"StatefulSet", "DaemonSet"} else f"{pod.name}-r{cycle}"
    meta = msgspec.structs.replace(pod.metadata, name=name, uid=f"{pod.metadata.uid}-r{cycle}",
                                   deletion_timestamp=None)
    spec = msgspec.structs.replace(pod.spec, node_name="")
    status = type(pod.status)(phase="Pending")
    return Pod(metadata=meta, spec=spec, status=status)


def reschedule(evicted: list[Pod], snapshot: ClusterSnapshot, cycle: int,
               nodes: list[Node]) -> list[tuple[Pod, Pod, str | None]]:
    """Recreate owned evicted pods and place each; returns (evicted pod, replacement, node name
    or None when no node fits)."""
    placed: list[tuple[Pod, Pod, str | None]] = []
    for old in evicted:
        if not old.metadata.owner_references:
            continue
        pod = replacement(old, cycle)
        if old.is_daemonset:
            target = next((n for n in nodes if n.name == old.node_name), None)
        else:
            target = choose_node(pod, nodes, snapshot)
        if target is not None:
            pod = msgspec.structs.replace(pod, spec=msgspec.structs.replace(
                pod.spec, node_name=target.name), status=type(pod.status)(phase="Running"))
            # The replacement is assumed to become Ready, as its controller expects.
            pod.cached_conditions = (PodCondition(type=Shared("Ready"), status="True"),)
            pod.cached_ready = True
        snapshot.add_pod(pod)
        placed.append((old, pod, target.name if target is not None else None))
    return placed


"""NodeFit: the subset of scheduler predicates the descheduler checks before evicting a pod.

Mirrors pkg/descheduler/node NodeFit. Each check returns upstream's error text, so callers can
explain why a pod fits nowhere. Nodes are tried in order and the search stops at the first fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from desched.model.meta import json_encoder
from desched.model.node import Node
from desched.model.pod import Pod
from desched.predicates.labels import SelectorError
from desched.predicates.nodeaffinity import NodeMatcher, required_affinity_matcher
from desched.predicates.podaffinity import (
    AntiAffinityTerm,
    anti_affinity_conflict,
    compile_anti_affinity,
)
from desched.predicates.taints import SCHEDULING_EFFECTS, first_untolerated
from desched.snapshot.cluster import ClusterSnapshot

NOT_SCHEDULABLE = "node is not schedulable"
SELECTOR_MISMATCH = "pod node selector does not match the node label"
UNTOLERATED_TAINT = "pod does not tolerate taints on the node"
ANTI_AFFINITY = "pod matches inter-pod anti-affinity rule of other pod on node"

# Upstream computes these from allocatable even when the node does not list them; any other
# resource the node lacks has nothing available, whatever its pods request.
_BASIC = frozenset({"cpu", "memory", "pods"})


def insufficient_resource(pod: Pod, node: Node, snapshot: ClusterSnapshot) -> str | None:
    """The first resource the node cannot give the pod ("insufficient <name>"), or None."""
    allocatable = node.allocatable
    used = snapshot.node_requested(node.metadata.name)
    for name, request in pod.requests.items():
        if name in _BASIC or name in allocatable:
            available = allocatable.get(name, 0) - used.get(name, 0)
        else:
            available = 0
        if request > available:
            return f"insufficient {name}"
    if allocatable.get("pods", 0) - used.get("pods", 0) <= 0:
        return "insufficient pods"
    return None


class _Prepared(NamedTuple):
    """What NodeFit compiles from the pod once, to check it against many nodes."""

    affinity: NodeMatcher
    anti_affinity: tuple[AntiAffinityTerm, ...]


def _prepare(pod: Pod) -> _Prepared:
    return _Prepared(required_affinity_matcher(pod), compile_anti_affinity(pod))


def _fit(pod: Pod, node: Node, snapshot: ClusterSnapshot, prepared: _Prepared) -> str | None:
    if node.spec.unschedulable:
        return NOT_SCHEDULABLE
    if not prepared.affinity(node):
        return SELECTOR_MISMATCH
    if node.spec.taints and first_untolerated(
            node.spec.taints, pod.spec.tolerations, SCHEDULING_EFFECTS) is not None:
        return UNTOLERATED_TAINT
    try:
        if anti_affinity_conflict(pod, prepared.anti_affinity, node, snapshot):
            return ANTI_AFFINITY
    except SelectorError as err:
        return str(err)
    # A pod already on the node is counted in its usage: it fits there resource-wise.
    if pod.spec.node_name != node.metadata.name:
        return insufficient_resource(pod, node, snapshot)
    return None


def node_fit(pod: Pod, node: Node, snapshot: ClusterSnapshot) -> str | None:
    """Why `pod` cannot be placed on `node`, or None when it fits. Checks, in order:
    schedulable, nodeSelector + required node affinity, NoSchedule/NoExecute taints, the pod's
    required anti-affinity against pods on the node, then resources (skipped on the pod's own
    node)."""
    return _fit(pod, node, snapshot, _prepare(pod))


def pod_fits_any_node(pod: Pod, nodes: Iterable[Node], snapshot: ClusterSnapshot) -> bool:
    """Whether the pod fits some node, its current one included (upstream PodFitsAnyNode)."""
    prepared = _prepare(pod)
    return any(_fit(pod, node, snapshot, prepared) is None for node in nodes)


def placement_signature(pod: Pod) -> bytes:
    """What NodeFit's verdict for a pod depends on besides the node: namespace, requests,
    nodeSelector, affinity and tolerations. Pods of one workload usually share it."""
    if pod.cached_signature is None:
        spec = pod.spec
        pod.cached_signature = json_encoder.encode((
            pod.namespace, sorted(pod.requests.items()), sorted(spec.node_selector.items()),
            spec.affinity, spec.tolerations))
    return pod.cached_signature


def pod_fits_any_other_node(pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot) -> bool:
    """Whether the pod fits some node other than the one it is on (PodFitsAnyOtherNode).

    Within a run where pods are only removed (evictions free resources and anti-affinity
    partners), a node that fit a placement signature keeps fitting it, so the first fitting node
    found for a signature is remembered per node list and re-checked alone next time.
    """
    current = pod.spec.node_name
    memo: dict[tuple[int, bytes], tuple[Sequence[Node], int, Node]] = \
        snapshot.caches.setdefault("nodefit.other", {})
    signature = placement_signature(pod)
    key = (id(nodes), signature)
    hit = memo.get(key)
    if hit is not None and hit[0] is nodes and hit[1] == snapshot.additions \
            and hit[2].metadata.name != current:
        return True
    prepared = _prepare(pod)
    for node in nodes:
        if node.metadata.name != current and _fit(pod, node, snapshot, prepared) is None:
            memo[key] = (nodes, snapshot.additions, node)
            return True
    return False


def fit_failures(pod: Pod, nodes: Iterable[Node], snapshot: ClusterSnapshot,
                 skip_current: bool = False) -> dict[str, str]:
    """Node name -> reason for every node in `nodes` the pod does not fit (nodes that fit are
    left out). With skip_current, the pod's own node is not looked at."""
    prepared = _prepare(pod)
    current = pod.spec.node_name
    failures: dict[str, str] = {}
    for node in nodes:
        name = node.metadata.name
        if skip_current and name == current:
            continue
        reason = _fit(pod, node, snapshot, prepared)
        if reason is not None:
            failures[name] = reason
    return failures

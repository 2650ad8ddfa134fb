"""Pods no node takes, remembered until a pod comes to or leaves a node that could change that.

kube-scheduler tries a pending pod again each time a pod leaves, and so does `--reschedule` (a
replacement waits while the evicted pods terminate: scheduler/placement.py); most tries find
nothing new. When the node-local filters and PodTopologySpread refused every candidate (and
InterPodAffinity refused none), the answer depends only on the pods of the candidates and of the
nodes whose pods the pod's spread constraints count: while no pod comes to or leaves one of
those, and no pod with required anti-affinity comes anywhere, the search would refuse the same
nodes for the same reasons. A pod with required pod (anti-)affinity terms of its own is not
remembered: pods coming or going anywhere change its answer.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from desched.model.node import Node
from desched.model.pod import Pod
from desched.scheduler.model import Placement
from desched.snapshot.cluster import ClusterSnapshot

_CACHE = "scheduler.nowhere"


def _required_anti_affinity(pod: Pod) -> bool:
    a = pod.spec.affinity
    return a is not None and a.pod_anti_affinity is not None and bool(
        a.pod_anti_affinity.required_during_scheduling_ignored_during_execution)


def rememberable(pod: Pod) -> bool:
    """An unbound pod without required pod (anti-)affinity terms of its own."""
    a = pod.spec.affinity
    return not pod.spec.node_name and (a is None or (
        (a.pod_affinity is None
         or not a.pod_affinity.required_during_scheduling_ignored_during_execution)
        and not _required_anti_affinity(pod)))


class _Failed:
    __slots__ = ("added", "additions", "model", "nodes", "placement", "pod", "removed",
                 "removed_seen", "watched")

    def __init__(self, model: object, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
                 watched: list[Container[str]], placement: Placement) -> None:
        self.model = model
        self.pod = pod
        self.nodes = nodes
        self.watched = watched
        self.placement = placement
        self.mark(snapshot)

    def mark(self, snapshot: ClusterSnapshot) -> None:
        self.additions = snapshot.additions
        self.added = len(snapshot.added_since_finish)
        self.removed = snapshot.removed_from
        self.removed_seen = len(self.removed)

    def unchanged(self, snapshot: ClusterSnapshot) -> bool:
        """Whether no pod came to or left a watched node, and none with required
        anti-affinity came anywhere, since the search (as the snapshot's logs tell)."""
        added = snapshot.added_since_finish
        if (snapshot.removed_from is not self.removed
                or snapshot.additions - self.additions != len(added) - self.added):
            return False
        watched = self.watched
        for name in self.removed[self.removed_seen:]:
            if any(name in w for w in watched):
                return False
        for pod in added[self.added:]:
            name = pod.spec.node_name
            if name and (_required_anti_affinity(pod) or any(name in w for w in watched)):
                return False
        return True


def remembered(model: object, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot
               ) -> Placement | None:
    """The placement nowhere found for this very pod, if nothing that could change it has
    changed since."""
    failed: dict[str, _Failed] = snapshot.caches.get(_CACHE, {})
    found = failed.get(pod.key)
    if (found is None or found.pod is not pod or found.model is not model
            or found.nodes is not nodes):
        return None
    if not found.unchanged(snapshot):
        del failed[pod.key]
        return None
    found.mark(snapshot)
    return found.placement


def remember(model: object, pod: Pod, nodes: Sequence[Node], snapshot: ClusterSnapshot,
             watched: list[Container[str]], placement: Placement) -> None:
    """Keep a search that found no node, with the nodes whose pods decide it."""
    failed: dict[str, _Failed] = snapshot.caches.setdefault(_CACHE, {})
    failed[pod.key] = _Failed(model, pod, nodes, snapshot, watched, placement)


def forget(pod: Pod, snapshot: ClusterSnapshot) -> None:
    failed: dict[str, _Failed] | None = snapshot.caches.get(_CACHE)
    if failed:
        failed.pop(pod.key, None)

"""Which workload a pod moves with, and how many of that workload's pods are unavailable now:
what pacing (moves.maxUnavailablePerWorkload) weighs the next move against.

A workload with a desired replica count (a Deployment through its ReplicaSets, a ReplicaSet,
StatefulSet or ReplicationController) is short of `desired - ready` pods, ready meaning active,
not terminating and Ready, as the snapshot (or the informer cache) shows them: a replacement
not Ready yet, an evicted pod still terminating, a pod desched evicted earlier in the cycle.
That is read from the cluster, not remembered, so it survives a restart of desched. A
Deployment mid-rollout (a restart desched or anyone started) counts as one in flight at least.
A workload without a count (a DaemonSet, a Job, any other owner, a bare pod) counts the pods
desched evicted that are not gone yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from desched.framework.moves.rollout import in_progress
from desched.framework.moves.tracker import MoveTracker
from desched.model.meta import controller_ref
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.workloads import Workload, WorkloadResolver, is_available


@dataclass(frozen=True, slots=True)
class Target:
    """The workload a pod moves with: its top object (a ReplicaSet's Deployment), whether or
    not the snapshot holds it; a bare pod is its own."""

    kind: str
    namespace: str
    name: str
    uid: str
    workload: Workload | None  # resolved with a desired replica count

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def target_of(pod: Pod, resolver: WorkloadResolver) -> Target:
    found = resolver.resolve(pod)
    if isinstance(found, Workload):
        obj = resolver.snapshot.workloads.get((found.kind, found.namespace, found.name))
        uid = str(obj.metadata.uid) if obj is not None else ""
        return Target(found.kind, found.namespace, found.name, uid, found)
    ref = controller_ref(pod.metadata)
    if ref is not None:
        return Target(str(ref.kind), pod.namespace, str(ref.name), str(ref.uid), None)
    return Target("Pod", pod.namespace, pod.name, str(pod.metadata.uid), None)


@dataclass(frozen=True)
class InFlight:
    count: int  # pods unavailable now, less those desched stopped waiting for
    desired: int | None  # the workload's replica count, when it has one
    why: str  # what is awaited, for a deferral's reason ("" when nothing)


def deployment_of(target: Target, snapshot: ClusterSnapshot) -> Any:
    if target.kind != "Deployment":
        return None
    return snapshot.workloads.get(("Deployment", target.namespace, target.name))


def in_flight(target: Target, snapshot: ClusterSnapshot, resolver: WorkloadResolver,
              tracker: MoveTracker, cycle: int) -> InFlight:
    key = target.key
    last = tracker.last_move.get(key)
    awaited = (f"the replacement of {last.pod} is not Ready yet" if last is not None
               else "")
    workload = target.workload
    if workload is None:
        return _own_in_flight(target, snapshot, tracker, cycle, last.pod if last else "")
    desired = workload.replicas
    ready = sum(1 for p in resolver.pods(workload) if is_available(p))
    short = max(0, desired - ready - tracker.vanished.get(key, 0))
    why = awaited or f"{target} has {desired - ready} pod(s) not Ready"
    deployment = deployment_of(target, snapshot)
    if deployment is not None:
        progress = in_progress(deployment)
        if progress is not None:
            short, why = max(short, 1), f"it is mid-rollout ({progress})"
        elif tracker.restarting(key, deployment) is not None:
            # desched's own restart, not in the cache yet: in progress all the same.
            short, why = max(short, 1), "its restart by desched has not shown yet"
    return InFlight(_less_forgiven(tracker, key, short), desired, why)


def _own_in_flight(target: Target, snapshot: ClusterSnapshot, tracker: MoveTracker,
                   cycle: int, last: str) -> InFlight:
    key = target.key
    own = tracker.own.get(key)
    pending: list[str] = []
    if own:
        for pod_key, (uid, when) in list(own.items()):
            there = snapshot.pods.get(pod_key)
            if when == cycle or (there is not None and str(there.metadata.uid) == uid):
                pending.append(pod_key)
            else:
                del own[pod_key]  # gone: no longer in flight
        if not own:
            del tracker.own[key]
    why = (f"{pending[-1]}, which desched evicted, is not gone yet" if pending
           else f"the replacement of {last} is not Ready yet" if last else "")
    return InFlight(_less_forgiven(tracker, key, len(pending)), None, why)


def _less_forgiven(tracker: MoveTracker, key: str, unavailable: int) -> int:
    """`unavailable` less the pods desched stopped waiting for, which shrink as they recover."""
    forgiven = tracker.forgiven.get(key)
    if forgiven is None:
        return unavailable
    forgiven = min(forgiven, unavailable)
    if forgiven:
        tracker.forgiven[key] = forgiven
    else:
        del tracker.forgiven[key]
    return unavailable - forgiven


def vanished(tracker: MoveTracker, pods: list[Pod], resolver: WorkloadResolver) -> None:
    """simulate without --reschedule: `pods` left and nothing replaces them; each counts as a
    Ready replacement of its workload from the next cycle on, as a live one would be."""
    for pod in pods:
        target = target_of(pod, resolver)
        if target.workload is not None:
            tracker.vanish(target.key, 1)

"""Replacements for evicted pods, as their controllers would create them, placed by a scheduler
model; the evicted pod's measured usage moves with it, so later cycles see the load where the
replacement runs (docs/scheduler.md)."""

from __future__ import annotations

import re
from datetime import datetime

import msgspec

from desched.model.meta import Shared
from desched.model.node import Node
from desched.model.objects import PodMetricInfo
from desched.model.pod import Pod, PodCondition
from desched.scheduler.kube_default import gone_at_once
from desched.scheduler.model import Placement, SchedulerModel
from desched.scheduler.waiting import WaitingQueue
from desched.snapshot.cluster import ClusterSnapshot

_SUFFIX = re.compile(r"-r\d+$")


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def replacement(pod: Pod, cycle: int, now: datetime) -> Pod:
    """The pod a controller creates for an evicted one: new (created now, no restarts, no
    status yet); StatefulSet and DaemonSet pods keep their name, others get a new one."""
    kinds = {ref.kind for ref in pod.metadata.owner_references}
    base = _SUFFIX.sub("", pod.name)
    name = pod.name if kinds & {"StatefulSet", "DaemonSet"} else f"{base}-r{cycle}"
    meta = msgspec.structs.replace(pod.metadata, name=name, uid=f"{pod.metadata.uid}-r{cycle}",
                                   creation_timestamp=now, deletion_timestamp=None)
    spec = msgspec.structs.replace(pod.spec, node_name="")
    status = type(pod.status)(phase="Pending", qos_class=pod.status.qos_class)
    return Pod(metadata=meta, spec=spec, status=status)


def bind(pod: Pod, node: str, now: datetime) -> Pod:
    """The replacement running on `node`: Running and Ready since `now`, as its controller
    expects, with every container started and none restarted."""
    ready = PodCondition(type=Shared("Ready"), status="True", last_transition_time=now)
    status = type(pod.status)(
        phase="Running", qos_class=pod.status.qos_class, start_time=now,
        conditions=msgspec.Raw(msgspec.json.encode([{
            "type": "Ready", "status": "True", "lastTransitionTime": _stamp(now)}])))
    bound = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=node),
                                    status=status)
    bound.cached_conditions = (ready,)
    bound.cached_ready = True
    return bound


def carry_usage(snapshot: ClusterSnapshot, old: Pod, new: Pod, now: datetime) -> None:
    """Move the evicted pod's measured usage to its replacement: the NodeMetric podsMetric entry
    (from the old node's metric to the new node's) and its PodMetrics (metrics.k8s.io)."""
    metric = snapshot.node_metrics.get(old.node_name)
    entry: PodMetricInfo | None = None
    if metric is not None:
        kept = []
        for e in metric.status.pods_metric:
            if f"{e.namespace or 'default'}/{e.name}" == old.key and entry is None:
                entry = e
            else:
                kept.append(e)
        if entry is not None:
            snapshot.node_metrics[old.node_name] = msgspec.structs.replace(
                metric, status=msgspec.structs.replace(metric.status, pods_metric=tuple(kept)))
    target = snapshot.node_metrics.get(new.node_name) if new.node_name else None
    if entry is not None and target is not None:
        moved = msgspec.structs.replace(entry, name=new.name, namespace=new.namespace)
        snapshot.node_metrics[new.node_name] = msgspec.structs.replace(
            target, status=msgspec.structs.replace(
                target.status, pods_metric=(*target.status.pods_metric, moved)))
    sample = snapshot.metrics_pods.get(old.key)
    if sample is not None and new.node_name:
        snapshot.metrics_pods[new.key] = msgspec.structs.replace(
            sample, metadata=msgspec.structs.replace(sample.metadata, name=new.name),
            timestamp=now)


def _terminating(pod: Pod, now: datetime) -> Pod:
    """The evicted pod while it terminates: deletionTimestamp set."""
    meta = msgspec.structs.replace(pod.metadata, deletion_timestamp=now)
    return msgspec.structs.replace(pod, metadata=meta)


def _place(pod: Pod, nodes: list[Node], snapshot: ClusterSnapshot, model: SchedulerModel,
           now: datetime, chances: dict[str, Placement] | None) -> str | None:
    placement = model.place(pod, nodes, snapshot, now)
    if chances is not None and (placement.ties > 1 or placement.sampled):
        chances[pod.key] = placement
    elif chances is not None:
        chances.pop(pod.key, None)
    return placement.node


def _retry(index: int, placed: list[tuple[Pod, Pod, str | None]], nodes: list[Node],
           snapshot: ClusterSnapshot, model: SchedulerModel, now: datetime,
           chances: dict[str, Placement] | None) -> bool:
    """Place a pending replacement again; True when a node took it."""
    old, pod, _ = placed[index]
    target = _place(pod, nodes, snapshot, model, now, chances)
    if target is None:
        return False
    pod = bind(pod, target, now)
    snapshot.add_pod(pod)
    carry_usage(snapshot, old, pod, now)
    placed[index] = (old, pod, target)
    return True


def reschedule(evicted: list[Pod], snapshot: ClusterSnapshot, cycle: int, nodes: list[Node],
               model: SchedulerModel, now: datetime, chances: dict[str, Placement] | None = None
               ) -> list[tuple[Pod, Pod, str | None]]:
    """Recreate owned evicted pods and place each with the model; returns (evicted pod,
    replacement, node name or None when no node fits). `chances` collects the placements of
    replacements where the scheduler chooses at random: among equally scored nodes, or among a
    sample of the feasible nodes."""
    placed: list[tuple[Pod, Pod, str | None]] = []
    # Live, the controller recreates an evicted pod and kube-scheduler binds the replacement
    # within milliseconds, while the descheduler is still evicting the next ones (tens of
    # milliseconds apart): each replacement is placed with the pods evicted after it still
    # running, as bench/placement_fidelity.py saw on a real control plane. An evicted pod
    # terminates for seconds (its grace period, the kubelet's confirmation), and kube-scheduler
    # counts it on its node meanwhile (not for topology spreading): it stays, terminating, until
    # every replacement of the cycle is placed; one deleted at once (gone_at_once) leaves first.
    for old in evicted:
        if old.key not in snapshot.pods:
            snapshot.add_pod(old)
    terminating: list[Pod] = []
    # Replacements no node took while the evicted pods terminated, told each pod that comes or
    # goes from here on (scheduler/waiting.py).
    waiting = WaitingQueue()
    try:
        for old in evicted:
            snapshot.remove_pod(old)
            waiting.changed(old, old.node_name, came=False)
            if not gone_at_once(old):
                going = _terminating(old, now)
                snapshot.add_pod(going)
                waiting.changed(going, going.node_name, came=True)
                terminating.append(going)
            if not old.metadata.owner_references:
                continue
            pod = replacement(old, cycle, now)
            target: str | None
            if old.is_daemonset:
                target = old.node_name if old.node_name in snapshot.nodes else None
            else:
                target = _place(pod, nodes, snapshot, model, now, chances)
            if target is not None:
                pod = bind(pod, target, now)
                carry_usage(snapshot, old, pod, now)
            elif terminating:
                waiting.add(len(placed), model.waiting(pod, nodes, snapshot))
            snapshot.add_pod(pod)
            waiting.changed(pod, pod.node_name, came=True)
            placed.append((old, pod, target))
    finally:
        # The evicted pods go in the order they were evicted (their grace periods start one
        # after the other); kube-scheduler tries the pending replacements again, in order, each
        # time one goes.
        for going in terminating:
            snapshot.remove_pod(going)  # a replacement that took its name (a DaemonSet's)
            # stays: remove_pod removes only this very object
            waiting.changed(going, going.node_name, came=False)
            for index in waiting.due():
                if _retry(index, placed, nodes, snapshot, model, now, chances):
                    waiting.placed(index)
                    waiting.changed(placed[index][1], placed[index][1].node_name, came=True)
                else:
                    waiting.nowhere(index, model.waiting(placed[index][1], nodes, snapshot))
    for index in waiting.indices():  # still nowhere: pending, its usage no longer where it was
        old, pod, _ = placed[index]
        carry_usage(snapshot, old, pod, now)
    return placed

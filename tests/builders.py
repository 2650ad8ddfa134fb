"""Building test objects from plain dicts, the way a snapshot file would describe them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from desched.framework.decisions import DecisionLog
from desched.framework.evictor import Evictor, Limits, ProfileEvictor
from desched.framework.types import Clock, Handle
from desched.model.kinds import JSON_DECODERS
from desched.model.meta import json_encoder
from desched.model.node import Node
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
# How long a test waits for a `desched` command process to say or finish something: a bound
# a loaded 2-core machine meets (Python's start-up, imports, the first sync), under the 120 s
# per-test timeout. A test that needs the answer sooner is racing the clock.
COMMAND_WAIT = 90.0


def decode(kind: str, body: dict[str, Any]) -> Any:
    """Decode a dict exactly as the snapshot loader decodes JSON."""
    return JSON_DECODERS[kind].decode(json_encoder.encode(body))


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
         labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False, ready: bool = True,
         extra: dict[str, str] | None = None) -> Node:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return decode("Node", {
        "metadata": {"name": name, "labels": labels or {"kubernetes.io/hostname": name}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {"allocatable": allocatable,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })


def pod(name: str, node_name: str = "n1", namespace: str = "default", cpu: str | None = "100m",
        memory: str | None = "128Mi", owner: tuple[str, str] | None = ("ReplicaSet", "rs-1"),
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        phase: str = "Running", created: str = "2026-11-20T12:00:00Z",
        priority: int | None = None, image: str = "app:1", spec: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
        ready: bool = True) -> Pod:
    """A pod with one container. `owner=None` makes a bare pod."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                                "creationTimestamp": created, "labels": labels or {},
                                "annotations": annotations or {}}
    if owner is not None:
        metadata["ownerReferences"] = [{"kind": owner[0], "name": owner[1],
                                        "uid": f"uid-{owner[0]}-{owner[1]}", "controller": True}]
    metadata.update(meta or {})
    pod_spec: dict[str, Any] = {"nodeName": node_name, "containers": [
        {"name": "main", "image": image, "resources": {"requests": requests}}]}
    if priority is not None:
        pod_spec["priority"] = priority
    pod_spec.update(spec or {})
    pod_status: dict[str, Any] = {"phase": phase, "startTime": created,
                                  "conditions": [{"type": "Ready",
                                                  "status": "True" if ready else "False"}]}
    pod_status.update(status or {})
    return decode("Pod", {"metadata": metadata, "spec": pod_spec, "status": pod_status})


def snapshot(*objects: Any) -> ClusterSnapshot:
    snap = ClusterSnapshot()
    for obj in objects:
        snap.add(obj)
    snap.finish()
    return snap


class RecordingExecutor:
    """Executes every eviction (removing the pod) and remembers the order."""

    def __init__(self, snap: ClusterSnapshot) -> None:
        from desched.executors.simulation import SimulationExecutor

        self.inner = SimulationExecutor(snap)

    def evict(self, p: Pod, profile: str, plugin: str, reason: str) -> Any:
        return self.inner.evict(p, profile, plugin, reason)

    def set_unschedulable(self, node: str, unschedulable: bool) -> Any:
        return self.inner.set_unschedulable(node, unschedulable)

    @property
    def evicted(self) -> list[str]:
        return [p.name for p in self.inner.evicted]


def handle_for(snap: ClusterSnapshot, plugin: str = "Test", limits: Limits | None = None,
               filters: list[Any] | None = None, now: datetime = NOW) -> tuple[Handle,
                                                                               RecordingExecutor]:
    """A plugin handle over `snap` with a simulation executor and optional filter plugins."""
    executor = RecordingExecutor(snap)
    log = DecisionLog()
    evictor = Evictor(limits or Limits(), executor, log)
    pe = ProfileEvictor(evictor, "default", list(filters or []), list(filters or []))
    return Handle(snap, pe, Clock(now), log, "default", plugin), executor


def args(args_type: type, raw: dict[str, Any]) -> Any:
    from desched.policy_files.args import decode_args

    return decode_args(args_type, raw, args_type.__name__)


__all__ = ["NOW", "args", "decode", "handle_for", "msgspec", "node", "pod", "snapshot"]


def workload(kind: str, name: str, replicas: int | None = None, namespace: str = "default",
             owner: tuple[str, str] | None = None, uid: str | None = None) -> Any:
    """A workload object; `owner` makes it controlled by (kind, name)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "uid": f"uid-{kind}-{name}" if uid is None else uid}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1],
                                    "uid": f"uid-{owner[0]}-{owner[1]}", "controller": True}]
    spec = {} if replicas is None else {"replicas": replicas}
    return decode(kind, {"metadata": meta, "spec": spec})


def deployment(name: str, replicas: int, namespace: str = "default") -> list[Any]:
    """A Deployment and its ReplicaSet `<name>-rs`."""
    return [workload("Deployment", name, replicas, namespace),
            workload("ReplicaSet", f"{name}-rs", replicas, namespace, owner=("Deployment", name))]

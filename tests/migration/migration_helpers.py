"""Builders for the migration tests: workloads, a Deployment's pods, PodMigrationJobs."""

from __future__ import annotations

from typing import Any

from builders import decode, pod


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


def replica(name: str, deployment_name: str, node_name: str = "n1", namespace: str = "default",
            scheduler: str = "koord-scheduler", **kw: Any) -> Any:
    """A pod of the Deployment's ReplicaSet `<deployment>-rs`."""
    spec = {"schedulerName": scheduler, **kw.pop("spec", {})}
    return pod(name, node_name, namespace=namespace, owner=("ReplicaSet", f"{deployment_name}-rs"),
               spec=spec, **kw)


def pmj(name: str, pod_name: str, phase: str = "Pending", namespace: str = "default",
        passed: bool = False, created: str = "2026-11-22T11:00:00Z",
        uid: str | None = None) -> Any:
    annotations = {"descheduler.koordinator.sh/passed-arbitration": "true"} if passed else {}
    return decode("PodMigrationJob", {
        "metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
        "spec": {"podRef": {"namespace": namespace, "name": pod_name,
                            "uid": f"uid-{pod_name}" if uid is None else uid}},
        "status": {"phase": phase}})

"""Builders for the migration tests: workloads, a Deployment's pods, PodMigrationJobs."""

from __future__ import annotations

from typing import Any

from builders import decode, pod


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

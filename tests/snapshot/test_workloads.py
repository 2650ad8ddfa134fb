"""The workload behind a pod (docs/migration.md), its pods and their availability."""

from __future__ import annotations

from typing import Any

import pytest

from builders import deployment, pod, snapshot, workload
from desched.snapshot.workloads import Unresolved, Workload, WorkloadResolver


def replica(name: str, deployment_name: str, node_name: str = "n1", **kw: Any) -> Any:
    """A pod of the Deployment's ReplicaSet `<deployment>-rs`."""
    return pod(name, node_name, owner=("ReplicaSet", f"{deployment_name}-rs"), **kw)


def resolve(subject: Any, *objects: Any) -> Workload | Unresolved | None:
    return WorkloadResolver(snapshot(subject, *objects)).resolve(subject)


def test_replicaset_of_a_deployment_resolves_to_the_deployment() -> None:
    found = resolve(replica("web-1", "web"), *deployment("web", 6))
    assert isinstance(found, Workload)
    assert (found.kind, found.namespace, found.name, found.replicas) == (
        "Deployment", "default", "web", 6)
    assert found.key == "Deployment/default/web"
    assert str(found) == "Deployment default/web"


def test_the_deployment_replicas_count_not_the_replicaset() -> None:
    objs = [workload("Deployment", "web", 6),
            workload("ReplicaSet", "web-rs", 3, owner=("Deployment", "web"))]
    found = resolve(replica("web-1", "web"), *objs)
    assert isinstance(found, Workload) and found.replicas == 6


@pytest.mark.parametrize(("kind", "replicas"), [
    ("ReplicaSet", 4), ("StatefulSet", 3), ("ReplicationController", 5), ("Deployment", 7)])
def test_direct_controllers(kind: str, replicas: int) -> None:
    found = resolve(pod("p", owner=(kind, "w")), workload(kind, "w", replicas))
    assert isinstance(found, Workload)
    assert (found.kind, found.name, found.replicas) == (kind, "w", replicas)


def test_unset_replicas_read_as_the_api_default_of_one() -> None:
    found = resolve(pod("p", owner=("StatefulSet", "db")), workload("StatefulSet", "db"))
    assert isinstance(found, Workload) and found.replicas == 1


def test_a_pod_without_a_controller_has_no_workload() -> None:
    assert resolve(pod("p", owner=None)) is None
    not_controller = pod("q", meta={"ownerReferences": [
        {"kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": False}]})
    assert resolve(not_controller) is None


@pytest.mark.parametrize(("subject", "objects", "reason"), [
    (pod("p", owner=("Job", "report")), [workload("Job", "report")],
     "Job default/report has no replica count (batch Jobs have no /scale subresource)"),
    (pod("p", owner=("CloneSet", "cs")), [],
     "CloneSet default/cs: desched resolves replica counts only for ReplicaSet, Deployment, "
     "StatefulSet, ReplicationController"),
    (pod("p", owner=("ReplicaSet", "gone")), [],
     "ReplicaSet default/gone is not in the snapshot"),
    (replica("web-1", "web"), [workload("ReplicaSet", "web-rs", 3, owner=("Deployment", "web"))],
     "ReplicaSet default/web-rs: its Deployment default/web is not in the snapshot"),
    (pod("p", owner=("StatefulSet", "db")), [workload("StatefulSet", "db", 3, uid="other")],
     "StatefulSet default/db in the snapshot has uid other, not the owner reference's "
     "uid-StatefulSet-db"),
])
def test_unresolved_workloads_say_why(subject: Any, objects: list[Any], reason: str) -> None:
    assert resolve(subject, *objects) == Unresolved(reason)


def test_pods_of_a_deployment_span_its_replicasets() -> None:
    objs = [workload("Deployment", "web", 4),
            workload("ReplicaSet", "web-old", 2, owner=("Deployment", "web")),
            workload("ReplicaSet", "web-new", 2, owner=("Deployment", "web")),
            workload("ReplicaSet", "other", 2)]
    pods = [pod("a", owner=("ReplicaSet", "web-old")), pod("b", owner=("ReplicaSet", "web-old")),
            pod("c", owner=("ReplicaSet", "web-new")), pod("d", owner=("ReplicaSet", "other"))]
    resolver = WorkloadResolver(snapshot(*objs, *pods))
    found = resolver.resolve(pods[2])
    assert isinstance(found, Workload)
    assert sorted(p.name for p in resolver.pods(found)) == ["a", "b", "c"]


def test_unavailable_pods_are_inactive_or_not_ready_and_follow_evictions() -> None:
    objs = deployment("web", 5)
    pods = [replica("ready", "web"), replica("not-ready", "web", ready=False),
            replica("failed", "web", phase="Failed"),
            replica("terminating", "web", meta={"deletionTimestamp": "2026-11-22T11:59:00Z"})]
    snap = snapshot(*objs, *pods)
    resolver = WorkloadResolver(snap)
    found = resolver.resolve(pods[0])
    assert isinstance(found, Workload)
    assert sorted(p.name for p in resolver.unavailable(found)) == [
        "failed", "not-ready", "terminating"]
    snap.remove_pod(pods[1])
    assert sorted(p.name for p in resolver.unavailable(found)) == ["failed", "terminating"]
    snap.add_pod(replica("late", "web", ready=False))
    assert sorted(p.name for p in resolver.unavailable(found)) == [
        "failed", "late", "terminating"]


def test_owners_without_uid_match_by_kind_and_name() -> None:
    """Hand-written files often leave uids out."""
    sts = workload("StatefulSet", "db", 3, uid="")
    pods = [pod(f"db-{i}", meta={"ownerReferences": [
        {"kind": "StatefulSet", "name": "db", "controller": True}]}) for i in range(3)]
    resolver = WorkloadResolver(snapshot(sts, *pods))
    found = resolver.resolve(pods[0])
    assert isinstance(found, Workload)
    assert sorted(p.name for p in resolver.pods(found)) == ["db-0", "db-1", "db-2"]

"""maxMigrating / maxUnavailable rounding (reference/koordinator.md §6.4) and the workload behind
a pod (§6.3)."""

from __future__ import annotations

from typing import Any

import pytest
from migration_helpers import deployment, replica, workload

from builders import pod, snapshot
from desched.migration.limits import (
    IntOrPercent,
    IntOrStringError,
    Unresolved,
    Workload,
    WorkloadResolver,
    get_max_migrating,
    get_max_unavailable,
    int_or_percent_error,
    scaled_value,
)

# ---------------------------------------------------------------------------------------------
# Rounding
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("replicas", "value", "expected"), [
    # util_test.go's vectors.
    (6, "80%", 4),
    (6, "150%", 6),
    (6, 5, 5),
    (6, 7, 6),
    (6, None, 2),
    (50, "0%", 1),
    (6, 0, 1),  # an empty IntOrString is the int 0
    # The ladder when unset: 10% above 10 replicas (rounded down), 2 from 4 to 10, else 1.
    (0, None, 0),
    (1, None, 1),
    (3, None, 1),
    (4, None, 2),
    (10, None, 2),
    (11, None, 1),
    (19, None, 1),
    (20, None, 2),
    (105, None, 10),
    # A configured value rounds down, and a result of 0 becomes 1.
    (5, "1%", 1),
    (100, "10%", 10),
    (19, "10%", 1),
    (3, "50%", 1),
    (4, "50%", 2),
    (2, "100%", 2),
    (0, 3, 0),  # never more than the replicas
])
def test_get_max_unavailable(replicas: int, value: IntOrPercent | None, expected: int) -> None:
    assert get_max_unavailable(replicas, value) == expected
    assert get_max_migrating(replicas, value) == expected


@pytest.mark.parametrize(("value", "total", "up", "expected"), [
    (5, 10, False, 5),
    ("25%", 10, False, 2),
    ("25%", 10, True, 3),
    ("100%", 7, False, 7),
    ("-10%", 10, False, -1),
    ("+10%", 10, False, 1),
])
def test_scaled_value(value: IntOrPercent, total: int, up: bool, expected: int) -> None:
    assert scaled_value(value, total, up) == expected


@pytest.mark.parametrize(("value", "error"), [
    ("5", "invalid value for IntOrString: invalid type: string is not a percentage"),
    ("abc", "invalid value for IntOrString: invalid type: string is not a percentage"),
    ("a%", 'invalid value for IntOrString: invalid value "a%": strconv.Atoi: parsing "a": '
           "invalid syntax"),
    ("%", 'invalid value for IntOrString: invalid value "%": strconv.Atoi: parsing "": '
          "invalid syntax"),
    ("1.5%", 'invalid value for IntOrString: invalid value "1.5%": strconv.Atoi: parsing '
             '"1.5": invalid syntax'),
    ("10%", None),
    (3, None),
    (-3, None),
])
def test_int_or_percent_error(value: IntOrPercent, error: str | None) -> None:
    assert int_or_percent_error(value) == error


def test_an_invalid_value_raises() -> None:
    with pytest.raises(IntOrStringError):
        get_max_unavailable(6, "x")


# ---------------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------------


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

"""The arbitrator (docs/migration.md): the filter pipeline, the migrating counts
and limits, the evict annotation, and the arbitration of waiting PodMigrationJobs."""

from __future__ import annotations

from typing import Any

import pytest
from migration_helpers import pmj, replica

from builders import deployment, node, pod, snapshot, workload
from desched.migration.arbitration import (
    Arbitrator,
    MigrationLedger,
    Settings,
    Verdict,
    sort_jobs,
)
from desched.model.labels import compile_selector
from desched.model.meta import LabelSelector
from desched.model.pod import Pod
from desched.policy_files.args import Namespaces
from desched.snapshot.workloads import WorkloadResolver

EVICT = {"descheduler.alpha.kubernetes.io/evict": ""}
NODES = [node("n1"), node("n2"), node("n3")]


def arbitrator(*objects: Any, **settings: Any) -> Arbitrator:
    snap = snapshot(*NODES, *objects)
    resolver = WorkloadResolver(snap)
    return Arbitrator(Settings(**settings), snap, resolver, MigrationLedger(snap, resolver))


def web(count: int = 6, replicas: int | None = None, node_of: Any = None,
        **kw: Any) -> list[Any]:
    """Deployment `web` with `count` replica pods web-0.. (on n1 unless node_of(i) says)."""
    pods = [replica(f"web-{i}", "web", node_name=node_of(i) if node_of else "n1", **kw)
            for i in range(count)]
    return [*deployment("web", count if replicas is None else replicas), *pods]


def spread(i: int) -> str:
    return f"n{i % 3 + 1}"


# ---------------------------------------------------------------------------------------------
# 1. existing PodMigrationJob
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", ["", "Pending", "Running"])
def test_an_active_job_for_the_pod_rejects_it(phase: str) -> None:
    arb = arbitrator(*web(), pmj("job-1", "web-0", phase))
    state = "Running" if phase == "Running" else "Pending"
    assert arb.filter(arb.snapshot.pods["default/web-0"]) == (
        f"the pod is already migrating: PodMigrationJob job-1 ({state})")


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "Aborted"])
def test_a_finished_job_does_not(phase: str) -> None:
    arb = arbitrator(*web(), pmj("job-1", "web-0", phase))
    assert arb.filter(arb.snapshot.pods["default/web-0"]) is None


def test_the_job_is_found_by_uid_then_by_name() -> None:
    by_uid = arbitrator(*web(), pmj("job-1", "renamed", "Running", uid="uid-web-0"))
    assert by_uid.filter(by_uid.snapshot.pods["default/web-0"]) is not None
    by_name = arbitrator(*web(), pmj("job-1", "web-0", "Running", uid="old-uid"))
    assert by_name.filter(by_name.snapshot.pods["default/web-0"]) is not None


def test_the_evict_annotation_does_not_bypass_an_existing_job() -> None:
    arb = arbitrator(*web(annotations=EVICT), pmj("job-1", "web-0", "Running"))
    assert arb.filter(arb.snapshot.pods["default/web-0"]) is not None


# ---------------------------------------------------------------------------------------------
# 2. the Reservation's scheduler
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("scheduler", "settings", "rejected"), [
    ("koord-scheduler", {}, False),
    ("default-scheduler", {}, True),
    ("", {}, True),  # the API server's default
    ("default-scheduler", {"job_mode": "EvictDirectly"}, False),
    ("my-scheduler", {"scheduler_names": frozenset({"my-scheduler"})}, False),
])
def test_reservation_first_needs_a_reservation_aware_scheduler(
        scheduler: str, settings: dict[str, Any], rejected: bool) -> None:
    arb = arbitrator(*web(scheduler=scheduler), **settings)
    reason = arb.filter(arb.snapshot.pods["default/web-0"])
    if rejected:
        shown = scheduler or "default-scheduler"
        assert reason == (f'spec.schedulerName is "{shown}", not one of schedulerNames '
                          f"[koord-scheduler]: a ReservationFirst migration needs a scheduler "
                          f"that honours Reservations")
    else:
        assert reason is None


def test_the_evict_annotation_does_not_bypass_the_reservation_filter() -> None:
    arb = arbitrator(*web(scheduler="default-scheduler", annotations=EVICT))
    assert arb.filter(arb.snapshot.pods["default/web-0"]) is not None


# ---------------------------------------------------------------------------------------------
# 3. non-retryable
# ---------------------------------------------------------------------------------------------

CRITICAL = 2_000_000_000
SIX = deployment("web", 6)


def one(subject: Pod, *extra: Any, **settings: Any) -> str | None:
    """The verdict on `subject`, a pod of a 6-replica Deployment unless it has another owner."""
    arb = arbitrator(*SIX, subject, *extra, **settings)
    return arb.filter(arb.snapshot.pods[subject.key])


def ok_pod(name: str = "p", **kw: Any) -> Pod:
    return replica(name, "web", **kw)


def bare(name: str = "p", **kw: Any) -> Pod:
    return pod(name, owner=None, spec={"schedulerName": "koord-scheduler"}, **kw)


@pytest.mark.parametrize(("subject", "settings", "reason"), [
    (ok_pod(), {}, None),
    (ok_pod(namespace="kube-system"), {"namespaces": Namespaces(exclude=["kube-system"])},
     "namespace kube-system is in namespaces.exclude"),
    (ok_pod(), {"namespaces": Namespaces(include=["prod"])},
     "namespace default is not in namespaces.include"),
    (ok_pod(), {"namespaces": Namespaces(include=["prod"]), "gates": frozenset({"Namespaces"})},
     None),
    (ok_pod(annotations={"scheduling.koordinator.sh/eviction-cost": "2147483647"}), {},
     "scheduling.koordinator.sh/eviction-cost is 2147483647: the pod is never migrated"),
    (ok_pod(annotations={"scheduling.koordinator.sh/eviction-cost": "2147483646"}), {}, None),
    (pod("p", owner=("DaemonSet", "ds"), spec={"schedulerName": "koord-scheduler"}), {},
     "the pod belongs to a DaemonSet"),
    (ok_pod(annotations={"kubernetes.io/config.mirror": "x"}), {}, "the pod is a mirror pod"),
    (ok_pod(annotations={"kubernetes.io/config.source": "file"}), {},
     "the pod is a static pod"),
    (ok_pod(meta={"deletionTimestamp": "2026-11-22T11:59:00Z"}), {}, "the pod is terminating"),
    (bare(), {}, "the pod has no ownerReferences (a bare pod)"),
    (bare(), {"evict_failed_bare_pods": True},
     "the pod has no ownerReferences and is not Failed"),
    (bare(phase="Failed"), {"evict_failed_bare_pods": True}, None),
    (bare(), {"evict_all_bare_pods": True}, None),
    (bare(), {"gates": frozenset({"BarePods"})}, None),
    (ok_pod(priority=CRITICAL), {}, f"the pod has system-critical priority {CRITICAL}"),
    (ok_pod(priority=CRITICAL), {"evict_system_critical_pods": True}, None),
    (ok_pod(priority=CRITICAL), {"gates": frozenset({"SystemCritical"})}, None),
    (ok_pod(priority=1000), {"priority_threshold": 1000},
     "the pod's priority 1000 is not below priorityThreshold 1000"),
    (ok_pod(priority=999), {"priority_threshold": 1000}, None),
    (ok_pod(), {"priority_threshold": 1000}, None),  # no priority: evictable
    (ok_pod(priority=1000), {"priority_threshold": 1000, "evict_system_critical_pods": True},
     None),
    (ok_pod(priority=1000), {"priority_threshold": 1000,
                             "gates": frozenset({"PriorityThreshold"})}, None),
    (ok_pod(spec={"volumes": [{"name": "tmp", "emptyDir": {}}]}), {},
     "the pod has a hostPath or emptyDir volume (evictLocalStoragePods is false)"),
    (ok_pod(spec={"volumes": [{"name": "h", "hostPath": {"path": "/x"}}]}),
     {"evict_local_storage_pods": True}, None),
    (ok_pod(spec={"volumes": [{"name": "tmp", "emptyDir": {}}]}),
     {"gates": frozenset({"LocalStorage"})}, None),
    (ok_pod(spec={"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]}),
     {}, None),
    (ok_pod(spec={"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]}),
     {"ignore_pvc_pods": True}, "the pod has a PersistentVolumeClaim (ignorePvcPods is true)"),
    (ok_pod(spec={"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]}),
     {"ignore_pvc_pods": True, "gates": frozenset({"PVC"})}, None),
    (ok_pod(labels={"tier": "web"}),
     {"label_selector": compile_selector(LabelSelector(match_labels={"tier": "db"}))},
     "the pod's labels do not match labelSelector"),
    (ok_pod(labels={"tier": "db"}),
     {"label_selector": compile_selector(LabelSelector(match_labels={"tier": "db"}))}, None),
    (ok_pod(), {"label_selector": compile_selector(LabelSelector(match_labels={"a": "b"})),
                "gates": frozenset({"LabelSelector"})}, None),
])
def test_non_retryable(subject: Pod, settings: dict[str, Any], reason: str | None) -> None:
    assert one(subject, **settings) == reason


@pytest.mark.parametrize("subject", [
    pod("p", owner=("DaemonSet", "ds"), spec={"schedulerName": "koord-scheduler"},
        annotations=EVICT),
    bare(annotations=EVICT),
    ok_pod(priority=CRITICAL, annotations=EVICT),
    ok_pod(annotations={**EVICT, "scheduling.koordinator.sh/eviction-cost": "2147483647"}),
    pod("p", owner=("Job", "report"), spec={"schedulerName": "koord-scheduler"},
        annotations=EVICT),
])
def test_the_evict_annotation_bypasses_the_non_retryable_filters(subject: Pod) -> None:
    assert one(subject, namespaces=Namespaces(exclude=["default"])) is None


# -- expected replicas --------------------------------------------------------------------------


def verdict_for(objects: list[Any], name: str, **settings: Any) -> str | None:
    arb = arbitrator(*objects, **settings)
    return arb.filter(arb.snapshot.pods[f"default/{name}"])


def test_a_single_replica_workload_is_never_migrated() -> None:
    assert verdict_for(web(1), "web-0") == (
        "Deployment default/web has 1 replica: a single-replica workload is never migrated "
        "(skipCheckExpectedReplicas)")


@pytest.mark.parametrize(("count", "settings", "shown"), [
    (2, {"max_migrating_per_workload": "100%"}, (2, 2, 1)),
    (3, {"max_unavailable_per_workload": 3}, (3, 1, 3)),
    (4, {"max_migrating_per_workload": "100%", "max_unavailable_per_workload": "100%"},
     (4, 4, 4)),
])
def test_limits_equal_to_the_replicas_reject(count: int, settings: dict[str, Any],
                                             shown: tuple[int, int, int]) -> None:
    replicas, max_migrating, max_unavailable = shown
    assert verdict_for(web(count, node_of=spread), "web-0", **settings) == (
        f"Deployment default/web expects {replicas} replicas and maxMigrating is "
        f"{max_migrating}, maxUnavailable {max_unavailable}: migrating could take every "
        f"replica (skipCheckExpectedReplicas)")


@pytest.mark.parametrize("settings", [{"skip_check_expected_replicas": True},
                                      {"gates": frozenset({"ExpectedReplicas"})}])
def test_the_expected_replicas_check_can_be_skipped(settings: dict[str, Any]) -> None:
    assert verdict_for(web(1), "web-0", **settings) is None


def test_an_unresolved_workload_is_rejected_with_its_reason() -> None:
    """Koordinator rejects these silently (expectedReplicas 0 == maxMigrating 0, #2699)."""
    objs = [workload("Job", "report"),
            pod("report-0", owner=("Job", "report"), spec={"schedulerName": "koord-scheduler"})]
    assert verdict_for(objs, "report-0") == (
        "the pod's workload cannot be resolved: Job default/report has no replica count (batch "
        "Jobs have no /scale subresource) (Koordinator reads it as 0 expected replicas and never "
        "migrates the pod)")
    assert verdict_for(objs, "report-0", skip_check_expected_replicas=True) == (
        "the pod's workload cannot be resolved: Job default/report has no replica count (batch "
        "Jobs have no /scale subresource)")
    gates = frozenset({"MaxMigratingPerWorkload", "MaxUnavailablePerWorkload"})
    assert verdict_for(objs, "report-0", skip_check_expected_replicas=True, gates=gates) is None


# ---------------------------------------------------------------------------------------------
# 4. retryable
# ---------------------------------------------------------------------------------------------


def running(*names: str) -> list[Any]:
    return [pmj(f"job-{name}", name, "Running") for name in names]


@pytest.mark.parametrize(("jobs", "settings", "candidate", "reason"), [
    # maxMigratingPerNode (default 2): the other pods of the node with a job.
    (running("web-1"), {}, "web-2", None),
    (running("web-1", "web-4"), {}, "web-7",
     "maxMigratingPerNode: 2 pods on node n2 are migrating, the limit is 2"),
    (running("web-1", "web-4"), {}, "web-8", None),  # on n3
    (running("web-1", "web-4"), {"max_migrating_per_node": 0}, "web-7", None),  # 0 is off
    (running("web-1", "web-4"), {"gates": frozenset({"MaxMigratingPerNode"})}, "web-7", None),
    # maxMigratingGlobally
    (running("web-0", "web-1", "web-2"), {"max_migrating_globally": 3}, "web-5",
     "maxMigratingGlobally: 3 pods are migrating, the limit is 3"),
    (running("web-0", "web-1"), {"max_migrating_globally": 3}, "web-5", None),
    (running("web-0", "web-1", "web-2"), {"max_migrating_globally": 0}, "web-5", None),
    (running("web-0", "web-1", "web-2"),
     {"max_migrating_globally": 3, "gates": frozenset({"MaxMigratingGlobally"})}, "web-5", None),
    # maxMigratingPerNamespace
    (running("web-0"), {"max_migrating_per_namespace": 1}, "web-5",
     "maxMigratingPerNamespace: 1 pods in namespace default are migrating, the limit is 1"),
    (running("web-0"), {"max_migrating_per_namespace": 0}, "web-5", None),
    (running("web-0"), {"max_migrating_per_namespace": 1,
                        "gates": frozenset({"MaxMigratingPerNamespace"})}, "web-5", None),
    # Another limit's gate leaves it in force.
    (running("web-0"), {"max_migrating_per_namespace": 1,
                        "gates": frozenset({"MaxMigratingPerNode", "MaxMigratingGlobally"})},
     "web-5",
     "maxMigratingPerNamespace: 1 pods in namespace default are migrating, the limit is 1"),
    # Jobs of another namespace do not count.
    ([pmj("job-x", "x-0", "Running", namespace="batch")], {"max_migrating_per_namespace": 1},
     "web-5", None),
    # maxMigratingPerWorkload: 12 replicas, "25%" -> 3.
    (running("web-0", "web-2"), {"max_migrating_per_workload": "25%",
                                 "max_unavailable_per_workload": 6}, "web-5", None),
    (running("web-0", "web-2", "web-4"), {"max_migrating_per_workload": "25%",
                                          "max_unavailable_per_workload": 6}, "web-5",
     "maxMigratingPerWorkload: Deployment default/web has 3 migrating pods, the limit is 3 of "
     "12 replicas"),
    (running("web-0", "web-2", "web-4"),
     {"max_migrating_per_workload": "25%", "max_unavailable_per_workload": 6,
      "gates": frozenset({"MaxMigratingPerWorkload"})}, "web-5", None),
    # Unset, both follow the ladder: 1 for 11-19 replicas.
    (running("web-0"), {"max_migrating_per_workload": None,
                        "max_unavailable_per_workload": None}, "web-5",
     "maxMigratingPerWorkload: Deployment default/web has 1 migrating pods, the limit is 1 of "
     "12 replicas"),
    (running("web-0"), {"max_unavailable_per_workload": None}, "web-5",
     "maxUnavailablePerWorkload: Deployment default/web has 1 unavailable or migrating pods, "
     "the limit is 1 of 12 replicas"),
    (running("web-0"), {"max_unavailable_per_workload": None,
                        "gates": frozenset({"MaxUnavailablePerWorkload"})}, "web-5", None),
])
def test_retryable_limits(jobs: list[Any], settings: dict[str, Any], candidate: str,
                          reason: str | None) -> None:
    """Over a 12-replica Deployment spread on n1..n3 (web-i on n(i%3+1)); the workload limits
    are 5 and 6 unless the case sets them."""
    settings = {"max_migrating_per_workload": 5, "max_unavailable_per_workload": 6, **settings}
    assert verdict_for([*web(12, node_of=spread), *jobs], candidate, **settings) == reason


def test_not_ready_pods_count_as_unavailable_the_candidate_included() -> None:
    pods = [replica(f"web-{i}", "web", node_name=spread(i), ready=i != 3) for i in range(6)]
    objs = [*deployment("web", 6), *pods]
    settings = {"max_unavailable_per_workload": 1}
    # web-3 is not Ready: with maxUnavailable 1 nothing else may go.
    assert verdict_for(objs, "web-0", **settings) == (
        "maxUnavailablePerWorkload: Deployment default/web has 1 unavailable or migrating pods, "
        "the limit is 1 of 6 replicas")
    # The not-Ready candidate counts itself.
    assert verdict_for(objs, "web-3", **settings) is not None
    # Explicit 0 rounds to 1: the same.
    assert verdict_for(objs, "web-0", max_unavailable_per_workload=0) is not None
    # The ladder's 2 for 6 replicas leaves room for one more.
    assert verdict_for(objs, "web-0") is None


def test_migrations_started_this_cycle_count() -> None:
    arb = arbitrator(*web(6, node_of=spread))
    pods = arb.snapshot.pods
    first, second, third = pods["default/web-0"], pods["default/web-1"], pods["default/web-2"]
    assert arb.filter(third) is None
    for started in (first, second):
        arb.snapshot.remove_pod(started)  # evicted
        arb.ledger.start(started)
    assert arb.filter(third) == (
        "maxMigratingPerWorkload: Deployment default/web has 2 migrating pods, the limit is 2 of "
        "6 replicas")
    assert arb.filter(first) == "the pod is already migrating: a migration started in this cycle"
    arb.ledger.new_cycle()
    assert arb.filter(third) is None


def test_the_evict_annotation_bypasses_the_limits() -> None:
    objs = [*web(12, node_of=spread, annotations=EVICT), *running("web-1", "web-4")]
    assert verdict_for(objs, "web-7") is None


def test_arbitration_disabled_switches_the_limits_off() -> None:
    objs = [*web(12, node_of=spread), *running("web-1", "web-4")]
    assert verdict_for(objs, "web-7") is not None
    assert verdict_for(objs, "web-7", arbitration_enabled=False) is None
    # The pod-level checks stay.
    assert verdict_for(web(1), "web-0", arbitration_enabled=False) is not None


def test_check_tells_retryable_refusals_apart() -> None:
    arb = arbitrator(*web(12, node_of=spread), *running("web-1", "web-4"),
                     *deployment("solo", 1), replica("solo-0", "solo"))
    assert arb.check(arb.snapshot.pods["default/web-7"]) == (
        "maxMigratingPerNode: 2 pods on node n2 are migrating, the limit is 2", True)
    refusal = arb.check(arb.snapshot.pods["default/solo-0"])
    assert refusal is not None and refusal[1] is False


# ---------------------------------------------------------------------------------------------
# Arbitration of waiting jobs
# ---------------------------------------------------------------------------------------------


def stamp(minute: int) -> str:
    return f"2026-11-22T11:{minute:02d}:00Z"


def test_arbitration_counts_only_jobs_that_passed_issue_1150() -> None:
    """Ten Pending jobs on one node with maxMigratingPerNode 2: the filter counts them all, so
    nothing else may start; arbitration lets the first two through and the rest wait."""
    objs = [*web(20), *[pmj(f"job-{i}", f"web-{i}", created=stamp(i)) for i in range(10)]]
    settings = {"max_migrating_per_workload": "50%", "max_unavailable_per_workload": "50%"}
    arb = arbitrator(*objs, **settings)
    assert arb.filter(arb.snapshot.pods["default/web-15"]) == (
        "maxMigratingPerNode: 10 pods on node n1 are migrating, the limit is 2")
    verdicts = arb.arbitrate()
    # Newer jobs first: job-9, job-8 pass.
    assert verdicts[:3] == [
        Verdict("job-9", "passed", "passed arbitration"),
        Verdict("job-8", "passed", "passed arbitration"),
        Verdict("job-7", "waiting",
                "maxMigratingPerNode: 2 pods on node n1 are migrating, the limit is 2")]
    assert [v.outcome for v in verdicts[3:]] == ["waiting"] * 7


def test_a_job_that_passed_before_counts_and_is_not_arbitrated_again() -> None:
    objs = [*web(6, node_of=spread), pmj("old", "web-0", passed=True, created=stamp(1)),
            pmj("new", "web-3", created=stamp(2))]
    arb = arbitrator(*objs, max_migrating_per_node=1)
    assert arb.arbitrate() == [Verdict(
        "new", "waiting", "maxMigratingPerNode: 1 pods on node n1 are migrating, the limit is 1")]


def test_non_retryable_failures_and_missing_pods_fail() -> None:
    objs = [*web(6, node_of=spread), *deployment("solo", 1), replica("solo-0", "solo"),
            pmj("a", "solo-0", created=stamp(1)), pmj("b", "ghost", created=stamp(2)),
            pmj("c", "web-1", created=stamp(3))]
    verdicts = {v.job: v for v in arbitrator(*objs).arbitrate()}
    assert verdicts["a"] == Verdict(
        "a", "failed", 'Pod "default/solo-0" is forbidden to migrate because it does not meet the '
                       "requirements: Deployment default/solo has 1 replica: a single-replica "
                       "workload is never migrated (skipCheckExpectedReplicas)")
    assert verdicts["b"] == Verdict("b", "failed", 'Pod "default/ghost" is missing')
    assert verdicts["c"].outcome == "passed"


def test_arbitration_disabled_keeps_the_pod_checks_and_drops_the_limits() -> None:
    # Three jobs of one workload on one node: maxMigratingPerNode (2) would hold one back.
    objs = [*web(6), *deployment("solo", 1), replica("solo-0", "solo"),
            pmj("a", "solo-0"), pmj("b", "web-1"), pmj("c", "web-2"), pmj("d", "web-3"),
            pmj("e", "ghost")]
    verdicts = arbitrator(*objs, arbitration_enabled=False).arbitrate()
    assert [(v.job, v.outcome) for v in verdicts] == [
        ("a", "failed"), ("b", "passed"), ("c", "passed"), ("d", "passed"), ("e", "failed")]
    assert "single-replica" in verdicts[0].reason
    enabled = arbitrator(*objs).arbitrate()
    assert sorted(v.outcome for v in enabled if v.job in "bcd") == \
        ["passed", "passed", "waiting"]


def test_jobs_decided_but_not_yet_in_the_snapshot() -> None:
    """A live cache lags behind the verdicts written: decided jobs are not arbitrated again,
    and those that passed count against the limits."""
    objs = [*web(6), pmj("a", "web-1", created=stamp(1)), pmj("b", "web-2", created=stamp(2)),
            pmj("c", "web-3", created=stamp(3))]
    verdicts = arbitrator(*objs).arbitrate({"a": "passed", "b": "passed"})
    assert [(v.job, v.outcome) for v in verdicts] == [("c", "waiting")]
    assert verdicts[0].reason.startswith("maxMigratingPerNode: 2 pods on node n1")
    verdicts = arbitrator(*objs).arbitrate({"a": "failed"})
    assert sorted((v.job, v.outcome) for v in verdicts) == [("b", "passed"), ("c", "passed")]


def test_finished_and_passed_jobs_are_not_waiting() -> None:
    objs = [*web(6, node_of=spread), pmj("done", "web-0", "Succeeded"),
            pmj("run", "web-1", "Running"), pmj("ok", "web-2", passed=True),
            pmj("wait", "web-4")]
    arb = arbitrator(*objs)
    assert [j.metadata.name for j in arb.waiting_jobs()] == ["wait"]


# -- order --------------------------------------------------------------------------------------


def order(jobs: list[Any], pods: dict[str, Pod],
          migrating: dict[str, int] | None = None) -> list[str]:
    counts = migrating or {}
    return [j.metadata.name for j in sort_jobs(jobs, pods, lambda uid: counts.get(uid, 0))]


def test_newer_jobs_first_among_equal_pods() -> None:
    jobs = [pmj("a", "p", created=stamp(1)), pmj("b", "p", created=stamp(3)),
            pmj("c", "p", created=stamp(2))]
    same = pod("p")
    assert order(jobs, {"a": same, "b": same, "c": same}) == ["b", "c", "a"]


def test_pod_order_then_jobs_without_a_pod_first() -> None:
    jobs = [pmj("prod", "x", created=stamp(3)), pmj("batch", "y", created=stamp(2)),
            pmj("nopod", "z", created=stamp(1)), pmj("free", "w", created=stamp(4))]
    pods = {"prod": pod("x", priority=9500), "batch": pod("y", priority=5500),
            "free": pod("w", priority=3500)}
    assert order(jobs, pods) == ["nopod", "free", "batch", "prod"]


def test_jobs_of_one_batch_job_are_grouped_and_busier_ones_first() -> None:
    owned_a = pod("a1", owner=("Job", "ja"))
    owned_b = pod("b1", owner=("Job", "jb"))
    jobs = [pmj("a-1", "a1", created=stamp(9)), pmj("x", "x", created=stamp(8)),
            pmj("b-1", "b1", created=stamp(7)), pmj("a-2", "a1", created=stamp(6))]
    pods = {"a-1": owned_a, "x": pod("x"), "b-1": owned_b, "a-2": owned_a}
    assert order(jobs, pods) == ["a-1", "a-2", "x", "b-1"]
    # The batch Job jb already has migrations in flight: its jobs go first.
    assert order(jobs, pods, {"uid-Job-jb": 2}) == ["b-1", "a-1", "a-2", "x"]


def test_migrating_of_owner_counts_passed_or_running_jobs_of_its_pods() -> None:
    objs = [pod("a1", owner=("Job", "ja")), pod("a2", owner=("Job", "ja")),
            pod("b1", owner=("Job", "jb")),
            pmj("j1", "a1", "Running"), pmj("j2", "a2", passed=True), pmj("j3", "b1")]
    arb = arbitrator(*objs)
    assert arb.ledger.migrating_of_owner("uid-Job-ja") == 2
    assert arb.ledger.migrating_of_owner("uid-Job-jb") == 0

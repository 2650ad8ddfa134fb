"""`desched run` with MigrationController as the evict plugin, against kmock over real HTTP:
the cycle creates PodMigrationJobs instead of evicting, the migration service arbitrates and
carries them out, jobs created by hand are executed, and a restarted run resumes a job."""

from __future__ import annotations

import asyncio
import copy
import json
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kmock
import pytest
from fake_apiserver import Emulator, FakeApiServer, node, pod, status
from test_executor import Evictions
from test_run import (
    OLD,
    YOUNG,
    background,
    config,
    events,
    json_lines,
    kubeconfig,
    run,
    runner_for,
    start,
    until,
)

from desched.errors import InputError
from desched.live.migration import creator_identity
from desched.live.run import Runner
from desched.migration.arbitration import PASSED_ARBITRATION_ANNOTATION
from desched.model.resources import RESOURCES

pytestmark = pytest.mark.asyncio

KINDS = ("Namespace", "Node", "PodDisruptionBudget", "Pod", "Deployment", "ReplicaSet",
         "PodMigrationJob", "Reservation")
POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord
  plugins:
    deschedule:
      enabled: [{name: PodLifeTime}]
  pluginConfig:
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 3600}
  - name: MigrationController
    args:
      defaultJobMode: EvictDirectly
      arbitrationArgs: {interval: 20ms}
"""
CREATOR = creator_identity("koord")


class Jobs:
    """podmigrationjobs writes (POST, PUT, PUT status with resourceVersion checks) and GET on
    a FakeApiServer, which serves their list and watch."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.created: list[dict[str, Any]] = []
        self.broken: set[str] = set()  # GETs of these jobs answer 500
        self.lose_answers = 0  # answer this many creates with a 500 after carrying them out
        target = kmock.resource("scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs")
        api.server[kmock.method.POST, target] << self.create
        api.server[kmock.method.PUT, target] << self.put
        api.server[kmock.action.FETCH, target] << self.get

    @property
    def objects(self) -> dict[str, dict[str, Any]]:
        return {key.lstrip("/"): obj
                for key, obj in self.api.kinds["PodMigrationJob"].objects.items()}

    async def create(self, request: kmock.Request) -> kmock.Response:
        body = request.data if isinstance(request.data, dict) else json.loads(request.body)
        self.created.append(copy.deepcopy(body))
        name = body["metadata"]["name"]
        if name in self.objects:
            if self.lose_answers:
                self.lose_answers -= 1
                return kmock.Response(status=500, payload=status(500, "lost", "InternalError"))
            return kmock.Response(status=409, payload=status(409, "exists", "AlreadyExists"))
        body["metadata"].update(uid=f"uid-{name}", creationTimestamp=datetime.now(UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"))
        await self.api.add("PodMigrationJob", body)
        if self.lose_answers:
            self.lose_answers -= 1
            return kmock.Response(status=500, payload=status(500, "lost", "InternalError"))
        return kmock.Response(status=201, payload=self.objects[name])

    async def get(self, request: kmock.Request) -> kmock.Response:
        if request.name in self.broken:
            return kmock.Response(status=500, payload=status(500, "etcd hiccup", "InternalError"))
        obj = self.objects.get(request.name or "")
        if obj is None:
            return kmock.Response(status=404, payload=status(404, "not found", "NotFound"))
        return kmock.Response(status=200, payload=obj)

    async def put(self, request: kmock.Request) -> kmock.Response:
        body = request.data if isinstance(request.data, dict) else json.loads(request.body)
        current = self.objects.get(request.name or "")
        if current is None:
            return kmock.Response(status=404, payload=status(404, "not found", "NotFound"))
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return kmock.Response(status=409, payload=status(409, "conflict", "Conflict"))
        updated = copy.deepcopy(current)
        if request.subresource == "status":
            updated["status"] = body.get("status") or {}
        else:
            updated["spec"] = body.get("spec") or {}
            updated["metadata"]["annotations"] = body["metadata"].get("annotations") or {}
        await self.api.modify("PodMigrationJob", updated)
        return kmock.Response(status=200, payload=self.objects[request.name or ""])

    def phases(self) -> dict[str, str]:
        return {name: (obj.get("status") or {}).get("phase", "") for name, obj in
                self.objects.items()}


def replica(name: str, node_name: str, created: str) -> dict[str, Any]:
    return pod(name, node=node_name, metadata={
        "creationTimestamp": created,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs",
                             "uid": "uid-rs-web", "controller": True}]},
        status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})


def workload_cluster(api: FakeApiServer, *, with_crd: bool = True) -> Evictions:
    """Two Ready nodes; a 6-replica Deployment whose pods old-1 and old-2 are past the 1h
    lifetime (the others are young)."""
    kinds = [r.kind for r in RESOURCES if with_crd or r.kind != "PodMigrationJob"]
    api.serve(*kinds)
    api.add_now("Node", node("n1"), node("n2"))
    api.add_now("Deployment", {"metadata": {"name": "web", "namespace": "default",
                                            "uid": "uid-deploy-web"},
                               "spec": {"replicas": 6}})
    api.add_now("ReplicaSet", {"metadata": {
        "name": "web-rs", "namespace": "default", "uid": "uid-rs-web",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                             "uid": "uid-deploy-web", "controller": True}]},
        "spec": {"replicas": 6}})
    api.add_now("Pod", replica("old-1", "n1", OLD), replica("old-2", "n2", OLD),
                *(replica(f"young-{i}", f"n{i % 2 + 1}", YOUNG) for i in range(1, 5)))
    return Evictions(api).install()


@pytest.fixture
def policy(tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "koord.yaml"
    path.write_text(POLICY)
    yield str(path)


async def test_once_creates_a_job_and_carries_it_out(tmp_path: Path, emulator: Emulator,
                                                     api: FakeApiServer, policy: str) -> None:
    evictions = workload_cluster(api)
    jobs = Jobs(api)
    runner, code = await run(config(tmp_path, emulator, once=True, policy_path=policy,
                                    kinds=KINDS))
    assert code == 0
    # One job: the default workload object limiter (2 per 5m for 6 replicas, burst 1) holds
    # old-2 back once old-1's migration started.
    [created] = jobs.created
    assert created["metadata"]["annotations"] == {
        "koordinator.sh/evict-reason": created["metadata"]["annotations"][
            "koordinator.sh/evict-reason"],
        "koordinator.sh/evict-trigger": "PodLifeTime",
        "koordinator.sh/job-created-by": CREATOR}
    assert created["spec"]["podRef"]["name"] in ("old-1", "old-2")
    assert created["spec"]["mode"] == "EvictDirectly" and created["spec"]["ttl"] == "5m0s"
    migrated = created["spec"]["podRef"]["name"]
    name = created["metadata"]["name"]
    job = jobs.objects[name]
    assert job["status"]["phase"] == "Succeeded"
    assert job["metadata"]["annotations"][PASSED_ARBITRATION_ANNOTATION] == "true"
    assert evictions.evicted() == [f"default/{migrated}"]
    [report] = runner.reports
    outcomes = sorted((d.outcome, d.pod) for d in report.log.decisions)
    other = "old-2" if migrated == "old-1" else "old-1"
    assert outcomes == [("evicted", migrated), ("limited", other)]
    evicted = next(d for d in report.log.decisions if d.outcome == "evicted")
    assert f"PodMigrationJob {name}" in evicted.reason
    limited = next(d for d in report.log.decisions if d.outcome == "limited")
    assert "objectLimiters.workload" in limited.reason
    posted = await events(emulator)
    assert any(e["regarding"]["name"] == migrated and e["reason"] == "Descheduled"
               and e["action"] == "Migrating" for e in posted)
    scraped = runner.metrics.render().decode()
    assert 'desched_migration_jobs{phase="Succeeded",profile="koord"} 1.0' in scraped
    assert 'desched_migration_evictions_total{profile="koord"} 1.0' in scraped


async def test_dry_run_creates_no_job(tmp_path: Path, emulator: Emulator,
                                      api: FakeApiServer, policy: str) -> None:
    evictions = workload_cluster(api)
    jobs = Jobs(api)
    runner, code = await run(config(tmp_path, emulator, once=True, dry_run=True,
                                    policy_path=policy, kinds=KINDS))
    assert code == 0
    assert jobs.created == [] and evictions.evicted() == []
    [report] = runner.reports
    assert sorted(d.outcome for d in report.log.decisions) == ["evicted", "limited"]


async def test_missing_crd_is_one_clear_error(tmp_path: Path, emulator: Emulator,
                                              api: FakeApiServer, policy: str) -> None:
    workload_cluster(api, with_crd=False)
    with pytest.raises(InputError) as caught:
        await run(config(tmp_path, emulator, once=True, policy_path=policy, kinds=KINDS))
    assert "PodMigrationJob CRD" in str(caught.value) and policy in str(caught.value)


async def more_rounds(runner: Runner, rounds: int) -> None:
    """Until every migration service has run `rounds` more rounds: what has not happened by
    then did not happen for lack of time."""
    services = list(runner.migrations.services.values())
    assert services, "no migration service runs"
    seen = [s.rounds for s in services]
    await until(lambda: all(s.rounds >= n + rounds for s, n in zip(services, seen, strict=True)))


def hand_made(name: str, pod_name: str, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "annotations": annotations,
                         "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": {"podRef": {"namespace": "default", "name": pod_name}, "ttl": "5m"}}


async def test_loop_executes_jobs_created_by_hand(tmp_path: Path, emulator: Emulator,
                                                  api: FakeApiServer, policy: str) -> None:
    evictions = workload_cluster(api)
    jobs = Jobs(api)
    runner = runner_for(config(tmp_path, emulator, interval="1h", policy_path=policy,
                               kinds=KINDS))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 1)
        await until(lambda: all(p in ("Succeeded", "Failed") for p in jobs.phases().values()))
        # old-1's migration took the workload limiter's token: a job created by hand waits
        # for the next one unless it carries the evict annotation.
        await api.add("PodMigrationJob",
                      hand_made("by-hand", "young-1",
                                **{"descheduler.alpha.kubernetes.io/evict": "true"}),
                      hand_made("held", "young-4"),
                      hand_made("ghost", "no-such-pod"),
                      hand_made("others", "young-2", **{
                          "koordinator.sh/job-created-by": "someone-else"}))
        await until(lambda: jobs.phases().get("by-hand") == "Succeeded"
                    and jobs.phases().get("ghost") == "Failed")
        await more_rounds(runner, 3)  # "others" stays untouched
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert "default/young-1" in evictions.evicted()
    assert "default/young-2" not in evictions.evicted()
    ghost = jobs.objects["ghost"]["status"]
    assert ghost["reason"] == "ForbiddenMigratePod"
    assert "no-such-pod" in ghost["message"]
    assert jobs.phases()["others"] == ""
    assert jobs.phases()["held"] == "Running"
    assert "default/young-4" not in evictions.evicted()


async def test_restarted_run_resumes_its_job_without_a_second_eviction(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer, policy: str) -> None:
    evictions = workload_cluster(api)
    jobs = Jobs(api)
    # A previous run evicted young-3 and stopped before it recorded the job's success.
    await api.delete("Pod", "young-3", "default")
    resumed = hand_made("resumed", "young-3", **{"koordinator.sh/job-created-by": CREATOR,
                                                   PASSED_ARBITRATION_ANNOTATION: "true"})
    resumed["spec"]["podRef"]["uid"] = "uid-default-young-3"
    resumed["spec"]["mode"] = "EvictDirectly"
    resumed["status"] = {"phase": "Running", "status": "Eviction", "reason": "Evicting",
                         "conditions": [{"type": "Eviction", "status": "False",
                                         "reason": "Evicting"}]}
    await api.add("PodMigrationJob", resumed)
    text = textwrap.dedent(POLICY).replace("maxPodLifeTimeSeconds: 3600",
                                            "maxPodLifeTimeSeconds: 86400")
    (tmp_path / "quiet.yaml").write_text(text)
    runner = runner_for(config(tmp_path, emulator, interval="1h",
                               policy_path=str(tmp_path / "quiet.yaml"), kinds=KINDS))
    async with background(runner) as task:
        await until(lambda: jobs.phases().get("resumed") == "Succeeded")
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert evictions.bodies == []
    assert jobs.objects["resumed"]["status"]["message"] == \
        'Pod "default/young-3" has been evicted'


async def test_scavenger_deletes_old_jobs(tmp_path: Path, emulator: Emulator,
                                          api: FakeApiServer, policy: str) -> None:
    workload_cluster(api)
    jobs = Jobs(api)
    deleted: list[str] = []
    target = kmock.resource("scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs")

    async def delete(request: kmock.Request) -> kmock.Response:
        name = request.name or ""
        body = json.loads(request.body) if request.body else {}
        if (body.get("preconditions") or {}).get("uid") not in (None, f"uid-{name}"):
            return kmock.Response(status=409, payload=status(409, "uid", "Conflict"))
        deleted.append(name)
        await api.delete("PodMigrationJob", name)
        return kmock.Response(status=200, payload={"kind": "Status", "status": "Success"})

    api.server[kmock.method.DELETE, target] << delete
    old = hand_made("old", "young-1")
    old["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    old["status"] = {"phase": "Succeeded"}
    kept = hand_made("kept", "young-2")  # created now, TTL 5m: not due
    kept["status"] = {"phase": "Failed"}
    others = hand_made("others", "young-3", **{"koordinator.sh/job-created-by": "someone"})
    others["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    others["status"] = {"phase": "Failed"}
    for job in (old, kept, others):
        api.add_now("PodMigrationJob", job)
        # kmock's emulator answers a DELETE only for objects it knows.
        api.server.objects[target, None, job["metadata"]["name"]] = job
    text = POLICY.replace("maxPodLifeTimeSeconds: 3600", "maxPodLifeTimeSeconds: 86400")
    (tmp_path / "quiet.yaml").write_text(text)
    runner = runner_for(config(tmp_path, emulator, interval="1h",
                               policy_path=str(tmp_path / "quiet.yaml"), kinds=KINDS))
    async with background(runner) as task:
        await until(lambda: "old" not in jobs.objects)
        await more_rounds(runner, 2)  # the scavenging round has ended
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert deleted == ["old"]
    assert sorted(jobs.objects) == ["kept", "others"]


async def test_a_failing_job_does_not_hold_up_the_others(tmp_path: Path, emulator: Emulator,
                                                         api: FakeApiServer) -> None:
    evictions = workload_cluster(api)
    jobs = Jobs(api)
    jobs.broken.add("broken")
    text = POLICY.replace("maxPodLifeTimeSeconds: 3600", "maxPodLifeTimeSeconds: 86400").replace(
        "defaultJobMode: EvictDirectly", "defaultJobMode: EvictDirectly\n      "
        "maxConcurrentReconciles: 2")
    (tmp_path / "quiet.yaml").write_text(text)
    evict = {"descheduler.alpha.kubernetes.io/evict": "true"}
    for name, pod_name in (("broken", "young-1"), ("fine", "young-2")):
        job = hand_made(name, pod_name, **evict)
        job["spec"]["mode"] = "EvictDirectly"
        api.add_now("PodMigrationJob", job)
    runner = runner_for(config(tmp_path, emulator, interval="1h",
                               policy_path=str(tmp_path / "quiet.yaml"), kinds=KINDS))
    async with background(runner) as task:
        await until(lambda: jobs.phases().get("fine") == "Succeeded")
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert evictions.evicted() == ["default/young-2"]
    assert runner.migrations.services["koord"].controller.args.max_concurrent_reconciles == 2


async def test_object_limiters_hold_across_cycles(tmp_path: Path, emulator: Emulator,
                                                  api: FakeApiServer, policy: str) -> None:
    """The workload limiter (2 per 5m, burst 1) took its token for old-1's job in the first
    cycle: later cycles, each with a fresh plugin, still refuse old-2."""
    workload_cluster(api)
    jobs = Jobs(api)
    runner = runner_for(config(tmp_path, emulator, interval="50ms", policy_path=policy,
                               kinds=KINDS))
    async with background(runner) as task:
        await until(lambda: len(runner.reports) >= 4)
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    assert len(jobs.created) == 1
    later = [d for report in runner.reports[1:] for d in report.log.decisions
             if d.pod in ("old-1", "old-2")]
    assert later and all(d.outcome in ("limited", "filtered") for d in later), later
    assert any("objectLimiters.workload" in d.reason for d in later)


async def test_a_lost_create_answer_still_counts_the_job(tmp_path: Path, emulator: Emulator,
                                                         api: FakeApiServer, policy: str) -> None:
    """The server created the job but every answer was a 500: the executor finds its job by
    name instead of reporting a failure (which would let a second job be made)."""
    workload_cluster(api)
    jobs = Jobs(api)
    jobs.lose_answers = 10
    runner, code = await run(config(tmp_path, emulator, once=True, policy_path=policy,
                                    kinds=KINDS, eviction_attempts=2))
    assert code == 0
    [report] = runner.reports
    assert sorted(d.outcome for d in report.log.decisions) == ["evicted", "limited"]
    assert len(jobs.objects) == 1
    assert set(jobs.phases().values()) == {"Succeeded"}


async def test_arbitration_disabled_still_fails_jobs_the_pod_checks_refuse(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    workload_cluster(api)
    api.add_now("Pod", pod("agent", node="n1", metadata={"ownerReferences": [{
        "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "uid-ds",
        "controller": True}]}))
    jobs = Jobs(api)
    text = POLICY.replace("maxPodLifeTimeSeconds: 3600", "maxPodLifeTimeSeconds: 86400") \
        .replace("arbitrationArgs: {interval: 20ms}",
                 "arbitrationArgs: {interval: 20ms, enabled: false}")
    (tmp_path / "off.yaml").write_text(text)
    api.add_now("PodMigrationJob", hand_made("ds", "agent"))
    runner = runner_for(config(tmp_path, emulator, interval="1h",
                               policy_path=str(tmp_path / "off.yaml"), kinds=KINDS))
    async with background(runner) as task:
        await until(lambda: jobs.phases().get("ds") == "Failed")
        runner.request_stop("test")
        assert await asyncio.wait_for(task, 10) == 0
    failed = jobs.objects["ds"]["status"]
    assert failed["reason"] == "ForbiddenMigratePod"
    assert "DaemonSet" in failed["message"]


@pytest.mark.process
async def test_the_command_migrates_as_the_e2e_scenario_expects(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer, policy: str) -> None:
    """`desched run --once` as a process: what tests/e2e/test_e2e_migration.py reads from a real
    cluster — the JSON log line per created job, the job Succeeded, the pod evicted."""
    evictions = workload_cluster(api)
    jobs = Jobs(api)
    kube = kubeconfig(tmp_path, str(emulator.url).rstrip("/"))
    proc = await start("--policy", policy, "--kubeconfig", kube, "--log-format", "json",
                       "--once")
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    lines = json_lines(err)
    created = [e for e in lines if e.get("event") == "Created PodMigrationJob"]
    [job] = jobs.objects.values()
    migrated = job["spec"]["podRef"]["name"]
    assert [e["pod"] for e in created] == [f"default/{migrated}"]
    assert job["status"]["phase"] == "Succeeded"
    assert evictions.evicted() == [f"default/{migrated}"]
    assert any(e.get("event") == "migration jobs finished" for e in lines)

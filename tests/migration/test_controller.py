"""The live PodMigrationJob controller against kmock over real HTTP (EvictDirectly and
ReservationFirst).

`Cluster` serves pods (GET, eviction), podmigrationjobs (GET, LIST, PUT and PUT status with
resourceVersion checks, 409 on a stale one) and reservations (POST, GET, DELETE) from plain
dicts, as an API server with the CRDs."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import kmock
import pytest
import pytest_asyncio

from desched.live.client import ApiClient
from desched.live.informer import Backoff
from desched.migration.controller import MigrationJobController
from desched.plugins.migrationcontroller_args import MigrationControllerArgs

pytestmark = pytest.mark.asyncio

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
GROUP, VERSION = "scheduling.koordinator.sh", "v1alpha1"


def _status(code: int, message: str, reason: str = "") -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "code": code, "reason": reason, "message": message}


def _pdb_refusal() -> dict[str, Any]:
    body = _status(429, "Cannot evict pod as it would violate the pod's disruption budget.",
                   "TooManyRequests")
    body["details"] = {"causes": [{"type": "DisruptionBudget",
                                   "message": "The disruption budget web needs 1 healthy pods"}]}
    return body


class Cluster:
    def __init__(self, server: kmock.KubernetesEmulator) -> None:
        self.server = server
        self.rv = 100
        self.pods: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.evictions: list[dict[str, Any]] = []
        self.refuse = 0  # answer this many evictions with a PDB refusal
        self.writes: list[str] = []  # "spec"/"status" per accepted PUT
        self.conflicts = 0  # answer this many job writes with 409 (another writer won)
        pods = kmock.resource("", "v1", "pods")
        pmjs = kmock.resource(GROUP, VERSION, "podmigrationjobs")
        server[kmock.method.POST, pods, kmock.subresource("eviction")] << self._evict
        server[kmock.action.FETCH, pods] << self._get_pod
        server[kmock.method.PUT, pmjs] << self._put_job
        server[kmock.action.FETCH, pmjs] << self._get_job
        server[kmock.action.LIST, pmjs] << self._list_jobs
        self.reservations: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []  # reservations deleted
        rsvs = kmock.resource(GROUP, VERSION, "reservations")
        server[kmock.method.POST, rsvs] << self._create_reservation
        server[kmock.method.DELETE, rsvs] << self._delete_reservation
        server[kmock.action.FETCH, rsvs] << self._get_reservation

    async def _create_reservation(self, request: kmock.Request) -> kmock.Response:
        body = request.data if isinstance(request.data, dict) else json.loads(request.body)
        name = body["metadata"]["name"]
        if name in self.reservations:
            return kmock.Response(status=409, payload=_status(409, "exists", "AlreadyExists"))
        body["metadata"].update(uid=f"r-{name}", resourceVersion=self._next_rv())
        body["status"] = {"phase": "Pending"}
        self.reservations[name] = body
        return kmock.Response(status=201, payload=body)

    async def _get_reservation(self, request: kmock.Request) -> kmock.Response:
        obj = self.reservations.get(request.name or "")
        if obj is None:
            return kmock.Response(status=404, payload=_status(404, "not found", "NotFound"))
        return kmock.Response(status=200, payload=obj)

    async def _delete_reservation(self, request: kmock.Request) -> kmock.Response:
        obj = self.reservations.pop(request.name or "", None)
        if obj is None:
            return kmock.Response(status=404, payload=_status(404, "not found", "NotFound"))
        self.deleted.append(request.name or "")
        return kmock.Response(status=200, payload=obj)

    def schedule(self, name: str, node: str) -> None:
        self.reservations[name]["status"] = {
            "phase": "Available", "nodeName": node,
            "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled"},
                           {"type": "Ready", "status": "True", "reason": "Available"}]}

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def add_pod(self, name: str, node: str = "n1", uid: str | None = None,
                bare: bool = False) -> dict[str, Any]:
        owners = [] if bare else [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                   "uid": "rs-uid", "controller": True}]
        obj = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}",
                            "labels": {"app": "web"}, "ownerReferences": owners,
                            "resourceVersion": self._next_rv()},
               "spec": {"nodeName": node, "containers": [{"name": "c"}]},
               "status": {"phase": "Running"}}
        self.pods[f"default/{name}"] = obj
        return obj

    def add_job(self, name: str, pod: str | None = "web-1", *, mode: str = "EvictDirectly",
                ttl: str | None = "5m", status: dict[str, Any] | None = None,
                **spec: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"mode": mode, **spec}
        if ttl:
            body["ttl"] = ttl
        if pod is not None and "podRef" not in body:
            body["podRef"] = {"namespace": "default", "name": pod}
        obj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodMigrationJob",
               "metadata": {"name": name, "uid": f"uid-{name}",
                            "creationTimestamp": T0.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "resourceVersion": self._next_rv()},
               "spec": body}
        if status is not None:
            obj["status"] = status
        self.jobs[name] = obj
        return obj

    def job(self, name: str) -> dict[str, Any]:
        return self.jobs[name]

    async def _get_pod(self, request: kmock.Request) -> kmock.Response:
        obj = self.pods.get(f"{request.namespace}/{request.name}")
        if obj is None:
            return kmock.Response(status=404, payload=_status(404, "not found", "NotFound"))
        return kmock.Response(status=200, payload=obj)

    async def _evict(self, request: kmock.Request) -> kmock.Response:
        body = request.data if isinstance(request.data, dict) else json.loads(request.body)
        self.evictions.append(body)
        key = f"{request.namespace}/{request.name}"
        obj = self.pods.get(key)
        if obj is None:
            return kmock.Response(status=404, payload=_status(404, "not found", "NotFound"))
        if self.refuse:
            self.refuse -= 1
            return kmock.Response(status=429, payload=_pdb_refusal())
        del self.pods[key]
        return kmock.Response(status=201, payload={"kind": "Status", "status": "Success"})

    async def _get_job(self, request: kmock.Request) -> kmock.Response:
        obj = self.jobs.get(request.name or "")
        if obj is None:
            return kmock.Response(status=404, payload=_status(404, "not found", "NotFound"))
        return kmock.Response(status=200, payload=obj)

    async def _list_jobs(self, request: kmock.Request) -> kmock.Response:
        return kmock.Response(status=200, payload={
            "kind": "PodMigrationJobList", "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {"resourceVersion": str(self.rv)}, "items": list(self.jobs.values())})

    async def _put_job(self, request: kmock.Request) -> kmock.Response:
        body = request.data if isinstance(request.data, dict) else json.loads(request.body)
        current = self.jobs.get(request.name or "")
        if current is None:
            return kmock.Response(status=404, payload=_status(404, "not found", "NotFound"))
        if self.conflicts:
            self.conflicts -= 1
            current["metadata"]["resourceVersion"] = self._next_rv()
            return kmock.Response(status=409, payload=_status(409, "conflict", "Conflict"))
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return kmock.Response(status=409, payload=_status(409, "conflict", "Conflict"))
        updated = copy.deepcopy(current)
        if request.subresource == "status":
            updated["status"] = body.get("status") or {}
            self.writes.append("status")
        else:
            updated["spec"] = body.get("spec") or {}
            updated["metadata"]["annotations"] = body["metadata"].get("annotations")
            self.writes.append("spec")
        updated["metadata"]["resourceVersion"] = self._next_rv()
        self.jobs[request.name or ""] = updated
        return kmock.Response(status=200, payload=updated)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[tuple[Cluster, ApiClient]]:
    async with kmock.KubernetesEmulator() as handler, kmock.Server(handler):
        c = Cluster(handler)
        async with ApiClient.for_server(str(handler.url).rstrip("/"), token="t",
                                        trust_env=False, timeout=5.0) as client:
            yield c, client


def _controller(client: ApiClient, clock: Clock, **args: Any) -> MigrationJobController:
    return MigrationJobController(client, MigrationControllerArgs(**args), clock,
                                  eviction_attempts=2,
                                  backoff=Backoff(initial=0.01, maximum=0.02))


def _cond(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in job.get("status", {}).get("conditions") or []:
        if cond["type"] == kind:
            return cond
    return None


async def test_job_created_by_hand_is_executed(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("by-hand")
    ctl = _controller(client, Clock(T0 + timedelta(seconds=10)))
    await ctl.reconcile("by-hand")
    job = c.job("by-hand")
    assert job["status"]["phase"] == "Succeeded"
    assert job["status"]["status"] == "Complete"
    assert job["status"]["reason"] == ""
    assert job["status"]["message"] == 'Pod "default/web-1" has been evicted'
    assert job["spec"]["podRef"]["uid"] == "uid-web-1"
    assert _cond(job, "Eviction") is not None
    assert _cond(job, "Eviction")["status"] == "True"  # type: ignore[index]
    assert len(c.evictions) == 1
    assert c.evictions[0]["deleteOptions"]["preconditions"]["uid"] == "uid-web-1"
    assert "default/web-1" not in c.pods
    assert ctl.evictions == 1
    # A final job is left alone.
    writes = len(c.writes)
    await ctl.reconcile("by-hand")
    assert len(c.writes) == writes and len(c.evictions) == 1


async def test_default_mode_evict_directly_and_grace_period(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", mode="", deleteOptions={"gracePeriodSeconds": 7})
    ctl = MigrationJobController(
        client, MigrationControllerArgs(default_job_mode="EvictDirectly"), Clock(T0))
    await ctl.reconcile("j")
    assert c.job("j")["status"]["phase"] == "Succeeded"
    assert c.evictions[0]["deleteOptions"]["gracePeriodSeconds"] == 7


async def test_missing_pod_fails(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_job("j", pod="ghost")
    await _controller(client, Clock(T0)).reconcile("j")
    status = c.job("j")["status"]
    assert status["phase"] == "Failed"
    assert status["reason"] == "MissingPod"
    assert status["message"] == 'Abort job caused by missing Pod "default/ghost"'
    assert not c.evictions


async def test_malformed_job_fails(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_job("j", pod=None)
    await _controller(client, Clock(T0)).reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidPodRef")
    assert status["message"] == "Abort job caused by invalid PodRef"


async def test_paused_and_missing_jobs_are_skipped(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", paused=True)
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile("j")
    await ctl.reconcile("no-such-job")
    assert not c.writes and not c.evictions


async def test_pdb_refusal_is_retried_then_times_out(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", ttl="5m")
    c.refuse = 100
    clock = Clock(T0 + timedelta(seconds=1))
    ctl = _controller(client, clock)
    await ctl.reconcile("j")
    job = c.job("j")
    assert job["status"]["phase"] == "Running"
    cond = _cond(job, "Eviction")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "FailedEvict")
    assert "disruption budget" in cond["message"]
    assert len(c.evictions) == 1
    clock.now = T0 + timedelta(minutes=2)
    await ctl.reconcile("j")
    assert c.job("j")["status"]["phase"] == "Running"
    assert len(c.evictions) == 2
    clock.now = T0 + timedelta(minutes=5)
    await ctl.reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "Timeout")
    assert status["message"].startswith("Abort job caused by timeout")
    assert "disruption budget" in status["message"]
    assert len(c.evictions) == 2
    assert "default/web-1" in c.pods


async def test_pdb_refusal_then_allowed_succeeds(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    c.refuse = 1
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile_all()
    assert c.job("j")["status"]["phase"] == "Running"
    await ctl.reconcile_all()
    assert c.job("j")["status"]["phase"] == "Succeeded"
    assert len(c.evictions) == 2


async def test_restart_resumes_running_job_without_second_eviction(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    # The previous controller wrote Evicting, sent the eviction, and stopped: the pod is gone.
    message = 'Pod "default/web-1" evicted from node "n1" by the reason "x"'
    c.add_job("j", status={
        "phase": "Running", "status": "Eviction", "reason": "Evicting", "message": message,
        "conditions": [{"type": "Eviction", "status": "False", "reason": "Evicting",
                        "message": message}]},
        podRef={"namespace": "default", "name": "web-1", "uid": "uid-web-1"})
    c.job("j")["metadata"]["annotations"] = {"koordinator.sh/job-created-by": "old-process"}
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile("j")
    status = c.job("j")["status"]
    assert status["phase"] == "Succeeded"
    assert not c.evictions
    writes = list(c.writes)
    await ctl.reconcile("j")
    await _controller(client, Clock(T0)).reconcile("j")
    assert c.writes == writes and not c.evictions


async def test_restart_with_replaced_pod_completes(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1", uid="new-uid")  # a StatefulSet recreated the pod under the same name
    c.add_job("j", status={
        "phase": "Running", "status": "Eviction",
        "conditions": [{"type": "Eviction", "status": "False", "reason": "Evicting"}]},
        podRef={"namespace": "default", "name": "web-1", "uid": "uid-web-1"})
    await _controller(client, Clock(T0)).reconcile("j")
    assert c.job("j")["status"]["phase"] == "Succeeded"
    assert not c.evictions and "default/web-1" in c.pods


async def test_restart_with_terminating_pod_waits(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:05Z"
    c.add_job("j", status={
        "phase": "Running", "status": "Eviction",
        "conditions": [{"type": "Eviction", "status": "False", "reason": "Evicting"}]},
        podRef={"namespace": "default", "name": "web-1", "uid": "uid-web-1"})
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile("j")
    assert c.job("j")["status"]["phase"] == "Running" and not c.evictions
    del c.pods["default/web-1"]
    await ctl.reconcile("j")
    assert c.job("j")["status"]["phase"] == "Succeeded" and not c.evictions


async def test_running_job_whose_pod_vanished_before_eviction_fails(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_job("j", status={"phase": "Running"},
              podRef={"namespace": "default", "name": "web-1", "uid": "uid-web-1"})
    await _controller(client, Clock(T0)).reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "MissingPod")


async def test_identity_skips_jobs_of_other_instances(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    c.job("j")["metadata"]["annotations"] = {"koordinator.sh/job-created-by": "other"}
    ctl = MigrationJobController(client, MigrationControllerArgs(), Clock(T0), identity="me")
    await ctl.reconcile("j")
    assert not c.writes and not c.evictions


async def test_stale_write_ends_the_pass(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    c.conflicts = 1
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile("j")
    assert not c.evictions
    await ctl.reconcile("j")
    assert c.job("j")["status"]["phase"] == "Succeeded"
    assert len(c.evictions) == 1


# -- ReservationFirst ------------------------------------------------------------------------------

async def test_reservation_first_happy_path(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1", node="n1")
    c.add_job("j", mode="ReservationFirst", ttl="5m")
    clock = Clock(T0 + timedelta(seconds=1))
    ctl = _controller(client, clock)
    await ctl.reconcile("j")
    job = c.job("j")
    assert job["status"]["phase"] == "Running"
    ref = job["spec"]["reservationOptions"]["reservationRef"]
    assert ref == {"kind": "Reservation", "apiVersion": "v1alpha1", "name": "uid-j",
                   "uid": "r-uid-j"}
    assert _cond(job, "ReservationCreated")["status"] == "True"  # type: ignore[index]
    r = c.reservations["uid-j"]
    assert r["metadata"]["labels"]["app.kubernetes.io/created-by"] == "koord-descheduler"
    assert r["metadata"]["labels"]["scheduling.koordinator.sh/reservation-order"] == \
        str(int((T0 + timedelta(seconds=1)).timestamp() * 1000))
    assert r["metadata"]["ownerReferences"][0]["uid"] == "uid-j"
    spec = r["spec"]
    assert spec["allocateOnce"] is True and spec["ttl"] == "5m"
    assert spec["owners"] == [{"controller": {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "web", "uid": "rs-uid",
                                              "controller": True, "namespace": "default"}}]
    pod_spec = spec["template"]["spec"]
    assert "nodeName" not in pod_spec
    terms = pod_spec["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                       "values": ["n1"]}]}]
    assert spec["template"]["metadata"]["labels"] == {"app": "web"}
    # Pending: nothing happens.
    await ctl.reconcile("j")
    assert not c.evictions and c.job("j")["status"]["phase"] == "Running"
    # Scheduled on n2: the pod is evicted, then the job waits for the new pod to bind.
    c.schedule("uid-j", "n2")
    await ctl.reconcile("j")
    job = c.job("j")
    assert len(c.evictions) == 1 and "default/web-1" not in c.pods
    assert job["status"]["nodeName"] == "n2"
    assert _cond(job, "ReservationScheduled")["status"] == "True"  # type: ignore[index]
    assert _cond(job, "Eviction")["status"] == "True"  # type: ignore[index]
    assert job["status"]["reason"] == "WaitForPodBindReservation"
    assert job["status"]["phase"] == "Running"
    await ctl.reconcile("j")
    assert c.job("j")["status"]["phase"] == "Running" and len(c.evictions) == 1
    c.reservations["uid-j"]["status"]["currentOwners"] = [
        {"kind": "Pod", "namespace": "default", "name": "web-2", "uid": "uid-web-2"}]
    await _controller(client, clock).reconcile("j")  # a restarted controller finishes it
    status = c.job("j")["status"]
    assert (status["phase"], status["status"]) == ("Succeeded", "Complete")
    assert status["message"] == 'Bind Pod "default/web-2" in Reservation "uid-j"'
    assert status["podRef"]["name"] == "web-2"
    assert len(c.evictions) == 1 and "uid-j" in c.reservations


async def test_reservation_never_available_times_out_and_is_deleted(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", mode="ReservationFirst", ttl="5m")
    clock = Clock(T0)
    ctl = _controller(client, clock)
    await ctl.reconcile("j")
    c.reservations["uid-j"]["status"]["conditions"] = [
        {"type": "Scheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available"}]
    clock.now = T0 + timedelta(minutes=1)
    await ctl.reconcile("j")
    job = c.job("j")
    cond = _cond(job, "ReservationScheduled")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == \
        ("False", "Unschedulable", "0/3 nodes are available")
    assert job["status"]["phase"] == "Running"
    clock.now = T0 + timedelta(minutes=5)
    await ctl.reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "Timeout")
    assert c.deleted == ["uid-j"] and not c.reservations
    assert not c.evictions and "default/web-1" in c.pods


async def test_reservation_owned_by_someone_else(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", mode="ReservationFirst", ttl="5m")
    theirs = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Reservation",
              "metadata": {"name": "uid-j", "uid": "theirs",
                           "ownerReferences": [{"kind": "Deployment", "uid": "other"}]},
              "spec": {}, "status": {"phase": "Available"}}
    c.reservations["uid-j"] = copy.deepcopy(theirs)
    clock = Clock(T0)
    ctl = _controller(client, clock)
    await ctl.reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "FailedCreateReservation")
    assert "owned by something else" in status["message"]
    assert c.reservations["uid-j"] == theirs and not c.deleted and not c.evictions
    clock.now = T0 + timedelta(minutes=10)
    await ctl.reconcile("j")
    assert c.reservations["uid-j"] == theirs and not c.deleted


async def test_timeout_spares_a_reservation_of_someone_else(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", mode="ReservationFirst", ttl="5m", reservationOptions={
        "reservationRef": {"kind": "Reservation", "name": "user-made"}})
    c.reservations["user-made"] = {"metadata": {"name": "user-made", "uid": "u"},
                                   "status": {"phase": "Pending"}}
    await _controller(client, Clock(T0 + timedelta(minutes=6))).reconcile("j")
    assert c.job("j")["status"]["reason"] == "Timeout"
    assert "user-made" in c.reservations and not c.deleted


async def test_reservation_adopted_after_restart(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", mode="ReservationFirst")
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile("j")  # Running; creates the Reservation and records it
    assert list(c.reservations) == ["uid-j"]
    # Forget the reference, as if the process had died between the two writes.
    job = c.job("j")
    del job["spec"]["reservationOptions"]
    await ctl.reconcile("j")
    assert c.job("j")["spec"]["reservationOptions"]["reservationRef"]["uid"] == "r-uid-j"
    assert c.job("j")["status"]["phase"] == "Running" and list(c.reservations) == ["uid-j"]


async def test_reservation_on_the_same_node_is_forbidden(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1", node="n1")
    c.add_job("j", mode="ReservationFirst")
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile("j")
    c.schedule("uid-j", "n1")
    await ctl.reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "ForbiddenMigratePod")
    assert not c.evictions


async def test_expired_and_missing_reservations_fail(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_pod("web-2")
    c.add_job("a", "web-1", mode="ReservationFirst")
    c.add_job("b", "web-2", mode="ReservationFirst")
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile_all()
    c.reservations["uid-a"]["status"] = {
        "phase": "Failed", "conditions": [{"type": "Ready", "reason": "Expired"}]}
    del c.reservations["uid-b"]
    await ctl.reconcile_all()
    a, b = c.job("a")["status"], c.job("b")["status"]
    assert (a["phase"], a["reason"]) == ("Failed", "ReservationExpired")
    assert (b["phase"], b["reason"]) == ("Failed", "MissingReservation")
    assert not c.evictions


async def test_bare_pod_cannot_get_a_reservation(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1", bare=True)
    c.add_job("j", mode="ReservationFirst")
    await _controller(client, Clock(T0)).reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "FailedCreateReservation")
    assert not c.reservations and not c.evictions

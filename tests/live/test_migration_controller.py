"""The live PodMigrationJob controller against kmock over real HTTP (EvictDirectly and
ReservationFirst).

`Cluster` serves pods (GET, eviction, DELETE with a UID precondition, PUT with a resourceVersion
check), podmigrationjobs (GET, LIST, PUT and PUT status with resourceVersion checks, 409 on a
stale one), reservations (POST, GET, DELETE) from plain dicts, as an API server with the CRDs,
and records the events posted (events.k8s.io/v1)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kmock
import pytest
import pytest_asyncio
import yaml

from desched.live.client import ApiClient, ConnectionLost
from desched.live.events import EventRecorder
from desched.live.migration_controller import MigrationGate, MigrationJobController
from desched.migration.arbitration import Verdict
from desched.migration.args import MigrationControllerArgs
from desched.model.pod import Pod
from desched.util.backoff import Backoff

pytestmark = pytest.mark.asyncio

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
GROUP, VERSION = "scheduling.koordinator.sh", "v1alpha1"


def _status(code: int, message: str, reason: str = "") -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "code": code, "reason": reason, "message": message}


PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def _pdb_refusal(message: str = PDB_MESSAGE) -> dict[str, Any]:
    body = _status(429, message, "TooManyRequests")
    body["details"] = {"causes": [{"type": "DisruptionBudget",
                                   "message": "The disruption budget web needs 1 healthy pods"}]}
    return body


def _body(request: kmock.Request) -> Any:
    return request.data if isinstance(request.data, dict) else json.loads(request.body)


def _not_found() -> kmock.Response:
    return kmock.Response(status=404, payload=_status(404, "not found", "NotFound"))


class Cluster:
    def __init__(self, server: kmock.KubernetesEmulator) -> None:
        self.server = server
        self.rv = 100
        self.pods: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.evictions: list[dict[str, Any]] = []
        self.refuse = 0  # answer this many evictions with a PDB refusal
        self.pdb_message = PDB_MESSAGE  # ... that says this
        self.writes: list[str] = []  # "spec"/"status" per accepted PUT
        self.conflicts = 0  # answer this many job writes with 409 (another writer won)
        pods = kmock.resource("", "v1", "pods")
        pmjs = kmock.resource(GROUP, VERSION, "podmigrationjobs")
        server[kmock.method.POST, pods, kmock.subresource("eviction")] << self._evict
        server[kmock.action.FETCH, pods] << self._get_pod
        server[kmock.method.DELETE, pods] << self._delete_pod
        server[kmock.method.PATCH, pods] << self._patch_pod
        self.pod_deletes: list[dict[str, Any]] = []  # DeleteOptions of each pod DELETE
        self.pod_patches: list[tuple[str, dict[str, Any]]] = []  # (pod key, merge patch)
        self.events: list[dict[str, Any]] = []  # events posted, in order
        self.replace_after_read: dict[str, str] = {}  # pod key -> the replacement's uid
        server[kmock.method.POST, kmock.resource("events.k8s.io", "v1", "events")] << \
            self._post_event
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
        body = _body(request)
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
            return _not_found()
        return kmock.Response(status=200, payload=obj)

    async def _delete_reservation(self, request: kmock.Request) -> kmock.Response:
        obj = self.reservations.pop(request.name or "", None)
        if obj is None:
            return _not_found()
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
        # kmock's emulator refuses a DELETE of an object it does not track, before any handler.
        self.server.objects[kmock.resource("", "v1", "pods"), "default", name] = obj
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

    async def _post_event(self, request: kmock.Request) -> kmock.Response:
        body = _body(request)
        body["metadata"]["namespace"] = request.namespace  # where it was posted
        self.events.append(body)
        return kmock.Response(status=201, payload=body)

    async def _delete_pod(self, request: kmock.Request) -> kmock.Response:
        body = _body(request)
        self.pod_deletes.append(body)
        key = f"{request.namespace}/{request.name}"
        obj = self.pods.get(key)
        if obj is None:
            return _not_found()
        uid = (body.get("preconditions") or {}).get("uid")
        if uid and uid != obj["metadata"]["uid"]:
            return kmock.Response(status=409, payload=_status(409, "uid mismatch", "Conflict"))
        del self.pods[key]
        return kmock.Response(status=200, payload=obj)

    async def _patch_pod(self, request: kmock.Request) -> kmock.Response:
        """A JSON merge patch of the pod's annotations; a UID in the patch must match."""
        assert request.headers.get("Content-Type") == "application/merge-patch+json"
        body = json.loads(request.body)
        key = f"{request.namespace}/{request.name}"
        self.pod_patches.append((key, copy.deepcopy(body)))
        obj = self.pods.get(key)
        if obj is None:
            return _not_found()
        uid = body["metadata"].get("uid")
        if uid and uid != obj["metadata"]["uid"]:
            return kmock.Response(status=409, payload=_status(409, "uid mismatch", "Conflict"))
        meta = obj["metadata"]
        meta["annotations"] = {**(meta.get("annotations") or {}),
                               **body["metadata"]["annotations"]}
        meta["resourceVersion"] = self._next_rv()
        return kmock.Response(status=200, payload=obj)

    def pmj_events(self) -> list[tuple[str, str, str]]:
        """(type, reason, note) of the events about podmigrationjobs, in order."""
        return [(e["type"], e["reason"], e["note"]) for e in self.events
                if e["regarding"]["kind"] == "PodMigrationJob"]

    async def _get_pod(self, request: kmock.Request) -> kmock.Response:
        key = f"{request.namespace}/{request.name}"
        obj = self.pods.get(key)
        if obj is None:
            return _not_found()
        new_uid = self.replace_after_read.pop(key, None)
        if new_uid is not None:  # a StatefulSet recreates the pod right after this read
            self.add_pod(str(request.name), node=obj["spec"]["nodeName"], uid=new_uid)
        return kmock.Response(status=200, payload=obj)

    async def _evict(self, request: kmock.Request) -> kmock.Response:
        body = _body(request)
        self.evictions.append(body)
        key = f"{request.namespace}/{request.name}"
        obj = self.pods.get(key)
        if obj is None:
            return _not_found()
        if self.refuse:
            self.refuse -= 1
            return kmock.Response(status=429, payload=_pdb_refusal(self.pdb_message))
        del self.pods[key]
        return kmock.Response(status=201, payload={"kind": "Status", "status": "Success"})

    async def _get_job(self, request: kmock.Request) -> kmock.Response:
        obj = self.jobs.get(request.name or "")
        if obj is None:
            return _not_found()
        return kmock.Response(status=200, payload=obj)

    async def _list_jobs(self, request: kmock.Request) -> kmock.Response:
        return kmock.Response(status=200, payload={
            "kind": "PodMigrationJobList", "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {"resourceVersion": str(self.rv)}, "items": list(self.jobs.values())})

    async def _put_job(self, request: kmock.Request) -> kmock.Response:
        body = _body(request)
        current = self.jobs.get(request.name or "")
        if current is None:
            return _not_found()
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


def _controller(client: ApiClient, clock: Clock, *, events: EventRecorder | None = None,
                gate: MigrationGate | None = None, require_arbitration: bool = False,
                adopt_unowned: bool = True, identity: str | None = None,
                **args: Any) -> MigrationJobController:
    return MigrationJobController(client, MigrationControllerArgs(**args), clock,
                                  identity=identity, events=events, gate=gate,
                                  require_arbitration=require_arbitration,
                                  adopt_unowned=adopt_unowned, eviction_attempts=2,
                                  backoff=Backoff(initial=0.01, maximum=0.02))


def _recorder(client: ApiClient) -> EventRecorder:
    return EventRecorder(client, asyncio.get_running_loop(), "test-instance")


class Gate:
    """A MigrationGate that refuses while `why` is set and records each call."""

    def __init__(self, why: str | None = None) -> None:
        self.why = why
        self.asked: list[str] = []
        self.fed: list[tuple[str, str]] = []
        self.returned: list[tuple[str, str]] = []  # not_evicted: tokens given back
        self.went = 0  # limited() said go

    def limited(self, pod: Pod, job: dict[str, Any]) -> str | None:
        self.asked.append(pod.key)
        self.went += self.why is None
        return self.why

    def evicted(self, pod: Pod, job: dict[str, Any]) -> None:
        self.fed.append((pod.key, job["metadata"]["name"]))

    def not_evicted(self, pod: Pod, job: dict[str, Any]) -> None:
        self.returned.append((pod.key, job["metadata"]["name"]))

    def settled(self) -> bool:
        """Every go from limited() was answered by exactly one evicted or not_evicted."""
        return len(self.fed) + len(self.returned) == self.went


def _drop(client: ApiClient, monkeypatch: pytest.MonkeyPatch, method: str, suffix: str, *,
          sent: bool, skip: int = 0) -> list[str]:
    """The first request `method ...suffix` after `skip` such requests raises ConnectionLost:
    carried out with its answer lost (`sent`), or never sent. Returns the dropped paths."""
    original = client.request
    seen: list[str] = []
    dropped: list[str] = []

    async def request(verb: str, path: str, **kwargs: Any) -> Any:
        if verb == method and path.endswith(suffix) and not dropped:
            seen.append(path)
            if len(seen) > skip:
                dropped.append(path)
                if sent:
                    await original(verb, path, **kwargs)
                raise ConnectionLost(f"{kwargs.get('what')}: connection dropped")
        return await original(verb, path, **kwargs)

    monkeypatch.setattr(client, "request", request)
    return dropped


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


async def test_the_example_job_by_hand_is_executed(cluster: tuple[Cluster, ApiClient]) -> None:
    """examples/migration/pmj-by-hand.yaml, as `kubectl create` would store it."""
    c, client = cluster
    path = Path(__file__).resolve().parents[2] / "examples" / "migration" / "pmj-by-hand.yaml"
    example = yaml.safe_load(path.read_text())
    web = c.add_pod("web-0")
    web["metadata"]["namespace"] = "shop"
    c.pods["shop/web-0"] = c.pods.pop("default/web-0")
    job = c.add_job(example["metadata"]["name"], None, **example["spec"])
    job["metadata"]["annotations"] = example["metadata"]["annotations"]
    ctl = _controller(client, Clock(T0 + timedelta(seconds=10)))
    await ctl.reconcile("migrate-web-0")
    status = c.job("migrate-web-0")["status"]
    assert (status["phase"], status["message"]) == \
        ("Succeeded", 'Pod "shop/web-0" has been evicted')
    [eviction] = c.evictions
    assert eviction["deleteOptions"]["gracePeriodSeconds"] == 30
    assert "moved by hand" in eviction["metadata"]["annotations"]["reason"]


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
    assert ctl.failures == {} and ctl.retry_after("j") == 0  # finished: forgotten


async def test_pdb_refusal_then_allowed_succeeds(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    c.refuse = 1
    clock = Clock(T0)
    ctl = _controller(client, clock)
    await ctl.reconcile_all()
    assert c.job("j")["status"]["phase"] == "Running"
    clock.now += timedelta(seconds=1)  # evictQPS: a token for the second attempt
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
    recorder = _recorder(client)
    ctl = _controller(client, clock, events=recorder)
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
    c.add_pod("web-2", node="n2")  # bound, not Ready yet
    restarted = _controller(client, clock, events=recorder)
    assert await restarted.reconcile("j")  # still active: waits for the bound pod
    job = c.job("j")
    status = job["status"]
    assert status["phase"] == "Running"
    assert status["podRef"] == {"kind": "Pod", "namespace": "default", "name": "web-2",
                                "uid": "uid-web-2"}
    assert _cond(job, "ReservationBound")["status"] == "True"  # type: ignore[index]
    ready = _cond(job, "BoundPodReady")
    assert ready is not None
    assert (ready["status"], ready["reason"], ready["message"]) == \
        ("False", "WaitForBoundPodReady", "Waiting for Bound Pod default/web-2 Ready")
    writes = len(c.writes)
    await restarted.reconcile("j")
    assert len(c.writes) == writes  # waiting again writes nothing
    c.pods["default/web-2"]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert not await restarted.reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["status"]) == ("Succeeded", "Complete")
    assert status["message"] == 'Bind Pod "default/web-2" in Reservation "uid-j"'
    assert status["podRef"]["name"] == "web-2"
    assert _cond(c.job("j"), "BoundPodReady")["status"] == "True"  # type: ignore[index]
    assert _cond(c.job("j"), "PodBoundReservation")["status"] == "True"  # type: ignore[index]
    assert len(c.evictions) == 1 and "uid-j" in c.reservations
    await recorder.flush()
    evicting = 'Pod "default/web-1" evicted from node "n1" by the reason "NotSet"'
    assert c.pmj_events() == [
        ("Normal", "ReservationCreated", 'Successfully create Reservation "uid-j"'),
        ("Normal", "ReservationScheduled", 'Assigned Reservation "uid-j" to node "n2"'),
        ("Normal", "Evicting", evicting),
        ("Normal", "EvictComplete", 'Pod "default/web-1" has been evicted'),
        ("Normal", "WaitForPodBindReservation", "Waiting for Pod bind Reservation"),
        ("Normal", "PodBoundReservation", 'Reservation bound by pod "default/web-2"'),
        ("Normal", "WaitForBoundPodReady", "Waiting for Bound Pod default/web-2 Ready"),
        ("Normal", "BoundPodReady", 'Bind pod "default/web-2" is ready'),
        ("Normal", "Complete", 'Bind Pod "default/web-2" in Reservation "uid-j"')]
    pmj_event = next(e for e in c.events if e["regarding"]["kind"] == "PodMigrationJob")
    assert pmj_event["regarding"] == {"apiVersion": "scheduling.koordinator.sh/v1alpha1",
                                      "kind": "PodMigrationJob", "name": "j", "uid": "uid-j"}
    assert pmj_event["metadata"]["namespace"] == "default"  # cluster-scoped: "default"
    [pod_event] = [e for e in c.events if e["regarding"]["kind"] == "Pod"]
    assert (pod_event["type"], pod_event["reason"], pod_event["action"], pod_event["note"]) == \
        ("Normal", "Descheduled", "Migrating",
         'Pod evicted from node "n1" by the reason "NotSet"')
    assert pod_event["regarding"]["name"] == "web-1"


async def test_bound_pod_that_is_gone_counts_as_ready(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1", node="n1")
    c.add_job("j", mode="ReservationFirst")
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile("j")
    c.schedule("uid-j", "n2")
    c.reservations["uid-j"]["status"]["currentOwners"] = [
        {"kind": "Pod", "namespace": "default", "name": "web-2", "uid": "uid-web-2"}]
    await ctl.reconcile("j")  # evicts, then finds no bound pod: done as Koordinator does
    status = c.job("j")["status"]
    assert status["phase"] == "Succeeded"
    assert status["message"] == 'Bind Pod "default/web-2" in Reservation "uid-j"'


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


# -- events ----------------------------------------------------------------------------------------

async def test_abort_events_are_warnings_about_the_job(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("late", "web-1")
    c.add_job("no-ref", None)
    c.add_job("ghost", "ghost")
    recorder = _recorder(client)
    ctl = _controller(client, Clock(T0 + timedelta(minutes=5)), events=recorder)
    await ctl.reconcile("late")
    ctl.clock = Clock(T0)
    await ctl.reconcile("no-ref")
    await ctl.reconcile("ghost")
    await recorder.flush()
    assert c.pmj_events() == [
        ("Warning", "Timeout", "Abort job caused by timeout"),
        ("Warning", "InvalidPodRef", "Abort job caused by invalid PodRef"),
        ("Warning", "MissingPod", 'Abort job caused by missing Pod "default/ghost"')]
    assert [e["regarding"]["name"] for e in c.events] == ["late", "no-ref", "ghost"]
    assert all(e["metadata"]["namespace"] == "default" for e in c.events)
    # Final jobs are left alone: no second event.
    await ctl.reconcile_all()
    await recorder.flush()
    assert len(c.events) == 3


async def test_evict_directly_events(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    c.job("j")["metadata"]["annotations"] = {"koordinator.sh/evict-reason": "too old",
                                             "koordinator.sh/evict-trigger": "PodLifeTime"}
    recorder = _recorder(client)
    ctl = _controller(client, Clock(T0), events=recorder)
    await ctl.reconcile("j")
    await recorder.flush()
    assert c.job("j")["status"]["phase"] == "Succeeded"
    # No event for the EvictDirectly success itself, as Koordinator.
    assert c.pmj_events() == [
        ("Normal", "Evicting", 'Pod "default/web-1" evicted from node "n1" by the reason '
                               '"too old"'),
        ("Normal", "EvictComplete", 'Pod "default/web-1" has been evicted')]
    [pod_event] = [e for e in c.events if e["regarding"]["kind"] == "Pod"]
    assert pod_event["note"] == 'Pod evicted from node "n1" by the reason "too old"'
    assert pod_event["action"] == "Migrating"
    assert pod_event["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "default",
                                      "name": "web-1", "uid": "uid-web-1"}


async def test_failed_eviction_is_a_warning_once_per_error(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    c.refuse = 3
    recorder = _recorder(client)
    clock = Clock(T0)
    ctl = _controller(client, clock, events=recorder)
    await ctl.reconcile("j")
    await recorder.flush()
    [(kind, reason, note)] = c.pmj_events()
    assert (kind, reason) == ("Warning", "Evicting")
    assert note.startswith('Failed evict Pod "default/web-1" caused by pdb-blocked: ')
    assert not [e for e in c.events if e["regarding"]["kind"] == "Pod"]
    clock.now += timedelta(seconds=3)
    await ctl.reconcile("j")
    await recorder.flush()
    assert len(c.pmj_events()) == 1  # the same refusal again: no second warning
    c.pdb_message = "Cannot evict pod as it would violate the pod's disruption budget: 0 left"
    clock.now += timedelta(seconds=3)
    await ctl.reconcile("j")
    await recorder.flush()
    assert [r for _, r, _ in c.pmj_events()] == ["Evicting", "Evicting"]
    assert c.pmj_events()[1][2].endswith("0 left")


async def test_waiting_passes_repeat_no_event(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", mode="ReservationFirst")
    recorder = _recorder(client)
    clock = Clock(T0)
    ctl = _controller(client, clock, events=recorder)
    await ctl.reconcile("j")
    unschedulable = [{"type": "Scheduled", "status": "False", "reason": "Unschedulable",
                      "message": "0/3 nodes are available"}]
    c.reservations["uid-j"]["status"]["conditions"] = unschedulable
    for _ in range(3):
        clock.now += timedelta(seconds=3)
        await ctl.reconcile("j")
    c.schedule("uid-j", "n2")
    for _ in range(3):
        clock.now += timedelta(seconds=3)
        await ctl.reconcile("j")
    await recorder.flush()
    assert [(t, r) for t, r, _ in c.pmj_events()] == [
        ("Normal", "ReservationCreated"), ("Warning", "Unschedulable"),
        ("Normal", "ReservationScheduled"), ("Normal", "Evicting"), ("Normal", "EvictComplete"),
        ("Normal", "WaitForPodBindReservation")]
    assert ("Warning", "Unschedulable", "0/3 nodes are available") in c.pmj_events()


async def test_reservation_failure_events(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    for pod in ("web-1", "web-2", "web-3", "web-4"):
        c.add_pod(pod, node="n1")
    c.add_pod("bare", bare=True)
    for job, pod in (("same", "web-1"), ("missing", "web-2"), ("taken", "web-3"),
                     ("expired", "web-4"), ("bare", "bare")):
        c.add_job(job, pod, mode="ReservationFirst")
    recorder = _recorder(client)
    ctl = _controller(client, Clock(T0), events=recorder)
    await ctl.reconcile_all()
    c.schedule("uid-same", "n1")
    del c.reservations["uid-missing"]
    c.schedule("uid-taken", "n2")
    c.reservations["uid-taken"]["status"]["phase"] = "Succeeded"
    c.reservations["uid-expired"]["status"] = {
        "phase": "Failed", "conditions": [{"type": "Ready", "reason": "Expired"}]}
    await recorder.flush()
    c.events.clear()
    await ctl.reconcile_all()
    await recorder.flush()
    by_job = {e["regarding"]["name"]: (e["type"], e["reason"], e["note"]) for e in c.events
              if e["reason"] != "ReservationScheduled"}
    assert by_job == {
        "same": ("Warning", "ForbiddenMigratePod",
                 'Scheduler assignes the Reservation "uid-same" on the same node as the Pod'),
        "missing": ("Warning", "MissingReservation",
                    'Abort job caused by missing Reservation "uid-missing"'),
        "taken": ("Warning", "ForbiddenMigratePod",
                  "Reservation is already bound by another Pod")}
    assert c.job("expired")["status"]["reason"] == "ReservationExpired"  # no event for that
    assert c.job("bare")["status"]["reason"] == "FailedCreateReservation"
    assert not c.evictions


async def test_failed_reservation_creation_is_a_warning(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("bare", bare=True)
    c.add_job("j", "bare", mode="ReservationFirst")
    recorder = _recorder(client)
    await _controller(client, Clock(T0), events=recorder).reconcile("j")
    await recorder.flush()
    [(kind, reason, note)] = c.pmj_events()
    assert (kind, reason) == ("Warning", "FailedCreateReservation")
    assert note == c.job("j")["status"]["message"]
    assert note.startswith("Failed to create Reservation caused by ")


async def test_unschedulable_abort_has_no_event(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", mode="ReservationFirst")
    recorder = _recorder(client)
    ctl = _controller(client, Clock(T0), events=recorder)
    await ctl.reconcile("j")
    c.reservations["uid-j"]["status"] = {"phase": "Failed"}  # failed, not expired
    await recorder.flush()
    c.events.clear()
    await ctl.reconcile("j")
    await recorder.flush()
    assert c.job("j")["status"]["reason"] == "Unschedulable" and not c.events


# -- eviction policies -----------------------------------------------------------------------------

async def test_delete_policy_deletes_with_uid_precondition(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", deleteOptions={"gracePeriodSeconds": 5})
    recorder = _recorder(client)
    ctl = _controller(client, Clock(T0), events=recorder, eviction_policy="Delete")
    await ctl.reconcile("j")
    assert not c.evictions
    [body] = c.pod_deletes
    assert body["preconditions"] == {"uid": "uid-web-1"}
    assert body["gracePeriodSeconds"] == 5
    status = c.job("j")["status"]
    assert (status["phase"], status["message"]) == \
        ("Succeeded", 'Pod "default/web-1" has been evicted')
    assert ctl.evictions == 1
    await recorder.flush()
    assert [r for _, r, _ in c.pmj_events()] == ["Evicting", "EvictComplete"]


async def test_delete_policy_uses_default_delete_options(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    ctl = _controller(client, Clock(T0), eviction_policy="Delete",
                      default_delete_options={"gracePeriodSeconds": 0})
    await ctl.reconcile("j")
    [body] = c.pod_deletes
    assert body["gracePeriodSeconds"] == 0 and body["preconditions"]["uid"] == "uid-web-1"


async def test_delete_policy_never_deletes_a_replacement(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", podRef={"namespace": "default", "name": "web-1", "uid": "uid-web-1"},
              status={"phase": "Running"})
    ctl = _controller(client, Clock(T0), eviction_policy="Delete")
    # The pod is replaced between the controller's read and its DELETE.
    c.replace_after_read["default/web-1"] = "new-uid"
    await ctl.reconcile("j")
    [body] = c.pod_deletes
    assert body["preconditions"]["uid"] == "uid-web-1"
    assert c.pods["default/web-1"]["metadata"]["uid"] == "new-uid"  # not deleted
    assert ctl.evictions == 0


async def test_soft_eviction_annotates_once_and_waits(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", ttl="5m", deleteOptions={"gracePeriodSeconds": 3})
    c.job("j")["metadata"]["annotations"] = {"koordinator.sh/evict-reason": "hot node",
                                             "koordinator.sh/evict-trigger": "LowNodeLoad"}
    recorder = _recorder(client)
    gate = Gate()
    clock = Clock(T0 + timedelta(seconds=30))
    ctl = _controller(client, clock, events=recorder, gate=gate, eviction_policy="SoftEviction")
    assert await ctl.reconcile("j")
    assert not c.evictions and not c.pod_deletes
    [(key, patch)] = c.pod_patches
    assert key == "default/web-1" and patch["metadata"]["uid"] == "uid-web-1"
    value = patch["metadata"]["annotations"]["scheduling.koordinator.sh/soft-eviction"]
    assert value == ('{"timestamp":"2026-01-01T12:00:30Z","deleteOptions":'
                     '{"gracePeriodSeconds":3},"initiator":"LowNodeLoad","reason":"hot node"}')
    assert c.pods["default/web-1"]["metadata"]["annotations"][
        "scheduling.koordinator.sh/soft-eviction"] == value
    assert c.pods["default/web-1"]["metadata"]["labels"] == {"app": "web"}  # the rest is kept
    job = c.job("j")
    assert job["status"]["phase"] == "Running"
    assert (job["status"]["status"], job["status"]["reason"]) == ("Eviction", "Evicting")
    assert gate.fed == [("default/web-1", "j")] and ctl.evictions == 1
    writes = len(c.writes)
    for _ in range(3):
        clock.now += timedelta(seconds=3)
        await ctl.reconcile("j")
    assert len(c.pod_patches) == 1 and len(c.writes) == writes  # waits, writes nothing
    assert len(gate.fed) == 1
    restarted = _controller(client, clock, eviction_policy="SoftEviction")
    assert await restarted.reconcile("j")
    assert len(c.pod_patches) == 1 and len(c.writes) == writes  # the state is in pod and job
    del c.pods["default/web-1"]  # the agent acted on the annotation
    assert not await ctl.reconcile("j")
    assert c.job("j")["status"]["phase"] == "Succeeded"
    await recorder.flush()
    assert [r for _, r, _ in c.pmj_events()] == ["Evicting", "EvictComplete"]


async def test_soft_eviction_ends_by_ttl(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", ttl="5m")
    clock = Clock(T0)
    ctl = _controller(client, clock, eviction_policy="SoftEviction")
    await ctl.reconcile("j")
    clock.now = T0 + timedelta(minutes=5)
    await ctl.reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "Timeout")
    assert len(c.pod_patches) == 1 and "default/web-1" in c.pods


async def test_pod_label_overrides_the_policy(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")["metadata"]["labels"]["koordinator.sh/evict-policy"] = "Delete"
    c.add_pod("web-2")
    c.add_pod("web-3")
    c.add_job("a", "web-1")
    c.add_job("b", "web-2")
    c.job("b")["metadata"]["labels"] = {"koordinator.sh/evict-policy": "Eviction"}
    c.add_job("c", "web-3")
    clock = Clock(T0)
    ctl = _controller(client, clock, eviction_policy="SoftEviction", evict_qps=1000,
                      evict_burst=10)
    await ctl.reconcile_all()
    assert [d["preconditions"]["uid"] for d in c.pod_deletes] == ["uid-web-1"]
    assert [e["metadata"]["name"] for e in c.evictions] == ["web-2"]
    assert [key for key, _ in c.pod_patches] == ["default/web-3"]


# -- evictQPS and object limiters ------------------------------------------------------------------

def _running_job(c: Cluster, name: str, pod: str) -> None:
    c.add_job(name, pod, podRef={"namespace": "default", "name": pod, "uid": f"uid-{pod}"},
              status={"phase": "Running"})


async def test_evict_qps_defers_the_eviction(cluster: tuple[Cluster, ApiClient],
                                             caplog: pytest.LogCaptureFixture) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_pod("web-2")
    _running_job(c, "a", "web-1")
    _running_job(c, "b", "web-2")
    clock = Clock(T0)
    ctl = _controller(client, clock, evict_qps=0.5, evict_burst=1)
    with caplog.at_level(logging.DEBUG, logger="desched.migration.controller"):
        assert await ctl.reconcile_all() == ["b"]
    assert "podmigrationjob b: not evicting default/web-2 yet: too many evictions: evictQPS " \
        "0.5, evictBurst 1" in caplog.text
    assert [e["metadata"]["name"] for e in c.evictions] == ["web-1"]
    version = c.job("b")["metadata"]["resourceVersion"]
    clock.now += timedelta(seconds=1)  # half a token
    assert await ctl.reconcile_all() == ["b"]
    assert len(c.evictions) == 1
    assert c.job("b")["metadata"]["resourceVersion"] == version  # nothing written
    clock.now += timedelta(seconds=1)
    assert await ctl.reconcile_all() == []
    assert [e["metadata"]["name"] for e in c.evictions] == ["web-1", "web-2"]


async def test_evict_qps_string_and_burst(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    for pod in ("web-1", "web-2", "web-3"):
        c.add_pod(pod)
        _running_job(c, f"j-{pod}", pod)
    ctl = _controller(client, Clock(T0), evict_qps="1", evict_burst=2)
    assert await ctl.reconcile_all() == ["j-web-3"]
    assert len(c.evictions) == 2


async def test_object_limiter_gate(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_pod("web-2")
    _running_job(c, "a", "web-1")
    _running_job(c, "b", "web-2")
    c.job("b")["metadata"]["annotations"] = {"descheduler.alpha.kubernetes.io/evict": "true"}
    gate = Gate("objectLimiters.workload: migrated recently")
    ctl = _controller(client, Clock(T0), gate=gate, evict_burst=5)
    version = c.job("a")["metadata"]["resourceVersion"]
    assert await ctl.reconcile_all() == ["a"]
    assert gate.asked == ["default/web-1"]  # the evict annotation bypasses the gate
    assert [e["metadata"]["name"] for e in c.evictions] == ["web-2"]
    assert c.job("a")["metadata"]["resourceVersion"] == version  # nothing written
    assert gate.fed == [("default/web-2", "b")]
    gate.why = None
    assert await ctl.reconcile_all() == []
    assert gate.fed == [("default/web-2", "b"), ("default/web-1", "a")]
    assert len(c.evictions) == 2


async def test_gate_is_not_fed_by_a_failed_eviction(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    c.refuse = 1
    gate = Gate()
    clock = Clock(T0)
    ctl = _controller(client, clock, gate=gate)
    await ctl.reconcile("j")
    assert gate.fed == [] and gate.asked == ["default/web-1"]
    assert gate.returned == [("default/web-1", "j")]  # the refused eviction's token
    clock.now += timedelta(seconds=1)
    await ctl.reconcile("j")
    assert gate.fed == [("default/web-1", "j")]
    assert len(gate.returned) == 1 and gate.settled()


# -- arbitration -----------------------------------------------------------------------------------

async def test_require_arbitration_skips_unpassed_pending_jobs(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_pod("web-2")
    c.add_pod("web-3")
    c.add_job("waiting", "web-1", status={"phase": "Pending"})
    c.add_job("passed", "web-2", status={"phase": "Pending"})
    c.job("passed")["metadata"]["annotations"] = {
        "descheduler.koordinator.sh/passed-arbitration": "true"}
    _running_job(c, "running", "web-3")
    ctl = _controller(client, Clock(T0), require_arbitration=True, evict_burst=5)
    assert await ctl.reconcile_all() == ["waiting"]
    assert c.job("waiting")["status"] == {"phase": "Pending"}
    assert c.job("passed")["status"]["phase"] == "Succeeded"
    assert c.job("running")["status"]["phase"] == "Succeeded"
    assert sorted(e["metadata"]["name"] for e in c.evictions) == ["web-2", "web-3"]


async def test_apply_verdict(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_pod("web-2")
    c.add_job("pass", "web-1", status={"phase": "Pending"})
    c.add_job("fail", "web-2", status={"phase": "Pending"})
    c.add_job("wait", "web-2", status={"phase": "Pending"})
    _running_job(c, "late", "web-2")
    recorder = _recorder(client)
    ctl = _controller(client, Clock(T0), events=recorder, require_arbitration=True)
    forbidden = ('Pod "default/web-2" is forbidden to migrate because it does not meet the '
                 'requirements: a bare pod')
    await ctl.apply_verdict(Verdict("pass", "passed", "passed arbitration"))
    await ctl.apply_verdict(Verdict("fail", "failed", forbidden))
    await ctl.apply_verdict(Verdict("wait", "waiting", "maxMigratingPerNode"))
    await ctl.apply_verdict(Verdict("late", "failed", forbidden))  # not Pending: untouched
    await ctl.apply_verdict(Verdict("gone", "passed", ""))
    assert c.job("pass")["metadata"]["annotations"] == {
        "descheduler.koordinator.sh/passed-arbitration": "true"}
    assert c.job("pass")["status"] == {"phase": "Pending"}
    fail = c.job("fail")["status"]
    assert (fail["phase"], fail["reason"], fail["message"]) == \
        ("Failed", "ForbiddenMigratePod", forbidden)
    assert c.job("wait")["status"] == {"phase": "Pending"}
    assert "annotations" not in c.job("wait")["metadata"]
    assert c.job("late")["status"] == {"phase": "Running"}
    assert c.writes == ["spec", "status"]
    await recorder.flush()
    assert c.pmj_events() == [("Warning", "ForbiddenMigratePod", forbidden)]
    # Passed again: already annotated, nothing written; the reconcile now takes the job.
    await ctl.apply_verdict(Verdict("pass", "passed", ""))
    assert c.writes == ["spec", "status"]
    assert "pass" not in await ctl.reconcile_all()
    assert c.job("pass")["status"]["phase"] == "Succeeded"


async def test_apply_verdict_conflict_just_ends(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_job("j", status={"phase": "Pending"})
    c.conflicts = 1
    ctl = _controller(client, Clock(T0))
    await ctl.apply_verdict(Verdict("j", "passed", ""))
    assert "annotations" not in c.job("j")["metadata"]
    await ctl.apply_verdict(Verdict("j", "passed", ""))
    assert c.job("j")["metadata"]["annotations"] == {
        "descheduler.koordinator.sh/passed-arbitration": "true"}


# -- reconcile_all and ownership -------------------------------------------------------------------

async def test_reconcile_all_returns_the_active_jobs(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_pod("web-2")
    c.add_job("done", "web-1")
    c.add_job("waits", "web-2", mode="ReservationFirst")
    c.add_job("paused", "web-2", paused=True)
    c.add_job("failed", "ghost")
    c.add_job("old", "web-2", status={"phase": "Succeeded"})
    c.add_job("theirs", "web-2")
    c.job("theirs")["metadata"]["annotations"] = {"koordinator.sh/job-created-by": "other"}
    ctl = _controller(client, Clock(T0), identity="me")
    assert await ctl.reconcile_all() == ["waits"]
    assert c.job("theirs").get("status") is None


async def test_adopt_unowned_false_skips_hand_made_jobs(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_pod("web-2")
    c.add_job("by-hand", "web-1")
    c.add_job("mine", "web-2")
    c.job("mine")["metadata"]["annotations"] = {"koordinator.sh/job-created-by": "me"}
    ctl = _controller(client, Clock(T0), identity="me", adopt_unowned=False)
    assert await ctl.reconcile_all() == []
    assert c.job("by-hand").get("status") is None
    assert c.job("mine")["status"]["phase"] == "Succeeded"
    assert [e["metadata"]["name"] for e in c.evictions] == ["web-2"]


# -- a Pending pod's own Reservation (step i) ------------------------------------------------------

async def test_pending_pod_waits_for_its_reservation_and_is_never_evicted(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    pending = c.add_pod("web-1", node="")
    pending["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient cpu."}]}
    c.add_job("j", mode="ReservationFirst", ttl="5m")
    clock = Clock(T0 + timedelta(seconds=1))
    recorder = _recorder(client)
    ctl = _controller(client, clock, events=recorder)
    await ctl.reconcile("j")
    reservation = c.reservations["uid-j"]
    assert reservation["spec"]["owners"] == [{"object": {
        "uid": "uid-web-1", "kind": "Pod", "name": "web-1", "namespace": "default"}}]
    c.schedule("uid-j", "n2")
    assert await ctl.reconcile("j")
    job = c.job("j")
    scheduled = _cond(job, "PodScheduled")
    assert scheduled is not None
    assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == \
        ("False", "Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")
    writes = len(c.writes)
    await ctl.reconcile("j")
    assert len(c.writes) == writes  # waiting again writes nothing
    pending["spec"]["nodeName"] = "n2"
    pending["status"] = {"phase": "Running",
                         "conditions": [{"type": "PodScheduled", "status": "True"}]}
    assert not await ctl.reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["status"]) == ("Succeeded", "Complete")
    assert status["message"] == 'Assign Pod "default/web-1" to node "n2"'
    assert not c.evictions and not c.pod_deletes
    await recorder.flush()
    assert [(t, r) for t, r, _ in c.pmj_events()][-1] == ("Normal", "Complete")


async def test_pending_pod_whose_reservation_went_to_another_pod_fails(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    pending = c.add_pod("web-1", node="")
    pending["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    c.add_job("j", mode="ReservationFirst", ttl="5m")
    ctl = _controller(client, Clock(T0 + timedelta(seconds=1)))
    await ctl.reconcile("j")
    c.schedule("uid-j", "n2")
    c.reservations["uid-j"]["status"]["phase"] = "Succeeded"
    await ctl.reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"], status["message"]) == \
        ("Failed", "ForbiddenMigratePod", "Reservation is already bound by another Pod")
    assert not c.evictions


# -- review fixes: a pod replaced while its job waited ---------------------------------------------

async def test_pending_job_for_a_replaced_pod_fails_as_missing(
        cluster: tuple[Cluster, ApiClient]) -> None:
    """A StatefulSet recreated the pod under the same name while the job was Pending: the job
    carries the old UID, and the new pod is never evicted."""
    c, client = cluster
    c.add_pod("web-1", uid="new-uid")
    c.add_job("j", podRef={"namespace": "default", "name": "web-1", "uid": "uid-web-1"})
    recorder = _recorder(client)
    gate = Gate()
    await _controller(client, Clock(T0), events=recorder, gate=gate).reconcile("j")
    job = c.job("j")
    assert (job["status"]["phase"], job["status"]["reason"], job["status"]["message"]) == \
        ("Failed", "MissingPod", 'Abort job caused by missing Pod "default/web-1"')
    assert job["spec"]["podRef"]["uid"] == "uid-web-1"  # not overwritten
    assert c.writes == ["status"]
    assert not c.evictions and not gate.asked and "default/web-1" in c.pods
    await recorder.flush()
    assert c.pmj_events() == [
        ("Warning", "MissingPod", 'Abort job caused by missing Pod "default/web-1"')]


async def test_pending_job_with_the_pods_uid_writes_no_spec(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", podRef={"namespace": "default", "name": "web-1", "uid": "uid-web-1"})
    await _controller(client, Clock(T0)).reconcile("j")
    assert c.job("j")["status"]["phase"] == "Succeeded"
    assert "spec" not in c.writes and len(c.evictions) == 1


async def test_reservation_for_a_replaced_pod_is_not_created(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1", uid="new-uid")
    c.add_job("j", mode="ReservationFirst", status={"phase": "Running"},
              podRef={"namespace": "default", "name": "web-1", "uid": "uid-web-1"})
    await _controller(client, Clock(T0)).reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "MissingPod")
    assert not c.reservations and not c.evictions


# -- review fixes: never evict without room held ---------------------------------------------------

def _scheduled_status(phase: str, node: str = "n2") -> dict[str, Any]:
    return {"phase": phase, "nodeName": node,
            "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled"}]}


@pytest.mark.parametrize("phase", ["", "Pending", "Waiting"])
async def test_scheduled_reservation_not_yet_available_waits(
        cluster: tuple[Cluster, ApiClient], phase: str) -> None:
    c, client = cluster
    c.add_pod("web-1", node="n1")
    c.add_job("j", mode="ReservationFirst", ttl="5m")
    clock = Clock(T0)
    ctl = _controller(client, clock)
    await ctl.reconcile("j")
    c.reservations["uid-j"]["status"] = _scheduled_status(phase)
    for _ in range(2):
        clock.now += timedelta(seconds=3)
        assert await ctl.reconcile("j")
    assert not c.evictions and c.job("j")["status"]["phase"] == "Running"
    c.schedule("uid-j", "n2")  # Available
    clock.now += timedelta(seconds=3)
    await ctl.reconcile("j")
    assert len(c.evictions) == 1


async def test_succeeded_reservation_after_the_eviction_binds(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1", node="n1")
    c.add_job("j", mode="ReservationFirst")
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile("j")
    c.schedule("uid-j", "n2")
    await ctl.reconcile("j")
    assert len(c.evictions) == 1
    c.reservations["uid-j"]["status"].update(phase="Succeeded", currentOwners=[
        {"kind": "Pod", "namespace": "default", "name": "web-2", "uid": "uid-web-2"}])
    c.add_pod("web-2", node="n2")["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert not await ctl.reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["message"]) == \
        ("Succeeded", 'Bind Pod "default/web-2" in Reservation "uid-j"')
    assert len(c.evictions) == 1


@pytest.mark.parametrize(("reservation", "message"), [
    (_scheduled_status("Failed"), "Reservation is not available (phase Failed)"),
    ({"phase": "Failed", "nodeName": "n2", "conditions": [
        {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
        {"type": "Scheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available"}]}, "0/3 nodes are available"),
    ({"phase": "Available", "nodeName": "n2"}, "Reservation is not available (phase Available)"),
])
async def test_reservation_not_holding_room_fails_unschedulable(
        cluster: tuple[Cluster, ApiClient], reservation: dict[str, Any], message: str) -> None:
    """A Failed Reservation with a stale Scheduled=True (not expired) never lets the pod go."""
    c, client = cluster
    c.add_pod("web-1", node="n1")
    c.add_job("j", mode="ReservationFirst")
    ctl = _controller(client, Clock(T0))
    await ctl.reconcile("j")
    c.reservations["uid-j"]["status"] = copy.deepcopy(reservation)
    await ctl.reconcile("j")
    status = c.job("j")["status"]
    assert (status["phase"], status["reason"], status["message"]) == \
        ("Failed", "Unschedulable", message)
    assert not c.evictions and "default/web-1" in c.pods


# -- review fixes: the gate protocol ---------------------------------------------------------------

async def test_qps_refusal_does_not_ask_the_gate(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_pod("web-2")
    _running_job(c, "a", "web-1")
    _running_job(c, "b", "web-2")
    gate = Gate()
    clock = Clock(T0)
    ctl = _controller(client, clock, gate=gate, evict_qps=0.5, evict_burst=1)
    assert await ctl.reconcile_all() == ["b"]
    assert gate.asked == ["default/web-1"] and gate.fed == [("default/web-1", "a")]
    assert not gate.returned
    clock.now += timedelta(seconds=2)
    assert await ctl.reconcile_all() == []
    assert gate.asked == ["default/web-1", "default/web-2"]
    assert not gate.returned and gate.settled()


async def test_gate_refusal_keeps_the_qps_token(cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    _running_job(c, "a", "web-1")
    gate = Gate("objectLimiters.workload: migrated recently")
    ctl = _controller(client, Clock(T0), gate=gate, evict_qps=0.001, evict_burst=1)
    await ctl.reconcile("a")
    assert ctl.bucket.tokens(T0.timestamp()) == 1
    gate.why = None
    await ctl.reconcile("a")
    assert len(c.evictions) == 1 and gate.settled()


async def test_pass_ended_before_the_eviction_gives_the_tokens_back(
        cluster: tuple[Cluster, ApiClient]) -> None:
    """The Evicting write conflicts (another writer won): no eviction was sent, so the gate's
    and the evictQPS tokens are given back and the next pass evicts at once."""
    c, client = cluster
    c.add_pod("web-1")
    _running_job(c, "a", "web-1")
    c.conflicts = 1
    gate = Gate()
    ctl = _controller(client, Clock(T0), gate=gate, evict_qps=0.001, evict_burst=1)
    assert await ctl.reconcile("a")
    assert not c.evictions and gate.returned == [("default/web-1", "a")]
    assert ctl.bucket.tokens(T0.timestamp()) == 1
    assert not await ctl.reconcile("a")
    assert len(c.evictions) == 1 and gate.fed == [("default/web-1", "a")] and gate.settled()


async def test_failed_delete_gives_the_gate_token_back(
        cluster: tuple[Cluster, ApiClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """The DELETE never reached the server; reading the pod back shows it is still there."""
    c, client = cluster
    c.add_pod("web-1")
    _running_job(c, "a", "web-1")
    gate = Gate()
    ctl = _controller(client, Clock(T0), gate=gate, eviction_policy="Delete")
    dropped = _drop(client, monkeypatch, "DELETE", "/pods/web-1", sent=False)
    assert await ctl.reconcile("a")
    assert dropped and "default/web-1" in c.pods
    assert gate.returned == [("default/web-1", "a")] and not gate.fed
    assert ctl.failures == {"a": 1} and ctl.evictions == 0
    cond = _cond(c.job("a"), "Eviction")
    assert cond is not None and cond["reason"] == "FailedEvict"
    assert "connection dropped" in cond["message"]


# -- review fixes: PDB refusal storm ---------------------------------------------------------------

async def test_repeated_pdb_refusals_write_the_job_once(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    c.refuse = 100
    clock = Clock(T0)
    ctl = _controller(client, clock)
    await ctl.reconcile("j")
    writes, version = list(c.writes), c.job("j")["metadata"]["resourceVersion"]
    probe = _cond(c.job("j"), "Eviction")["lastProbeTime"]  # type: ignore[index]
    for _ in range(3):
        clock.now += timedelta(seconds=5)
        await ctl.reconcile("j")
    assert len(c.evictions) == 4  # each pass tried
    assert c.writes == writes and c.job("j")["metadata"]["resourceVersion"] == version
    assert _cond(c.job("j"), "Eviction")["lastProbeTime"] == probe  # type: ignore[index]
    c.pdb_message = "The disruption budget web needs 2 healthy pods"
    clock.now += timedelta(seconds=5)
    await ctl.reconcile("j")
    assert c.writes == [*writes, "status"]
    assert "2 healthy pods" in _cond(c.job("j"), "Eviction")["message"]  # type: ignore[index]


async def test_retry_after_backs_off_and_resets_on_success(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1", node="n1")
    c.add_job("j", mode="ReservationFirst", ttl="1h")
    clock = Clock(T0)
    ctl = _controller(client, clock)
    assert ctl.retry_after("j") == 0 and ctl.retry_after("unknown") == 0
    await ctl.reconcile("j")
    c.schedule("uid-j", "n2")
    c.refuse = 8
    waits = []
    for _ in range(8):
        clock.now += timedelta(seconds=1)
        await ctl.reconcile("j")
        waits.append(ctl.retry_after("j"))
    assert waits == [3, 6, 12, 24, 48, 60, 60, 60]
    clock.now += timedelta(seconds=1)
    assert await ctl.reconcile("j")  # evicted; waits for the new pod to bind
    assert len(c.evictions) == 9 and "default/web-1" not in c.pods
    assert ctl.retry_after("j") == 0 and ctl.failures == {}
    cond = _cond(c.job("j"), "Eviction")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "EvictComplete")


async def test_eviction_after_a_failed_attempt_records_evicting(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    c.refuse = 1
    recorder = _recorder(client)
    clock = Clock(T0)
    ctl = _controller(client, clock, events=recorder)
    await ctl.reconcile("j")
    clock.now += timedelta(seconds=3)
    assert not await ctl.reconcile("j")
    assert c.job("j")["status"]["phase"] == "Succeeded"
    await recorder.flush()
    assert [(t, r) for t, r, _ in c.pmj_events()] == [
        ("Warning", "Evicting"), ("Normal", "Evicting"), ("Normal", "EvictComplete")]


async def test_soft_eviction_after_a_failed_attempt_annotates_once(
        cluster: tuple[Cluster, ApiClient], monkeypatch: pytest.MonkeyPatch) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j")
    clock = Clock(T0)
    ctl = _controller(client, clock, eviction_policy="SoftEviction")
    _drop(client, monkeypatch, "PATCH", "/pods/web-1", sent=False)
    await ctl.reconcile("j")
    assert _cond(c.job("j"), "Eviction")["reason"] == "FailedEvict"  # type: ignore[index]
    assert ctl.failures == {"j": 1}
    for _ in range(3):
        clock.now += timedelta(seconds=3)
        assert await ctl.reconcile("j")
    assert len(c.pod_patches) == 1 and ctl.evictions == 1 and ctl.failures == {}
    assert _cond(c.job("j"), "Eviction")["reason"] == "Evicting"  # type: ignore[index]


# -- review fixes: arbitration verdicts ------------------------------------------------------------

async def test_stale_failed_verdict_spares_a_passed_job(
        cluster: tuple[Cluster, ApiClient]) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_job("j", status={"phase": "Pending"})
    c.job("j")["metadata"]["annotations"] = {
        "descheduler.koordinator.sh/passed-arbitration": "true"}
    recorder = _recorder(client)
    ctl = _controller(client, Clock(T0), events=recorder, require_arbitration=True)
    await ctl.apply_verdict(Verdict("j", "failed", "forbidden"))
    await ctl.apply_verdict(Verdict("j", "passed", ""))
    assert c.job("j")["status"] == {"phase": "Pending"} and not c.writes
    await recorder.flush()
    assert not c.events
    assert not await ctl.reconcile("j")
    assert c.job("j")["status"]["phase"] == "Succeeded"


# -- review fixes: a dropped connection ------------------------------------------------------------

async def test_lost_answer_to_an_eviction_that_took_effect(
        cluster: tuple[Cluster, ApiClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """The eviction POST is carried out but its answer is lost: the executor reads the pod
    back, finds it gone, and the job completes without a second eviction."""
    c, client = cluster
    c.add_pod("web-1")
    _running_job(c, "a", "web-1")
    gate = Gate()
    ctl = _controller(client, Clock(T0), gate=gate)
    dropped = _drop(client, monkeypatch, "POST", "/pods/web-1/eviction", sent=True)
    assert not await ctl.reconcile("a")
    assert dropped and len(c.evictions) == 1
    assert c.job("a")["status"]["phase"] == "Succeeded"
    assert gate.fed == [("default/web-1", "a")] and not gate.returned
    assert ctl.evictions == 1 and ctl.failures == {}


async def test_connection_lost_after_the_eviction_resumes_without_a_second(
        cluster: tuple[Cluster, ApiClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """ConnectionLost escapes the pass after the eviction went through (reading the pod back):
    the counters are settled, and the next pass completes the job from the Evicting
    condition without evicting again."""
    c, client = cluster
    c.add_pod("web-1")
    _running_job(c, "a", "web-1")
    gate = Gate()
    ctl = _controller(client, Clock(T0), gate=gate)
    dropped = _drop(client, monkeypatch, "GET", "/pods/web-1", sent=True, skip=1)
    with pytest.raises(ConnectionLost):
        await ctl.reconcile("a")
    assert dropped and len(c.evictions) == 1
    assert gate.fed == [("default/web-1", "a")] and not gate.returned
    assert ctl.evictions == 1 and ctl.failures == {}
    assert c.job("a")["status"]["reason"] == "Evicting"
    assert not await ctl.reconcile("a")
    assert c.job("a")["status"]["phase"] == "Succeeded"
    assert len(c.evictions) == 1 and ctl.evictions == 1 and len(gate.fed) == 1


async def test_connection_lost_before_the_eviction_gives_the_tokens_back(
        cluster: tuple[Cluster, ApiClient], monkeypatch: pytest.MonkeyPatch) -> None:
    c, client = cluster
    c.add_pod("web-1")
    _running_job(c, "a", "web-1")
    gate = Gate()
    ctl = _controller(client, Clock(T0), gate=gate, evict_qps=0.001, evict_burst=1)
    _drop(client, monkeypatch, "PUT", "/podmigrationjobs/a/status", sent=False)
    with pytest.raises(ConnectionLost):
        await ctl.reconcile("a")
    assert not c.evictions and gate.returned == [("default/web-1", "a")]
    assert ctl.bucket.tokens(T0.timestamp()) == 1 and ctl.failures == {}
    assert not await ctl.reconcile("a")
    assert len(c.evictions) == 1 and gate.settled()


async def test_lost_answer_to_a_delete_that_took_effect(
        cluster: tuple[Cluster, ApiClient], monkeypatch: pytest.MonkeyPatch) -> None:
    c, client = cluster
    c.add_pod("web-1")
    _running_job(c, "a", "web-1")
    gate = Gate()
    ctl = _controller(client, Clock(T0), gate=gate, eviction_policy="Delete")
    _drop(client, monkeypatch, "DELETE", "/pods/web-1", sent=True)
    assert not await ctl.reconcile("a")
    assert c.job("a")["status"]["phase"] == "Succeeded"
    assert len(c.pod_deletes) == 1 and gate.fed == [("default/web-1", "a")]
    assert not gate.returned and ctl.evictions == 1


async def test_reconcile_all_goes_on_after_a_connection_lost(
        cluster: tuple[Cluster, ApiClient], monkeypatch: pytest.MonkeyPatch) -> None:
    c, client = cluster
    c.add_pod("web-1")
    c.add_pod("web-2")
    _running_job(c, "a", "web-1")
    _running_job(c, "b", "web-2")
    ctl = _controller(client, Clock(T0), evict_burst=5)
    _drop(client, monkeypatch, "PUT", "/podmigrationjobs/a/status", sent=False)
    assert await ctl.reconcile_all() == ["a"]
    assert c.job("b")["status"]["phase"] == "Succeeded"


async def test_reservation_first_takes_the_jobs_template_and_the_pvc_gate(
        cluster: tuple[Cluster, ApiClient]) -> None:
    """The job's reservationOptions.template reaches the Reservation the controller creates
    (its name, labels, TTL and owners win), and with Koordinator's DisablePVCReservation gate
    the pod template keeps no PVC or ephemeral volume."""
    c, client = cluster
    c.add_pod("web-1", node="n1")["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "config", "configMap": {"name": "web"}}]
    owners = [{"labelSelector": {"matchLabels": {"app": "web"}}}]
    c.add_job("j", mode="ReservationFirst", ttl="5m", reservationOptions={"template": {
        "metadata": {"name": "web-1-room", "labels": {"team": "shop"}},
        "spec": {"ttl": "30m", "owners": owners}}})
    ctl = MigrationJobController(client, MigrationControllerArgs(), Clock(T0),
                                 disable_pvc_reservation=True)
    await ctl.reconcile("j")
    assert c.job("j")["spec"]["reservationOptions"]["reservationRef"]["name"] == "web-1-room"
    r = c.reservations["web-1-room"]
    assert r["metadata"]["labels"]["team"] == "shop"
    assert (r["spec"]["ttl"], r["spec"]["owners"]) == ("30m", owners)
    assert [v["name"] for v in r["spec"]["template"]["spec"]["volumes"]] == ["config"]

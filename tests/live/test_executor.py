"""The Eviction API executor against kmock over real HTTP: success, PDB refusals (429), pods
already gone (404), retries after 5xx and throttling, and a timed-out request that must not be
sent twice once it took effect.

`Evictions` is the pods/eviction reaction the other live tests reuse: 429 with a DisruptionBudget
cause while a matching budget allows no disruption, otherwise the pod is deleted (watchers see
DELETED) and the budget's disruptionsAllowed goes down by one."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import kmock
import pytest
from fake_apiserver import FakeApiServer, pod, status

from builders import decode
from desched.live.client import ApiClient
from desched.live.eviction_api import EvictionApiExecutor
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.backoff import Backoff

pytestmark = pytest.mark.asyncio


class Evictions:
    """pods/eviction and pod GET for a FakeApiServer serving Pods (and optionally PDBs)."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.bodies: list[dict[str, Any]] = []  # every eviction request, in order
        self.callers: list[tuple[float, str]] = []  # (monotonic time, bearer token) of each
        self.gets: list[str] = []  # pod GETs ("namespace/name")
        # Scripted answers for the next requests: (status, message[, Retry-After seconds]) or
        # ("hang", seconds), the latter carrying the eviction out, then answering too late.
        self.script: list[tuple[Any, ...]] = []
        self.delay = 0.0  # seconds before every answer
        self.on_request: Any = None  # called with each eviction body (tests stop runs here)
        # Serialises evictions: the budget check and the deletion are one step on a server.
        self._lock = asyncio.Lock()

    def install(self) -> Evictions:
        pods = kmock.resource("", "v1", "pods")
        self.api.server[kmock.method.POST, pods, kmock.subresource("eviction")] << self.evict
        self.api.server[kmock.action.FETCH, pods] << self.get
        return self

    def _pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.api.kinds["Pod"].objects.get(f"{namespace}/{name}")

    async def get(self, request: kmock.Request) -> kmock.Response:
        namespace, name = request.namespace or "", request.name or ""
        self.gets.append(f"{namespace}/{name}")
        obj = self._pod(namespace, name)
        if obj is None:
            return kmock.Response(status=404, payload=status(404, f'pods "{name}" not found',
                                                             "NotFound"))
        return kmock.Response(status=200, payload=obj)

    async def evict(self, request: kmock.Request) -> kmock.Response:
        body = request.data if isinstance(request.data, dict) else json.loads(request.body)
        self.bodies.append(body)
        # Who asked, and when: tells replicas apart (each has its own bearer token).
        self.callers.append((time.monotonic(),
                             request.headers.get("Authorization", "").removeprefix("Bearer ")))
        if self.on_request is not None:
            self.on_request(body)
        if self.delay:
            await asyncio.sleep(self.delay)
        hang = 0.0
        if self.script:
            code, detail, *retry_after = self.script.pop(0)
            if code == "hang":
                hang = float(detail)
            else:
                headers = {"Retry-After": str(retry_after[0])} if retry_after else None
                return kmock.Response(status=code, payload=status(code, str(detail)),
                                      headers=headers)
        async with self._lock:
            answer = await self._evict(request.namespace or "", request.name or "", body)
        if hang:
            await asyncio.sleep(hang)
        return answer

    async def _evict(self, namespace: str, name: str, body: dict[str, Any]) -> kmock.Response:
        obj = self._pod(namespace, name)
        if obj is None:
            return kmock.Response(status=404, payload=status(404, f'pods "{name}" not found',
                                                             "NotFound"))
        uid = (((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid"))
        if uid and uid != obj["metadata"].get("uid"):
            return kmock.Response(status=409, payload=status(
                409, f"Precondition failed: UID in precondition: {uid}", "Conflict"))
        budget = self._budget(obj)
        if budget is not None:
            allowed = int((budget.get("status") or {}).get("disruptionsAllowed") or 0)
            if allowed < 1:
                refusal = status(429, "Cannot evict pod as it would violate the pod's "
                                      "disruption budget.", "TooManyRequests")
                refusal["details"] = {"causes": [{
                    "type": "DisruptionBudget",
                    "message": f"The disruption budget {budget['metadata']['name']} needs 1 "
                               "healthy pods and has 1 currently"}]}
                return kmock.Response(status=429, payload=refusal)
            budget.setdefault("status", {})["disruptionsAllowed"] = allowed - 1
            await self.api.modify("PodDisruptionBudget", budget)
        await self.api.delete("Pod", name, namespace)
        return kmock.Response(status=201, payload={"kind": "Status", "apiVersion": "v1",
                                                   "status": "Success", "code": 201})

    def _budget(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        kind = self.api.kinds.get("PodDisruptionBudget")
        if kind is None:
            return None
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        for budget in kind.objects.values():
            if budget["metadata"].get("namespace") != meta.get("namespace"):
                continue
            wanted = ((budget.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if all(labels.get(k) == v for k, v in wanted.items()):
                return dict(budget)
        return None

    def evicted(self) -> list[str]:
        return [f"{b['metadata']['namespace']}/{b['metadata']['name']}" for b in self.bodies]


def pdb(name: str, allowed: int, labels: dict[str, str], namespace: str = "default"
        ) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed}}


# -- fixtures ------------------------------------------------------------------------------------

def setup(api: FakeApiServer, *names: str, labels: dict[str, str] | None = None
          ) -> tuple[ClusterSnapshot, dict[str, Pod]]:
    """The pods on the server and, decoded from the same objects, in a snapshot."""
    api.serve("Pod", "PodDisruptionBudget")
    objs = [pod(n, labels=labels or {"app": n}) for n in names]
    api.add_now("Pod", *objs)
    snap = ClusterSnapshot()
    pods = {}
    for obj in objs:
        p = decode("Pod", obj)
        snap.add(p)
        pods[p.name] = p
    snap.finish()
    return snap, pods


def executor(client: ApiClient, snap: ClusterSnapshot, **options: Any) -> EvictionApiExecutor:
    options.setdefault("backoff", Backoff(initial=0.01, maximum=0.02))
    return EvictionApiExecutor(client, asyncio.get_running_loop(), snap, **options)


async def evict(ex: EvictionApiExecutor, p: Pod) -> Any:
    # As in a live cycle: the Evictor calls from a worker thread.
    return await asyncio.to_thread(ex.evict, p, "default", "PodLifeTime", "pod is too old")


# -- tests ---------------------------------------------------------------------------------------

async def test_success_posts_an_annotated_eviction_and_drops_the_pod(
        api: FakeApiServer, client: ApiClient) -> None:
    snap, pods = setup(api, "a", "b")
    evictions = Evictions(api).install()
    ex = executor(client, snap, grace_period_seconds=30)
    result = await evict(ex, pods["a"])
    assert result.ok and result.outcome == "evicted"
    body = evictions.bodies[0]
    assert body["apiVersion"] == "policy/v1" and body["kind"] == "Eviction"
    assert body["metadata"]["name"] == "a" and body["metadata"]["namespace"] == "default"
    assert body["metadata"]["annotations"] == {
        "reason": "triggered by default/PodLifeTime: pod is too old",
        "requested-by": "desched"}
    assert body["deleteOptions"] == {"gracePeriodSeconds": 30,
                                     "preconditions": {"uid": "uid-default-a"}}
    assert "default/a" not in api.kinds["Pod"].objects
    assert "default/a" not in snap.pods and "default/b" in snap.pods
    assert ex.evicted == [pods["a"]]
    # No grace period in the policy: the pod's own applies.
    ex2 = executor(client, snap)
    assert (await evict(ex2, pods["b"])).ok
    assert "gracePeriodSeconds" not in evictions.bodies[1]["deleteOptions"]


async def test_pdb_refusal_is_recorded_not_retried(api: FakeApiServer, client: ApiClient) -> None:
    snap, pods = setup(api, "a", labels={"app": "web"})
    api.add_now("PodDisruptionBudget", pdb("web", 0, {"app": "web"}))
    evictions = Evictions(api).install()
    ex = executor(client, snap)
    result = await evict(ex, pods["a"])
    assert (result.ok, result.outcome) == (False, "pdb-blocked")
    assert "disruption budget" in result.message
    assert len(evictions.bodies) == 1
    assert "default/a" in api.kinds["Pod"].objects and "default/a" in snap.pods


async def test_pdb_allows_one_disruption(api: FakeApiServer, client: ApiClient) -> None:
    snap, pods = setup(api, "a", "b", labels={"app": "web"})
    api.add_now("PodDisruptionBudget", pdb("web", 1, {"app": "web"}))
    Evictions(api).install()
    ex = executor(client, snap)
    assert (await evict(ex, pods["a"])).ok
    assert (await evict(ex, pods["b"])).outcome == "pdb-blocked"


async def test_already_gone_is_not_counted(api: FakeApiServer, client: ApiClient) -> None:
    snap, pods = setup(api, "a")
    evictions = Evictions(api).install()
    await api.delete("Pod", "a", "default")  # deleted by someone else after the snapshot
    ex = executor(client, snap)
    result = await evict(ex, pods["a"])
    assert (result.ok, result.outcome) == (False, "failed")
    assert result.message.startswith("already gone")
    assert ex.evicted == [] and len(evictions.bodies) == 1
    assert "default/a" not in snap.pods  # later plugins must not pick it


async def test_replaced_pod_is_never_evicted(api: FakeApiServer, client: ApiClient) -> None:
    snap, pods = setup(api, "a")
    Evictions(api).install()
    replacement = pod("a", labels={"app": "a"})
    replacement["metadata"]["uid"] = "uid-new"
    await api.modify("Pod", replacement)  # a StatefulSet pod recreated under the same name
    result = await evict(executor(client, snap), pods["a"])
    assert result.outcome == "failed" and "replaced" in result.message
    assert "default/a" in api.kinds["Pod"].objects


async def test_server_error_then_success(api: FakeApiServer, client: ApiClient) -> None:
    snap, pods = setup(api, "a")
    evictions = Evictions(api).install()
    evictions.script = [(500, "etcdserver: request timed out")]
    result = await evict(executor(client, snap), pods["a"])
    assert result.ok
    assert len(evictions.bodies) == 2
    assert evictions.gets == ["default/a"]  # checked before sending it again
    assert "default/a" not in api.kinds["Pod"].objects


async def test_throttled_429_is_retried(api: FakeApiServer, client: ApiClient) -> None:
    snap, pods = setup(api, "a")
    evictions = Evictions(api).install()
    evictions.script = [(429, "Too many requests, please try again later.")]
    assert (await evict(executor(client, snap), pods["a"])).ok
    assert len(evictions.bodies) == 2 and evictions.gets == []


async def test_a_retry_is_not_sent_once_the_fence_refuses(api: FakeApiServer,
                                                        client: ApiClient) -> None:
    """A leader that lost its lease during a retry's backoff (or was paused between the
    cycle's check and the request) sends nothing more: the fence is asked before each one."""
    snap, pods = setup(api, "a")
    evictions = Evictions(api).install()
    evictions.script = [(429, "Too many requests, please try again later.")]
    leading = [True]

    def fence() -> str | None:
        return None if leading[0] else "leader election lost: this instance no longer holds " \
                                       "the lease"

    evictions.on_request = lambda body: leading.__setitem__(0, False)
    result = await evict(executor(client, snap, fence=fence), pods["a"])
    assert (result.ok, result.outcome) == (False, "failed")
    assert result.message.startswith("leader election lost")
    assert len(evictions.bodies) == 1  # the retry was never sent
    assert "default/a" in api.kinds["Pod"].objects
    leading[0] = False
    assert (await evict(executor(client, snap, fence=fence), pods["a"])).message.startswith(
        "leader election lost")
    assert len(evictions.bodies) == 1  # nor a first request once refused


async def test_gives_up_after_bounded_attempts(api: FakeApiServer, client: ApiClient) -> None:
    snap, pods = setup(api, "a")
    evictions = Evictions(api).install()
    evictions.script = [(503, "unavailable")] * 5
    result = await evict(executor(client, snap, attempts=3), pods["a"])
    assert (result.ok, result.outcome) == (False, "failed")
    assert "503" in result.message and "gave up after 3 attempts" in result.message
    assert len(evictions.bodies) == 3
    assert "default/a" in snap.pods


async def test_timeout_is_not_followed_by_a_second_eviction(
        api: FakeApiServer, client: ApiClient) -> None:
    snap, pods = setup(api, "a")
    evictions = Evictions(api).install()
    # Carried out, answered long after the client gave up. The timeout also bounds the read
    # back, answered at once: 1 s is ample on a loaded machine (0.1 s was not, on the cycles
    # page's retry test).
    evictions.script = [("hang", 10.0)]
    ex = executor(client, snap, timeout=1.0)
    result = await evict(ex, pods["a"])
    assert result.ok, result
    assert len(evictions.bodies) == 1  # the pod was found gone: no second request
    assert evictions.gets == ["default/a"]
    assert ex.evicted == [pods["a"]] and "default/a" not in snap.pods


async def test_a_lost_answer_that_cannot_be_read_back_is_not_sent_again(
        api: FakeApiServer, client: ApiClient) -> None:
    """A 500 may have been carried out; while the pod cannot be read (the GET is throttled)
    nothing tells a second request from a second eviction, so none is sent, and the pod counts
    as evicted: over the limit is worse than one pod left for the next cycle."""
    snap, pods = setup(api, "a")
    evictions = Evictions(api)
    evictions.script = [(500, "etcdserver: request timed out")]
    reads = evictions.get

    async def throttled(request: kmock.Request) -> kmock.Response:
        await reads(request)  # counted
        return kmock.Response(status=429, payload=status(429, "Too many requests, please "
                                                              "try again later."))

    evictions.get = throttled  # type: ignore[method-assign]
    evictions.install()
    result = await evict(executor(client, snap, attempts=3), pods["a"])
    assert (result.ok, result.outcome) == (True, "evicted"), result
    assert "outcome unknown: counted as evicted, not retried" in result.message
    assert len(evictions.bodies) == 1
    assert len(evictions.gets) >= 3  # read before each would-be retry, and at the end


async def test_a_pod_not_in_the_snapshot_is_not_sent(api: FakeApiServer,
                                                     client: ApiClient) -> None:
    snap, pods = setup(api, "a")
    evictions = Evictions(api).install()
    snap.remove_pod(pods["a"])
    result = await evict(executor(client, snap), pods["a"])
    assert result.outcome == "failed" and evictions.bodies == []


async def test_evict_refuses_to_block_the_event_loop(api: FakeApiServer,
                                                     client: ApiClient) -> None:
    snap, pods = setup(api, "a")
    with pytest.raises(RuntimeError, match="worker thread"):
        executor(client, snap).evict(pods["a"], "default", "PodLifeTime", "old")
    assert threading.current_thread() is threading.main_thread()

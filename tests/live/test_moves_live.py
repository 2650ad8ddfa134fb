"""Moves against kmock over real HTTP (framework/moves, live/deployment_restart.py): the restart
is the strategic merge patch `kubectl rollout restart` sends, conditional on the Deployment the
cycle saw; the budget check is a dry-run eviction that evicts nothing; `desched run` restarts a
one-replica Deployment instead of evicting it, posts events on the Deployment and the pod,
counts moves by mode, and `--dry-run` predicts the restart and patches nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import kmock
import pytest
from fake_apiserver import Emulator, FakeApiServer, node, pod, status
from test_executor import Evictions, pdb
from test_run import config, events, run

from builders import NOW, decode
from desched.framework.evictor import RestartOrder
from desched.live.client import ApiClient
from desched.live.cycles_page import cycle_json
from desched.live.deployment_restart import PATCH_TYPE, RESTARTED_AT
from desched.live.eviction_api import EvictionApiExecutor
from desched.model.pod import Pod
from desched.model.resources import RESOURCES
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.backoff import Backoff

pytestmark = pytest.mark.asyncio

MOVES_POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
moves:
  surgeFirst: true
  maxUnavailablePerWorkload: 1
profiles:
- name: default
  pluginConfig:
  - name: DefaultEvictor
  - name: RemovePodsViolatingNodeTaints
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
"""
READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
KINDS = ("Namespace", "Node", "PodDisruptionBudget", "Pod", "ReplicaSet", "Deployment",
         "StatefulSet")


class Cluster:
    """A FakeApiServer's Deployments PATCHed as the API server patches them (uid and
    resourceVersion preconditions, generation bumped on a template change), and pods/eviction
    answering dry runs without evicting (a real eviction as test_executor's Evictions)."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.evictions = Evictions(api)
        self.patches: list[tuple[str, str, dict[str, Any]]] = []  # (name, content type, body)
        self.dry_runs: list[str] = []
        self.lose_answer = 0  # apply the next patches, then drop the connection
        self.unavailable = 0  # answer the next patches 503, unapplied

    def install(self) -> Cluster:
        deployments = kmock.resource("apps", "v1", "deployments")
        # kmock's emulator applies a PATCH to its own store before any reaction answers, and
        # refuses one for an object it does not hold: it gets a copy of each Deployment.
        for obj in self.api.kinds["Deployment"].objects.values():
            meta = obj["metadata"]
            self.api.server.objects[deployments, meta["namespace"], meta["name"]] = obj
        self.api.server[kmock.method.PATCH, deployments] << self.patch
        self.api.server[kmock.action.FETCH, deployments] << self.get
        pods = kmock.resource("", "v1", "pods")
        self.api.server[kmock.method.POST, pods, kmock.subresource("eviction")] << self.evict
        self.api.server[kmock.action.FETCH, pods] << self.evictions.get
        return self

    def _deployment(self, request: kmock.Request) -> dict[str, Any] | None:
        return self.api.kinds["Deployment"].objects.get(
            f"{request.namespace or ''}/{request.name or ''}")

    async def get(self, request: kmock.Request) -> kmock.Response:
        found = self._deployment(request)
        if found is None:
            return kmock.Response(status=404, payload=status(404, "not found", "NotFound"))
        return kmock.Response(status=200, payload=found)

    async def patch(self, request: kmock.Request) -> kmock.Response:
        body = json.loads(request.body)
        self.patches.append((request.name or "", request.headers.get("Content-Type", ""), body))
        found = self._deployment(request)
        if found is None:
            return kmock.Response(status=404, payload=status(404, "not found", "NotFound"))
        if self.unavailable:
            self.unavailable -= 1
            return kmock.Response(status=503, payload=status(503, "etcd is down", "Unavailable"))
        meta = body.get("metadata") or {}
        for key in ("uid", "resourceVersion"):
            if key in meta and meta[key] != found["metadata"].get(key):
                return kmock.Response(status=409, payload=status(
                    409, "the object has been modified", "Conflict"))
        template = found.setdefault("spec", {}).setdefault("template", {})
        annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
        annotations.update(body["spec"]["template"]["metadata"]["annotations"])
        found["metadata"]["generation"] = found["metadata"].get("generation", 1) + 1
        await self.api.modify("Deployment", found)
        if self.lose_answer:
            self.lose_answer -= 1
            raw = request._raw_request
            assert raw is not None and raw.transport is not None
            raw.transport.abort()
        return kmock.Response(status=200, payload=found)

    async def evict(self, request: kmock.Request) -> kmock.Response:
        if request.params.get("dryRun") == "All":
            body = request.data if isinstance(request.data, dict) else json.loads(request.body)
            assert body["deleteOptions"]["dryRun"] == ["All"]
            self.dry_runs.append(f"{request.namespace}/{request.name}")
            budget = self.evictions._budget(
                self.api.kinds["Pod"].objects[f"{request.namespace}/{request.name}"])
            if budget is not None and int(budget["status"]["disruptionsAllowed"]) < 1:
                refusal = status(429, "Cannot evict pod as it would violate the pod's "
                                      "disruption budget.", "TooManyRequests")
                refusal["details"] = {"causes": [{"type": "DisruptionBudget"}]}
                return kmock.Response(status=429, payload=refusal)
            return kmock.Response(status=201, payload={"kind": "Status", "status": "Success"})
        return await self.evictions.evict(request)


def deployment(name: str, replicas: int = 1, **strategy: Any) -> list[tuple[str, Any]]:
    """A Deployment (rolled out), its ReplicaSet, and its pods on the tainted node n1."""
    dep = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-dep-{name}",
                        "generation": 1},
           "spec": {"replicas": replicas, **({"strategy": strategy} if strategy else {})},
           "status": {"observedGeneration": 1, "replicas": replicas,
                      "updatedReplicas": replicas, "readyReplicas": replicas,
                      "availableReplicas": replicas}}
    rs = {"metadata": {"name": f"{name}-rs", "namespace": "default", "uid": f"uid-rs-{name}",
                       "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": name, "uid": f"uid-dep-{name}",
                                            "controller": True}]},
          "spec": {"replicas": replicas}}
    pods = [pod(f"{name}-{i}", node="n1", labels={"app": name}, status=READY, metadata={
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{name}-rs",
                             "uid": f"uid-rs-{name}", "controller": True}]})
        for i in range(replicas)]
    return [("Deployment", dep), ("ReplicaSet", rs), *(("Pod", p) for p in pods)]


def serve(api: FakeApiServer, *objects: tuple[str, Any]) -> Cluster:
    api.serve(*(r.kind for r in RESOURCES))
    tainted = node("n1")
    tainted["spec"] = {"taints": [{"key": "maintenance", "value": "true",
                                   "effect": "NoSchedule"}]}
    api.add_now("Node", tainted, node("n2"))
    for kind, obj in objects:
        api.add_now(kind, obj)
    return Cluster(api).install()


# -- the executor ---------------------------------------------------------------------------------

def order(snap: ClusterSnapshot, name: str = "web", resource_version: str = "") -> RestartOrder:
    pods = tuple(p for p in snap.pods.values() if p.name.startswith(f"{name}-"))
    return RestartOrder("default", name, f"uid-dep-{name}", resource_version, NOW, pods,
                        "default", "RemovePodsViolatingNodeTaints", "restart ...")


def snapshot_of(api: FakeApiServer) -> ClusterSnapshot:
    snap = ClusterSnapshot()
    for obj in api.kinds["Pod"].objects.values():
        snap.add(decode("Pod", obj))
    snap.finish()
    return snap


def executor(client: ApiClient, snap: ClusterSnapshot) -> EvictionApiExecutor:
    return EvictionApiExecutor(client, asyncio.get_running_loop(), snap, attempts=3,
                               timeout=2.0, backoff=Backoff(initial=0.01, maximum=0.02))


async def test_a_restart_is_kubectls_patch_on_the_deployment_the_cycle_saw(
        api: FakeApiServer, client: ApiClient) -> None:
    cluster = serve(api, *deployment("web"))
    snap = snapshot_of(api)
    rv = api.kinds["Deployment"].objects["default/web"]["metadata"]["resourceVersion"]
    ex = executor(client, snap)
    result = await asyncio.to_thread(ex.restart, order(snap, resource_version=rv))
    assert result.ok and result.outcome == "restarted"
    [(name, content_type, body)] = cluster.patches
    assert (name, content_type) == ("web", PATCH_TYPE)
    assert body == {"metadata": {"uid": "uid-dep-web", "resourceVersion": rv},
                    "spec": {"template": {"metadata": {"annotations": {
                        RESTARTED_AT: "2026-11-22T12:00:00Z"}}}}}
    assert "default/web-0" not in snap.pods  # replaced: the cycle no longer sees it
    assert cluster.evictions.bodies == [] and "default/web-0" in api.kinds["Pod"].objects


async def test_a_deployment_changed_since_the_snapshot_is_not_restarted(
        api: FakeApiServer, client: ApiClient) -> None:
    cluster = serve(api, *deployment("web"))
    snap = snapshot_of(api)
    result = await asyncio.to_thread(executor(client, snap).restart,
                                     order(snap, resource_version="1"))
    assert not result.ok and result.message.startswith("the Deployment changed since the "
                                                       "cycle's snapshot (409 Conflict)")
    assert len(cluster.patches) == 1 and "default/web-0" in snap.pods


async def test_a_lost_answer_is_read_back_not_sent_blindly(
        api: FakeApiServer, client: ApiClient) -> None:
    cluster = serve(api, *deployment("web"))
    cluster.lose_answer = 1
    snap = snapshot_of(api)
    rv = api.kinds["Deployment"].objects["default/web"]["metadata"]["resourceVersion"]
    result = await asyncio.to_thread(executor(client, snap).restart,
                                     order(snap, resource_version=rv))
    # The first patch took effect; the retry met a new resourceVersion (409) and the read back
    # found this cycle's restartedAt.
    assert result.ok and "applied by an earlier request" in result.message
    assert len(cluster.patches) == 2


async def test_a_restart_is_not_retried_once_the_lease_is_lost(
        api: FakeApiServer, client: ApiClient) -> None:
    """The leader's fence is asked before each attempt: a leader that lost its lease during a
    retry's backoff sends nothing more."""
    cluster = serve(api, *deployment("web"))
    cluster.unavailable = 1
    snap = snapshot_of(api)
    asked: list[int] = []

    def fence() -> str | None:
        asked.append(1)
        return None if len(asked) == 1 else "leader election lost"

    ex = EvictionApiExecutor(client, asyncio.get_running_loop(), snap, attempts=3, timeout=2.0,
                             backoff=Backoff(initial=0.01, maximum=0.02), fence=fence)
    result = await asyncio.to_thread(ex.restart, order(snap))
    assert (result.ok, result.message) == (False, "leader election lost")
    assert len(cluster.patches) == 1 and "default/web-0" in snap.pods


async def test_the_budget_check_is_a_dry_run_eviction(api: FakeApiServer,
                                                      client: ApiClient) -> None:
    cluster = serve(api, *deployment("web"), ("PodDisruptionBudget", pdb("web", 0,
                                                                          {"app": "web"})))
    snap = snapshot_of(api)
    ex = executor(client, snap)
    pods: list[Pod] = list(snap.pods.values())
    answer = await asyncio.to_thread(ex.check_budget, pods[0])
    assert (answer.ok, answer.outcome) == (False, "pdb-blocked")
    assert cluster.dry_runs == ["default/web-0"] and cluster.evictions.bodies == []
    assert "default/web-0" in api.kinds["Pod"].objects and "default/web-0" in snap.pods


# -- desched run ----------------------------------------------------------------------------------

def moves_config(tmp_path: Path, emulator: Emulator, **options: Any) -> Any:
    path = tmp_path / "moves.yaml"
    path.write_text(MOVES_POLICY)
    return config(tmp_path, emulator, policy_path=str(path), kinds=KINDS, **options)


async def test_run_restarts_a_one_replica_deployment_instead_of_evicting_it(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster = serve(api, *deployment("web"), *deployment("api", 2, type="Recreate"))
    runner, code = await run(moves_config(tmp_path, emulator, once=True))
    assert code == 0
    assert [p[0] for p in cluster.patches] == ["web"]
    assert cluster.dry_runs == ["default/web-0"]
    # api cannot surge (Recreate): paced, one pod evicted, the other deferred.
    assert [b["metadata"]["name"] for b in cluster.evictions.bodies] == ["api-0"]
    [report] = runner.reports
    outcomes = {d.pod: d.outcome for d in report.log.decisions}
    assert outcomes == {"web-0": "restarted", "api-0": "evicted", "api-1": "deferred"}
    value = runner.metrics.registry.get_sample_value
    assert value("desched_moves_total", {"mode": "restart"}) == 1
    assert value("desched_moves_total", {"mode": "evict"}) == 1
    assert value("desched_moves_total", {"mode": "deferred"}) == 1
    assert value("desched_deployment_restarts_total",
                 {"strategy": "RemovePodsViolatingNodeTaints", "profile": "default"}) == 1
    posted = {(e["regarding"]["kind"], e["regarding"]["name"], e["reason"], e["action"])
              for e in await events(emulator)}
    assert {("Deployment", "web", "SurgeRestart", "Restart"),
            ("Pod", "web-0", "SurgeRestart", "Descheduled")} <= posted
    live = cycle_json(report)
    assert live["live"]["moves"] == {"evict": 1, "restart": 1, "restarts": 1, "deferred": 1}
    assert [r["deployment"] for r in live["restarts"]] == ["web"]
    assert sorted(e["mode"] for e in live["evictions"]) == ["evict", "restart"]


async def test_the_next_cycle_does_not_restart_again_while_the_rollout_runs(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    """The patch bumped the Deployment's generation; its controller has not observed it: a
    desched restarted now (a fresh Runner) defers instead of starting a second restart."""
    cluster = serve(api, *deployment("web"))
    await run(moves_config(tmp_path, emulator, once=True))
    runner, code = await run(moves_config(tmp_path, emulator, once=True))
    assert code == 0 and len(cluster.patches) == 1
    [decision] = runner.reports[0].log.decisions
    assert decision.outcome == "deferred"
    assert "Deployment default/web is rolling out (its controller has not observed its spec " \
           "yet (generation 2, observed 1)): the rollout replaces its pods" in decision.reason


async def test_dry_run_predicts_the_restart_and_changes_nothing(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster = serve(api, *deployment("web"))
    runner, code = await run(moves_config(tmp_path, emulator, once=True, dry_run=True))
    assert code == 0
    assert cluster.patches == [] and cluster.dry_runs == [] and cluster.evictions.bodies == []
    [decision] = runner.reports[0].log.decisions
    assert decision.outcome == "restarted"
    assert runner.metrics.registry.get_sample_value("desched_moves_total",
                                                    {"mode": "restart"}) == 1

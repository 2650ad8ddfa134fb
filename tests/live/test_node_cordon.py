"""CustomPriority's autoCordon against kmock over real HTTP (live/node_cordon.py): the cordon is
the strategic merge patch `kubectl cordon` sends, retried on a server error, refused by a lost
lease; `desched run` cordons the drained node, evicts its pods and logs the cordon as a note on
the node; `--dry-run` marks nothing on the server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import kmock
import pytest
from fake_apiserver import Emulator, FakeApiServer, node, pod, status
from test_executor import Evictions
from test_run import config, run

from builders import decode
from desched.live.client import ApiClient
from desched.live.eviction_api import EvictionApiExecutor
from desched.live.node_cordon import PATCH_TYPE
from desched.model.resources import RESOURCES
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.backoff import Backoff

pytestmark = pytest.mark.asyncio

POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  plugins:
    balance: {enabled: [{name: CustomPriority}]}
    evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
    filter: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
  pluginConfig:
  - name: CustomPriority
    args:
      mode: DrainNode
      autoCordon: true
      evictionOrder:
      - {name: on-demand, nodeSelector: {matchLabels: {billing: on-demand}}}
      - {name: committed, nodeSelector: {matchLabels: {billing: committed}}}
"""
KINDS = ("Namespace", "Node", "Pod", "ReplicaSet")
OWNED = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs",
                              "uid": "uid-rs-web", "controller": True}]}
READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


def tiered(name: str, billing: str) -> dict[str, Any]:
    obj = node(name)
    obj["metadata"]["labels"]["billing"] = billing
    return obj


class Nodes:
    """PATCH on nodes as the API server applies a strategic merge patch of spec.unschedulable;
    `unavailable` answers the next patches 503, unapplied."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.patches: list[tuple[str, str, dict[str, Any]]] = []  # (name, content type, body)
        self.unavailable = 0

    def install(self) -> Nodes:
        nodes = kmock.resource("", "v1", "nodes")
        # kmock applies a PATCH to its own store first, and refuses one for an object it lacks.
        for obj in self.api.kinds["Node"].objects.values():
            self.api.server.objects[nodes, None, obj["metadata"]["name"]] = obj
        self.api.server[kmock.method.PATCH, nodes] << self.patch
        return self

    async def patch(self, request: kmock.Request) -> kmock.Response:
        body = json.loads(request.body)
        name = request.name or ""
        self.patches.append((name, request.headers.get("Content-Type", ""), body))
        found = self.api.kinds["Node"].objects.get(f"/{name}")  # cluster-scoped: no namespace
        if found is None:
            return kmock.Response(status=404, payload=status(404, f'nodes "{name}" not found',
                                                             "NotFound"))
        if self.unavailable:
            self.unavailable -= 1
            return kmock.Response(status=503, payload=status(503, "etcd is down", "Unavailable"))
        found.setdefault("spec", {})["unschedulable"] = body["spec"]["unschedulable"]
        await self.api.modify("Node", found)
        return kmock.Response(status=200, payload=found)


def serve(api: FakeApiServer) -> tuple[Nodes, Evictions]:
    api.serve(*(r.kind for r in RESOURCES))
    api.add_now("Node", tiered("elastic-1", "on-demand"), tiered("static-1", "committed"))
    for name in ("web-0", "web-1"):
        api.add_now("Pod", pod(name, node="elastic-1", status=READY, metadata=OWNED))
    return Nodes(api).install(), Evictions(api).install()


def snapshot_of(api: FakeApiServer) -> ClusterSnapshot:
    snap = ClusterSnapshot()
    for obj in api.kinds["Node"].objects.values():
        snap.add(decode("Node", obj))
    snap.finish()
    return snap


def executor(client: ApiClient, snap: ClusterSnapshot, **kw: Any) -> EvictionApiExecutor:
    return EvictionApiExecutor(client, asyncio.get_running_loop(), snap, attempts=3,
                               timeout=2.0, backoff=Backoff(initial=0.01, maximum=0.02), **kw)


async def test_a_cordon_is_kubectls_patch_and_the_snapshot_follows(
        api: FakeApiServer, client: ApiClient) -> None:
    nodes, _ = serve(api)
    snap = snapshot_of(api)
    result = await asyncio.to_thread(executor(client, snap).set_unschedulable, "elastic-1", True)
    assert result.ok
    assert nodes.patches == [("elastic-1", PATCH_TYPE, {"spec": {"unschedulable": True}})]
    assert snap.nodes["elastic-1"].spec.unschedulable
    undone = await asyncio.to_thread(executor(client, snap).set_unschedulable, "elastic-1",
                                     False)
    assert undone.ok and not snap.nodes["elastic-1"].spec.unschedulable
    assert nodes.patches[-1][2] == {"spec": {"unschedulable": False}}


async def test_a_server_error_is_retried_and_a_missing_node_is_not(
        api: FakeApiServer, client: ApiClient) -> None:
    nodes, _ = serve(api)
    nodes.unavailable = 1
    snap = snapshot_of(api)
    result = await asyncio.to_thread(executor(client, snap).set_unschedulable, "elastic-1", True)
    assert result.ok and len(nodes.patches) == 2
    gone = await asyncio.to_thread(executor(client, snap).set_unschedulable, "nowhere", True)
    assert not gone.ok and "404" in gone.message


async def test_a_cordon_is_not_sent_once_the_lease_is_lost(
        api: FakeApiServer, client: ApiClient) -> None:
    nodes, _ = serve(api)
    snap = snapshot_of(api)
    ex = executor(client, snap, fence=lambda: "leader election lost")
    result = await asyncio.to_thread(ex.set_unschedulable, "elastic-1", True)
    assert (result.ok, result.message) == (False, "leader election lost")
    assert nodes.patches == [] and not snap.nodes["elastic-1"].spec.unschedulable


def custom_priority(tmp_path: Path, emulator: Emulator, **options: Any) -> Any:
    path = tmp_path / "custompriority.yaml"
    path.write_text(POLICY)
    return config(tmp_path, emulator, policy_path=str(path), kinds=KINDS, **options)


async def test_run_cordons_the_node_then_drains_it(tmp_path: Path, emulator: Emulator,
                                                   api: FakeApiServer) -> None:
    nodes, evictions = serve(api)
    runner, code = await run(custom_priority(tmp_path, emulator, once=True))
    assert code == 0
    assert [(name, body) for name, _, body in nodes.patches] == [
        ("elastic-1", {"spec": {"unschedulable": True}})]
    assert sorted(b["metadata"]["name"] for b in evictions.bodies) == ["web-0", "web-1"]
    [report] = runner.reports
    assert [n.text for n in report.log.notes if n.node == "elastic-1"] == [
        "cordoned node elastic-1: autoCordon: draining its 2 pod(s) to cheaper tiers"]


async def test_dry_run_cordons_only_its_own_snapshot(tmp_path: Path, emulator: Emulator,
                                                     api: FakeApiServer) -> None:
    nodes, evictions = serve(api)
    runner, code = await run(custom_priority(tmp_path, emulator, once=True, dry_run=True))
    assert code == 0
    assert nodes.patches == [] and evictions.bodies == []
    [report] = runner.reports
    assert sorted(d.pod for d in report.log.decisions if d.outcome == "evicted") == [
        "web-0", "web-1"]
    assert "cordoned node elastic-1: autoCordon: draining its 2 pod(s) to cheaper tiers" in [
        n.text for n in report.log.notes]

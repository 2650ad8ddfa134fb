"""`desched snapshot` capture: what it writes is what `simulate --snapshot` reads, and gives the
same objects as the live informers."""

from __future__ import annotations

import asyncio
import json
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import Emulator, FakeApiServer, node, pod

from desched.errors import InputError
from desched.live.capture import capture, run_capture
from desched.live.client import ApiClient
from desched.live.informer import build_snapshot, make_informers, stop_informers
from desched.model.meta import json_encoder
from desched.model.resources import RESOURCES
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.loader import load_snapshot
from desched.util.backoff import Backoff

pytestmark = pytest.mark.asyncio

OPTIONAL_UNSERVED = ("NodeMetrics", "PodMetrics", "PodMigrationJob", "Reservation")
MANAGED = [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]


def fast() -> Backoff:
    return Backoff(initial=0.01, maximum=0.05)


def populate(api: FakeApiServer) -> int:
    """A small cluster of every kind except the optional ones in OPTIONAL_UNSERVED."""
    api.serve(*(r.kind for r in RESOURCES if r.kind not in OPTIONAL_UNSERVED))
    objects: dict[str, list[dict[str, Any]]] = {
        "Namespace": [{"metadata": {"name": n, "labels": {"team": n}}}
                      for n in ("default", "prod")],
        "Node": [node("n1"), node("n2", cpu="8"), node("n3")],
        "PriorityClass": [{"metadata": {"name": "high"}, "value": 1000}],
        "PodDisruptionBudget": [{"metadata": {"name": "web", "namespace": "prod"},
                                 "spec": {"minAvailable": 1,
                                          "selector": {"matchLabels": {"app": "web"}}},
                                 "status": {"disruptionsAllowed": 1}}],
        "Deployment": [{"metadata": {"name": "web", "namespace": "prod"},
                        "spec": {"replicas": 3}}],
        "ReplicaSet": [{"metadata": {"name": "web-1", "namespace": "prod", "uid": "rs-1",
                                     "ownerReferences": [{"kind": "Deployment", "name": "web",
                                                          "uid": "d-1", "controller": True}]},
                        "spec": {"replicas": 3}}],
        "Pod": [pod(f"web-{i}", namespace="prod", node=f"n{i % 3 + 1}",
                    metadata={"managedFields": MANAGED, "ownerReferences": [
                        {"kind": "ReplicaSet", "name": "web-1", "uid": "rs-1",
                         "controller": True}]})
                for i in range(4)] + [pod("solo", metadata={"managedFields": MANAGED})],
        "NodeMetric": [{"metadata": {"name": "n1"}, "status": {
            "updateTime": "2026-11-22T12:00:00Z",
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1500m", "memory": "2Gi"}}}}}],
    }
    for kind, objs in objects.items():
        api.add_now(kind, *objs)
    return sum(len(objs) for objs in objects.values())


def encoded(snapshot: ClusterSnapshot) -> dict[str, Any]:
    """Everything a snapshot holds, as comparable JSON (without facts derived on demand)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not k.startswith("~")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    def enc(values: Any) -> Any:
        return strip(json.loads(json_encoder.encode(values)))
    return {
        "nodes": enc(snapshot.nodes), "pods": enc(snapshot.pods),
        "namespaces": enc(snapshot.namespaces),
        "pdbs": enc(snapshot.pdbs_by_namespace),
        "priority_classes": enc(snapshot.priority_classes),
        "workloads": enc({"/".join(k): v for k, v in snapshot.workloads.items()}),
        "node_metrics": enc(snapshot.node_metrics),
    }


async def test_capture_loads_as_the_same_objects(api: FakeApiServer, client: ApiClient,
                                                 tmp_path: Path) -> None:
    total = populate(api)
    out = tmp_path / "cluster.jsonl"
    notes: list[str] = []
    before = datetime.now(UTC)
    written = await capture(client, out, page_size=2, note=notes.append)
    assert written == total
    assert sorted(notes) == sorted(
        f"skipping {kind}: the API server does not serve {label}" for kind, label in [
            ("NodeMetrics", "nodes.metrics.k8s.io/v1beta1"),
            ("PodMetrics", "pods.metrics.k8s.io/v1beta1"),
            ("PodMigrationJob", "podmigrationjobs.scheduling.koordinator.sh/v1alpha1"),
            ("Reservation", "reservations.scheduling.koordinator.sh/v1alpha1")])

    raw = out.read_bytes()
    assert b"managedFields" not in raw
    *pages, info = [json.loads(line) for line in raw.splitlines()]
    kinds = [page["kind"] for page in pages]
    assert kinds.count("PodList") == 3  # 5 pods, 2 a page
    assert kinds.count("NodeList") == 2
    assert all(set(page) == {"kind", "apiVersion", "metadata", "items"} for page in pages)
    # The last line records when the capture finished: simulate's default clock.
    assert (info["apiVersion"], info["kind"]) == ("desched.io/v1alpha1", "SnapshotInfo")
    captured = datetime.fromisoformat(info["metadata"]["creationTimestamp"])
    assert before - timedelta(seconds=1) <= captured <= datetime.now(UTC)
    assert info["server"] == client.server
    assert not (tmp_path / "cluster.jsonl.partial").exists()

    warnings: list[str] = []
    loaded = load_snapshot([str(out)], warn=warnings.append)
    assert warnings == []
    assert sorted(loaded.pods) == ["default/solo"] + [f"prod/web-{i}" for i in range(4)]
    assert loaded.node_requested("n1")["cpu"] == 300  # web-0, web-3 and solo
    assert loaded.nodes["n2"].allocatable["cpu"] == 8000
    assert len(loaded.pods_by_owner_uid["rs-1"]) == 4
    assert dict(loaded.namespace_labels("prod")) == {"team": "prod"}
    assert loaded.captured_at == captured

    # The live informers over the same server see exactly the same objects.
    informers = make_informers(client, backoff=fast())
    try:
        live = await build_snapshot(informers)
    finally:
        await stop_informers(informers)
    assert encoded(loaded) == encoded(live)


async def test_items_are_copied_byte_for_byte(api: FakeApiServer, client: ApiClient,
                                              tmp_path: Path) -> None:
    api.serve("Pod")
    original = pod("a", metadata={"managedFields": MANAGED, "annotations": {"x": "1"}},
                   spec={"nodeName": "n1", "someFutureField": {"kept": [1, 2.5, None]}})
    api.add_now("Pod", original)
    out = tmp_path / "pods.jsonl"
    assert await capture(client, out, ["Pod"]) == 1
    page, _info = [json.loads(line) for line in out.read_bytes().splitlines()]
    item = page["items"][0]
    expected = {k: v for k, v in original.items()}
    expected["metadata"] = {k: v for k, v in original["metadata"].items()
                            if k != "managedFields"}
    expected["metadata"]["resourceVersion"] = "1001"
    assert item == expected
    assert page["metadata"] == {"resourceVersion": "1001"}


async def test_expired_continue_token_lists_the_kind_again(
        api: FakeApiServer, client: ApiClient, tmp_path: Path) -> None:
    api.serve("Pod")
    api.add_now("Pod", *(pod(f"p{i}") for i in range(5)))
    api.fail("list", "Pod", 410, "The provided continue parameter is too old", after=1)
    out = tmp_path / "pods.jsonl"
    notes: list[str] = []
    assert await capture(client, out, ["Pod"], page_size=2, note=notes.append) == 5
    assert notes == ["pods changed too much while being listed; listing it again"]
    # The first attempt's page is gone: three pages and the SnapshotInfo line.
    assert len(out.read_bytes().splitlines()) == 4
    assert len(load_snapshot([str(out)]).pods) == 5


async def test_server_errors_are_retried(api: FakeApiServer, client: ApiClient,
                                         tmp_path: Path) -> None:
    api.serve("Node")
    api.add_now("Node", node("n1"))
    api.fail("list", "Node", 500, times=2)
    api.fail("list", "Node", 429, times=1)
    out = tmp_path / "nodes.jsonl"
    assert await capture(client, out, ["Node"], backoff=fast()) == 1
    assert len(api.requests("list", "nodes")) == 4


async def test_persistent_server_error_gives_up(api: FakeApiServer, client: ApiClient,
                                                tmp_path: Path) -> None:
    api.serve("Node")
    api.fail("list", "Node", 503, "etcd is unavailable", times=10)
    out = tmp_path / "nodes.jsonl"
    with pytest.raises(InputError) as caught:
        await capture(client, out, ["Node"], attempts=3, backoff=fast())
    assert str(caught.value) == f"{client.server}: cannot list nodes: 503 Service Unavailable: " \
                                "etcd is unavailable (gave up after 3 attempts)"
    assert not out.exists() and not (tmp_path / "nodes.jsonl.partial").exists()


async def test_forbidden_names_the_resource_and_leaves_no_file(
        api: FakeApiServer, client: ApiClient, tmp_path: Path) -> None:
    api.serve("Node", "Pod")
    api.add_now("Node", node("n1"))
    api.fail("list", "Pod", 403, 'pods is forbidden: User "alice" cannot list resource "pods" '
                                 'in API group "" at the cluster scope')
    out = tmp_path / "cluster.jsonl"
    with pytest.raises(InputError) as caught:
        await capture(client, out, ["Node", "Pod"])
    message = str(caught.value)
    assert "\n" not in message
    assert "forbidden (403) to list pods" in message
    assert not out.exists() and not (tmp_path / "cluster.jsonl.partial").exists()


async def test_required_kind_not_served_is_an_error(api: FakeApiServer, client: ApiClient,
                                                    tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"does not serve poddisruptionbudgets.policy/v1 \(404\)"):
        await capture(client, tmp_path / "x.jsonl", ["PodDisruptionBudget"])


async def test_unwritable_output(client: ApiClient, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot write snapshot"):
        await capture(client, tmp_path / "missing-dir" / "x.jsonl", ["Node"])


async def test_unknown_kind(client: ApiClient, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown kind"):
        await capture(client, tmp_path / "x.jsonl", ["Nodes"])


def kubeconfig(path: Path, server: str, token: str = "s3cret") -> str:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "c", "user": "u"}}],
    }))
    return str(path)


async def test_run_capture_with_a_kubeconfig(emulator: Emulator, api: FakeApiServer,
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    total = populate(api)
    config = kubeconfig(tmp_path / "kubeconfig", api.url)
    out = tmp_path / "snap.jsonl"
    notes: list[str] = []
    # run_capture runs its own event loop: give it a thread, the server stays on this loop.
    written = await asyncio.to_thread(run_capture, config, None, str(out), note=notes.append)
    assert written == total
    assert len(notes) == len(OPTIONAL_UNSERVED)
    assert len(load_snapshot([str(out)]).pods) == 5
    assert {r.headers.get("Authorization") for r in emulator} == {"Bearer s3cret"}
    assert all(r.headers.get("User-Agent", "").startswith("desched/") for r in emulator)


async def test_run_capture_unreachable(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")
    with pytest.raises(InputError) as caught:
        await asyncio.to_thread(run_capture, config, None, str(tmp_path / "x.jsonl"))
    assert str(caught.value).startswith(f"http://127.0.0.1:{port}: cannot connect to the API "
                                        "server to list namespaces")

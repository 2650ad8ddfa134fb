"""A real API server's protobuf and watch-list answers decode to the same lean objects as its JSON:
the test's pods listed both ways, and every node listed page by page as JSON and streamed."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from e2e_cluster import Cluster

from desched.live.client import ApiClient
from desched.live.informer import PAGE_DECODERS, Informer
from desched.model.meta import trim_annotations
from desched.model.pod import Pod
from desched.model.proto_decode import MAGIC, decode_list
from desched.model.resources import BY_KIND


def comparable(pod: Pod) -> tuple[Pod, Any]:
    """The pod with its conditions as read (the JSON text kept for them differs in spelling)."""
    conditions = pod.conditions
    pod.status.conditions = msgspec.Raw()
    pod.cached_conditions = None
    return pod, conditions


async def _pods_both_ways(kubeconfig: str, namespace: str) -> tuple[list[Any], list[Any]]:
    # Only the test's own pods: on a loaded machine the real ReplicaSet controller has been seen
    # to add one of its own to the namespace before them.
    path = f"/api/v1/namespaces/{namespace}/pods?labelSelector=decode%3Dboth"
    async with ApiClient.from_config(kubeconfig) as client:
        protobuf = await client.get(path, what="list pods", protobuf=True)
        json = await client.get(path, what="list pods")
    assert protobuf.startswith(MAGIC) and json.startswith(b"{")
    from_protobuf, _, _ = decode_list(protobuf, "Pod")
    from_json = list(PAGE_DECODERS["Pod"].decode(json).items)
    for pod in from_json:
        trim_annotations(pod.metadata)
    return from_protobuf, from_json


async def _nodes(kubeconfig: str, watch_list: bool, protobuf: bool) -> dict[str, Any]:
    async with ApiClient.from_config(kubeconfig, protobuf=protobuf) as client:
        informer = Informer(client, BY_KIND["Node"], watch_list=watch_list)
        await informer.relist()
        if watch_list:
            assert client.watch_list, "the server should offer the watch-list stream"
        return informer.store


def test_protobuf_and_json_lists_decode_alike(cluster: Cluster) -> None:
    node = cluster.add_node(0)
    owner = ("web", cluster.add_replicaset("web", 2, {"app": "web"}))
    for i in range(2):
        cluster.add_pod(f"web-{i}", node, owner, {"app": "web", "pod-template-hash": "h",
                                                      "decode": "both"})
    from_protobuf, from_json = asyncio.run(_pods_both_ways(cluster.kubeconfig, cluster.ns))
    assert [p.name for p in from_protobuf] == ["web-0", "web-1"]
    for pod in (*from_protobuf, *from_json):  # what a cycle reads first (cached on the pod)
        assert pod.ready and pod.requests == {"cpu": 100, "memory": 64 * 1024 ** 2}
    assert [comparable(p) for p in from_protobuf] == [comparable(p) for p in from_json]

    paged_json = asyncio.run(_nodes(cluster.kubeconfig, watch_list=False, protobuf=False))
    streamed = asyncio.run(_nodes(cluster.kubeconfig, watch_list=True, protobuf=True))
    assert node in streamed
    assert streamed == paged_json

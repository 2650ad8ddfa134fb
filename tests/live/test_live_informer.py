"""Informers against kmock over real HTTP: paging, watch events, bookmarks, 410 relists,
reconnects, retries with backoff, fail-fast errors, and snapshots built from the caches."""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_apiserver import Emulator, FakeApiServer, node, pod

from desched.errors import InputError
from desched.live.client import AccessDenied, ApiClient, Unreachable
from desched.live.informer import (
    Backoff,
    Informer,
    build_snapshot,
    make_informers,
    start_informers,
    stop_informers,
)
from desched.model.resources import BY_KIND

pytestmark = pytest.mark.asyncio


def fast() -> Backoff:
    return Backoff(initial=0.01, maximum=0.05)


def informer(client: ApiClient, kind: str, **options: Any) -> Informer:
    options.setdefault("backoff", fast())
    return Informer(client, BY_KIND[kind], **options)


async def eventually(check: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll until check() holds. The bound only ends a test that would otherwise hang: a loaded
    machine must not fail a test that is merely slow."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


@pytest.fixture
def unfreeze() -> Iterator[None]:
    """start_informers() freezes the heap (as a live run should); give it back after the test."""
    yield
    gc.unfreeze()


def running_informers() -> list[str]:
    """The informer loops still running (their tasks are named "informer <kind>")."""
    return sorted(t.get_name() for t in asyncio.all_tasks()
                  if t.get_name().startswith("informer ") and not t.done())


def node_of(inf: Informer, key: str) -> str:
    return str(inf.store[key].spec.node_name)


async def test_paged_list_follows_continue_tokens(api: FakeApiServer, client: ApiClient) -> None:
    api.serve("Pod")
    api.add_now("Pod", *(pod(f"p{i}") for i in range(5)))
    inf = informer(client, "Pod", page_size=2)
    try:
        await inf.wait_synced()
        assert sorted(inf.store) == [f"default/p{i}" for i in range(5)]
        lists = api.requests("list", "pods")
        assert [p.get("limit") for p in lists] == ["2", "2", "2"]
        assert "continue" not in lists[0]
        assert lists[1]["continue"] and lists[2]["continue"] != lists[1]["continue"]
        assert inf.resource_version == "1005"
        assert inf.lists == 1
    finally:
        await inf.stop()


async def test_watch_events_update_the_store(api: FakeApiServer, client: ApiClient) -> None:
    api.serve("Pod")
    api.add_now("Pod", pod("a"), pod("b"))
    inf = informer(client, "Pod")
    seen: list[str] = []
    inf.handlers.append(lambda kind, obj: seen.append(kind))
    try:
        await inf.wait_synced()
        generation = inf.generation
        await api.add("Pod", pod("c"))
        await api.modify("Pod", pod("a", node="n2"))
        await api.delete("Pod", "b", "default")
        await eventually(lambda: "default/b" not in inf.store)
        assert sorted(inf.store) == ["default/a", "default/c"]
        assert node_of(inf, "default/a") == "n2"
        assert seen == ["SYNC", "ADDED", "MODIFIED", "DELETED"]
        assert inf.generation == generation + 3
        assert inf.resource_version == str(api.rv)
        watch = api.requests("watch", "pods")[0]
        assert watch["watch"] == "true"
        assert watch["resourceVersion"] == "1002"
        assert watch["allowWatchBookmarks"] == "true"
        assert int(watch["timeoutSeconds"]) >= 300
    finally:
        await inf.stop()


async def test_bookmarks_move_the_resource_version(api: FakeApiServer,
                                                   client: ApiClient) -> None:
    api.serve("Pod")
    api.add_now("Pod", pod("a"))
    inf = informer(client, "Pod")
    try:
        await inf.wait_synced()
        generation = inf.generation
        mark = await api.bookmark("Pod")
        await eventually(lambda: inf.resource_version == str(mark))
        assert inf.generation == generation  # a bookmark changes no object
        assert list(inf.store) == ["default/a"]
        # A stream that ends (timeoutSeconds) is re-watched from the bookmark, not re-listed.
        await api.end_watches()
        await eventually(lambda: len(api.requests("watch", "pods")) == 2)
        assert api.requests("watch", "pods")[1]["resourceVersion"] == str(mark)
        assert inf.lists == 1
    finally:
        await inf.stop()


@pytest.mark.parametrize("as_event", [False, True], ids=["http-410", "error-event-410"])
async def test_gone_relists(emulator: Emulator, client: ApiClient,
                            as_event: bool) -> None:
    api = FakeApiServer(emulator, gone_as_event=as_event)
    api.serve("Pod")
    api.add_now("Pod", pod("a"))
    inf = informer(client, "Pod")
    try:
        await inf.wait_synced()
        await api.change_unseen("Pod", pod("missed"))
        await eventually(lambda: "default/missed" in inf.store)
        assert inf.lists == 2
        assert sorted(inf.store) == ["default/a", "default/missed"]
        # Watching goes on from the new list.
        await api.add("Pod", pod("later"))
        await eventually(lambda: "default/later" in inf.store)
    finally:
        await inf.stop()


async def test_a_broken_watch_is_not_current_again_on_a_compacted_version(
        emulator: Emulator, client: ApiClient) -> None:
    # kube-apiserver without a watch cache serves a watch from etcd: it accepts the stream
    # first and says 410 only once etcd has answered that the resourceVersion was compacted.
    # An informer resuming after a dropped connection must not call its cache current in
    # between (a cycle would act on a cache that missed what changed meanwhile): it asks for
    # its version first, and lists again.
    api = FakeApiServer(emulator, gone_as_event=True, gone_after=0.3)
    api.serve("Pod")
    api.add_now("Pod", pod("a"))
    # Backing off long enough for the test to see the cache stale before it reconnects.
    inf = informer(client, "Pod", backoff=Backoff(initial=0.2, maximum=0.2))
    try:
        await inf.wait_synced()
        await api.add("Pod", pod("b"))
        await eventually(lambda: "default/b" in inf.store)  # watching
        await api.change_unseen("Pod", pod("missed"), abort=True)
        await eventually(lambda: inf.stale_since is not None)
        claimed_current = False
        while "default/missed" not in inf.store:
            claimed_current |= inf.stale_since is None
            await asyncio.sleep(0.005)
        assert not claimed_current
        assert inf.lists == 2
        assert api.requests("list", "pods")[1]["resourceVersionMatch"] == "Exact"
    finally:
        await inf.stop()


async def test_dropped_stream_reconnects_from_last_version(api: FakeApiServer,
                                                           client: ApiClient) -> None:
    api.serve("Pod")
    api.add_now("Pod", pod("a"))
    inf = informer(client, "Pod")
    try:
        await inf.wait_synced()
        await api.add("Pod", pod("b"))
        await eventually(lambda: "default/b" in inf.store)
        last = inf.resource_version
        await api.end_watches(abort=True)
        await api.add("Pod", pod("c"))
        await eventually(lambda: "default/c" in inf.store)
        watches = api.requests("watch", "pods")
        assert len(watches) >= 2
        assert watches[1]["resourceVersion"] == last
        assert inf.lists == 1  # no relist for a dropped connection
    finally:
        await inf.stop()


async def test_server_errors_are_retried_with_backoff(api: FakeApiServer,
                                                      client: ApiClient) -> None:
    api.serve("Pod")
    api.add_now("Pod", pod("a"))
    api.fail("list", "Pod", 500, times=2)
    api.fail("watch", "Pod", 503, times=2)
    api.fail("list", "Pod", 429, times=1, after=3)
    inf = informer(client, "Pod")
    try:
        await inf.wait_synced()
        assert len(api.requests("list", "pods")) == 3
        assert list(inf.store) == ["default/a"]
        await api.add("Pod", pod("b"))
        await eventually(lambda: "default/b" in inf.store)
        assert len(api.requests("watch", "pods")) == 3
    finally:
        await inf.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_backoff_is_bounded_and_resets() -> None:
    backoff = Backoff(initial=1.0, maximum=8.0, jitter=0.0)
    assert [backoff.next() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    backoff.reset()
    assert backoff.next() == 1.0
    jittered = Backoff(initial=1.0, jitter=0.2)
    assert 0.8 <= jittered.next() <= 1.2


async def test_forbidden_fails_with_one_line_naming_the_resource(
        api: FakeApiServer, client: ApiClient) -> None:
    api.serve("Pod")
    api.fail("list", "Pod", 403, 'pods is forbidden: User "system:serviceaccount:kube-system:'
                                 'desched" cannot list resource "pods" in API group "" at the '
                                 'cluster scope')
    inf = informer(client, "Pod")
    with pytest.raises(AccessDenied) as caught:
        await inf.wait_synced()
    message = str(caught.value)
    assert isinstance(caught.value, InputError)
    assert "\n" not in message
    assert "forbidden (403) to list pods" in message
    assert 'cannot list resource "pods"' in message


async def test_unreachable_server_fails_fast() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with ApiClient.for_server(f"http://127.0.0.1:{port}", trust_env=False) as client:
        inf = informer(client, "Node")
        with pytest.raises(Unreachable) as caught:
            await inf.wait_synced()
    message = str(caught.value)
    assert message.startswith(f"http://127.0.0.1:{port}: cannot connect to the API server to "
                              "list nodes")
    assert "\n" not in message


async def test_kinds_the_server_does_not_serve(api: FakeApiServer, client: ApiClient) -> None:
    optional = informer(client, "NodeMetric")
    await optional.wait_synced()
    assert optional.skipped and optional.store == {}
    required = informer(client, "Node")
    with pytest.raises(InputError, match="does not serve nodes"):
        await required.wait_synced()


async def test_metrics_kinds_are_polled(api: FakeApiServer, client: ApiClient) -> None:
    api.serve("NodeMetrics")
    api.add_now("NodeMetrics", {"metadata": {"name": "n1"}, "usage": {"cpu": "1"}})
    inf = informer(client, "NodeMetrics", poll_interval=0.02)
    try:
        await inf.wait_synced()
        assert list(inf.store) == ["n1"]
        api.add_now("NodeMetrics", {"metadata": {"name": "n2"}, "usage": {"cpu": "2"}})
        await eventually(lambda: "n2" in inf.store)
        assert api.requests("watch", "nodes") == []
    finally:
        await inf.stop()


async def test_plain_emulator_list_and_watch(emulator: Emulator,
                                             client: ApiClient) -> None:
    """kmock's own emulator: lists without kind or real resourceVersion, watches replaying
    every object as ADDED; objects changed through its HTTP API."""
    for name in ("a", "b"):
        body = {"apiVersion": "v1", "kind": "Pod", **pod(name)}
        response = await emulator.post("/api/v1/namespaces/default/pods", json=body)
        assert response.status == 200
    inf = informer(client, "Pod")
    try:
        await inf.wait_synced()
        assert sorted(inf.store) == ["default/a", "default/b"]
        await emulator.patch("/api/v1/namespaces/default/pods/a", json={"spec": {"nodeName": "n9"}})
        await eventually(lambda: node_of(inf, "default/a") == "n9")
        await emulator.delete("/api/v1/namespaces/default/pods/b")
        await eventually(lambda: "default/b" not in inf.store)
    finally:
        await inf.stop()


async def test_build_snapshot_is_a_consistent_cut(api: FakeApiServer, client: ApiClient,
                                                  unfreeze: None) -> None:
    api.serve("Namespace", "Node", "Pod")
    api.add_now("Node", node("n1"), node("n2"))
    api.add_now("Pod", pod("a", node="n1"), pod("b", node="n2"),
                pod("c", namespace="kube-system", node="n1",
                    metadata={"annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                                              "{...}", "descheduler.alpha.kubernetes.io/evict":
                                              "true"}}))
    informers = make_informers(client, ["Node", "Pod", "Namespace"], backoff=fast())
    try:
        frozen = gc.get_freeze_count()
        await start_informers(informers, timeout=5)
        assert gc.get_freeze_count() > frozen
        first = await build_snapshot(informers)
        assert sorted(first.nodes) == ["n1", "n2"]
        assert sorted(first.pods_by_node["n1"]) == ["default/a", "kube-system/c"]
        assert sorted(first.namespaces) == ["default", "kube-system"]  # from the pods
        # Annotations no decision reads are dropped as the cache fills.
        assert dict(first.pods["kube-system/c"].metadata.annotations) == {
            "descheduler.alpha.kubernetes.io/evict": "true"}

        pods = next(inf for inf in informers if inf.resource.kind == "Pod")
        await api.delete("Pod", "a", "default")
        await api.modify("Pod", pod("b", node="n1"))
        await eventually(lambda: node_of(pods, "default/b") == "n1")
        second = await build_snapshot(informers)
        assert sorted(second.pods_by_node["n1"]) == ["default/b", "kube-system/c"]
        assert "n2" not in second.pods_by_node or not second.pods_by_node["n2"]
        # The earlier snapshot is untouched: each cycle gets its own cut.
        assert sorted(first.pods) == ["default/a", "default/b", "kube-system/c"]
        second.remove_pod(second.pods["default/b"])
        assert "default/b" in pods.store
    finally:
        await stop_informers(informers)


async def test_start_informers_stops_all_on_failure(api: FakeApiServer,
                                                    client: ApiClient) -> None:
    api.serve("Pod")
    api.fail("list", "Node", 403, "nodes is forbidden")
    api.serve("Node")
    informers = make_informers(client, ["Node", "Pod"], backoff=fast())
    was_enabled = gc.isenabled()
    with pytest.raises(AccessDenied, match="list nodes"):
        await start_informers(informers, timeout=5)
    assert gc.isenabled() == was_enabled
    assert not running_informers()


async def test_initial_sync_timeout_names_the_kind(api: FakeApiServer, client: ApiClient) -> None:
    api.serve("Node", "Pod")
    api.fail("list", "Pod", 500, times=1000)
    informers = make_informers(client, ["Node", "Pod"], backoff=fast())
    # Long enough for the nodes' list to finish on a loaded machine: only pods are named.
    with pytest.raises(InputError) as caught:
        await start_informers(informers, timeout=5)
    assert str(caught.value) == (f"{client.server}: the initial list did not finish within 5s "
                                 "for: pods")
    assert not running_informers()


async def test_errors_after_the_first_sync_are_retried(api: FakeApiServer,
                                                       client: ApiClient) -> None:
    """Once running, a descheduler rides out outages: even a 403 (RBAC being re-applied) or an
    unknown error leads to a backed-off relist, never to a dead informer."""
    api.serve("Pod")
    api.add_now("Pod", pod("a"))
    inf = informer(client, "Pod")
    try:
        await inf.wait_synced()
        api.fail("watch", "Pod", 403, "pods is forbidden")
        api.fail("list", "Pod", 400, "bad request")
        api.fail("list", "Pod", 500)
        await api.end_watches()
        await api.add("Pod", pod("b"))
        await eventually(lambda: "default/b" in inf.store)
        assert running_informers() == ["informer pods"]
        assert inf.lists == 2
        assert len(api.requests("list", "pods")) == 4
    finally:
        await inf.stop()


async def test_a_relist_keeps_the_objects_it_already_holds(emulator: Emulator,
                                                         client: ApiClient) -> None:
    # A relist must not hold two copies of the kind: what did not change stays the same object
    # (with what it cached), what changed or is new is the listed copy.
    api = FakeApiServer(emulator)
    api.serve("Pod")
    api.add_now("Pod", pod("a", node="n1"), pod("b", node="n1"))
    inf = informer(client, "Pod")
    try:
        await inf.wait_synced()
        a, b = inf.store["default/a"], inf.store["default/b"]
        assert a.requests is not None and a.cached_requests is not None  # a cache is filled
        await api.change_unseen("Pod", pod("b", node="n2"), pod("c", node="n1"))
        await eventually(lambda: inf.lists == 2)
        assert inf.store["default/a"] is a
        assert inf.store["default/b"] is not b and node_of(inf, "default/b") == "n2"
        assert sorted(inf.store) == ["default/a", "default/b", "default/c"]
    finally:
        await inf.stop()

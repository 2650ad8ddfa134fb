"""The informers ask for protobuf for pods and nodes and decode whichever form the server answers
with: protobuf pages from a server that speaks it, JSON from one that does not (CRDs, kmock)."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx2
import pytest
from protobuf_fixtures import MINIMAL_POD, NODE, RICH_POD, comparable, envelope, list_body, message

from desched.errors import InputError
from desched.live.client import ApiClient, ApiError, ConnectionLost
from desched.live.informer import WATCH_LIST_GATE, Informer
from desched.model.resources import BY_KIND
from desched.util.backoff import Backoff

pytestmark = pytest.mark.asyncio

PROTOBUF = "application/vnd.kubernetes.protobuf"


@pytest.fixture(autouse=True)
def _watch_list_gate_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream tests below need client-go's WatchListClient gate on, as a user sets it
    (off by default: test_pages_unless_the_watch_list_gate_is_on)."""
    monkeypatch.setenv(WATCH_LIST_GATE, "true")


def named(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "name": name}}


PODS = [named(RICH_POD, f"web-{i}") for i in range(3)] + [MINIMAL_POD]


class Server:
    """Answers list requests from pages of JSON-shaped objects, in protobuf when asked for it
    (and `protobuf` is on), else JSON; records each request's Accept header."""

    def __init__(self, protobuf: bool = True, version: str = "31",
                 watch_list: bool = True, end: bool = True) -> None:
        self.protobuf = protobuf
        self.version = version  # the minor version /version reports
        self.watch_list = watch_list  # False: 422 to sendInitialEvents, as with the gate off
        self.end = end  # whether a watch-list stream ends its initial events with the bookmark
        self.accepts: dict[str, list[str]] = {}
        self.objects = {"/api/v1/pods": ("Pod", PODS), "/api/v1/nodes": ("Node", [NODE]),
                        "/api/v1/namespaces": ("Namespace", [{"metadata": {"name": "prod"}}])}
        self.status: httpx2.Response | None = None
        self.watch_lists = 0
        self.pages: dict[str, int] = {}

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        accept = request.headers.get("accept", "")
        self.accepts.setdefault(path, []).append(accept)
        if path == "/version":
            return httpx2.Response(200, json={"major": "1", "minor": self.version,
                                              "gitVersion": f"v1.{self.version}.0"})
        if self.status is not None:
            return self.status
        kind, objects = self.objects[path]
        if request.url.params.get("sendInitialEvents") == "true":
            return self.stream(kind, objects, accept)
        self.pages[path] = self.pages.get(path, 0) + 1
        limit = int(request.url.params.get("limit", "500"))
        start = int(request.url.params.get("continue") or 0)
        page, after = objects[start:start + limit], start + limit
        token = str(after) if after < len(objects) else ""
        if self.protobuf and accept.startswith(PROTOBUF):
            return httpx2.Response(200, content=list_body(kind, page, rv="77", token=token),
                                   headers={"Content-Type": PROTOBUF})
        body = {"kind": f"{kind}List", "apiVersion": "v1",
                "metadata": {"resourceVersion": "77", "continue": token}, "items": page}
        return httpx2.Response(200, json=body)


    def stream(self, kind: str, objects: list[dict[str, Any]], accept: str) -> httpx2.Response:
        self.watch_lists += 1
        if not self.watch_list:
            return httpx2.Response(422, json={
                "kind": "Status", "code": 422, "reason": "Invalid", "message":
                "sendInitialEvents is forbidden for watch unless the WatchList feature gate "
                "is enabled"})
        bookmark = {"metadata": {"resourceVersion": "88", "annotations": {
            "k8s.io/initial-events-end": "true"}}}
        events = [("ADDED", obj) for obj in objects]
        if self.end:
            events.append(("BOOKMARK", bookmark))
        if self.protobuf and accept.startswith(PROTOBUF) and kind != "Namespace":
            frames = b""
            for kind_of_event, obj in events:
                event = message("WatchEvent", {"type": kind_of_event})
                event.object.raw = envelope(kind, message(kind, obj).SerializeToString())
                data = event.SerializeToString()
                frames += len(data).to_bytes(4, "big") + data
            return httpx2.Response(200, content=frames,
                                   headers={"Content-Type": f"{PROTOBUF};stream=watch"})
        lines = b"".join(json.dumps({"type": t, "object": {"kind": kind, **o}}).encode() + b"\n"
                         for t, o in events)
        return httpx2.Response(200, content=lines, headers={"Content-Type": "application/json"})


def client_for(server: Server, **options: Any) -> ApiClient:
    return ApiClient.for_server("https://k8s.test", token="t",
                                transport=httpx2.MockTransport(server.handle), **options)


async def listed(server: Server, kind: str, **options: Any) -> dict[str, Any]:
    async with client_for(server, **options) as client:
        informer = Informer(client, BY_KIND[kind], page_size=2,
                            backoff=Backoff(initial=0.01, maximum=0.02))
        await informer.relist()
        assert informer.synced.is_set()
        return informer.store


@pytest.mark.parametrize("kind", ["Pod", "Node"])
async def test_protobuf_pages_fill_the_store_as_json_pages_do(kind: str) -> None:
    server = Server()
    from_protobuf = await listed(server, kind)
    path = BY_KIND[kind].path
    assert all(a.startswith(PROTOBUF) and "application/json" in a for a in server.accepts[path])
    assert len(server.accepts[path]) == (2 if kind == "Pod" else 1)  # paged by continue
    from_json = await listed(Server(protobuf=False), kind)
    assert list(from_protobuf) == list(from_json)
    assert [comparable(o) for o in from_protobuf.values()] == \
        [comparable(o) for o in from_json.values()]


async def test_other_kinds_and_a_json_only_client_ask_for_json() -> None:
    server = Server()
    await listed(server, "Namespace")
    await listed(server, "Pod", protobuf=False)
    assert not any(PROTOBUF in a for accepts in server.accepts.values() for a in accepts)


async def test_a_protobuf_error_status_is_reported_by_its_message() -> None:
    server = Server()
    status = message("Status", {"status": "Failure", "reason": "Expired", "code": 410,
                                "message": "continue token expired"})
    server.status = httpx2.Response(410, content=envelope("Status", status.SerializeToString()),
                                    headers={"Content-Type": PROTOBUF})
    async with client_for(server) as client:
        with pytest.raises(ApiError) as caught:
            await client.get("/api/v1/pods", what="list pods", protobuf=True)
    assert caught.value.code == 410 and caught.value.message == "continue token expired"
    assert caught.value.reason == "Expired"


async def test_an_undecodable_protobuf_page_is_one_clear_error() -> None:
    server = Server()
    server.status = httpx2.Response(200, content=b"k8s\x00\x12\x09truncated",
                                    headers={"Content-Type": PROTOBUF})
    with pytest.raises(InputError, match="cannot decode the list of pods"):
        await listed(server, "Pod")


def lists(server: Server, path: str) -> int:
    """How many list pages of `path` the server answered."""
    return server.pages.get(path, 0)


@pytest.mark.parametrize("kind", ["Pod", "Node", "Namespace"])
@pytest.mark.parametrize("protobuf", [True, False])
async def test_a_watch_list_stream_fills_the_store_as_pages_do(kind: str, protobuf: bool) -> None:
    """Kubernetes 1.34 and later: the initial state streamed, protobuf frames for pods and
    nodes, JSON lines otherwise; nothing listed page by page."""
    server = Server(version="36", protobuf=protobuf)
    async with client_for(server) as client:
        informer = Informer(client, BY_KIND[kind])
        await informer.relist()
    assert server.watch_lists == 1 and lists(server, BY_KIND[kind].path) == 0
    assert informer.resource_version == "88" and informer.synced.is_set()
    paged = await listed(Server(protobuf=False), kind)
    assert list(informer.store) == list(paged)
    assert [comparable(o) for o in informer.store.values()] == \
        [comparable(o) for o in paged.values()]


@pytest.mark.parametrize("version", ["33", "36"])
async def test_json_pods_share_what_replicas_repeat(version: str) -> None:
    """Pods listed as JSON (pages, or a watch-list stream from 1.34 on) are decoded in two
    steps: replicas of one owner hold one copy of each repeated part, and only the annotations
    a decision reads."""
    store = await listed(Server(protobuf=False, version=version), "Pod")
    web = sorted((pod for pod in store.values() if pod.name.startswith("web-")),
                 key=lambda pod: pod.name)
    assert len(web) == 3
    for other in web[1:]:
        assert other.spec.containers is web[0].spec.containers
        assert other.metadata.owner_references is web[0].metadata.owner_references
        assert other.metadata.labels is web[0].metadata.labels
    assert set(web[0].metadata.annotations) == {"descheduler.alpha.kubernetes.io/evict",
                                                "kubernetes.io/config.source"}


@pytest.mark.parametrize("value", [None, "false", "0", "maybe"])
async def test_pages_unless_the_watch_list_gate_is_on(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        value: str | None) -> None:
    """A server that offers the stream (1.36) is still listed page by page unless
    KUBE_FEATURE_WatchListClient is true, as client-go reads its gate; a value that is no
    boolean is said once in the log."""
    if value is None:
        monkeypatch.delenv(WATCH_LIST_GATE)
    else:
        monkeypatch.setenv(WATCH_LIST_GATE, value)
    server = Server(version="36")
    store = await listed(server, "Pod")
    assert server.watch_lists == 0 and lists(server, "/api/v1/pods") == 2 and store
    warned = [r.getMessage() for r in caplog.records if WATCH_LIST_GATE in r.getMessage()]
    assert len(warned) == (1 if value == "maybe" else 0)
    monkeypatch.setenv(WATCH_LIST_GATE, "True")
    await listed(server, "Pod")
    assert server.watch_lists == 1


async def test_older_servers_are_listed_page_by_page() -> None:
    server = Server(version="33")
    await listed(server, "Pod")
    assert server.watch_lists == 0 and lists(server, "/api/v1/pods") == 2


async def test_a_refused_watch_list_falls_back_to_pages_once_and_quietly(
        caplog: pytest.LogCaptureFixture) -> None:
    server = Server(version="36", watch_list=False)
    caplog.set_level(logging.INFO, logger="desched")
    async with client_for(server) as client:
        for kind in ("Pod", "Node"):
            informer = Informer(client, BY_KIND[kind], page_size=2)
            await informer.relist()
            assert informer.synced.is_set() and informer.store
    assert server.watch_lists == 1  # the second kind did not ask again
    assert lists(server, "/api/v1/pods") == 2 and lists(server, "/api/v1/nodes") == 1
    assert not caplog.records


async def test_a_stream_that_ends_before_its_initial_events_is_a_lost_connection() -> None:
    server = Server(version="36", end=False)
    async with client_for(server) as client:
        informer = Informer(client, BY_KIND["Pod"])
        with pytest.raises(ConnectionLost, match="ended before its initial events"):
            await informer.relist()
    assert not informer.synced.is_set() and not informer.store

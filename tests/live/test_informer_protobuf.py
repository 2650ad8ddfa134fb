"""The informers ask for protobuf for pods and nodes and decode whichever form the server answers
with: protobuf pages from a server that speaks it, JSON from one that does not (CRDs, kmock)."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from protobuf_fixtures import MINIMAL_POD, NODE, RICH_POD, comparable, envelope, list_body, message

from desched.errors import InputError
from desched.live.client import ApiClient, ApiError
from desched.live.informer import Informer
from desched.model.resources import BY_KIND
from desched.util.backoff import Backoff

pytestmark = pytest.mark.asyncio

PROTOBUF = "application/vnd.kubernetes.protobuf"


def named(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "name": name}}


PODS = [named(RICH_POD, f"web-{i}") for i in range(3)] + [MINIMAL_POD]


class Server:
    """Answers list requests from pages of JSON-shaped objects, in protobuf when asked for it
    (and `protobuf` is on), else JSON; records each request's Accept header."""

    def __init__(self, protobuf: bool = True) -> None:
        self.protobuf = protobuf
        self.accepts: dict[str, list[str]] = {}
        self.objects = {"/api/v1/pods": ("Pod", PODS), "/api/v1/nodes": ("Node", [NODE])}
        self.status: httpx2.Response | None = None

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        accept = request.headers.get("accept", "")
        self.accepts.setdefault(path, []).append(accept)
        if self.status is not None:
            return self.status
        kind, objects = self.objects.get(path, ("Namespace", []))
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


def client_for(server: Server, **options: Any) -> ApiClient:
    return ApiClient.for_server("https://k8s.test", token="t",
                                transport=httpx2.MockTransport(server.handle), **options)


async def listed(server: Server, kind: str, **options: Any) -> dict[str, Any]:
    async with client_for(server, **options) as client:
        informer = Informer(client, BY_KIND[kind], page_size=2,
                            backoff=Backoff(initial=0.01, maximum=0.02))
        await informer._list()
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

"""API-server behaviour that kmock's KubernetesEmulator lacks, added as kmock reactions:
resourceVersions, limit/continue paging from a frozen list, watch from a resourceVersion with
bookmarks, 410 Gone for compacted history (as an HTTP status or an ERROR event), and injected
failures (any status for the next N list/watch requests, dropped or ended watch streams).

Objects are changed through this helper (add/modify/delete), which versions them and feeds the
open watches. Requests for resources it does not serve fall through to the emulator (404 for
unknown resources), as on a real server without the CRD.

kmock 0.8 cannot parse the path /api/v1/namespaces (its parser takes "namespaces" for the
namespace prefix and fails with a 500), so `Emulator` routes that path to a plain aiohttp
handler in front of kmock."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp.web
import attrs
import kmock

from desched.model.resources import BY_KIND, Resource

RawRoute = Callable[[aiohttp.web.BaseRequest], Awaitable[aiohttp.web.StreamResponse]]
Answer = tuple[int, Any]  # (status, a JSON body or an async iterator of watch events)
Abort = Callable[[], None]


@attrs.define(kw_only=True)
class Emulator(kmock.KubernetesEmulator):
    """kmock's emulator, with raw aiohttp routes for paths its parser cannot handle."""

    raw_routes: dict[str, RawRoute] = attrs.field(factory=dict)

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        route = self.raw_routes.get(raw_request.path)
        if route is not None:
            return await route(raw_request)
        return await super().__call__(raw_request)


def _kmock_answer(result: Answer) -> Any:
    # Every answer sets its status: kmock keeps the last status on the reaction otherwise, so
    # one 410 would turn every later answer of the same reaction into a 410.
    headers = result[2] if len(result) > 2 else None  # type: ignore[misc]
    return kmock.Response(status=result[0], payload=result[1], headers=headers)


async def _aiohttp_answer(raw: aiohttp.web.BaseRequest,
                          result: Answer) -> aiohttp.web.StreamResponse:
    code, payload = result[0], result[1]
    if isinstance(payload, dict):
        return aiohttp.web.json_response(payload, status=code)
    response = aiohttp.web.StreamResponse(status=code)
    await response.prepare(raw)
    try:
        async for event in payload:
            if event != b"":
                await response.write(json.dumps(event).encode() + b"\n")
        await response.write_eof()
    except ConnectionError:
        pass  # dropped on purpose (end_watches(abort=True))
    return response


def status(code: int, message: str, reason: str = "") -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "code": code, "reason": reason, "message": message}


@dataclass
class Fault:
    verb: str  # "list" | "watch"
    resource: str  # its label: plurals repeat across groups (nodes, nodes.metrics.k8s.io)
    code: int
    message: str
    times: int
    after: int = 0  # let this many matching requests through first
    retry_after: int | None = None  # seconds, sent as a Retry-After header


@dataclass
class Logged:
    verb: str
    plural: str
    params: dict[str, str]


@dataclass
class _Kind:
    resource: Resource
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    floor: int = 0  # a watch from below this resourceVersion gets 410 Gone
    trimmed: int = 0  # history entries dropped from the front (trim): positions stay absolute


class FakeApiServer:
    def __init__(self, server: Emulator, *, gone_as_event: bool = False,
                 gone_after: float = 0.0, list_kind: bool = True) -> None:
        self.server = server
        self.url = str(server.url).rstrip("/")
        self.gone_as_event = gone_as_event
        # With gone_as_event: the stream is accepted (headers sent) this long before its 410
        # ERROR event, as kube-apiserver without a watch cache does while etcd answers.
        self.gone_after = gone_after
        self.list_kind = list_kind  # False: lists without kind/apiVersion, as kmock sends them
        self.rv = 1000
        self.kinds: dict[str, _Kind] = {}
        self.faults: list[Fault] = []
        self.log: list[Logged] = []
        self._frozen: dict[str, list[dict[str, Any]]] = {}
        self._frozen_rv: dict[str, int] = {}
        self._tokens = itertools.count(1)
        self._changed = asyncio.Condition()
        self._epoch = 0  # bumped to end every open watch
        self._abort = False

    # -- serving ---------------------------------------------------------------------------------
    def serve(self, *kinds: str) -> None:
        for kind in kinds:
            resource = BY_KIND[kind]
            self.kinds[kind] = _Kind(resource)
            if isinstance(self.server, Emulator) and resource.path == "/api/v1/namespaces":
                self.server.raw_routes[resource.path] = \
                    lambda raw, k=kind: self._raw_route(k, raw)
                continue
            target = kmock.resource(resource.group, resource.version, resource.plural)
            self.server[kmock.action.LIST, target] << (
                lambda request, k=kind: _kmock_answer(self._list(k, dict(request.params))))
            self.server[kmock.action.WATCH, target] << (
                lambda request, k=kind: _kmock_answer(
                    self._watch(k, dict(request.params), _aborter(request._raw_request))))

    def forget_requests(self) -> None:
        """Drop the requests kmock keeps for assertions, on the server and on every reaction
        that answered one (a long soak would otherwise count them as desched's memory)."""
        self.server._requests.clear()
        for reaction in self.server._payloads:
            reaction._requests.clear()

    async def _raw_route(self, kind: str, raw: aiohttp.web.BaseRequest) -> Any:
        params = dict(raw.query)
        if params.get("watch") == "true":
            return await _aiohttp_answer(raw, self._watch(kind, params, _aborter(raw)))
        return await _aiohttp_answer(raw, self._list(kind, params))

    def requests(self, verb: str, plural: str) -> list[dict[str, str]]:
        return [e.params for e in self.log if e.verb == verb and e.plural == plural]

    def fail(self, verb: str, kind: str, code: int, message: str = "injected", times: int = 1,
             after: int = 0, retry_after: int | None = None) -> None:
        """Answer the next `times` list/watch requests of `kind` (after `after` of them) with
        an error status (and a Retry-After header if given)."""
        self.faults.append(Fault(verb, BY_KIND[kind].label, code, message, times, after,
                                 retry_after))

    def _fault(self, verb: str, resource: str) -> Any:
        for fault in self.faults:
            if fault.verb == verb and fault.resource == resource and fault.times > 0:
                if fault.after > 0:
                    fault.after -= 1
                    continue
                fault.times -= 1
                if fault.retry_after is not None:
                    return (fault.code, status(fault.code, fault.message),
                            {"Retry-After": str(fault.retry_after)})
                return fault.code, status(fault.code, fault.message)
        return None

    def _list(self, kind: str, params: dict[str, str]) -> Answer:
        state = self.kinds[kind]
        resource = state.resource
        self.log.append(Logged("list", resource.plural, params))
        fault = self._fault("list", resource.label)
        if fault is not None:
            return fault
        if params.get("resourceVersionMatch") == "Exact" and \
                int(params.get("resourceVersion") or 0) < state.floor:
            return 410, status(410, "The resourceVersion for the provided list is too old.",
                               "Expired")
        limit = int(params.get("limit") or 0)
        token = params.get("continue")
        if token:
            frozen_id, _, offset_text = token.partition(":")
            if frozen_id not in self._frozen:
                return 410, status(410, "The provided continue parameter is too old", "Expired")
            items, rv, offset = self._frozen[frozen_id], self._frozen_rv[frozen_id], \
                int(offset_text)
        else:
            frozen_id = str(next(self._tokens))
            items = [self._item(o) for _, o in sorted(state.objects.items())]
            rv, offset = self.rv, 0
            self._frozen[frozen_id], self._frozen_rv[frozen_id] = items, rv
        page = items[offset: offset + limit] if limit else items[offset:]
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and offset + len(page) < len(items):
            metadata["continue"] = f"{frozen_id}:{offset + len(page)}"
            for abandoned in list(self._frozen)[:-8]:  # lists given up half-way: a few kept
                del self._frozen[abandoned], self._frozen_rv[abandoned]
        else:  # the last page: no continue token points at this list any more
            self._frozen.pop(frozen_id, None)
            self._frozen_rv.pop(frozen_id, None)
        body: dict[str, Any] = {"metadata": metadata, "items": page}
        if self.list_kind:
            body = {"kind": resource.list_kind, "apiVersion": resource.api_version, **body}
        return 200, body

    @staticmethod
    def _item(obj: dict[str, Any]) -> dict[str, Any]:
        # List items carry no kind/apiVersion on a real server.
        return {k: v for k, v in copy.deepcopy(obj).items() if k not in ("kind", "apiVersion")}

    def _watch(self, kind: str, params: dict[str, str], abort: Abort) -> Answer:
        state = self.kinds[kind]
        self.log.append(Logged("watch", state.resource.plural, params))
        fault = self._fault("watch", state.resource.label)
        if fault is not None:
            return fault
        since = int(params.get("resourceVersion") or 0)
        if since < state.floor:
            gone = status(410, f"too old resource version: {since} ({state.floor})", "Expired")
            if self.gone_as_event:
                return 200, self._one_event({"type": "ERROR", "object": gone}, self.gone_after)
            return 410, gone
        bookmarks = params.get("allowWatchBookmarks") == "true"
        return 200, self._stream(state, since, bookmarks, abort)

    async def _one_event(self, event: dict[str, Any], after: float = 0.0) -> AsyncIterator[Any]:
        if after:
            yield b""  # the headers first
            await asyncio.sleep(after)
        yield event

    async def _stream(self, state: _Kind, since: int, bookmarks: bool,
                      abort: Abort) -> AsyncIterator[Any]:
        yield b""  # send the headers now, as the API server does
        epoch = self._epoch
        pos = state.trimmed + next(
            (i for i, (rv, _, _) in enumerate(state.history) if rv > since), len(state.history))
        while True:
            async with self._changed:
                await self._changed.wait_for(
                    lambda seen=pos: seen < state.trimmed + len(state.history)
                    or epoch != self._epoch)
            if epoch != self._epoch:
                if self._abort:
                    abort()
                return
            start = pos - state.trimmed
            if start < 0:  # this watcher fell behind what was trimmed: as etcd's compaction
                yield {"type": "ERROR", "object": status(
                    410, f"too old resource version: {since} ({state.floor})", "Expired")}
                return
            for _, kind, obj in state.history[start:]:
                if kind != "BOOKMARK" or bookmarks:
                    yield {"type": kind, "object": obj}
            pos = state.trimmed + len(state.history)

    # -- changing state --------------------------------------------------------------------------
    def _record(self, kind: str, event: str, obj: dict[str, Any]) -> dict[str, Any]:
        state = self.kinds[kind]
        self.rv += 1
        obj = copy.deepcopy(obj)
        resource = state.resource
        obj.setdefault("kind", kind)
        obj.setdefault("apiVersion", resource.api_version)
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        if event == "DELETED":
            state.objects.pop(key, None)
        elif event != "BOOKMARK":
            state.objects[key] = obj
        state.history.append((self.rv, event, obj))
        return obj

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def add(self, kind: str, *objs: dict[str, Any]) -> None:
        for obj in objs:
            self._record(kind, "ADDED", obj)
        await self._notify()

    async def modify(self, kind: str, obj: dict[str, Any]) -> None:
        self._record(kind, "MODIFIED", obj)
        await self._notify()

    async def delete(self, kind: str, name: str, namespace: str = "") -> None:
        obj = self.kinds[kind].objects[f"{namespace}/{name}"]
        self._record(kind, "DELETED", obj)
        await self._notify()

    async def bookmark(self, kind: str) -> int:
        resource = self.kinds[kind].resource
        self._record(kind, "BOOKMARK", {"kind": kind, "apiVersion": resource.api_version,
                                        "metadata": {"name": ""}})
        await self._notify()
        return self.rv

    def trim(self, kind: str, keep: int) -> None:
        """Keep only the newest `keep` events of the kind's history (a long soak would otherwise
        grow without end); a watch from before them gets 410 Gone, as after etcd's compaction."""
        state = self.kinds[kind]
        drop = len(state.history) - keep
        if drop <= 0:
            return
        state.floor = max(state.floor, state.history[drop - 1][0])
        del state.history[:drop]
        state.trimmed += drop

    def compact(self, kind: str) -> None:
        """Forget the history up to now: older resourceVersions and continue tokens are Gone."""
        self.kinds[kind].floor = self.rv
        self._frozen.clear()
        self._frozen_rv.clear()

    async def end_watches(self, abort: bool = False) -> None:
        """End every open watch: cleanly (as timeoutSeconds does) or by dropping the connection."""
        self._abort = abort
        self._epoch += 1
        await self._notify()

    async def change_unseen(self, kind: str, *objs: dict[str, Any], abort: bool = False) -> None:
        """End the open watches (`abort`: by dropping their connections), add objects no watcher
        sees and compact the history, all before any watcher can reconnect: the watchers'
        resourceVersion is then Gone."""
        self._abort = abort
        self._epoch += 1
        for obj in objs:
            self._record(kind, "ADDED", obj)
        self.compact(kind)
        await self._notify()

    def add_now(self, kind: str, *objs: dict[str, Any]) -> None:
        """add() for setup before any watch is open."""
        for obj in objs:
            self._record(kind, "ADDED", obj)


def _aborter(raw: aiohttp.web.BaseRequest | None) -> Abort:
    """Drop the request's connection, as a network failure would."""
    def abort() -> None:
        assert raw is not None and raw.transport is not None
        raw.transport.abort()
    return abort


def pod(name: str, namespace: str = "default", node: str = "n1", **extra: Any) -> dict[str, Any]:
    labels = extra.pop("labels", {"app": "web"})
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "uid": f"uid-{namespace}-{name}", **extra.pop("metadata", {})},
            "spec": {"nodeName": node, "containers": [
                {"name": "c", "image": "nginx",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
            "status": {"phase": "Running"}, **extra}


def node(name: str, cpu: str = "4", memory: str = "8Gi") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}

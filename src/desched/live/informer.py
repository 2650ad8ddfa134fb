"""Informers: one in-memory cache per kind, kept current by list + watch, and the ClusterSnapshot
built from them for each descheduling cycle.

Each informer lists its kind page by page (limit/continue), then watches from the list's
resourceVersion with bookmarks, as client-go's reflector does:
- a 410 Gone (an HTTP status, or an ERROR event with code 410) means the resourceVersion left the
  server's history window: list again;
- a stream that ends (the server's timeoutSeconds) is re-watched from the last resourceVersion
  seen, which bookmarks keep recent even for kinds that rarely change;
- a watch that broke is resumed only once a list at exactly its last resourceVersion says the
  version is still there (410 otherwise: list again): a server that serves watches from etcd
  (no watch cache) accepts the watch first and sends its 410 after, in an ERROR event;
- dropped connections, 429 and 5xx are retried with bounded exponential backoff.

List pages and watch events are decoded from bytes straight into desched's lean structs; pods
and nodes are listed as protobuf where the server answers in it (desched.model.proto_decode),
everything else and every watch as JSON. Before
the first sync, errors the user must fix (unreachable server, 401/403, a required kind the server
does not serve) are raised as InputError; afterwards everything is retried, so a long-running
descheduler rides out API server restarts.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import msgspec

from desched.errors import InputError
from desched.live.assumed import EvictedPods
from desched.live.client import (
    AccessDenied,
    ApiClient,
    ApiError,
    ConnectionLost,
    Unreachable,
    decode_status,
)
from desched.model import proto_decode
from desched.model.kinds import JSON_DECODERS, TYPES
from desched.model.meta import shared_hook, trim_annotations
from desched.model.pod_decoder import PodDecoder
from desched.model.proto_decode import ProtobufError
from desched.model.resources import Resource, resources_for
from desched.model.sharing import detach
from desched.snapshot.cluster import ClusterSnapshot
from desched.util.backoff import Backoff

log = logging.getLogger("desched.live")

Handler = Callable[[str, Any], None]  # (event type, object); "SYNC" with None after a (re)list


# -- decoding ------------------------------------------------------------------------------------

class _ListMeta(msgspec.Struct, rename="camel"):
    resource_version: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class _WatchEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _ObjectMeta(msgspec.Struct, rename="camel"):
    resource_version: str = ""


class _ObjectHead(msgspec.Struct):
    metadata: _ObjectMeta = msgspec.field(default_factory=_ObjectMeta)


class _BookmarkMeta(msgspec.Struct, rename="camel"):
    resource_version: str = ""
    annotations: dict[str, str] = {}


class _Bookmark(msgspec.Struct):
    metadata: _BookmarkMeta = msgspec.field(default_factory=_BookmarkMeta)


def _page_decoder(kind: str, item: type) -> msgspec.json.Decoder[Any]:
    # Like desched.model.kinds.PAGE_DECODERS, plus the list metadata paging needs.
    page = msgspec.defstruct(
        f"{kind}Page",
        [("metadata", _ListMeta, msgspec.field(default_factory=_ListMeta)),
         ("items", tuple[item, ...] | None, ())],  # type: ignore[valid-type]
        module=__name__,
    )
    return msgspec.json.Decoder(page, dec_hook=shared_hook)


PAGE_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    kind: _page_decoder(kind, t) for kind, t in TYPES.items()
}
_event_decoder = msgspec.json.Decoder(_WatchEvent)
_head_decoder = msgspec.json.Decoder(_ObjectHead)
_bookmark_decoder = msgspec.json.Decoder(_Bookmark)


class Gone(Exception):
    """410: the resourceVersion (or continue token) is too old; list again."""


class _NotServed(Exception):
    """404 on an optional kind's list."""


class _WatchListRefused(Exception):
    """The server refused a watch-list request (400/422: sendInitialEvents not enabled)."""


WATCH_LIST_GATE = "KUBE_FEATURE_WatchListClient"
_TRUE, _FALSE = ("1", "t", "true"), ("0", "f", "false")


def watch_list_gate() -> bool:
    """Whether the initial state is streamed by a watch (sendInitialEvents) where the server
    offers it: client-go's WatchListClient gate, read as client-go reads it from the
    environment (`KUBE_FEATURE_WatchListClient=true`). Off unless set: at 150,000 pods on
    kube-apiserver 1.36 the stream cost desched twice the CPU of protobuf pages and the server
    more too, and the sync took longer; it spares the server only the pages' transient memory
    (bench/README.md, "A real API server")."""
    value = os.environ.get(WATCH_LIST_GATE, "").strip().lower()
    if value and value not in _TRUE + _FALSE:
        log.warning("%s=%s is not a boolean; the initial state is listed page by page",
                    WATCH_LIST_GATE, os.environ[WATCH_LIST_GATE])
    return value in _TRUE


def _same_content(kept: Any, listed: Any) -> bool:
    """Whether a listed object equals the one the store holds, leaving out the values a Pod
    caches from its own fields (requests, QoS, signatures...)."""
    if type(kept) is not type(listed):
        return False
    fields = getattr(kept, "__struct_fields__", None)
    if fields is None:
        return bool(kept == listed)
    return all(getattr(kept, name) == getattr(listed, name)
               for name in fields if not name.startswith("cached_"))


def _key(obj: Any) -> str:
    meta = obj.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


# -- the informer --------------------------------------------------------------------------------

class Informer:
    """The cache of one kind: `store` maps "namespace/name" (or "name") to the lean object."""

    def __init__(self, client: ApiClient, resource: Resource, *, page_size: int = 500,
                 backoff: Backoff | None = None, watch_timeout: float = 300.0,
                 poll_interval: float = 60.0, watch_list: bool | None = None) -> None:
        self.client = client
        self.resource = resource
        self.page_size = page_size
        self.backoff = backoff or Backoff()
        self.watch_timeout = watch_timeout
        self.poll_interval = poll_interval
        # The initial state by a watch stream where offered; None: as the environment says.
        self.watch_list = watch_list_gate() if watch_list is None else watch_list
        self.store: dict[str, Any] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.skipped = False  # an optional kind the server does not serve
        self.generation = 0  # bumped on every change, so callers can tell whether a cycle is due
        self.lists = 0  # how many times the kind was (re)listed
        # Since when (monotonic) the cache has not been kept current: its watch broke, or it
        # is relisting. None while watching (or freshly listed). A cycle must not act on it.
        self.stale_since: float | None = None
        self.handlers: list[Handler] = []
        self._decoder = JSON_DECODERS[resource.kind]
        self._page_decoder = PAGE_DECODERS[resource.kind]
        # Pods listed as JSON are decoded in two steps, their repeated parts once per owner
        # (model/pod_decoder.py), by a decoder that lives for one list.
        self._two_step = resource.kind == "Pod"
        # Pods and nodes (the bulk of a cluster) are listed as protobuf where the server speaks
        # it: a fifth of the API server's JSON encoding time, a third of the bytes. A stand-in
        # client without the attribute (benchmarks, tests) gets JSON.
        self._protobuf = resource.kind in proto_decode.OBJECTS and getattr(
            client, "protobuf", False)
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<Informer {self.resource.label}: {len(self.store)} objects>"

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> asyncio.Task[None]:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"informer {self.resource.label}")
        return self._task

    async def stop(self) -> None:
        """Cancel the loop and return once it has ended, whatever it ended with: an error that
        stopped it was raised to `wait_synced`'s caller, and re-raising it here would leave
        the other informers `stop_informers` stops still running."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
            if not task.cancelled():
                task.exception()  # seen: asyncio does not log it as never retrieved

    async def wait_synced(self) -> None:
        """Return once the first list is in the store; raise what stopped the informer first."""
        task = self.start()
        if self.synced.is_set():
            return
        waiter = asyncio.create_task(self.synced.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not self.synced.is_set():
            if not task.cancelled():
                task.result()  # raises the informer's error
            raise RuntimeError(f"informer for {self.resource.label} stopped before syncing")

    # -- the loop --------------------------------------------------------------------------------
    async def run(self) -> None:
        resource = self.resource
        relist = True
        while True:
            try:
                if relist:
                    await self.relist()
                    relist = False
                    if not resource.watchable:
                        await asyncio.sleep(self.poll_interval)
                        relist = True
                        continue
                if self.stale_since is not None:
                    # The previous stream broke: is its last version still there?
                    await self._check_version(self.resource_version)
                # From the last version seen, also when the previous stream broke mid-way.
                await self._watch(self.resource_version)
            except Gone:
                self._went_stale()
                log.info("%s: resourceVersion %s is too old, listing again", resource.label,
                         self.resource_version)
                relist = True
            except _NotServed:
                log.warning("%s is not served by the API server; skipping it", resource.label)
                self.skipped = True
                self.synced.set()
                return
            except (ApiError, ConnectionLost, InputError) as err:
                if not self.synced.is_set() and not resource.watchable and resource.optional:
                    # A metrics API that is down at start (metrics-server, its APIService)
                    # must not hold every plugin back: the kind starts empty, the plugins
                    # that read it say so, and it is polled again.
                    self.synced.set()
                elif not self.synced.is_set() and not _retry_before_sync(err):
                    raise
                self._went_stale()
                if not isinstance(err, ConnectionLost | Unreachable) and not (
                        isinstance(err, ApiError) and err.transient):
                    relist = True  # an unexpected answer: start over from a fresh list
                delay = self.backoff.next()
                if isinstance(err, ApiError) and err.retry_after:
                    delay = max(delay, min(err.retry_after, self.backoff.maximum))
                log.warning("%s: %s; retrying in %.1fs", resource.label, err, delay)
                await asyncio.sleep(delay)

    def _went_stale(self) -> None:
        if self.stale_since is None:
            self.stale_since = time.monotonic()

    def stale_for(self, now: float) -> float:
        """Seconds the cache has not been kept current (0 while watching)."""
        return 0.0 if self.stale_since is None else now - self.stale_since

    async def relist(self) -> None:
        """Fill a fresh store with every object of the kind, swapped in whole, so a snapshot
        never sees a half-listed kind; the list's resourceVersion is where watching starts.

        With watch_list (watch_list_gate) and where the server offers it
        (ApiClient.offers_watch_list), the initial state comes as a watch stream
        (sendInitialEvents) that ends at a bookmark, which spares the server building list
        pages; otherwise, or if the server refuses it, page by page.

        An object the old store holds unchanged is kept rather than its new copy: a relist
        (after a 410, every few minutes on a busy cluster) then never holds two copies of the
        kind at once, which left the process's resident memory at that high-water mark."""
        offers = getattr(self.client, "offers_watch_list", None)  # stand-in clients lack it
        if self.watch_list and self.resource.watchable and offers is not None and await offers():
            try:
                await self._stream_list()
                return
            except _WatchListRefused as err:
                # Refused by a server that says it offers it: list pages, and stop asking.
                log.debug("%s: no watch-list stream (%s); listing pages", self.resource.label, err)
                self.client.watch_list = False
        await self._paged_list()

    def _list_error(self, err: ApiError) -> Exception:
        """What a 404 on listing means: an optional kind not served, or a user error."""
        resource = self.resource
        if err.code == 404 and not self.synced.is_set():
            if resource.optional:
                return _NotServed()
            return InputError(self.client.server, f"the API server does not serve "
                                                  f"{resource.label} (404): {err.message}")
        return err

    def _kept(self, old: dict[str, Any], obj: Any, fresh: list[Any]) -> tuple[str, Any]:
        """(key, object to store): the old store's copy when unchanged, else `obj`, added to
        `fresh` (still to detach from the buffer it was decoded from)."""
        if obj.metadata.annotations:
            trim_annotations(obj.metadata)
        key = _key(obj)
        previous = old.get(key)
        if previous is not None and _same_content(previous, obj):
            return key, previous
        fresh.append(obj)
        return key, obj

    def _listed(self, store: dict[str, Any], rv: str) -> None:
        self.store = store
        self.resource_version = rv
        self.stale_since = None
        self.generation += 1
        self.lists += 1
        self.backoff.reset()
        self.synced.set()
        for handler in self.handlers:
            handler("SYNC", None)

    async def _paged_list(self) -> None:
        resource = self.resource
        old = self.store
        store: dict[str, Any] = {}
        params = {"limit": str(self.page_size)}
        rv = ""
        pods = PodDecoder() if self._two_step else None
        while True:
            what = f"list {resource.label}"
            try:
                if self._protobuf:
                    body = await self.client.get(resource.path, params, what=what, protobuf=True)
                else:
                    body = await self.client.get(resource.path, params, what=what)
            except ApiError as err:
                if err.code == 410 and "continue" in params:
                    raise Gone from None  # the continue token expired: start over
                raise self._list_error(err) from None
            try:
                items, page_rv, token, detached = self._decode_page(body, pods)
            except (msgspec.DecodeError, ProtobufError) as err:
                raise InputError(self.client.server,
                                 f"cannot decode the list of {resource.label}: {err}") from None
            fresh: list[Any] = []
            for obj in items:
                key, kept = self._kept(old, obj, fresh)
                store[key] = kept
            if not detached:
                detach(fresh)  # the page's body must not stay alive with its pods
            rv = page_rv or rv
            if not token:
                break
            params["continue"] = token
        self._listed(store, rv)

    async def _stream_list(self) -> None:
        """The initial state as a watch-list stream: ADDED events, then the bookmark annotated
        k8s.io/initial-events-end, whose resourceVersion is where watching goes on."""
        resource = self.resource
        old = self.store
        store: dict[str, Any] = {}
        fresh: list[Any] = []
        what = f"watch-list {resource.label}"
        params = {"watch": "true", "sendInitialEvents": "true",
                  "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(max(1, int(self.watch_timeout)))}
        options = {"protobuf": True} if self._protobuf else {}
        pods = PodDecoder() if self._two_step and not self._protobuf else None
        try:
            async with self.client.stream(resource.path, params, what=what,
                                          read_timeout=self.watch_timeout * 2 + 30,
                                          **options) as events:
                async for frame in events:
                    try:
                        kind, obj, rv, end = self._decode_event(frame, pods)
                    except (msgspec.DecodeError, ProtobufError) as err:
                        raise InputError(self.client.server,
                                         f"cannot decode the {what} stream: {err}") from None
                    if kind == "ERROR":
                        code, reason, message = obj
                        raise ApiError(code, reason, message, what)
                    if end:
                        if pods is None:
                            detach(fresh)
                        self._listed(store, rv)
                        return
                    if obj is None:
                        continue
                    if kind == "DELETED":
                        store.pop(_key(obj), None)
                        continue
                    key, kept = self._kept(old, obj, fresh)
                    store[key] = kept
                    if len(fresh) >= self.page_size:
                        if pods is None:
                            detach(fresh)
                        fresh = []
        except ApiError as err:
            if err.code in (400, 422):  # the server does not take sendInitialEvents
                raise _WatchListRefused(err.message) from None
            raise self._list_error(err) from None
        raise ConnectionLost(f"{what}: the stream ended before its initial events")

    def _decode_event(self, frame: bytes,
                      pods: PodDecoder | None = None) -> tuple[str, Any, str, bool]:
        """(type, lean object or None, resourceVersion, ends the initial events) of a watch
        event, a JSON line or a protobuf frame (a WatchEvent message starts with field 1,
        never with "{"); JSON pods through `pods` when given. An ERROR's object is its (code,
        reason, message)."""
        if frame[:1] != b"{":
            return proto_decode.decode_event(frame, self.resource.kind)
        event = _event_decoder.decode(frame)
        if event.type == "ERROR":
            status = decode_status(event.object)
            found = (status.code or 500, status.reason, status.message) if status else (
                500, "", "undecodable ERROR event")
            return "ERROR", found, "", False
        if event.type == "BOOKMARK":
            meta = _bookmark_decoder.decode(event.object).metadata
            end = meta.annotations.get(proto_decode.INITIAL_EVENTS_END) == "true"
            return "BOOKMARK", None, meta.resource_version, end
        decoder = self._decoder if pods is None else pods
        return event.type, decoder.decode(event.object), "", False

    def _decode_page(self, body: bytes,
                     pods: PodDecoder | None) -> tuple[Sequence[Any], str, str, bool]:
        """(objects, resourceVersion, continue token, whether the objects are detached from
        `body` already) of a list page, JSON or protobuf; JSON pods through `pods`."""
        if body.startswith(proto_decode.MAGIC):
            return (*proto_decode.decode_list(body, self.resource.kind), False)
        page = self._page_decoder.decode(body) if pods is None else pods.decode_page(body)
        return (page.items or (), page.metadata.resource_version, page.metadata.continue_,
                pods is not None)

    async def _check_version(self, rv: str) -> None:
        """Raise Gone if the server no longer has `rv` (compacted). Asked before a watch resumes
        after a broken stream, as a list of one object at exactly that version: kube-apiserver
        without a watch cache serves a watch from etcd and accepts it before it says 410, in
        an ERROR event, so the cache would count as current meanwhile (a cycle could start on
        a cache that missed what changed while the stream was down)."""
        if not rv:
            return
        params = {"limit": "1", "resourceVersion": rv, "resourceVersionMatch": "Exact"}
        try:
            await self.client.get(self.resource.path, params,
                                  what=f"check resourceVersion {rv} of {self.resource.label}")
        except ApiError as err:
            if err.code == 410:
                raise Gone from None
            raise

    async def _watch(self, rv: str) -> None:
        """Apply watch events from `rv` until the stream ends (self.resource_version follows
        every event)."""
        resource = self.resource
        params = {
            "watch": "true",
            "resourceVersion": rv,
            "allowWatchBookmarks": "true",
            # Spread reconnects over time, as client-go does (timeout .. 2 * timeout).
            "timeoutSeconds": str(max(1, int(self.watch_timeout * (1 + random.random())))),
        }
        started = time.monotonic()
        try:
            async with self.client.stream(resource.path, params, what=f"watch {resource.label}",
                                          read_timeout=self.watch_timeout * 2 + 30) as lines:
                self.stale_since = None  # the server accepted the watch: current from here on
                events = await self._apply(lines)
        except ApiError as err:
            if err.code == 410:  # as an HTTP status, before the stream starts
                raise Gone from None
            raise
        if not events and time.monotonic() - started < 1.0:
            raise ConnectionLost(f"watch {resource.label}: the stream ended at once, empty")
        # A stream that stayed open is a working watch even if its kind was quiet (no events,
        # no bookmarks yet): without this, a quiet kind's backoff would only ever grow.
        self.backoff.reset()

    async def _apply(self, lines: AsyncIterator[bytes]) -> int:
        """Apply the events of one watch stream; returns how many lines it had."""
        resource = self.resource
        store = self.store
        decoder = self._decoder
        events = 0
        async for line in lines:
            if not events:
                self.backoff.reset()  # not on connect: a server closing at once must back off
            events += 1
            try:
                event = _event_decoder.decode(line)
            except msgspec.DecodeError as err:
                log.warning("%s: skipping an undecodable watch line: %s", resource.label, err)
                continue
            kind = event.type
            if kind == "ERROR":
                status = decode_status(event.object)
                if status is None:
                    raise ApiError(500, "", "undecodable ERROR event", f"watch {resource.label}")
                raise ApiError(status.code or 500, status.reason, status.message,
                               f"watch {resource.label}")
            try:
                event_rv = _head_decoder.decode(event.object).metadata.resource_version
            except msgspec.DecodeError:
                event_rv = ""
            if event_rv:
                self.resource_version = event_rv
            if kind == "BOOKMARK":
                continue
            try:
                obj = decoder.decode(event.object)
            except msgspec.DecodeError as err:
                log.warning("%s: skipping an undecodable %s event: %s", resource.label, kind, err)
                continue
            if kind == "DELETED":
                store.pop(_key(obj), None)
            elif kind in ("ADDED", "MODIFIED"):
                if obj.metadata.annotations:
                    trim_annotations(obj.metadata)
                detach((obj,))
                store[_key(obj)] = obj
            else:
                continue
            self.generation += 1
            for handler in self.handlers:
                handler(kind, obj)
        return events


def _retry_before_sync(err: Exception) -> bool:
    """Errors worth retrying even before the first sync: the server answered but is busy or
    failing. Configuration and permission problems fail fast instead."""
    if isinstance(err, AccessDenied | Unreachable):
        return False
    if isinstance(err, ApiError):
        return err.transient
    return isinstance(err, ConnectionLost)


# -- many informers ------------------------------------------------------------------------------

def make_informers(client: ApiClient, kinds: Iterable[str] | None = None,
                   **options: Any) -> list[Informer]:
    """One informer per kind (all kinds desched reads when None); options go to Informer."""
    return [Informer(client, resource, **options) for resource in resources_for(kinds)]


async def start_informers(informers: Iterable[Informer], timeout: float | None = None) -> None:
    """Start the informers and wait for every initial list. The cyclic GC is paused meanwhile
    and the survivors frozen afterwards (gc.freeze): at 150k pods this removes multi-second
    collections, and later collections no longer scan the cache (docs/architecture.md)."""
    informers = list(informers)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        waits = [inf.wait_synced() for inf in informers]
        await asyncio.wait_for(asyncio.gather(*waits), timeout)
    except BaseException as err:
        await stop_informers(informers)
        if isinstance(err, TimeoutError):
            late = ", ".join(i.resource.label for i in informers if not i.synced.is_set())
            server = informers[0].client.server if informers else ""
            raise InputError(server, f"the initial list did not finish within {timeout:g}s "
                                     f"for: {late}") from None
        raise
    finally:
        if was_enabled:
            gc.enable()
    gc.freeze()


async def stop_informers(informers: Iterable[Informer]) -> None:
    await asyncio.gather(*(inf.stop() for inf in informers))


async def build_snapshot(informers: Iterable[Informer],
                         evicted: EvictedPods | None = None) -> ClusterSnapshot:
    """A ClusterSnapshot of the informers' current stores, for one descheduling cycle, with the
    pods in `evicted` shown terminating until the cache catches up (live/assumed.py).

    Starts the informers and waits for their first sync if needed (see start_informers), then
    builds without yielding to the event loop, so no watch event lands half-way: the snapshot is
    one consistent cut of the caches. It shares the cached objects (cheap: only the indices are
    new); cycles only fill derived caches on objects and drop them from the indices."""
    informers = list(informers)
    if not all(informer.synced.is_set() for informer in informers):
        await start_informers(informers)  # the first cycle: sync with GC paused, then freeze
    snapshot = ClusterSnapshot()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for informer in informers:
            store = informer.store
            if evicted and informer.resource.kind == "Pod":
                shown = evicted.overlay(store)
                if shown:
                    store = {**store, **shown}
            if store:
                snapshot.add_all(tuple(store.values()))
        snapshot.finish()
    finally:
        if was_enabled:
            gc.enable()
    return snapshot

"""Kubernetes events about evictions (events.k8s.io/v1), as upstream records them, with desched
as the reporting controller:

- a successful eviction: Normal, reason <plugin>, action Descheduled,
  note "pod eviction from <node> node by desched";
- a failed one, only with the policy's evictionFailureEventNotification: Warning, reason
  EvictionFailed, note "... failed: <why>".

Any object can be the subject (`ObjectRef`): the PodMigrationJob controller reports on its jobs
(docs/migration.md). A cluster-scoped object's event goes to namespace "default", as
client-go records it.

Events are best effort: a failed POST is logged and counted, never retried and never fatal, and
posting never holds up a cycle. `emit` may be called from any thread (the cycle runs in a worker
thread); the POST itself runs on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from desched.framework.decisions import Restart
from desched.live.client import AccessDenied, ApiClient, ApiError

log = logging.getLogger("desched.events")

CONTROLLER = "desched"
ACTION = "Descheduled"
EVENT_NAMESPACE_FOR_CLUSTER_SCOPED = "default"
FAILED_REASON = "EvictionFailed"
# Moves (framework/moves): a surge-first restart, told on the Deployment (action Restart) and
# on each pod it replaces (action Descheduled); a wait for a replacement given up.
RESTART_REASON = "SurgeRestart"
RESTART_ACTION = "Restart"
TIMEOUT_REASON = "ReplacementTimeout"
NOTE_LIMIT = 1024  # the API server rejects longer notes


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str = ""
    node: str = ""


@dataclass(frozen=True)
class ObjectRef:
    """The object an event is about (`regarding`); namespace "" for a cluster-scoped one."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""


def _regarding(subject: PodRef | ObjectRef) -> ObjectRef:
    if isinstance(subject, ObjectRef):
        return subject
    return ObjectRef("v1", "Pod", subject.namespace, subject.name, subject.uid)


def restart_note(restart: Restart) -> str:
    return (f"restarted by {CONTROLLER} ({restart.plugin}) to move {len(restart.pods)} "
            f"pod(s): {restart.reason}")


def eviction_note(node: str, failure: str | None = None) -> str:
    note = f"pod eviction from {node} node by {CONTROLLER}"
    return note if failure is None else f"{note} failed: {failure}"


def event_body(subject: PodRef | ObjectRef, type_: str, reason: str, note: str, instance: str,
               now: datetime | None = None, action: str = ACTION) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    if len(note.encode()) > NOTE_LIMIT:
        note = note.encode()[: NOTE_LIMIT - 3].decode("utf-8", "ignore") + "..."
    ref = _regarding(subject)
    # str(): model strings may be interned subclasses the JSON encoder does not take.
    namespace, name = str(ref.namespace), str(ref.name)
    regarding = {"apiVersion": str(ref.api_version), "kind": str(ref.kind)}
    if namespace:
        regarding["namespace"] = namespace
    regarding["name"] = name
    if ref.uid:
        regarding["uid"] = str(ref.uid)
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        # client-go's naming: the object's name and the time in hex nanoseconds.
        "metadata": {"name": f"{name}.{time.time_ns():x}",
                     "namespace": namespace or EVENT_NAMESPACE_FOR_CLUSTER_SCOPED},
        "eventTime": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": CONTROLLER,
        "reportingInstance": instance[:128],
        "action": str(action)[:128],
        "reason": str(reason)[:128],
        "type": type_,
        "note": str(note),
        "regarding": regarding,
    }


class EventRecorder:
    """Posts events in the background on `loop`; `flush` waits for those in flight."""

    def __init__(self, client: ApiClient, loop: asyncio.AbstractEventLoop, instance: str, *,
                 timeout: float = 10.0,
                 on_result: Callable[[str, bool], None] | None = None) -> None:
        self.client = client
        self.loop = loop
        self.instance = instance
        self.timeout = timeout
        self.on_result = on_result  # (event type, posted?) for metrics
        self._pending: set[asyncio.Task[bool]] = set()

    def emit(self, subject: PodRef | ObjectRef, type_: str, reason: str, note: str,
             action: str = ACTION) -> None:
        body = event_body(subject, type_, reason, note, self.instance, action=action)
        try:
            self.loop.call_soon_threadsafe(self._start, body)
        except RuntimeError:  # the loop is closed: the process is exiting
            log.warning("event not posted, shutting down: %s %s", type_, reason)

    def _start(self, body: dict[str, Any]) -> None:
        task = self.loop.create_task(self.post(body))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def post(self, body: dict[str, Any]) -> bool:
        namespace = body["metadata"]["namespace"]
        path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
        regarding = body["regarding"]
        subject = "/".join(p for p in (regarding.get("namespace"), regarding["name"]) if p)
        what = f"{body['type']} event {body['reason']} for {str(regarding['kind']).lower()} " \
               f"{subject}"
        ok = False
        try:
            # The created event is not read: its answer is only checked to be JSON.
            await self.client.call("POST", path, msgspec.Raw, what=f"post {what}", body=body,
                                   timeout=self.timeout)
            ok = True
        except (ApiError, AccessDenied) as err:  # the server's refusal, which names the event
            log.warning("%s", err)
        except Exception as err:  # best effort: never let an event break a cycle
            log.warning("cannot post %s: %s", what, str(err) or type(err).__name__)
        if self.on_result is not None:
            self.on_result(str(body["type"]), ok)
        return ok

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait (at most `timeout`) for the events in flight, e.g. before exiting."""
        # Callbacks scheduled from the worker thread may not have run yet.
        await asyncio.sleep(0)
        if not self._pending:
            return
        pending = set(self._pending)
        _, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task

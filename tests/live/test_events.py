"""Eviction events (events.k8s.io/v1) posted to kmock: upstream's fields with desched as the
reporting controller, posted from the cycle's thread, and best effort when the server fails."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from typing import Any

import kmock
import pytest
from fake_apiserver import Emulator, status

from desched.live.client import ApiClient
from desched.live.events import EventRecorder, ObjectRef, PodRef, event_body, eviction_note

pytestmark = pytest.mark.asyncio

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


async def stored(client: ApiClient) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(await client.get(EVENTS, what="list events"))["items"]
    return items


async def test_normal_event_for_an_eviction(emulator: Emulator, client: ApiClient) -> None:
    results: list[tuple[str, bool]] = []
    recorder = EventRecorder(client, asyncio.get_running_loop(), "host_1234",
                             on_result=lambda t, ok: results.append((t, ok)))
    ref = PodRef("default", "web-1", "uid-1", "n1")
    # Emitted from a worker thread, as the cycle does.
    await asyncio.to_thread(recorder.emit, ref, "Normal", "PodLifeTime", eviction_note("n1"))
    await recorder.flush()
    [event] = await stored(client)
    assert event["type"] == "Normal"
    assert event["reason"] == "PodLifeTime"
    assert event["action"] == "Descheduled"
    assert event["note"] == "pod eviction from n1 node by desched"
    assert event["reportingController"] == "desched"
    assert event["reportingInstance"] == "host_1234"
    assert event["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "default",
                                  "name": "web-1", "uid": "uid-1"}
    assert event["metadata"]["name"].startswith("web-1.")
    assert event["eventTime"].endswith("Z") and "." in event["eventTime"]
    assert results == [("Normal", True)]


async def test_warning_event_for_a_failure(emulator: Emulator, client: ApiClient) -> None:
    recorder = EventRecorder(client, asyncio.get_running_loop(), "me")
    note = eviction_note("n2", "total eviction limit exceeded (3)")
    assert note == "pod eviction from n2 node by desched failed: total eviction limit exceeded (3)"
    recorder.emit(PodRef("default", "db-0", "", "n2"), "Warning", "EvictionFailed", note)
    await recorder.flush()
    [event] = await stored(client)
    assert (event["type"], event["reason"], event["note"]) == ("Warning", "EvictionFailed", note)
    assert "uid" not in event["regarding"]


@pytest.mark.parametrize(("code", "message", "logged"), [
    # A refusal names the event once, as the client's error line does.
    (403, "events is forbidden", "forbidden (403) to post Normal event PodLifeTime for pod "
                                 "default/a: events is forbidden"),
    (500, "etcd hiccup", "cannot post Normal event PodLifeTime for pod default/a: 500"),
])
async def test_posting_failures_are_logged_not_raised(
        emulator: Emulator, client: ApiClient, caplog: pytest.LogCaptureFixture, code: int,
        message: str, logged: str) -> None:
    emulator[kmock.method.POST, kmock.resource("events.k8s.io", "v1", "events")] << (
        lambda request: kmock.Response(status=code, payload=status(code, message)))
    results: list[tuple[str, bool]] = []
    recorder = EventRecorder(client, asyncio.get_running_loop(), "me",
                             on_result=lambda t, ok: results.append((t, ok)))
    with caplog.at_level(logging.WARNING, logger="desched.events"):
        recorder.emit(PodRef("default", "a"), "Normal", "PodLifeTime", eviction_note("n1"))
        await recorder.flush()
    assert results == [("Normal", False)]
    assert logged in caplog.text and message in caplog.text


async def test_unreachable_server_is_best_effort(caplog: pytest.LogCaptureFixture) -> None:
    async with ApiClient.for_server("http://127.0.0.1:9", trust_env=False,
                                    timeout=1.0) as client:
        recorder = EventRecorder(client, asyncio.get_running_loop(), "me", timeout=1.0)
        with caplog.at_level(logging.WARNING, logger="desched.events"):
            recorder.emit(PodRef("default", "a"), "Normal", "PodLifeTime", "x")
            await recorder.flush()
    assert "cannot post" in caplog.text


async def test_long_notes_are_cut_to_the_api_limit() -> None:
    body = event_body(PodRef("default", "a"), "Warning", "EvictionFailed", "é" * 2000, "me",
                      datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    assert len(body["note"].encode()) <= 1024 and body["note"].endswith("...")
    assert body["eventTime"] == "2026-11-22T12:00:00.000000Z"


async def test_event_about_a_cluster_scoped_object(emulator: Emulator,
                                                   client: ApiClient) -> None:
    recorder = EventRecorder(client, asyncio.get_running_loop(), "me")
    job = ObjectRef("scheduling.koordinator.sh/v1alpha1", "PodMigrationJob", "", "job-1", "u1")
    recorder.emit(job, "Warning", "Timeout", "Abort job caused by timeout")
    await recorder.flush()
    [event] = await stored(client)  # client-go puts it in "default"
    assert event["metadata"]["namespace"] == "default"
    assert event["metadata"]["name"].startswith("job-1.")
    assert event["regarding"] == {"apiVersion": "scheduling.koordinator.sh/v1alpha1",
                                  "kind": "PodMigrationJob", "name": "job-1", "uid": "u1"}
    assert (event["type"], event["reason"], event["action"]) == \
        ("Warning", "Timeout", "Descheduled")


async def test_action_and_namespaced_object_ref() -> None:
    ref = ObjectRef("v1", "Pod", "kube-system", "dns-0")
    body = event_body(ref, "Normal", "Descheduled", "Pod evicted", "me", action="Migrating")
    assert body["action"] == "Migrating"
    assert body["metadata"]["namespace"] == "kube-system"
    assert body["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "kube-system",
                                 "name": "dns-0"}
    # A PodRef is the same as its ObjectRef.
    same = event_body(PodRef("kube-system", "dns-0"), "Normal", "Descheduled", "Pod evicted",
                      "me", action="Migrating")
    assert same["regarding"] == body["regarding"]


async def test_failed_post_names_the_object_kind(
        emulator: Emulator, client: ApiClient, caplog: pytest.LogCaptureFixture) -> None:
    emulator[kmock.method.POST, kmock.resource("events.k8s.io", "v1", "events")] << (
        lambda request: kmock.Response(status=403, payload=status(403, "forbidden")))
    recorder = EventRecorder(client, asyncio.get_running_loop(), "me")
    with caplog.at_level(logging.WARNING, logger="desched.events"):
        recorder.emit(ObjectRef("scheduling.koordinator.sh/v1alpha1", "PodMigrationJob", "",
                                "job-1"), "Normal", "Complete", "done")
        await recorder.flush()
    assert "forbidden (403) to post Normal event Complete for podmigrationjob job-1" \
        in caplog.text

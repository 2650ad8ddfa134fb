"""`desched snapshot`: capture the cluster into a file that `desched simulate --snapshot` reads.

The file holds one JSON line per list page (limit/continue paging, 500 objects a page), each page
as the API server sent it, with one exception: `metadata.managedFields` is removed from every
item. It is server-side-apply bookkeeping, about 40% of a pod's bytes at scale
(bench/README.md), and no descheduling decision reads it. Each line keeps the list's
kind, apiVersion and resourceVersion; the continue token is dropped. Items are otherwise copied
byte for byte (never decoded and re-encoded), so nothing the loader reads is lost.

The last line is a SnapshotInfo document (desched.io/v1alpha1) recording when the capture
finished: `simulate` and `explain` run at that time unless told otherwise.

Kinds the server does not serve (CRDs that are not installed, no metrics-server) are skipped with
a note. The file is written under a temporary name and renamed at the end, so a failed capture
never leaves a partial snapshot behind.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import msgspec

from desched.errors import InputError
from desched.live.client import ApiClient, ApiError, ConnectionLost
from desched.model.objects import SNAPSHOT_INFO_API_VERSION
from desched.model.resources import Resource, resources_for
from desched.util.backoff import Backoff
from desched.util.progress import Progress

Note = Callable[[str], None]


def _stderr_note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


class _ListMeta(msgspec.Struct, rename="camel"):
    resource_version: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class _Page(msgspec.Struct, rename="camel"):
    kind: str = ""
    api_version: str = ""
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    # Items stay raw bytes per top-level field: only metadata is ever opened.
    items: list[dict[str, msgspec.Raw]] | None = None


_page_decoder = msgspec.json.Decoder(_Page)
_map_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_encoder = msgspec.json.Encoder()


def _strip_managed_fields(item: dict[str, msgspec.Raw]) -> None:
    meta = item.get("metadata")
    if meta is None:
        return
    fields = _map_decoder.decode(meta)
    if fields.pop("managedFields", None) is not None:
        item["metadata"] = msgspec.Raw(_encoder.encode(fields))


def page_line(body: bytes, resource: Resource) -> tuple[bytes, int, str]:
    """One list page as a snapshot line: (line with its "\\n", item count, continue token)."""
    page = _page_decoder.decode(body)
    items = page.items or []
    for item in items:
        _strip_managed_fields(item)
    line = _encoder.encode({
        # Some servers (and test doubles) omit these; the loader needs them to type the items.
        "kind": page.kind or resource.list_kind,
        "apiVersion": page.api_version or resource.api_version,
        "metadata": {"resourceVersion": page.metadata.resource_version},
        "items": items,
    })
    if b"\n" in line:
        # Only whitespace of a pretty-printed body can hold a raw newline (JSON strings cannot).
        line = line.replace(b"\n", b" ")
    return line + b"\n", len(items), page.metadata.continue_


def info_line(finished: datetime, server: str) -> bytes:
    """The SnapshotInfo document: when the capture finished (simulate's default clock)."""
    return _encoder.encode({
        "apiVersion": SNAPSHOT_INFO_API_VERSION, "kind": "SnapshotInfo",
        "metadata": {"name": "snapshot",
                     "creationTimestamp": finished.strftime("%Y-%m-%dT%H:%M:%SZ")},
        "server": server}) + b"\n"


class _Restart(Exception):
    """The continue token expired while paging: list the kind again from the start."""


async def capture(client: ApiClient, out_path: str | os.PathLike[str],
                  kinds: Iterable[str] | None = None, *, page_size: int = 500,
                  attempts: int = 5, backoff: Backoff | None = None,
                  note: Note = _stderr_note) -> int:
    """List every kind page by page into `out_path` (JSON lines); returns the objects written.

    Transient failures (429, 5xx, dropped connections) are retried `attempts` times per request
    with bounded exponential backoff; then, like 401/403 and an unreachable server, they raise
    InputError."""
    resources = resources_for(kinds)
    out = Path(out_path)
    tmp = out.with_name(out.name + ".partial")
    try:
        handle = tmp.open("wb")
    except OSError as err:
        raise InputError(str(out), f"cannot write snapshot: {err.strerror or err}") from None
    tally = _Tally(Progress(f"listing into {out}"))
    try:
        with handle:
            for resource in resources:
                await _capture_kind(client, resource, handle, page_size, attempts,
                                    backoff or Backoff(), note, tally)
            handle.write(info_line(datetime.now(UTC), client.server))
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        tally.progress.done()
    return tally.count


class _Tally:
    """Objects written so far, shown as progress."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.count = 0

    def add(self, items: int) -> None:
        self.count += items
        self.progress.update(self.count)


async def _capture_kind(client: ApiClient, resource: Resource, handle: IO[bytes], page_size: int,
                        attempts: int, backoff: Backoff, note: Note, tally: _Tally) -> None:
    start, written = handle.tell(), tally.count
    for _ in range(3):
        try:
            await _list_pages(client, resource, handle, page_size, attempts, backoff, tally)
            return
        except _Restart:
            tally.count = written
            note(f"{resource.label} changed too much while being listed; listing it again")
            handle.seek(start)
            handle.truncate()
        except ApiError as err:
            if err.code != 404:
                raise InputError(client.server, str(err)) from None
            if not resource.optional:
                raise InputError(client.server, f"the API server does not serve "
                                                f"{resource.label} (404): {err.message}") from None
            note(f"skipping {resource.kind}: the API server does not serve {resource.label}")
            tally.count = written
            handle.seek(start)
            handle.truncate()
            return
    raise InputError(client.server, f"cannot list {resource.label} consistently: the continue "
                                    "token kept expiring")


async def _list_pages(client: ApiClient, resource: Resource, handle: IO[bytes], page_size: int,
                      attempts: int, backoff: Backoff, tally: _Tally) -> None:
    params = {"limit": str(page_size)}
    while True:
        body = await _get(client, resource, params, attempts, backoff)
        try:
            line, items, token = page_line(body, resource)
        except msgspec.DecodeError as err:
            raise InputError(client.server,
                             f"cannot decode the list of {resource.label}: {err}") from None
        if items:
            handle.write(line)
            tally.add(items)
        if not token:
            return
        params["continue"] = token


async def _get(client: ApiClient, resource: Resource, params: dict[str, str], attempts: int,
               backoff: Backoff) -> bytes:
    what = f"list {resource.label}"
    backoff.reset()
    for attempt in range(1, attempts + 1):
        try:
            return await client.get(resource.path, params, what=what)
        except ApiError as err:
            if err.code == 410 and "continue" in params:
                raise _Restart from None
            if not err.transient:
                raise
            if attempt == attempts:
                raise InputError(client.server, f"{err} (gave up after {attempts} "
                                                "attempts)") from None
            delay = max(backoff.next(), min(err.retry_after or 0.0, backoff.maximum))
        except ConnectionLost as err:
            if attempt == attempts:
                raise InputError(client.server, f"gave up after {attempts} attempts: "
                                                f"{err}") from None
            delay = backoff.next()
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")


def run_capture(kubeconfig: str | None, context: str | None, out: str, *,
                kinds: Iterable[str] | None = None, note: Note = _stderr_note,
                **options: Any) -> int:
    """`desched snapshot`: connect with the kubeconfig (or in-cluster config) and capture every
    kind into `out`. Returns the number of objects written; raises InputError (one line) for
    anything the user must fix."""

    async def main() -> int:
        async with ApiClient.from_config(kubeconfig, context) as client:
            return await capture(client, out, kinds, note=note, **options)

    return asyncio.run(main())

"""Finding the items of one large JSON list document in place, without decoding it whole.

`kubectl get pods -A -o json` writes a single document: `{"apiVersion": ..., "items": [...],
"kind": "List", ...}`, pretty-printed, 1.4 GB at 150,000 pods; the API server itself (`kubectl
get --raw`, curl, client libraries' json.dump) writes the same on one line. Decoding it in one
call holds every page of it and every object at once; instead the loader decodes one item at a
time from the memory-mapped file and releases the pages behind it. This module only locates: the
header (every top-level key but `items`), then each item's byte range.

An item's end is guessed with one `find`, then confirmed by the item decoding (an object's text
is valid JSON only up to its own closing brace, so a wrong guess fails). Pretty-printed documents
(kubectl indents with spaces, and JSON text can hold a raw newline only between tokens) close an
item with a newline, the items' indentation and `}`. Compact ones join items with `},{` and the
next item's first key (`},{"metadata":`), or its apiVersion and kind when it starts with them
(`}, {"apiVersion": "v1", "kind": "Pod"`), learnt from the items read exactly: a joint found
also tells where the next item starts and, in a `kind: List`, its kind. Without a guess, or
when it does not decode, msgspec skips the item as raw JSON and names where it ended ("trailing
characters (byte N)").
"""

from __future__ import annotations

import mmap
import re
from typing import NamedTuple

import msgspec

_ITEMS_KEY = re.compile(rb'"items"\s*:\s*\[')
_WHITESPACE = b" \t\r\n"
_SEPARATOR = re.compile(rb"[ \t\r\n]*(?:(,)[ \t\r\n]*|$)")
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")
_FIRST_KEY = re.compile(rb'\{[ \t\r\n]*"[^"\\]*"[ \t\r\n]*:')
# An item whose first keys are apiVersion then kind (kubectl sorts keys); plain names only.
_ITEM_HEAD = re.compile(
    rb'\{\s*"apiVersion"\s*:\s*"([A-Za-z0-9./-]*)"\s*,\s*"kind"\s*:\s*"([A-Za-z0-9]*)"')
_HEAD_WINDOW = 1 << 16  # the top-level keys before `items` (apiVersion, kind, metadata)
_TAIL_WINDOW = 1 << 16  # and after it


def item_head(data: bytes | memoryview | mmap.mmap, pos: int = 0) -> tuple[str, str] | None:
    """(kind, apiVersion) of the item at `pos`, read off its first keys when they are
    apiVersion then kind (kubectl sorts keys); None otherwise (decode the item's header)."""
    match = _ITEM_HEAD.match(data, pos, pos + 512)
    if match is None:
        return None
    version, kind = match.group(1, 2)
    return kind.decode(), version.decode()


class _Header(msgspec.Struct, rename="camel"):
    kind: str = ""
    api_version: str = ""


class ListLayout(NamedTuple):
    kind: str
    api_version: str
    first: int  # offset just after the items' `[`
    end: int  # offset of the items' `]`


def _skip_space(data: mmap.mmap, pos: int, limit: int) -> int:
    while pos < limit and data[pos] in _WHITESPACE:
        pos += 1
    return pos


def find_list(data: mmap.mmap, size: int, start: int = 0) -> ListLayout | None:
    """The layout of the document in `data[start:size]` (a whole file, or one line of one) when
    its top level is an object with an `items` array, or None (a single object, several
    documents, or something this fast path does not read; the general path then decodes it and
    reports any error)."""
    head = data[start: min(size, start + _HEAD_WINDOW)]
    match = _ITEMS_KEY.search(head)
    if match is None or not head.lstrip().startswith(b"{"):
        return None
    prefix = head[: match.start()].rstrip()
    # `items` is a top-level key when what precedes it is `{` plus whole key/value pairs.
    opening = prefix[:-1] if prefix.endswith(b",") else prefix
    try:
        msgspec.json.decode(opening + b"}")
    except (msgspec.DecodeError, RecursionError):
        return None
    first = start + match.end()
    tail_start = max(first, size - _TAIL_WINDOW)
    tail = data[tail_start:size]
    # The items' `]` is the last one after which the rest closes the header validly.
    cut = len(tail)
    while True:
        cut = tail.rfind(b"]", 0, cut)
        if cut < 0:
            return None
        rest = tail[cut + 1:]
        try:
            header = msgspec.json.decode(prefix + b' "items": [] ' + rest, type=_Header)
        except (msgspec.DecodeError, RecursionError):
            continue
        return ListLayout(header.kind, header.api_version, first, tail_start + cut)


class ItemError(Exception):
    """An item that is not well-formed JSON; `index` counts items from 0."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def skip_item(view: memoryview, start: int, index: int) -> int:
    """The end of the JSON value at `start`, found by msgspec skipping it as raw JSON."""
    try:
        msgspec.json.decode(view[start:], type=msgspec.Raw)
    except msgspec.DecodeError as err:
        found = _TRAILING.search(str(err))
        if found is None:
            raise ItemError(index, str(err)) from None
        # msgspec counts the first trailing character in: the value ended before it and any
        # whitespace.
        end = start + int(found.group(1)) - 1
        while view[end - 1] in _WHITESPACE:
            end -= 1
        return end
    raise ItemError(index, "the list is not closed")


class Items:
    """Walks a list's items: `start` is the first one's offset (`layout.end` when there is
    none), `guess_end` guesses where an item ends from the layout, `exact_end` finds it for
    certain, `next_start` steps over the comma, `learn` takes a compact layout's item joint from
    an item found exactly. The caller decodes each guessed range and falls back to `exact_end`
    when the guess does not decode."""

    def __init__(self, data: mmap.mmap, layout: ListLayout) -> None:
        self.data = data
        self.view = memoryview(data)
        self.layout = layout
        start = _skip_space(data, layout.first, layout.end)
        gap = data[layout.first:start]
        newline = gap.rfind(b"\n")
        # The text that closes an item: newline, the items' indentation, `}`.
        self.closer = b"\n" + gap[newline + 1:] + b"}" if newline >= 0 else b""
        self.start = start
        # Compact layouts: `}`, the separator and the next item's first key (or apiVersion and
        # kind, then in `head`), once learnt; `lead` is where the next item starts in it.
        self.joint = b""
        self.run_joint = b""  # the joint up to the next item's kind: any item's end
        self.lead = 0
        self.head: tuple[str, str] | None = None
        self.follows = -1  # the next item's start when the last guess came from the joint

    def guess_end(self, start: int, at_least: int, at_most: int) -> int | None:
        """Where the item at `start` ends if it is laid out like the items before it, looking
        between `at_least` bytes in (a lower bound the caller knows, e.g. the smallest item of
        the kind seen so far: searching is most of the cost, and a wrong guess only fails to
        decode) and `at_most` (so a layout that stopped matching costs a bounded search per
        item, not a scan to the end of the list)."""
        stop = min(start + at_most, self.layout.end)
        self.follows = -1
        if self.closer:
            found = self.data.find(self.closer, start + at_least, stop)
            return None if found < 0 else found + len(self.closer)
        if self.joint:
            found = self.data.find(self.joint, start + at_least, stop)
            if found < 0:
                return None
            self.follows = found + self.lead
            return found + 1
        return None

    def run_end(self, start: int, length: int) -> int | None:
        """Where the first item that ends `length` or more bytes after `start` ends, by the
        layout learnt, whatever the next item's kind (the end of the last item when the list
        ends first); None when no item end is found within another `length` bytes. A guess,
        as guess_end's."""
        marker = self.closer or self.run_joint
        stop = min(start + 2 * length, self.layout.end)
        found = self.data.find(marker, start + length, stop) if marker else -1
        if found >= 0:
            return found + (len(marker) if self.closer else 1)
        if stop < self.layout.end:
            return None
        end = self.layout.end
        while end > start and self.data[end - 1] in _WHITESPACE:
            end -= 1
        return end

    def learn(self, end: int, following: int) -> None:
        """In a layout without newlines between items, takes what joins the item that ends at
        `end` to the one starting at `following`, up to its first key, as an item's end."""
        if self.closer:
            return
        limit = min(following + 512, self.layout.end)
        head = _ITEM_HEAD.match(self.data, following, limit)
        key = head or _FIRST_KEY.match(self.data, following, limit)
        self.joint = self.data[end - 1: key.end()] if key is not None else b""
        self.run_joint = self.joint
        self.lead = following - (end - 1)
        self.head = None
        if head is not None:
            version, kind = head.group(1, 2)
            self.head = kind.decode(), version.decode()
            self.run_joint = self.data[end - 1: head.start(2)]  # up to the kind's value

    def exact_end(self, start: int, index: int) -> int:
        return skip_item(self.view, start, index)

    def next_start(self, end: int, index: int) -> int | None:
        """Where the item after the one ending at `end` starts, or None after the last one."""
        match = _SEPARATOR.match(self.data, end, self.layout.end)
        if match is None:
            raise ItemError(index, f"expected ',' or ']' after item {index}")
        if match.group(1) is None:
            return None
        return match.end()

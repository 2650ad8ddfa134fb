"""Reading snapshot files: YAML or JSON documents, objects or lists, as `kubectl get -o`
prints them.

JSON is decoded from bytes straight into the lean structs. A file whose lines are each one JSON
document (what `desched snapshot` writes: one list page per line) is memory-mapped and decoded in
place, page by page, so a 150,000-pod cluster never has to sit in memory as text; a line too
large to be a page (the API server's own compact List, one line for the whole cluster) and a
multi-line List (kubectl's) are decoded in place a run of pods or an item at a time. Pods go
through one PodDecoder per load (model/pod_decoder.py), which shares what replicas repeat. YAML
is read an item at a time through rapidyaml (snapshot/yamlstream.py; PyYAML's C loader where
YAML 1.1 reads the text otherwise) and goes through the same JSON decoders, so every format
gives identical objects and error messages.
"""

from __future__ import annotations

import contextlib
import gc
import json
import mmap
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import yaml

from desched.errors import InputError, quote, warn
from desched.model.kinds import (
    JSON_DECODERS,
    KIND_GROUPS,
    PAGE_DECODERS,
    KubeObject,
    api_group,
)
from desched.model.pod import Pod
from desched.model.pod_decoder import PodDecoder
from desched.snapshot import yamlstream
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.jsonlist import (
    ItemError,
    Items,
    ListLayout,
    find_list,
    item_head,
    skip_item,
)
from desched.snapshot.yamlcheck import SnapshotLoader
from desched.util import yamlguard
from desched.util.progress import Progress
from desched.util.yamlguard import describe_yaml_error

Warn = Callable[[str], None]
Batch = tuple[KubeObject, ...]  # objects are read a list page at a time
Buffer = bytes | memoryview


class _Header(msgspec.Struct, rename="camel"):
    kind: str = ""
    api_version: str = ""
    items: list[msgspec.Raw] | None = None


class _ItemHeader(msgspec.Struct, rename="camel"):
    kind: str = ""
    api_version: str = ""


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""


class _Named(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


_header = msgspec.json.Decoder(_Header)
_named = msgspec.json.Decoder(_Named)
_item_header = msgspec.json.Decoder(_ItemHeader)
_KIND = re.compile(rb'"kind"\s*:\s*"([A-Za-z0-9]+List)"')
# YAML this large takes minutes and gigabytes where the same objects as JSON take seconds
# (measured in bench/README.md): desched warns and says how to get JSON.
YAML_WARN_BYTES = 64 << 20
# msgspec and json recurse once per nesting level and raise RecursionError near Python's
# recursion limit (about 1,000 levels; Kubernetes objects nest about 15).
_TOO_DEEP = "nesting too deep to decode"
BATCH = 500  # objects handed to the snapshot at a time, and pages released between them
# The YAML of one object larger than this is refused before it is parsed: no API server stores
# such an object (etcd takes at most 1.5 MiB a request; an object's YAML, indented and with its
# keys spelled out, is a few times its stored size), and parsing it would take seconds a MiB.
MAX_OBJECT_YAML = 8 << 20
_YAML_NAME = re.compile(rb"\n {2,4}name: *([^\s#]+)")
# A line longer than this that holds a List is read an item at a time: one call decoding the
# whole line holds all its objects at once. Larger than a page `desched snapshot` writes (500
# items, ~2.5 MB of production-like pods), which decodes faster in one call.
STREAM_LINE = 16 << 20
# The bytes of a list's items decoded in one call (about 400 production-like pods), at most a
# 64th of the list: what a run holds at once stays small beside what the list decodes to.
LIST_RUN = 4 << 20
# Lines are looked for this much at a time (see _line_end).
_SCAN_CHUNK = 64 << 20
# How far past the longest item so far an item's end is searched for before finding it exactly.
_GUESS_SLACK = 64 << 10


def _release(mm: mmap.mmap, start: int, end: int) -> None:
    """Drop the pages of the mapping from `start` (rounded down to a page) to `end` from
    resident memory; they are read again from the page cache if touched."""
    aligned = start - start % mmap.PAGESIZE
    mm.madvise(mmap.MADV_DONTNEED, aligned, end - aligned)


def _line_end(mm: mmap.mmap, pos: int, size: int) -> int:
    """Where the line at `pos` ends. Searching faults the pages in and a line may be the whole
    file (the API server's compact List: measured, 700 MB resident before the first item was
    decoded), so each chunk searched through is released again."""
    while pos < size:
        stop = min(pos + _SCAN_CHUNK, size)
        found = mm.find(b"\n", pos, stop)
        if found >= 0:
            return found
        _release(mm, pos, stop)
        pos = stop
    return size


def _guess_list_kind(data: Buffer) -> str | None:
    """The list kind named near either end of a document (kubectl sorts keys, so `kind` follows
    `items`). Only a hint for the fast path: the decoded kind is checked against it."""
    for part in (data[-200:], data[:200]):
        match = _KIND.search(bytes(part))
        if match:
            return match.group(1).decode()
    return None


Decode = Callable[[Buffer], Any]


class _Reader:
    def __init__(self, path: str, pods: PodDecoder) -> None:
        self.path = path
        self._pods = pods
        self._run = bytearray()  # reused: decoded pods keep nothing of it (PodDecoder)
        # Pods (and PodList pages) go through `pods`, which shares the parts replicas repeat and
        # leaves nothing pointing into the file; every other kind through its own decoder.
        self._decoders: dict[str, Decode] = {
            **{kind: d.decode for kind, d in JSON_DECODERS.items()}, "Pod": pods.decode}
        self._page_decoders: dict[str, Decode] = {
            **{kind: d.decode for kind, d in PAGE_DECODERS.items()}, "PodList": pods.decode_page}
        self.ignored: dict[str, int] = {}
        self.size = 0  # bytes in the file, and how far decoding has got (for progress)
        self.position = 0

    def _accept(self, kind: str, api_version: str) -> bool:
        groups = KIND_GROUPS.get(kind)
        if groups is None or (api_version and api_group(api_version) not in groups):
            label = f"{api_version}/{kind}" if api_version else kind or "<no kind>"
            self.ignored[label] = self.ignored.get(label, 0) + 1
            return False
        return True

    def _fail(self, where: str, err: Exception | str) -> InputError:
        return InputError(self.path, f"{where}: {err}")

    def json_document(self, data: Buffer, where: str) -> Iterator[Batch]:
        guess = _guess_list_kind(data)
        decoder = self._page_decoders.get(guess) if guess else None
        if guess is not None and decoder is not None:
            try:
                page = decoder(data)
            except (msgspec.DecodeError, RecursionError):
                page = None  # not what the hint said; the general path reports real errors
            if page is not None and page.kind == guess:
                if self._accept(guess[: -len("List")], page.api_version):
                    yield page.items
                return
        yield from self._json_general(data, where)

    def _json_general(self, data: Buffer, where: str) -> Iterator[Batch]:
        try:
            head = _header.decode(data)
        except msgspec.DecodeError as err:
            raise self._fail(where, err) from None
        except RecursionError:
            raise self._fail(where, _TOO_DEEP) from None
        if head.items is not None and head.kind.endswith("List"):
            item_kind = head.kind[: -len("List")]
            for index, raw in enumerate(head.items):
                obj = self._list_item(item_kind, head.api_version, raw, f"{where} item {index}")
                if obj is not None:
                    yield (obj,)
            return
        if not head.kind:
            raise self._fail(where, "object has no kind")
        if self._accept(head.kind, head.api_version):
            yield (self._decode(head.kind, data, where),)

    def _list_item(self, item_kind: str, api_version: str, raw: Buffer,
                   where: str) -> KubeObject | None:
        """One item of a List whose items are `item_kind` ("" for `kind: List`: each names its
        own), or None when its kind is not one desched reads."""
        kind, version = item_kind, api_version
        # Read off its first keys when it can be: a header decode skims the whole item (5 % of
        # a YAML List's load).
        known = item_head(raw) if item_kind == "" else None
        if known is not None:
            kind, version = known
        elif item_kind == "":
            try:
                head = _item_header.decode(raw)
            except msgspec.DecodeError as err:
                raise self._fail(where, err) from None
            except RecursionError:
                raise self._fail(where, _TOO_DEEP) from None
            kind, version = head.kind, head.api_version
        return self._decode(kind, raw, where) if self._accept(kind, version) else None

    def _decode(self, kind: str, data: Buffer, where: str) -> KubeObject:
        try:
            return self._decoders[kind](data)
        except msgspec.DecodeError as err:
            raise self._fail(f"{where} ({kind}{_name_of(data)})", err) from None
        except RecursionError:
            raise self._fail(f"{where} ({kind})", _TOO_DEEP) from None

    def json_file(self, handle: Any) -> Iterator[Batch]:
        self.size = size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return
        # Not closed here: lazily decoded fields (msgspec.Raw) keep pointing into the mapping.
        mm = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        first_end = _line_end(mm, 0, size)
        # Looked at without copying the line: it may be the whole file.
        last = first_end - 1
        while last > 0 and mm[last] in b" \t\r":
            last -= 1
        if mm[: min(first_end, 64)].lstrip()[:1] == b"{" and mm[last] == ord(b"}"):
            yield from self._json_lines(mm, size, first_end)
            return
        layout = find_list(mm, size)
        if layout is not None and layout.kind.endswith("List"):
            yield from self._json_list(mm, layout, "document 1")
            return
        data = mm[:]
        try:
            _header.decode(data)  # a skip-scan: one document, or several concatenated?
            documents: list[bytes] = [data]
        except (msgspec.DecodeError, RecursionError):
            documents = self._split_json(data)
        for index, doc in enumerate(documents):
            yield from self.json_document(doc, f"document {index + 1}")

    def _json_list(self, mm: mmap.mmap, layout: ListLayout, where: str) -> Iterator[Batch]:
        """One list document (`kubectl get -o json`, or a line holding the API server's compact
        List), decoded an item at a time in place; the pages behind are released from resident
        memory as for JSON lines."""
        typed = layout.kind[: -len("List")]  # "" for `kind: List`: items name their kinds
        items = Items(mm, layout)
        view = items.view
        batch: list[KubeObject] = []
        released = layout.first
        smallest: dict[str, int] = {}  # kind -> its smallest item so far, in bytes
        longest = 0
        pos: int | None = items.start if items.start < layout.end else None
        index = 0
        head: tuple[str, str] | None = None  # the item's kind and version, when the joint said
        # A PodList's items, or a `kind: List`'s while they are pods, are decoded a run at a
        # time once their layout is known.
        runs = typed == "" or (typed == "Pod" and self._accept(typed, layout.api_version))
        single_until = -1  # where a run that did not decode ended: its items are read singly
        run_bytes = max(1 << 16, min(LIST_RUN, (layout.end - layout.first) // 64))
        try:
            while pos is not None:
                pods: Batch | None = None
                if runs and pos >= single_until and (items.closer or items.run_joint):
                    pods, end = self._pod_run(items, pos, run_bytes, listed=not typed)
                    if pods is None:
                        single_until = end
                if pods is not None:
                    if batch:
                        yield tuple(batch)
                        batch = []
                    yield pods
                    _release(mm, released, end)
                    released = self.position = end
                    index += len(pods)
                    pos, head = items.next_start(end, index - 1), None
                    continue
                kind, version = typed, layout.api_version
                if not typed:
                    kind, version = head or self._item_kind(mm, view, pos, index, where)
                decoder = self._decoders[kind] if self._accept(kind, version) else None
                obj, end, exact, follows = None, -1, False, -1
                guess = items.guess_end(pos, smallest.get(kind, 0) * 7 // 8,
                                        2 * longest + _GUESS_SLACK)
                if decoder is not None and guess is not None:
                    # A failure means the guess was not the item's end, or a bad item: look
                    # exactly below.
                    with contextlib.suppress(msgspec.DecodeError, RecursionError):
                        obj, end = decoder(view[pos:guess]), guess
                        follows = items.follows
                if end < 0:
                    end, exact = items.exact_end(pos, index), True
                    if decoder is not None:
                        obj = self._decode(kind, view[pos:end], f"{where} item {index}")
                if obj is not None:
                    batch.append(obj)
                    if end - pos < smallest.get(kind, 1 << 62):
                        smallest[kind] = end - pos
                longest = max(longest, end - pos)
                self.position = end
                if len(batch) >= BATCH:
                    yield tuple(batch)
                    batch = []
                    _release(mm, released, end)
                    released = end
                if follows >= 0:  # the joint found holds the next item's start (and kind)
                    pos, head = follows, items.head
                else:
                    pos, head = items.next_start(end, index), None
                    if exact and pos is not None:
                        items.learn(end, pos)
                index += 1
        except ItemError as err:
            raise self._fail(f"{where} item {err.index}", err) from None
        except RecursionError:
            raise self._fail(f"{where} item {index}", _TOO_DEEP) from None
        if batch:
            yield tuple(batch)
        self.position = layout.end

    def _pod_run(self, items: Items, pos: int, length: int,
                 listed: bool) -> tuple[Batch | None, int]:
        """The pods of about `length` bytes of a list's items from `pos`, decoded in one call, and
        where the last of them ends; no pods when the run does not decode (an item end guessed
        inside an item, a bad item, or in a `kind: List` (`listed`) an item that is no pod:
        the caller reads those items one at a time). One call for hundreds of items instead of
        a search and a call for each (bench/README.md, "Load in two steps")."""
        end = items.run_end(pos, length)
        if end is None:
            return None, pos + length
        size = end - pos + 2
        if len(self._run) < size:
            self._run = bytearray(size + size // 2)
        text = memoryview(self._run)[:size]  # the run as a JSON array: `[` items `]`
        text[0], text[-1] = ord("["), ord("]")
        text[1:-1] = items.view[pos:end]
        try:
            return self._pods.decode_items(text, listed=listed), end
        except (msgspec.DecodeError, RecursionError):
            return None, end

    def _item_kind(self, mm: mmap.mmap, view: memoryview, pos: int, index: int,
                   where: str) -> tuple[str, str]:
        """An item's kind and apiVersion: read off its first keys when they are those two (as
        kubectl sorts them), else by decoding its header."""
        known = item_head(mm, pos)
        if known is not None:
            return known
        try:
            head = _item_header.decode(view[pos:skip_item(view, pos, index)])
        except msgspec.DecodeError as err:
            raise self._fail(f"{where} item {index}", err) from None
        except RecursionError:
            raise self._fail(f"{where} item {index}", _TOO_DEEP) from None
        return head.kind, head.api_version

    def _json_lines(self, mm: mmap.mmap, size: int, first_end: int) -> Iterator[Batch]:
        """One document per line, decoded in place from the mapping; decoded pages are released
        from resident memory (they are re-read from the page cache if a lazy field needs them).
        `first_end`: where the first line ends, already found (searching for it again is a
        second pass over the whole file when it is one line)."""
        view = memoryview(mm)
        pos, line_no = 0, 1
        while pos < size:
            end = first_end if pos == 0 else _line_end(mm, pos, size)
            if end > pos:
                layout = find_list(mm, end, pos) if end - pos > STREAM_LINE else None
                if layout is not None and layout.kind.endswith("List"):
                    yield from self._json_list(mm, layout, f"line {line_no}")
                else:
                    self.position = end
                    yield from self.json_document(view[pos:end], f"line {line_no}")
                _release(mm, pos, end)
            pos, line_no = end + 1, line_no + 1

    def _split_json(self, data: bytes) -> list[bytes]:
        """Concatenated JSON documents (e.g. two `kubectl get -o json` outputs in one file)."""
        text = data.decode("utf-8", errors="replace")
        decoder = json.JSONDecoder()
        out: list[bytes] = []
        pos = 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                return out
            try:
                _, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as err:
                raise InputError(self.path, f"invalid JSON: {err}") from None
            except RecursionError:
                raise InputError(self.path, f"invalid JSON: {_TOO_DEEP}") from None
            out.append(text[pos:end].encode())
            pos = end

    def yaml_file(self, handle: Any, warn: Warn) -> Iterator[Batch]:
        """YAML read a document or a List item at a time (yamlstream); when the pieces cannot
        be read alone, the whole file as before, after the objects already read."""
        self.size = size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return
        mm = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        done = 0
        try:
            for batch in self._yaml_pieces(mm, size):
                done += len(batch)
                yield batch
            return
        except _WholeFile:
            self.ignored.clear()  # counted again by the whole reading
        if size > YAML_WARN_BYTES:
            warn(f"{self.path}: {size / 2**20:.0f} MiB of YAML is parsed whole (it cannot be "
                 f"read an object at a time: directives, `...`, anchors shared between objects, "
                 f"or an error), at about 2 MiB/s and 40 bytes of memory per byte; the same "
                 f"objects as JSON (`kubectl get -o json`, or `yq -o=json`) load about 40 times "
                 f"faster")
        try:
            text = mm[:].decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(self.path, f"not UTF-8 text: {err}") from None
        for batch in self._yaml_text(text):
            if done >= len(batch):
                done -= len(batch)
                continue
            yield batch[done:]
            done = 0

    def _yaml_pieces(self, mm: mmap.mmap, size: int) -> Iterator[Batch]:
        docs = yamlstream.documents(mm, size)
        if docs is None:
            raise _WholeFile
        parser = yamlstream.Parser()
        view = memoryview(mm)
        for number, doc in enumerate(docs, 1):
            shape = yamlstream.list_shape(mm, doc)
            if shape is not None:
                yield from self._yaml_list(parser, mm, shape, f"document {number}")
                continue
            _check_object_size(mm, doc.span, f"document {number}", self.path)
            ignored = dict(self.ignored)
            with parser.quiet():
                text = parser.to_json(view[doc.span.start:doc.span.end], item=False)
            if text == b"null":
                continue
            if text is not None:
                try:
                    batches = list(self._json_general(text, f"document {number}"))
                    for batch in batches:
                        _compact(batch)
                    yield from batches
                    continue
                except InputError:
                    self.ignored = ignored  # PyYAML decides
            self.position = doc.span.end
            (obj,) = _pyyaml_piece(view[doc.span.start:doc.span.end]) or (None,)
            if obj is None:
                continue
            if not isinstance(obj, dict):
                raise _WholeFile
            yield from self._json_general(_encode_piece(obj), f"document {number}")

    def _yaml_list(self, parser: yamlstream.Parser, mm: mmap.mmap, shape: yamlstream.ListShape,
                   where: str) -> Iterator[Batch]:
        """kubectl's List: its header read by PyYAML, its items a batch at a time, the pages
        behind released as for JSON."""
        (head,) = _pyyaml_piece(shape.header) or (None,)
        if not isinstance(head, dict) or head.get("items") != []:
            raise _WholeFile
        kind, version = head.get("kind", ""), head.get("apiVersion", "")
        if not (isinstance(kind, str) and kind.endswith("List") and isinstance(version, str)):
            raise _WholeFile
        item_kind = kind[: -len("List")]
        released = shape.items[0].start
        for first in range(0, len(shape.items), BATCH):
            batch: list[KubeObject] = []
            with parser.quiet():
                for index in range(first, min(first + BATCH, len(shape.items))):
                    span = shape.items[index]
                    obj = self._yaml_item(parser, mm, span, item_kind, version,
                                          f"{where} item {index}")
                    if obj is not None:
                        batch.append(obj)
            self.position = end = span.end
            yield tuple(batch)
            _release(mm, released, end)
            released = end

    def _yaml_item(self, parser: yamlstream.Parser, mm: mmap.mmap, span: yamlstream.Span,
                   item_kind: str, version: str, where: str) -> KubeObject | None:
        _check_object_size(mm, span, where, self.path)
        text = parser.item_to_json(mm, span)
        if text is not None:
            try:
                obj = self._list_item(item_kind, version, text, where)
                _compact((obj,))
                return obj
            except InputError:
                pass  # PyYAML decides (a kind not read is counted before any error)
        items = _pyyaml_piece(memoryview(mm)[span.start:span.end])
        if items is None or len(items) != 1 or not isinstance(items[0], list) \
                or len(items[0]) != 1:
            raise _WholeFile
        return self._list_item(item_kind, version, _encode_piece(items[0][0]), where)

    def _yaml_text(self, text: str) -> Iterator[Batch]:
        try:
            documents = yamlguard.load_all(text, SnapshotLoader)
        except yaml.YAMLError as err:
            raise InputError(self.path, f"invalid YAML: {describe_yaml_error(err)}") from None
        except yamlguard.YamlLimitError as err:
            raise InputError(self.path, str(err)) from None
        for index, doc in enumerate(documents):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise InputError(self.path, f"document {index + 1}: expected a Kubernetes object, "
                                            f"got {type(doc).__name__}")
            try:
                data = msgspec.json.encode(doc)
            except (TypeError, msgspec.EncodeError) as err:
                raise InputError(self.path, f"document {index + 1}: {err}") from None
            yield from self._json_general(data, f"document {index + 1}")


def _check_object_size(mm: mmap.mmap, span: yamlstream.Span, where: str, path: str) -> None:
    """InputError for an object whose YAML is over MAX_OBJECT_YAML (named from its first lines
    when they name it)."""
    size = span.end - span.start
    if size <= MAX_OBJECT_YAML:
        return
    found = _YAML_NAME.search(mm, span.start, min(span.end, span.start + (64 << 10)))
    named = f" ({found.group(1).decode(errors='replace')!r})" if found else ""
    raise InputError(path, f"{where}{named}: {size / 2**20:.0f} MiB of YAML for one object, "
                           f"more than the API server stores (etcd takes at most 1.5 MiB an "
                           f"object): not a cluster's object; refused before parsing it")


class _WholeFile(Exception):
    """A YAML file that PyYAML must read whole: a piece cannot be read alone."""


def _pyyaml_piece(piece: Buffer) -> list[Any] | None:
    """PyYAML's documents in one piece, within the loader's bounds; None when it cannot read
    the piece alone. A single document, or none, in practice: the pieces have no `---`."""
    try:
        docs = yamlguard.load_all(bytes(piece).decode("utf-8"), SnapshotLoader)
    except (UnicodeDecodeError, yaml.YAMLError, yamlguard.YamlLimitError):
        raise _WholeFile from None
    if len(docs) > 1:
        raise _WholeFile
    return docs or None


def _compact(objs: Iterable[KubeObject | None]) -> None:
    """A pod's conditions keep their JSON text (msgspec.Raw), which rapidyaml writes indented:
    compacted as PyYAML's path writes it, a few hundred bytes less a pod."""
    for obj in objs:
        if type(obj) is Pod and obj.status.conditions:
            obj.status.conditions = msgspec.Raw(
                msgspec.json.encode(msgspec.json.decode(obj.status.conditions)))


def _encode_piece(obj: Any) -> bytes:
    try:
        return msgspec.json.encode(obj)
    except (TypeError, msgspec.EncodeError):
        raise _WholeFile from None


def _name_of(data: Buffer) -> str:
    """` namespace/name` of an object that failed to decode, when its metadata is readable."""
    try:
        meta = _named.decode(data).metadata
    except (msgspec.DecodeError, RecursionError):
        return ""
    name = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
    return f" {quote(name)}" if name else ""


STDIN = "-"
STDIN_LABEL = "<stdin>"


def _open_snapshot(path: str) -> BinaryIO:
    if path != STDIN:
        try:
            return Path(path).open("rb")
        except OSError as err:
            raise InputError(path, f"cannot read snapshot file: {err.strerror or err}") from None
    # Spooled to an unnamed temporary file, so a piped `kubectl get -o json` is memory-mapped
    # and decoded in place like any file instead of being held whole in memory.
    spool = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it)
    try:
        shutil.copyfileobj(sys.stdin.buffer, spool, 1 << 20)
    except OSError as err:
        spool.close()
        raise InputError(STDIN_LABEL, f"cannot read snapshot: {err.strerror or err}") from None
    spool.seek(0)
    return spool


def read_batches(path: str, warn: Warn = warn, progress: Progress | None = None,
                 pods: PodDecoder | None = None) -> Iterator[Batch]:
    """Every understood object in one snapshot file (`-`: standard input), in file order, a page
    at a time. Pods share their repeated parts through `pods` (one per file when not given):
    give several files one decoder, and replicas share across files too."""
    handle = _open_snapshot(path)
    if path == STDIN:
        path = STDIN_LABEL
    reader = _Reader(path, pods or PodDecoder())
    count = 0
    with handle:
        first = handle.read(4096).lstrip()[:1]
        handle.seek(0)
        if first in (b"{", b"["):
            batches = reader.json_file(handle)
        else:
            batches = reader.yaml_file(handle, warn)
        for batch in batches:
            if progress is not None:
                count += len(batch)
                progress.update(count, reader.position, reader.size)
            yield batch
    for label, count in sorted(reader.ignored.items()):
        warn(f"{path}: ignoring {count} object(s) of unsupported kind {label}")


def read_objects(path: str, warn: Warn = warn) -> Iterator[KubeObject]:
    """Every understood object in one snapshot file, in file order."""
    for batch in read_batches(path, warn):
        yield from batch


SNAPSHOT_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml")


def _directory_files(directory: Path, warn: Warn) -> list[str]:
    """The snapshot files directly in `directory`, sorted by name, as `kubectl apply -f DIR`
    reads a directory (not recursively). What is left out is said in one warning, so a file
    saved as `.txt` is not missed silently; hidden files (editor swap files) go unmentioned."""
    try:
        entries = sorted(directory.iterdir(), key=lambda entry: entry.name)
    except OSError as err:
        raise InputError(str(directory), f"cannot read snapshot directory: "
                                         f"{err.strerror or err}") from None
    files: list[str] = []
    skipped: list[str] = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.suffix.lower() in SNAPSHOT_SUFFIXES and entry.is_file():
            files.append(str(entry))
        else:
            skipped.append(entry.name + ("/" if entry.is_dir() else ""))
    kinds = ", ".join(SNAPSHOT_SUFFIXES)
    if not files:
        raise InputError(str(directory), f"no snapshot file in this directory (a directory is "
                                         f"read for its {kinds} files)")
    if skipped:
        listed = ", ".join(skipped[:3]) + (f" and {len(skipped) - 3} more"
                                          if len(skipped) > 3 else "")
        warn(f"{directory}: not read: {listed} (a directory is read for its {kinds} files, "
             f"not its subdirectories)")
    return files


def snapshot_files(paths: list[str], warn: Warn = warn) -> list[str]:
    """`paths` with each directory replaced by the snapshot files in it."""
    out: list[str] = []
    for path in paths:
        if path != STDIN and Path(path).is_dir():
            out.extend(_directory_files(Path(path), warn))
        else:
            out.append(path)
    return out


def load_snapshot(paths: list[str], warn: Warn = warn) -> ClusterSnapshot:
    """Read every file (a directory: the snapshot files in it) and build the indexed snapshot.
    GC is paused while millions of small objects are created and the survivors are frozen
    afterwards (measured: removes multi-second collections at 150k pods)."""
    if not paths:
        raise InputError("", "no snapshot file given")
    paths = snapshot_files(paths, warn)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        snapshot = ClusterSnapshot()
        pods = PodDecoder()
        for path in paths:
            progress = Progress(f"reading {path}")
            try:
                for batch in read_batches(path, warn, progress, pods):
                    snapshot.add_all(batch)
            finally:
                progress.done()
        snapshot.finish()
    finally:
        if was_enabled:
            gc.enable()
    gc.freeze()
    return snapshot

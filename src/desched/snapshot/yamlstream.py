"""Reading a large YAML snapshot a piece at a time, parsed by rapidyaml into JSON text.

PyYAML builds a Python object per node: 15,000 production-like pods as `kubectl get -o yaml`
(198 MB) took minutes and gigabytes. rapidyaml parses into its own flat tree and writes it out
as JSON, which the loader's decoders read like any JSON; no Python object is made per node.

The file is cut where its structure shows in the text: documents at `---` lines, and a List's
items at the `- ` lines in column 0 under a column-0 `items:` (how kubectl prints its List).
A line in column 0 ends every block and plain scalar before it (their lines are indented), so
only a quoted scalar or a flow collection could run across a cut; then the piece before the cut
ends inside it and fails to parse, and the loader reads the whole file with PyYAML as before.

Which text rapidyaml may read is decided in yamlcheck.py; what it may not, PyYAML reads.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import sys
from collections.abc import Iterator
from typing import NamedTuple

import ryml  # type: ignore[import-untyped]

from desched.snapshot import yamlcheck

# A line in column 0 starting with something other than a space or a line break.
_COLUMN0 = re.compile(rb"\n(?=[^ \t\r\n])")
_DOC_START = re.compile(rb"---(?=[ \t\r\n]|\Z)[ \t]*(?:#[^\n]*)?(?:\r?\n|\Z)")
_DOC_MARK = re.compile(rb"(?:---|\.\.\.)(?=[ \t\r\n]|\Z)")
_ITEMS_LINE = re.compile(rb"items:[ \t]*(?:#[^\n]*)?\r?\n")
_ENTRY = re.compile(rb"-(?=[ \t\r\n]|\Z)")
_BLANK = re.compile(rb"(?:[ \t\r\n]+|#[^\n]*)*")


class Span(NamedTuple):
    start: int
    end: int


class ListShape(NamedTuple):
    """A document holding a List as kubectl prints it: its top-level keys but `items`, to be
    parsed as a small document, and the span of each item (a `- ` line to the next column-0
    line)."""

    header: bytes
    items: list[Span]


_SCAN_CHUNK = 16 << 20  # scanned, then released from resident memory, this much at a time


def _column0_lines(mm: mmap.mmap, size: int) -> Iterator[int]:
    """Where each line beginning in column 0 starts. The pages scanned are released a chunk at
    a time (the file may be gigabytes), after the caller has looked at each line's start."""
    if size and mm[0] not in b" \t\r\n":
        yield 0
    pos = 0
    while pos < size:
        stop = min(pos + _SCAN_CHUNK, size)
        # One byte past the chunk, for the lookahead of a line break at its last byte.
        for match in _COLUMN0.finditer(mm, pos, min(stop + 1, size)):
            yield match.end()
        if stop < size:
            aligned = pos - pos % mmap.PAGESIZE
            mm.madvise(mmap.MADV_DONTNEED, aligned, stop - aligned)
        pos = stop


class Document(NamedTuple):
    span: Span
    explicit: bool  # started by `---` (counted by PyYAML even when empty)
    lines: list[int]  # its column-0 lines
    entries: list[bool]  # which of them are sequence entries (`- `)
    items_line: int  # the index of its first `items:` line, or -1


def documents(mm: mmap.mmap, size: int) -> list[Document] | None:
    """The documents of a file cut at its `---` lines, or None when a cut could be wrong or
    the file uses what a cut would break (directives, `...` ends, content after `---`)."""
    docs: list[Document] = []
    doc = Document(Span(0, size), False, [], [], -1)
    for line in _column0_lines(mm, size):
        first = mm[line]
        if first == ord("%") or (first == ord(".") and _DOC_MARK.match(mm, line)):
            return None
        if first == ord("-") and _DOC_MARK.match(mm, line):
            marker = _DOC_START.match(mm, line)
            if marker is None:
                return None
            docs.append(doc._replace(span=Span(doc.span.start, line)))
            doc = Document(Span(marker.end(), size), True, [], [], -1)
            continue
        if doc.items_line < 0 and first == ord("i") and _ITEMS_LINE.match(mm, line):
            doc = doc._replace(items_line=len(doc.lines))
        doc.lines.append(line)
        doc.entries.append(first == ord("-") and _ENTRY.match(mm, line) is not None)
    docs.append(doc)
    return [doc for doc in docs if doc.explicit or not is_blank(mm, doc.span)]


def is_blank(mm: mmap.mmap, span: Span) -> bool:
    """Only blank lines and comments: no document to PyYAML."""
    match = _BLANK.match(mm, span.start, span.end)
    return match is not None and match.end() == span.end


def list_shape(mm: mmap.mmap, doc: Document) -> ListShape | None:
    """The document's items when it is a mapping with a column-0 `items:` followed by column-0
    `- ` entries (kubectl's List), else None."""
    lines, entries, at = doc.lines, doc.entries, doc.items_line
    if at < 0 or at + 1 >= len(lines) or not entries[at + 1]:
        return None
    first = last = at + 1
    while last < len(lines) and entries[last]:
        last += 1
    if any(entries[:at]) or any(entries[last:]):
        return None  # entries outside `items:`: a sequence document, read whole
    trailer = lines[last] if last < len(lines) else doc.span.end
    items = [Span(lines[i], lines[i + 1] if i + 1 < last else trailer)
             for i in range(first, last)]
    header = mm[doc.span.start:lines[at]] + b"items: []\n" + mm[trailer:doc.span.end]
    return ListShape(header, items)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """rapidyaml prints a parse error to file descriptor 2 before raising it; the loader
    reports errors itself (PyYAML's reading), on one line."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class Parser:
    """rapidyaml with one tree and one output buffer reused for every piece."""

    def __init__(self) -> None:
        self._tree = ryml.Tree()
        # Written in place: rapidyaml's own emit_json leaked its output (measured: 18 KB a pod).
        self._buffer = bytearray(1 << 20)

    quiet = staticmethod(_quiet_stderr)

    def item_to_json(self, mm: mmap.mmap, span: Span) -> bytes | None:
        """A List item's JSON text, as `to_json` gives it, less its managedFields where they can
        be cut out of the text (yamlcheck.without_managed_fields): a third to a half of a pod's
        text is then neither checked, parsed, written as JSON nor decoded."""
        kept = yamlcheck.without_managed_fields(mm, span.start, span.end)
        if kept is None:
            return self.to_json(memoryview(mm)[span.start:span.end], item=True)
        return self._parsed(kept.text, item=True, tokens=kept.tokens)

    def to_json(self, piece: memoryview | bytes, item: bool) -> bytes | None:
        """The piece as JSON text (`item`: the one entry of a `- ` piece), `null` for an empty
        document, or None when rapidyaml cannot parse it or the text is suspect: PyYAML must
        decide. Call within `quiet()`."""
        tokens = yamlcheck.tokens(piece)
        if tokens is None:
            return None
        return self._parsed(piece, item, tokens)

    def _parsed(self, piece: memoryview | bytes, item: bool,
                tokens: frozenset[bytes]) -> bytes | None:
        tree = self._tree
        tree.clear()
        tree.clear_arena()
        try:
            ryml.parse_in_arena(piece, tree)
            root = tree.root_id()
            if item:
                if not tree.is_seq(root) or tree.num_children(root) != 1:
                    return None
                root = tree.first_child(root)
            elif tree.size() == 1 and not tree.has_val(root) and not tree.is_container(root):
                return b"null"
            try:
                out = ryml.emit_json_in_place(tree, self._buffer, root)
            except IndexError:
                self._buffer = bytearray(2 * ryml.compute_json_length(tree, root))
                out = ryml.emit_json_in_place(tree, self._buffer, root)
        except ryml.ExceptionBasic:
            return None
        # A copy: the buffer is written over by the next piece, and decoded objects may keep
        # slices of their text (msgspec.Raw) until the loader detaches them.
        return yamlcheck.reconcile(bytes(out), tokens) if tokens else bytes(out)

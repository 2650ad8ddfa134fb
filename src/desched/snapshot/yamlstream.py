"""Reading a large YAML snapshot a piece at a time, parsed by rapidyaml into JSON text.

PyYAML builds a Python object per node: 15,000 production-like pods as `kubectl get -o yaml`
(198 MB) took minutes and gigabytes. rapidyaml parses into its own flat tree and writes it out
as JSON, which the loader's decoders read like any JSON; no Python object is made per node.

The file is cut where its structure shows in the text: documents at `---` lines, and a List's
items at the `- ` lines in column 0 under a column-0 `items:` (how kubectl prints its List).
A line in column 0 ends every block and plain scalar before it (their lines are indented), so
only a quoted scalar or a flow collection could run across a cut; then the piece before the cut
ends inside it and fails to parse, and the loader reads the whole file with PyYAML as before.

rapidyaml reads YAML 1.2; desched has read snapshots with PyYAML's YAML 1.1 rules, where a
plain `yes`, `0x1F`, `1_000`, `1:20`, `~` or `.inf` is not a string and `1e3` is. A piece whose
text holds such a plain token (or a tag, an anchor or alias, a merge key, a tab) is not given
to rapidyaml: the loader parses it with PyYAML within its bounds (nesting, alias expansion).
The check is conservative, with one refinement: a suspect word or number in block context
(`No` ending a line of a message folded at 80 columns, a pod-template-hash like 41152685e7) is
looked up in rapidyaml's JSON and typed by PyYAML's own resolver. Inside longer text it is text
to both; a whole value PyYAML reads as a string is quoted where rapidyaml wrote a number; any
other whole value sends the piece to PyYAML.

A List item as kubectl prints it has its `metadata.managedFields` cut out of its text before it
is parsed: a third to a half of a pod's text that no plugin reads. The cut is made only where
nothing before or inside those lines (a quoted scalar left open at a line's end, a flow
collection, a tab, a Unicode line break) could run past their end; otherwise the item is parsed
whole. What managedFields hold is then not parsed at all, so an item whose only fault is there
is read where PyYAML would refuse the file.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import sys
from collections.abc import Iterator
from typing import NamedTuple

import re2  # type: ignore[import-untyped]
import ryml  # type: ignore[import-untyped]
import yaml

# A plain scalar starts a line or follows a space or a flow indicator, and ends a line or
# precedes a space, a comment, a flow indicator or a key's colon.
_BEFORE = rb"(?:^|[ \t\[{,])"
_AFTER = rb"[ \t]*(?:[,\]}#:\r\n]|$)"
# Plain scalars that PyYAML (YAML 1.1) and rapidyaml (YAML 1.2) read differently: booleans and
# nulls beside `true`, `false` and `null`; infinities and NaNs (rapidyaml also rewrites a plain
# `inf` as `.inf`); merge and value keys; numbers other than plain decimals like `-12` and
# `0.5`, which both read alike: bases, underscores, sexagesimals, exponents (a pod-template-hash
# `9512e17067` is a string to PyYAML and an out-of-range float to rapidyaml), a leading `+`,
# `.` or `0`, a trailing `.`. An IP address or version (two dots) is a string to both.
_WORDS = (rb"yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|True|TRUE|False|FALSE|Null|NULL|~|<<|="
          rb"|[-+]?\.?(?:inf|Inf|INF|nan|NaN|NAN)")
_NUMBER = (rb"[-+]?(?:0b[01_]+|0o?[0-7_]+|0x[0-9a-fA-F_]+)"
           rb"|\+[.0-9][0-9_.:eE+-]*|-?\.[0-9][0-9_.:eE+-]*|-?0[0-9_][0-9_.:eE+-]*"
           rb"|-?[0-9][0-9.]*[_:eE][0-9_.:eE+-]*|-?[0-9]+\.")
# Keys that PyYAML makes booleans, null or numbers written otherwise than read (`-0`, `1.50`).
_KEYWORD_KEY = rb"(?:true|false|null|-0|-?[0-9]+\.[0-9]+)[ \t]*:(?:[ \t]|$)"
# RE2: one pass of a finite automaton, about as fast as rapidyaml's parse; Python's `re` took
# five times longer over the same pods.
_SUSPECT_TEXT = (
    _BEFORE + rb"(?:(?:" + _WORDS + rb"|" + _NUMBER + rb")" + _AFTER
    + rb"|" + _KEYWORD_KEY
    + rb"|[&*!][^ \t\r\n]"  # an anchor, an alias or a tag
    + rb"|[\[{](?:[^\]}]|$)"  # a flow collection with content (kubectl writes only [] and {})
    + rb"|[?:](?:[ \t\r\n]|$)"  # a complex key, an empty key
    + rb"|[@`])"  # reserved indicators: PyYAML refuses them at a scalar's start
    # A block scalar's header with more than its chomping indicator (an indentation digit, or
    # text, which PyYAML refuses and rapidyaml ignores).
    + rb"|(?:^[ \t]*|[-:?][ \t]+)[|>]"
    + rb"(?:[-+](?:[^ \t\r\n]|[ \t]+[^ \t\r\n#])|[^-+ \t\r\n]|[ \t]+[^ \t\r\n#])"
    + rb"|\t"  # PyYAML takes `:` and a tab for a key's end; rapidyaml does not
    # NEL, LS, PS and a carriage return alone: line breaks to PyYAML (YAML 1.1), text to
    # rapidyaml. RE2 reads the pattern as UTF-8, so they are written as code points.
    + rb"|[\x{85}\x{2028}\x{2029}]|\r(?:[^\n]|\z)"
    # Characters PyYAML refuses anywhere in a stream, which rapidyaml passes on.
    + rb"|[\x{00}-\x{08}\x{0B}\x{0C}\x{0E}-\x{1F}\x{7F}-\x{84}\x{86}-\x{9F}\x{FFFE}\x{FFFF}]")
_SUSPECT = re2.compile(rb"(?m)" + _SUSPECT_TEXT)

# Text that could carry a scalar or a collection past the end of its line into a less indented
# one: a quoted scalar left open at a line's end (PyYAML does not hold its continuation lines to
# the indentation), a flow collection with content, a tab, a Unicode line break, a lone CR.
_NODE_START = rb"(?:^[ \t]*|[-:?][ \t]+|[ \t][!&][^ \t\r\n]*[ \t]+)"
_OPEN = (_NODE_START + rb"(?:'(?:[^'\n]|'')*|\"(?:[^\"\\\n]|\\.)*\\?)$"
         rb"|(?:^|[ \t\[{,])[\[{](?:[^\]}]|$)|\t|[\x{85}\x{2028}\x{2029}]|\r(?:[^\n]|\z)")
# kubectl's item: its keys sorted, so apiVersion and kind come before metadata, whose keys are
# at column 4; managedFields (3-7 KB of a pod's 10-14 KB, read by no plugin) is one of them.
_ITEM_HEAD = re.compile(rb"- apiVersion:[^\n]*\n  kind:[^\n]*\n  metadata:\r?\n")
_MANAGED_FIELDS = b"\n    managedFields:"
_LINE_END = re.compile(rb"[ \t]*\r?\n")
_OPEN_OR_SUSPECT = re2.compile(rb"(?m)" + _OPEN + rb"|" + _SUSPECT_TEXT)
# Within metadata before managedFields: open text, suspect text, a line above column 4 (not a
# metadata key's: metadata has ended) or one in column 4 that is not a plain key (a block
# scalar's header, a sequence's entry: metadata is not a mapping of keys in column 4).
_BEFORE_CUT = re2.compile(rb"(?m)" + _OPEN + rb"|" + _SUSPECT_TEXT
                          + rb"|^ {0,3}[^ \r\n]|^ {4}[^a-zA-Z \r\n]")
_FIRST_KEY = re.compile(rb" {4}[a-zA-Z]")
# From managedFields' value on: the first line in column 4 or less that is not one of its `- `
# entries (kubectl does not indent a sequence under its key) nor blank, where the cut ends
# (group 1), unless open text comes first.
_CUT_END = re2.compile(rb"(?m)(^(?: {0,3}[^ \r\n]| {4}[^ \r\n-]| {4}-[^ \r\n]))|" + _OPEN)
_KEY_LINE = re.compile(rb"(?:  |    )[^ #\r\n-]")

# A suspect plain token in block context: after a space or at a line's start, ending its line or
# before a comment (not a key: its colon, taken by the match, could hide what follows). Where it
# is a scalar of its own, rapidyaml's JSON holds it whole, written as it stands (quoted, or bare
# when it is a JSON number), and PyYAML's resolver says what it is; where it is part of a longer
# scalar (a message folded at 80 columns whose line ends in `No`), both read it as text
# (`_reconcile`). Tokens rapidyaml rewrites (`inf` as `.inf`, `.5` as `0.5`) are left to PyYAML.
_BLOCK_TOKEN = re.compile(rb"(?:[ \t]|^)(" + _WORDS + rb"|" + _NUMBER + rb")[ \t]*(?:[#\n]|$)")
_REWRITTEN = re.compile(rb"[-+]?\.?(?:inf|Inf|INF|nan|NaN|NAN)|[-+]?\.[0-9].*|.*[0-9]\.")


class _Resolver(yaml.resolver.Resolver):
    """PyYAML's implicit types as the loader reads them (timestamps are strings)."""


_Resolver.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
}
_STR = "tag:yaml.org,2002:str"


def _tokens(pattern: re2._Regexp, text: memoryview | bytes) -> frozenset[bytes] | None:
    """The suspect plain tokens the pattern finds, or None when it finds other suspect text."""
    found = set()
    for match in pattern.finditer(text):
        token = _BLOCK_TOKEN.fullmatch(match.group())
        # (A number may end in a colon, `1:`, which PyYAML takes for a key's end.)
        if token is None or token.group(1).endswith(b":") or _REWRITTEN.fullmatch(token.group(1)):
            return None
        found.add(token.group(1))
    return frozenset(found)


def _reconcile(text: bytes, tokens: frozenset[bytes]) -> bytes | None:
    """rapidyaml's JSON read as PyYAML reads the YAML, or None when that cannot be told: a token
    that is a string to PyYAML is quoted where rapidyaml wrote it as a number; one that is not a
    string must not be a whole JSON value (then it is inside longer text)."""
    resolve = _Resolver().resolve  # PyYAML's own implicit typing
    for token in tokens:
        bare = _bare(text, token)
        if resolve(yaml.ScalarNode, token.decode(), (True, False)) == _STR:  # type: ignore[no-untyped-call]
            for at in reversed(bare):
                text = text[:at] + b'"' + token + b'"' + text[at + len(token):]
        elif bare or b'"' + token + b'"' in text:
            return None
    return text


def _bare(text: bytes, token: bytes) -> list[int]:
    """Where the token is a whole bare value in rapidyaml's JSON: after a key's `: ` or alone on
    its line, before a comma or the line's end."""
    found = []
    for match in re.finditer(re.escape(token) + rb"(?=,?\n|\Z)", text):
        at = match.start()
        line = text.rfind(b"\n", 0, at) + 1
        if text.endswith(b": ", line, at) or not text[line:at].strip(b" "):
            found.append(at)
    return found


class Kept(NamedTuple):
    """An item's text less its managedFields, and the suspect tokens it holds."""

    text: bytes
    tokens: frozenset[bytes]


def without_managed_fields(mm: mmap.mmap, start: int, end: int) -> Kept | None:
    """The item in mm[start:end] with its `metadata.managedFields` cut out, or None when the
    item is not kubectl's shape or the cut could change what the rest reads as: then the whole
    item is parsed. Nothing but the lines of managedFields' value is cut, and only where no
    scalar or flow collection before or inside them can run past their end; the text kept is
    checked as `to_json` checks a piece."""
    head = _ITEM_HEAD.match(mm, start, end)
    if head is None:
        return None
    cut = mm.find(_MANAGED_FIELDS, head.end() - 1, end)
    line = None if cut < 0 else _LINE_END.match(mm, cut + len(_MANAGED_FIELDS), end)
    if line is None:
        return None
    view = memoryview(mm)
    value = line.end()
    after = _CUT_END.search(view[value:end])
    if after is None:
        resume = end
    elif after.start(1) < 0:
        return None  # open text within managedFields
    else:
        resume = value + after.start()
        if _KEY_LINE.match(mm, resume, end) is None:
            return None
    if cut + 1 > head.end() and _FIRST_KEY.match(mm, head.end(), cut) is None:
        return None  # metadata's keys are not in column 4
    if cut + 1 == head.end() and not (resume < end and mm[resume:resume + 4] == b"    "):
        return None  # managedFields is metadata's only key: cut, metadata would read as null
    head_tokens = _tokens(_OPEN_OR_SUSPECT, view[start:head.end()])
    before = _tokens(_BEFORE_CUT, view[head.end():cut + 1])
    rest = _tokens(_SUSPECT, view[resume:end])
    if head_tokens is None or before is None or rest is None:
        return None
    return Kept(mm[start:cut + 1] + mm[resume:end], head_tokens | before | rest)


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


def suspect(piece: memoryview | bytes) -> bool:
    """Whether the piece holds text that rapidyaml could read otherwise than PyYAML."""
    return _SUSPECT.search(piece) is not None


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
        be cut out of the text (without_managed_fields): a third to a half of a pod's text is
        then neither checked, parsed, written as JSON nor decoded."""
        kept = without_managed_fields(mm, span.start, span.end)
        if kept is None:
            return self.to_json(memoryview(mm)[span.start:span.end], item=True)
        return self._parsed(kept.text, item=True, tokens=kept.tokens)

    def to_json(self, piece: memoryview | bytes, item: bool) -> bytes | None:
        """The piece as JSON text (`item`: the one entry of a `- ` piece), `null` for an empty
        document, or None when rapidyaml cannot parse it or the text is suspect: PyYAML must
        decide. Call within `quiet()`."""
        tokens = _tokens(_SUSPECT, piece)
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
        return _reconcile(bytes(out), tokens) if tokens else bytes(out)

"""Which YAML text rapidyaml may read in PyYAML's stead, and managedFields cut out of an item.

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

import mmap
import re
from typing import NamedTuple

import re2  # type: ignore[import-untyped]
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
# A flow collection with content (kubectl writes only [] and {}), after _BEFORE.
_FLOW = rb"[\[{](?:[^\]}]|$)"
# NEL, LS, PS and a carriage return alone: line breaks to PyYAML (YAML 1.1), text to rapidyaml.
# RE2 reads the pattern as UTF-8, so they are written as code points.
_BREAKS = rb"[\x{85}\x{2028}\x{2029}]|\r(?:[^\n]|\z)"
# RE2: one pass of a finite automaton, about as fast as rapidyaml's parse; Python's `re` took
# five times longer over the same pods.
_SUSPECT_TEXT = (
    _BEFORE + rb"(?:(?:" + _WORDS + rb"|" + _NUMBER + rb")" + _AFTER
    + rb"|" + _KEYWORD_KEY
    + rb"|[&*!][^ \t\r\n]"  # an anchor, an alias or a tag
    + rb"|" + _FLOW
    + rb"|[?:](?:[ \t\r\n]|$)"  # a complex key, an empty key
    + rb"|[@`])"  # reserved indicators: PyYAML refuses them at a scalar's start
    # A block scalar's header with more than its chomping indicator (an indentation digit, or
    # text, which PyYAML refuses and rapidyaml ignores).
    + rb"|(?:^[ \t]*|[-:?][ \t]+)[|>]"
    + rb"(?:[-+](?:[^ \t\r\n]|[ \t]+[^ \t\r\n#])|[^-+ \t\r\n]|[ \t]+[^ \t\r\n#])"
    + rb"|\t"  # PyYAML takes `:` and a tab for a key's end; rapidyaml does not
    + rb"|" + _BREAKS
    # Characters PyYAML refuses anywhere in a stream, which rapidyaml passes on.
    + rb"|[\x{00}-\x{08}\x{0B}\x{0C}\x{0E}-\x{1F}\x{7F}-\x{84}\x{86}-\x{9F}\x{FFFE}\x{FFFF}]")
_SUSPECT = re2.compile(rb"(?m)" + _SUSPECT_TEXT)

# Text that could carry a scalar or a collection past the end of its line into a less indented
# one: a quoted scalar left open at a line's end (PyYAML does not hold its continuation lines to
# the indentation), a flow collection with content, a tab, a Unicode line break, a lone CR.
_NODE_START = rb"(?:^[ \t]*|[-:?][ \t]+|[ \t][!&][^ \t\r\n]*[ \t]+)"
_OPEN = (_NODE_START + rb"(?:'(?:[^'\n]|'')*|\"(?:[^\"\\\n]|\\.)*\\?)$"
         + rb"|" + _BEFORE + _FLOW + rb"|\t|" + _BREAKS)
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
# (`reconcile`). Tokens rapidyaml rewrites (`inf` as `.inf`, `.5` as `0.5`) are left to PyYAML.
_BLOCK_TOKEN = re.compile(rb"(?:[ \t]|^)(" + _WORDS + rb"|" + _NUMBER + rb")[ \t]*(?:[#\n]|$)")
_REWRITTEN = re.compile(rb"[-+]?\.?(?:inf|Inf|INF|nan|NaN|NAN)|[-+]?\.[0-9].*|.*[0-9]\.")


class SnapshotLoader(yaml.CSafeLoader):
    """PyYAML's reading of a snapshot, the reference for rapidyaml's: the C safe loader,
    keeping timestamps as strings so they decode like the JSON path."""


SnapshotLoader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.CSafeLoader.yaml_implicit_resolvers.items()
}
_STR = "tag:yaml.org,2002:str"


# A line whose value is one quoted scalar closed on the line: an optional sequence entry and
# plain key before it, nothing but a comment after. A `[` or `{` inside it is text (a kubelet's
# "containers with unready status: [main]", an annotation holding JSON), not a flow collection.
_QUOTED_LINE = re.compile(
    rb"[ \t]*(?:-[ \t]+)*(?:[^ \t'\"#\[\]{},:&*!|>%@`?-][^:#\r\n]*?:[ \t]+)?"
    rb"('(?:[^'\r\n]|'')*'|\"(?:[^\"\\\r\n]|\\.)*\")[ \t]*(?:#[^\r\n]*)?\r?")


def _in_closed_quotes(text: memoryview | bytes, at: int) -> bool:
    """Whether offset `at` of `text` lies inside a quoted scalar that opens and closes on its
    line (the line's whole value: see _QUOTED_LINE). Asked only of suspect text."""
    data = bytes(text) if isinstance(text, memoryview) else text
    start = data.rfind(b"\n", 0, at) + 1
    end = data.find(b"\n", at)
    line = _QUOTED_LINE.fullmatch(data, start, len(data) if end < 0 else end)
    return line is not None and line.start(1) < at < line.end(1) - 1


def _found(pattern: re2._Regexp, text: memoryview | bytes) -> frozenset[bytes] | None:
    """The suspect plain tokens the pattern finds, or None when it finds other suspect text."""
    found = set()
    for match in pattern.finditer(text):
        raw = bytes(match.group())
        rest = raw.lstrip(b" \t,")
        if rest[:1] in (b"[", b"{") and _in_closed_quotes(
                text, match.start() + len(raw) - len(rest)):
            continue  # text inside a closed quoted scalar, as both parsers read it
        token = _BLOCK_TOKEN.fullmatch(match.group())
        # (A number may end in a colon, `1:`, which PyYAML takes for a key's end.)
        if token is None or token.group(1).endswith(b":") or _REWRITTEN.fullmatch(token.group(1)):
            return None
        found.add(token.group(1))
    return frozenset(found)


def reconcile(text: bytes, tokens: frozenset[bytes]) -> bytes | None:
    """rapidyaml's JSON read as PyYAML reads the YAML, or None when that cannot be told: a token
    that is a string to PyYAML is quoted where rapidyaml wrote it as a number; one that is not a
    string must not be a whole JSON value (then it is inside longer text)."""
    resolve = SnapshotLoader("").resolve  # PyYAML's own implicit typing
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
    checked as `tokens` checks a piece."""
    head = _ITEM_HEAD.match(mm, start, end)
    if head is None:
        return None
    cut = mm.find(_MANAGED_FIELDS, head.end() - 1, end)
    line = None if cut < 0 else _LINE_END.match(mm, cut + len(_MANAGED_FIELDS), end)
    if line is None:
        return None
    if cut + 1 > head.end() and _FIRST_KEY.match(mm, head.end(), cut) is None:
        return None  # metadata's keys are not in column 4
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
    if cut + 1 == head.end() and not (resume < end and mm[resume:resume + 4] == b"    "):
        return None  # managedFields is metadata's only key: cut, metadata would read as null
    head_tokens = _found(_OPEN_OR_SUSPECT, view[start:head.end()])
    before = _found(_BEFORE_CUT, view[head.end():cut + 1])
    rest = _found(_SUSPECT, view[resume:end])
    if head_tokens is None or before is None or rest is None:
        return None
    return Kept(mm[start:cut + 1] + mm[resume:end], head_tokens | before | rest)


def tokens(piece: memoryview | bytes) -> frozenset[bytes] | None:
    """The suspect plain tokens in a piece, for `reconcile`, or None when it holds other text
    rapidyaml could read otherwise than PyYAML: then PyYAML reads it."""
    return _found(_SUSPECT, piece)

"""A candidate written as a policy file in the input's own format: the new values spliced into
the user's text, so comments, key order, quoting and layout stay where they were.

The text is composed with PyYAML (pure Python, so every node's marks index characters of the
text) and walked beside the document before and after `knobs.apply_policy`: a changed scalar is
replaced where it stands; a missing key is inserted after its mapping's last entry, as a new line
at the entries' indentation in a block mapping, or `, key: value` (JSON: `"key": value`) in a flow
one, with the separators its entries already use. A ConfigMap's policy is text inside a string:
its edits are made on that text and carried back into a literal block line by line (re-indented),
or the whole string is rewritten as a JSON-quoted one.

The result must load to the candidate `knobs.candidate` makes; when it does not, or the text
cannot be spliced (a value shared through a YAML anchor, merge keys), the document is written
anew, with a comment saying the input's comments were not kept (YAML).
"""

from __future__ import annotations

import bisect
import copy
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from desched.decoding.document import one_document
from desched.errors import InputError
from desched.framework.policy import Policy
from desched.policy_files.convert import dump_yaml
from desched.policy_files.loader import policy_from_document
from desched.tune.knobs import Knob, Value, apply, apply_policy, candidate, configmap_key

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _CannotSplice(Exception):
    """The text cannot be edited in place; the message says why, for the comment."""


@dataclass(frozen=True)
class _Splice:
    start: int
    end: int
    text: str


def _compose(text: str) -> yaml.Node:
    """The text's one document as nodes, marks indexing its characters."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is None:
        raise _CannotSplice("the text holds no document")
    return root


def _number_text(value: float) -> str:
    text = repr(float(value))
    # PyYAML reads 1e-05 as a string (YAML 1.1 floats need a dot).
    return text.replace("e", ".0e") if "e" in text and "." not in text else text


class _Editor:
    """The splices that turn `text` (whose document is `old`) into one holding `new`."""

    def __init__(self, text: str, as_json: bool) -> None:
        self.text = text
        self.as_json = as_json
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.root = _compose(text)
        self.splices: list[_Splice] = []
        self._keys = yaml.SafeLoader("")
        self._uses = self._count_uses() if "*" in text else Counter[int]()

    def _count_uses(self) -> Counter[int]:
        """How often each node is reached: above once, it is shared through an anchor."""
        uses: Counter[int] = Counter()
        stack = [self.root]
        while stack:
            node = stack.pop()
            uses[id(node)] += 1
            if isinstance(node, yaml.MappingNode):
                stack.extend(n for pair in node.value for n in pair)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)
        return uses

    # -- rendering new values ----------------------------------------------------------------

    def _string(self, text: str, quoted: bool = False) -> str:
        plain = (not self.as_json and not quoted and _PLAIN_KEY.fullmatch(text) is not None
                 and yaml.safe_load(text) == text)
        return text if plain else json.dumps(text, ensure_ascii=False)

    def render(self, value: Any) -> str:
        """`value` in flow style (JSON's in a JSON file)."""
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            return _number_text(value)
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, dict):
            return "{" + ", ".join(f"{self._string(str(k))}: {self.render(v)}"
                                   for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(self.render(v) for v in value) + "]"
        raise _CannotSplice(f"cannot write a {type(value).__name__}")

    # -- walking -----------------------------------------------------------------------------

    def diff(self, node: yaml.Node, old: Any, new: Any) -> None:
        if _same(old, new):
            return
        if self._uses[id(node)] > 1:
            raise _CannotSplice("a changed value is shared through a YAML anchor")
        if isinstance(node, yaml.MappingNode) and isinstance(old, dict) and \
                isinstance(new, dict):
            self._mapping(node, old, new)
        elif isinstance(node, yaml.SequenceNode) and isinstance(old, list) and \
                isinstance(new, list):
            self._sequence(node, old, new)
        elif isinstance(node, yaml.ScalarNode):
            self._replace(node, new)
        else:
            raise _CannotSplice(f"a {type(node).__name__} became a {type(new).__name__}")

    def _replace(self, node: yaml.ScalarNode, new: Any) -> None:
        start, end = node.start_mark.index, node.end_mark.index
        text = self.render(new)
        if start == end and start > 0 and self.text[start - 1] == ":":
            text = f" {text}"  # `args:` with nothing after it
        self.splices.append(_Splice(start, end, text))

    def _mapping(self, node: yaml.MappingNode, old: dict[Any, Any], new: dict[Any, Any]) -> None:
        entries: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                raise _CannotSplice("the policy uses YAML merge keys")
            key = self._keys.construct_object(key_node, deep=True)
            if key in entries:
                raise _CannotSplice(f"key {key!r} appears twice")
            entries[key] = value_node
        if set(old) - set(new) or set(old) != set(entries):
            raise _CannotSplice("the mapping's keys are not the text's")
        missing = []
        # New keys quoted when the mapping's keys are ("cpu": 20).
        quoted = bool(node.value) and node.value[0][0].style == '"'
        for key, value in new.items():
            if key in entries:
                self.diff(entries[key], old[key], value)
            else:
                missing.append(f"{self._string(str(key), quoted)}: {self.render(value)}")
        if missing:
            pairs = [(k, v) for k, v in node.value]
            self._insert(node, missing, pairs[0] if pairs else None,
                         [v for _, v in pairs] if node.flow_style else [])

    def _sequence(self, node: yaml.SequenceNode, old: list[Any], new: list[Any]) -> None:
        if len(new) < len(old) or len(node.value) != len(old):
            raise _CannotSplice("a list lost items")
        for item, before, after in zip(node.value, old, new, strict=False):
            self.diff(item, before, after)
        extra = [self.render(v) for v in new[len(old):]]
        if extra:
            if node.flow_style:
                self._insert(node, extra, None, list(node.value))
            else:
                self._append_lines(node, [f"- {item}" for item in extra],
                                   node.start_mark.column)

    def _insert(self, node: yaml.CollectionNode, items: list[str],
                first: tuple[yaml.Node, yaml.Node] | None, values: list[yaml.Node]) -> None:
        """Add `items` (rendered `key: value` entries or list items) at the end of `node`."""
        if not node.flow_style:
            assert first is not None  # a block mapping has an entry
            self._append_lines(node, items, first[0].start_mark.column)
            return
        text = self.text
        if first is not None:  # the colon as the mapping writes it: `: `, `:`
            colon = text[first[0].end_mark.index:first[1].start_mark.index]
            if "#" not in colon and colon.strip() == ":":
                items = [item.replace(": ", colon, 1) for item in items]
        if not values:  # `{}` or `[]`
            self.splices.append(_Splice(node.start_mark.index + 1, node.start_mark.index + 1,
                                        ", ".join(items)))
            return
        keys = [k for k, _ in node.value] if isinstance(node, yaml.MappingNode) else values
        if len(values) > 1:
            sep = text[values[0].end_mark.index:keys[1].start_mark.index]
        else:
            opening = text[node.start_mark.index + 1:keys[0].start_mark.index]
            sep = "," + opening if "\n" in opening else ", "
        if "#" in sep or sep.strip() != ",":
            sep = ", "
        end = values[-1].end_mark.index
        self.splices.append(_Splice(end, end, "".join(sep + item for item in items)))

    def _append_lines(self, node: yaml.Node, lines: list[str], column: int) -> None:
        """New lines after the last line of a block collection's content."""
        last = node
        while isinstance(last, yaml.MappingNode | yaml.SequenceNode) and not last.flow_style \
                and last.value:
            last = last.value[-1][1] if isinstance(last, yaml.MappingNode) else last.value[-1]
        at = last.end_mark.index
        while at > last.start_mark.index and self.text[at - 1] in " \t\r\n":
            at -= 1
        newline = self.text.find("\n", at)
        at = len(self.text) if newline < 0 else newline
        if at > 0 and self.text[at - 1] == "\r":
            at -= 1
        self.splices.append(_Splice(at, at, "".join(f"{self.newline}{' ' * column}{line}"
                                                    for line in lines)))


def _same(a: Any, b: Any) -> bool:
    return bool(a == b) and isinstance(a, bool) == isinstance(b, bool) and \
        (not isinstance(a, dict | list) or _same_nested(a, b))


def _same_nested(a: Any, b: Any) -> bool:
    """Equal collections whose leaves are also equal in kind (1 == True is not the same)."""
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return all(_same(x, y) for x, y in zip(a, b, strict=True))


def _is_json(text: str) -> bool:
    if not text.lstrip().startswith("{"):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _edits(text: str, old: dict[str, Any], new: dict[str, Any]) -> list[_Splice]:
    editor = _Editor(text, _is_json(text))
    editor.diff(editor.root, old, new)
    return editor.splices


def _apply_splices(text: str, splices: list[_Splice]) -> str:
    """`text` with the splices made from the last to the first, so the earlier indexes still
    hold; of two at one index the later made goes first, which leaves them in their order."""
    out = text
    ordered = sorted(enumerate(splices), key=lambda p: (p[1].start, p[0]), reverse=True)
    for _, splice in ordered:
        out = out[:splice.start] + splice.text + out[splice.end:]
    return out


def _spliced(text: str, document: dict[str, Any], policy: Policy,
             assignment: Mapping[Knob, Value], path: str) -> str:
    key = configmap_key(document)
    if key is None:
        new = apply_policy(copy.deepcopy(document), policy, assignment)
        return _apply_splices(text, _edits(text, document, new))
    inner_text = document["data"][key]
    inner = one_document(f"{path}[{key}]", inner_text, "policy")
    new_inner = apply_policy(copy.deepcopy(inner), policy, assignment)
    inner_splices = _edits(inner_text, inner, new_inner)
    node = _child(_child(_compose(text), "data"), key)
    if not isinstance(node, yaml.ScalarNode):
        raise _CannotSplice("the ConfigMap's policy is not a string")
    outer = _block_splices(text, node, inner_text, inner_splices)
    if outer is None:  # not a literal block: the string written anew, JSON-quoted
        written = json.dumps(_apply_splices(inner_text, inner_splices), ensure_ascii=False)
        outer = [_Splice(node.start_mark.index, node.end_mark.index, written)]
    return _apply_splices(text, outer)


def _child(node: yaml.Node, key: str) -> yaml.Node:
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return value
    raise _CannotSplice(f"no {key} in the ConfigMap")


def _block_splices(text: str, node: yaml.ScalarNode, inner: str,
                   splices: list[_Splice]) -> list[_Splice] | None:
    """The inner text's splices carried into the literal block `node` holds it in, lines
    re-indented; None when the block is not a plain literal one (folded, an explicit
    indentation, lines that do not read back as the inner text)."""
    header_end = text.find("\n", node.start_mark.index)
    header = text[node.start_mark.index:header_end].split("#")[0].strip()
    if node.style != "|" or header_end < 0 or header not in ("|", "|-", "|+"):
        return None
    outer_lines = text[header_end + 1:].split("\n")
    starts = [header_end + 1]
    for line in outer_lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    inner_lines = inner.split("\n")
    content = [line.rstrip("\r") for line in outer_lines[:len(inner_lines)]]
    filled = [line for line in content if line.strip()]
    if not filled:
        return None
    indent = len(filled[0]) - len(filled[0].lstrip(" "))
    for want, have in zip(inner_lines, content, strict=False):
        if want and (have[:indent] != " " * indent or have[indent:] != want):
            return None
    inner_starts = [0]
    for line in inner_lines[:-1]:
        inner_starts.append(inner_starts[-1] + len(line) + 1)

    def outer(index: int) -> int:
        row = bisect.bisect_right(inner_starts, index) - 1
        return starts[row] + indent + index - inner_starts[row]

    newline = ("\r\n" if "\r\n" in text else "\n") + " " * indent
    return [_Splice(outer(s.start), outer(s.end), s.text.replace("\n", newline))
            for s in splices]


def _same_policy(a: Policy, b: Policy) -> bool:
    return ([(p.name, p.args, p.enabled) for p in a.profiles]
            == [(p.name, p.args, p.enabled) for p in b.profiles]
            and a.limits == b.limits and a.format == b.format)


def _anew(document: dict[str, Any], policy: Policy, assignment: Mapping[Knob, Value],
          as_json: bool, reason: str) -> str:
    doc = apply(document, policy, assignment)
    if as_json:
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return (f"# written anew by desched tune: the input's comments and layout were not kept "
            f"({reason})\n" + dump_yaml(doc, block_text=True))


def write_policy(text: str, path: str, policy: Policy,
                 assignment: Mapping[Knob, Value]) -> str:
    """The candidate `assignment` makes of `policy` (loaded from `text`, the file at `path`) as
    a policy file in the input's format: JSON for JSON, the same apiVersion, kind and wrapper,
    the values spliced into the text. Loading it gives the policy `knobs.candidate` does; an
    invalid candidate raises as `candidate` does."""
    document = one_document(path, text, "policy")
    expected = candidate(path, document, policy, assignment)
    as_json = _is_json(text)
    try:
        written = _spliced(text, document, policy, assignment, path)
        loaded = policy_from_document(path, one_document(path, written, "policy"),
                                      policy.plugins)
    except (_CannotSplice, InputError, yaml.YAMLError) as err:
        return _anew(document, policy, assignment, as_json, str(err))
    if not _same_policy(loaded, expected):
        return _anew(document, policy, assignment, as_json,
                     "the edited text did not load as the candidate")
    return written

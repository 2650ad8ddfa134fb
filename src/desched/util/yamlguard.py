"""Loading YAML with bounded nesting and alias expansion.

PyYAML's C composer recurses once per nesting level (builds without libyaml's own nesting limit
crash the interpreter on `[[[[...`), and aliases are composed as shared nodes that later code —
encoding to JSON, walking a policy — expands: a 16 KB "billion laughs" document took 90 s and
12 GiB. So the event stream is checked first, iteratively, before anything is composed. The
check costs about a quarter of a load, so it runs only when a cheap scan of the text says the
document could be deep or could use aliases at all.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

MAX_DEPTH = 256  # Kubernetes objects nest about 15 deep; msgspec and Python recurse per level
MAX_ALIAS_NODES = 1_000_000  # nodes that aliases may add once expanded

# A line starting with this many indentation or block-indicator characters could nest as deep
# (each block level adds a column, or a `- `/`? `/`: ` on the same line).
_DEEP_LINE = re.compile(rf"^[ \t?:-]{{{MAX_DEPTH // 2},}}", re.MULTILINE)


class YamlLimitError(ValueError):
    """A document nested too deeply or whose aliases expand too far."""


def describe_yaml_error(err: yaml.YAMLError) -> str:
    """`line N: problem` from a PyYAML error, on one line."""
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    return f"{where}{problem}"


def _could_exceed(text: str) -> bool:
    return ("*" in text or text.count("[") + text.count("{") >= MAX_DEPTH // 2
            or _DEEP_LINE.search(text) is not None)


def _line(event: yaml.Event) -> str:
    return f"line {event.start_mark.line + 1}" if event.start_mark is not None else "input"


def _check_events(text: str, loader: type[yaml.CSafeLoader]) -> None:
    """Raises YamlLimitError on the first collection nested deeper than MAX_DEPTH or once
    aliases expand to more than MAX_ALIAS_NODES nodes; yaml.YAMLError on invalid YAML."""
    parser = loader(text)
    sizes: list[int] = []  # expanded node count of each open collection
    anchors: list[str | None] = []
    expanded: dict[str, int] = {}  # anchor -> nodes it stands for
    added = 0
    try:
        while parser.check_event():
            event = parser.get_event()
            if isinstance(event, yaml.CollectionStartEvent):
                if len(sizes) >= MAX_DEPTH:
                    raise YamlLimitError(f"{_line(event)}: nesting deeper "
                                         f"than {MAX_DEPTH} levels")
                sizes.append(1)
                anchors.append(event.anchor)
            elif isinstance(event, yaml.CollectionEndEvent):
                size, anchor = sizes.pop(), anchors.pop()
                if anchor is not None:
                    expanded[anchor] = size
                if sizes:
                    sizes[-1] += size
            elif isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
                size = 1
                if isinstance(event, yaml.AliasEvent):
                    if event.anchor in anchors:  # would compose a cyclic structure
                        raise YamlLimitError(f"{_line(event)}: alias "
                                             f"*{event.anchor} refers to its own ancestor")
                    size = expanded.get(event.anchor or "", 1)
                    added += size
                    if added > MAX_ALIAS_NODES:
                        raise YamlLimitError(f"{_line(event)}: aliases "
                                             f"expand to more than {MAX_ALIAS_NODES} nodes")
                elif event.anchor is not None:
                    expanded[event.anchor] = 1
                if sizes:
                    sizes[-1] += size
            elif isinstance(event, yaml.DocumentStartEvent):
                expanded.clear()  # anchors are local to a document
    finally:
        parser.dispose()


def load_all(text: str, loader: type[yaml.CSafeLoader] = yaml.CSafeLoader) -> list[Any]:
    """Every document in `text`; YamlLimitError (message starts `line N:`) past the bounds,
    yaml.YAMLError when it is not YAML."""
    if _could_exceed(text):
        _check_events(text, loader)
    return list(yaml.load_all(text, Loader=loader))

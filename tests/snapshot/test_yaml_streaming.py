"""YAML snapshots read a piece at a time through rapidyaml: the same objects and errors as
PyYAML reading the whole file, an item at a time for kubectl's List."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

import desched.snapshot.loader as loader
from desched.errors import InputError
from desched.snapshot import yamlcheck, yamlstream
from desched.snapshot.loader import load_snapshot, read_objects

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}


def pod(name: str, **labels: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}",
                         "labels": labels or {"app": "a"},
                         "annotations": {"note": "- starts like an entry\n- and again\n"}},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def kubectl_yaml(items: list[dict[str, Any]]) -> str:
    """A List as `kubectl get -o yaml` prints it: items at column 0 under `items:`."""
    return yaml.safe_dump({"apiVersion": "v1", "items": items, "kind": "List",
                           "metadata": {"resourceVersion": ""}}, default_flow_style=False)


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return str(path)


def read(path: str) -> list[Any]:
    return list(read_objects(path, warn=lambda message: None))


def read_whole(path: str, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What PyYAML reading the whole file gives (the loader before rapidyaml)."""
    with monkeypatch.context() as patch:
        patch.setattr(yamlstream, "documents", lambda mm, size: None)
        return read(path)


class _Pieces:
    """Records the size of every piece given to rapidyaml."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        to_json = yamlstream.Parser.to_json

        def recording(parser: yamlstream.Parser, piece: Any, item: bool) -> bytes | None:
            self.sizes.append(len(piece))
            return to_json(parser, piece, item)

        monkeypatch.setattr(yamlstream.Parser, "to_json", recording)


def test_kubectl_list_is_read_an_item_at_a_time(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    items = [NODE] + [pod(f"p{i}") for i in range(1200)]
    path = write(tmp_path, "big.yaml", kubectl_yaml(items))
    size = Path(path).stat().st_size
    pieces = _Pieces(monkeypatch)
    batches = list(loader.read_batches(path, warn=lambda message: None))
    assert sum(len(batch) for batch in batches) == 1201
    assert max(len(batch) for batch in batches) <= loader.BATCH  # objects held at once
    assert len(pieces.sizes) == 1201  # one parse per item, none of the whole document
    assert max(pieces.sizes) < size / 500
    assert read(path) == read_whole(path, monkeypatch)


def test_items_pinned_by_a_hash_that_is_a_float_to_yaml_1_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A pod-template-hash like 9512e17067 is a string to PyYAML (and kubectl prints it plain)
    # but an out-of-range float to rapidyaml: that item is read by PyYAML.
    text = kubectl_yaml([NODE, pod("a", hash="x")])
    path = write(tmp_path, "hash.yaml", text.replace("hash: x", "hash: 9512e17067"))
    assert read(path)[1].metadata.labels == {"hash": "9512e17067"}
    assert read(path) == read_whole(path, monkeypatch)
    # 0x1F is 31 to PyYAML (a label that is not a string) and a string to rapidyaml.
    path = write(tmp_path, "hex.yaml", text.replace("hash: x", "hash: 0x1F"))
    for reading in (read, lambda path: read_whole(path, monkeypatch)):
        with pytest.raises(InputError, match=r"item 1 .*Expected `str`, got `int`"):
            reading(path)


@pytest.mark.parametrize("text", [
    # multi-document, with an empty explicit document and a leading `---`
    "---\n" + yaml.safe_dump(NODE) + "---\n# nothing\n---\n" + yaml.safe_dump(pod("a")),
    yaml.safe_dump(pod("a")),  # a single object
    "apiVersion: v1\nitems: []\nkind: List\nmetadata:\n  resourceVersion: ''\n",
    kubectl_yaml([NODE, pod("a"), pod("b")]).replace("\n", "\r\n"),  # Windows line endings
    # a block scalar whose lines start like entries, inside items
    kubectl_yaml([NODE, pod("a")]).replace("note: '- starts", "note: |\n        - starts", 1),
    # a flow List, and a typed List
    "apiVersion: v1\nkind: List\nitems: [" + msgspec.json.encode(NODE).decode() + "]\n",
    "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {nodeName: n1}\n",
])
def test_edge_cases_read_as_pyyaml_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              text: str) -> None:
    path = write(tmp_path, "s.yaml", text)
    assert read(path) == read_whole(path, monkeypatch)


def test_a_quoted_scalar_running_across_an_entry_line_is_read_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # PyYAML accepts a double-quoted scalar continued in column 0: the text cut at "- " would
    # end the first item inside the quotes, which fails, so the file is read whole.
    text = kubectl_yaml([NODE, pod("a")]).replace(
        "      app: a\n", '      app: "a\n- b"\n', 1)
    path = write(tmp_path, "s.yaml", text)
    objects = read(path)
    assert objects == read_whole(path, monkeypatch)
    assert objects[1].metadata.labels == {"app": "a - b"}


@pytest.mark.parametrize("brk", ["\x85", "\u2028", "\u2029"])
def test_unicode_line_breaks_read_as_pyyaml_reads_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, brk: str) -> None:
    # PyYAML (YAML 1.1, like kubectl's go-yaml) breaks lines at NEL, LS and PS; rapidyaml does
    # not. Written raw in a literal block, the item goes to PyYAML.
    text = kubectl_yaml([NODE, pod("a")]).replace(
        "      app: a\n", f"      app: |\n        a{brk}          b\n", 1)
    path = write(tmp_path, "breaks.yaml", text)
    # PyYAML keeps LS and PS in a literal block, normalises NEL; either way the next line's
    # indentation is the block's.
    expected = "a\n  b\n" if brk == "\x85" else f"a{brk}  b\n"
    assert read(path)[1].metadata.labels["app"] == expected
    assert read(path) == read_whole(path, monkeypatch)
    # A break before column-0 text ends the List's items to PyYAML: read whole, alike.
    text = kubectl_yaml([NODE, pod("a")]).replace(
        "  kind: Pod\n", f"  kind: Pod{brk}extra: x\n", 1)
    path = write(tmp_path, "column0.yaml", text)
    assert _outcome(read, path) == _outcome(lambda path: read_whole(path, monkeypatch), path)


def _outcome(reading: Any, path: str) -> Any:
    try:
        return reading(path)
    except InputError as err:
        return str(err)


def test_anchors_within_and_across_items(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    first = kubectl_yaml([NODE, pod("a"), pod("b")])
    within = first.replace("      app: a\n", "      app: &v a\n      other: *v\n", 1)
    across = within.replace("      app: a\n", "      app: *v\n", 1)  # in the next item
    for name, text in (("within.yaml", within), ("across.yaml", across)):
        path = write(tmp_path, name, text)
        assert read(path) == read_whole(path, monkeypatch)
    labels = [obj.metadata.labels for obj in read(str(tmp_path / "across.yaml"))[1:]]
    assert labels == [{"app": "a", "other": "a"}, {"app": "a"}]


def test_alias_bomb_and_deep_nesting_in_an_item_are_refused(tmp_path: Path) -> None:
    bomb = ["      x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    bomb += [f"      x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
    text = kubectl_yaml([NODE, pod("a")]).replace("      app: a\n", "\n".join(bomb) + "\n", 1)
    with pytest.raises(InputError, match=r"line \d+: aliases expand to more than"):
        read(write(tmp_path, "bomb.yaml", text))
    deep = "      x: " + "[" * 300 + "]" * 300 + "\n"
    text = kubectl_yaml([NODE, pod("a")]).replace("      app: a\n", deep, 1)
    with pytest.raises(InputError, match=r"line \d+: nesting deeper than 256"):
        read(write(tmp_path, "deep.yaml", text))


def test_an_object_larger_than_any_the_api_server_stores_is_refused_unparsed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node with a million labels (45 MB of YAML) took 14 s and 1.1 GB to parse; no API server
    stores an object that large (etcd: 1.5 MiB), so it is refused from its size alone."""
    labels = "".join(f"      example.com/l-{i:06d}: v{i}\n" for i in range(3000))
    text = kubectl_yaml([NODE, pod("a")]).replace("      app: a\n", labels, 1)
    monkeypatch.setattr(loader, "MAX_OBJECT_YAML", 64 << 10)  # the same, at a test's size
    parsed: list[object] = []
    monkeypatch.setattr(yamlstream.Parser, "item_to_json",
                        lambda *args: parsed.append(args) or None)
    with pytest.raises(InputError, match=r"document 1 item 1: 0 MiB of YAML for one object, "
                                         r"more than the API server stores"):
        read(write(tmp_path, "huge.yaml", text))
    assert len(parsed) == 1  # the node before it, not the pod
    # Within the real bound, the same pod is read.
    monkeypatch.undo()
    assert [o.metadata.name for o in read(write(tmp_path, "big.yaml", text))] == ["n1", "a"]


def test_invalid_yaml_is_one_error_and_nothing_on_stderr(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    text = kubectl_yaml([NODE, pod("a")]).replace("      app: a\n", "      app: [a\n", 1)
    with pytest.raises(InputError, match="invalid YAML: line"):
        load_snapshot([write(tmp_path, "bad.yaml", text)])
    assert capfd.readouterr().err == ""  # rapidyaml's own report of the error is not shown


_TOKEN = st.text(alphabet="0123456789._:+-eExXoObBinfaINFAyYsnNO~<=tTrRuUlL ",
                 min_size=1, max_size=8).map(str.strip).filter(bool)


def _pyyaml_json(text: str) -> Any:
    try:
        read = yaml.load(text, Loader=yamlcheck.SnapshotLoader)
        return msgspec.json.decode(msgspec.json.encode(read))
    except (yaml.YAMLError, TypeError, msgspec.EncodeError):
        return "PyYAML refuses"


def _assert_read_alike(text: str) -> None:
    """rapidyaml's JSON for a one-item piece is PyYAML's reading, or the loader asks PyYAML."""
    parser = yamlstream.Parser()
    with parser.quiet():
        fast = parser.to_json(text.encode(), item=True)
    if fast is None:
        return
    try:
        got = msgspec.json.decode(fast)
    except msgspec.DecodeError:
        return  # not JSON (a `+5`): the loader asks PyYAML
    assert [got] == _pyyaml_json(text)


@settings(max_examples=3000, deadline=None)
@given(token=_TOKEN, form=st.sampled_from(["- k: {}\n", "- {}: v\n", "- k:\n    {}\n",
                                           "- [{}]\n", "- k: [a, {}]\n", "- {}\n"]))
def test_a_plain_token_reads_as_pyyaml_reads_it_or_goes_to_pyyaml(token: str, form: str) -> None:
    """rapidyaml's reading is used only where it is PyYAML's (YAML 1.1 booleans, bases,
    sexagesimals, exponents, infinities are left to PyYAML)."""
    _assert_read_alike(form.format(token))


@pytest.mark.parametrize("text", ["- k: a\r  b\n", "- k: 'a\r  b'\n", "- a: 1\r  b: 2\n",
                                  "- k: |\n    a\r    b\n", "- k: a\rb: c\n"])
def test_a_carriage_return_alone_reads_as_pyyaml_reads_it(text: str) -> None:
    """A line break to PyYAML, text to rapidyaml; a CR before LF is neither's concern."""
    assert yamlcheck.tokens(text.encode()) is None  # suspect, and not a plain token
    assert yamlcheck.tokens(text.replace("\r", "\r\n").encode()) == set()
    _assert_read_alike(text)


@pytest.mark.parametrize(("text", "fast"), [
    # kubectl folds a long message at 80 columns: a line may end in a YAML 1.1 boolean, text
    ("- message: '0/5000 nodes are available: No\n    preemption victims found.'\n", True),
    ("- message: 0/5000 nodes are available, or\n    not at all\n", True),
    ("- message: |\n    on\n    off\n", True),
    # a plain value of digits and e's, or with a leading zero, a string to PyYAML: quoted
    ("- hash: 41152685e7\n  zero: 0844300466\n  list:\n  - 9512e17067\n", True),
    # the same tokens as whole values PyYAML types otherwise: PyYAML reads the item
    ("- message: No\n", False),
    ("- flag: on  # a comment\n", False),
    ("- mode: 0755\n", False),
    ("- No: x\n", False),
    ("- message: 'say No'\n  other: No\n", False),
    # what PyYAML refuses and rapidyaml reads (found in review): characters outside YAML's
    # printable set, a reserved indicator starting a scalar, text after a block header
    ("- k: a\x7fb\n", False),
    ("- k: a\x01b\n", False),
    ("- k: a\ufffeb\n", False),
    ("- k: @a\n", False),
    ("- k: `a\n", False),
    ("- k: |1x\n    a\n     b\n  j: y\n", False),
    ("- k: > x\n", False),
    ("- k: >=1.0\n", False),
    # block headers PyYAML reads, and a pipe inside a plain scalar
    ("- k: |-\n    a\n  j: |+\n    b\n\n  l: >  # c\n    d\n", True),
    ("- cmd: cat x | grep y\n", True),
    # in a flow collection, or rewritten by rapidyaml (`inf` as `.inf`): PyYAML reads it
    ("- list: [No, 1e5]\n", False),
    ("- value: inf\n", False),
])
def test_suspect_tokens_inside_longer_text_or_read_alike_stay_with_rapidyaml(
        text: str, fast: bool) -> None:
    parser = yamlstream.Parser()
    with parser.quiet():
        out = parser.to_json(text.encode(), item=True)
    assert (out is not None) is fast
    _assert_read_alike(text)


@pytest.mark.parametrize(("text", "fast"), [
    # a quoted scalar closed on its line is text, brackets and braces included (issue 33)
    ("- message: 'containers with unready status: [main]'\n", True),
    ("- sidecar.istio.io/status: '{\"initContainers\":null,\"containers\":[\"istio-proxy\"],"
     "\"volumes\":[\"istio-envoy\"],\"revision\":\"default\"}'\n", True),
    ('- k: "{\\"a\\":[1, {\\"b\\": 2}]}"\n', True),
    ("- k: 'it''s [x] {y}'  # a comment\n", True),
    ("- - '[a]'\n  - \"{b}\"\n", True),
    # what could still be a flow collection, or a quote not closed on its line: PyYAML reads it
    ("- k: [a, '[b]']\n", False),
    ("- k: 'a' [b]\n", False),
    ("- k: 'a\n    [b]'\n", False),
    ("- k: 'a [b]\n    c'\n", False),
    ("- 'a [b]': v\n", False),
    ("- k: '[a]'\n  j: [b]\n", False),
])
def test_brackets_inside_a_quoted_scalar_are_text(text: str, fast: bool) -> None:
    parser = yamlstream.Parser()
    with parser.quiet():
        out = parser.to_json(text.encode(), item=True)
    assert (out is not None) is fast, text
    _assert_read_alike(text)


@settings(max_examples=1500, deadline=None)
@given(value=st.text(alphabet="ab []{},:'\"#\\-x\u00e9", max_size=24),
       style=st.sampled_from(["'", '"']), key=st.sampled_from(["k", "a.b/c-d", "- k"]))
def test_a_quoted_scalar_with_brackets_and_quotes_reads_as_pyyaml_reads_it(
        value: str, style: str, key: str) -> None:
    """JSON annotations, bracketed messages, quotes inside quotes, as PyYAML quotes them."""
    body = yaml.safe_dump(value, default_style=style, width=10_000).removesuffix("...\n")
    nested = key.startswith("- ")
    text = f"- {key.removeprefix('- ')}: {body.strip()}\n" if not nested else \
        f"- - {body.strip()}\n"
    _assert_read_alike(text)


_SCALARS = st.one_of(st.text(max_size=30), st.integers(), st.booleans(), st.none(),
                     st.floats(allow_nan=False, allow_infinity=False))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES, width=st.sampled_from([20, 80]),
       style=st.sampled_from([None, '"', "'", "|"]), flow=st.sampled_from([False, None]))
# NEL, LS and PS written raw (PyYAML writes them so in single quotes and literal blocks) are
# line breaks to PyYAML, text to rapidyaml.
@example(value="\x85", width=20, style=None, flow=False)
@example(value="a\x85  b", width=80, style="|", flow=False)
@example(value="a\u2028  b", width=80, style="|", flow=False)
@example(value="a\u2029  b", width=80, style="|", flow=None)
def test_any_document_pyyaml_writes_reads_alike(value: Any, width: int, style: str | None,
                                                flow: bool | None) -> None:
    text = yaml.safe_dump([{"v": value}], width=width, default_style=style,
                          default_flow_style=flow, allow_unicode=True)
    _assert_read_alike(text)


def test_an_items_kind_is_read_whatever_its_keys_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kubectl sorts keys (apiVersion, kind first), and the kind is read off them; an item
    written otherwise, or of another API group, is read as PyYAML reading the whole file
    reads it."""
    unsorted = "- kind: Pod\n  apiVersion: v1\n" + "\n".join(
        "  " + line for line in yaml.safe_dump({k: v for k, v in pod("late").items()
                                                if k not in ("kind", "apiVersion")}).splitlines())
    grouped = dict(pod("grouped"), apiVersion="example.com/v1")
    head, _, tail = kubectl_yaml([NODE, pod("early"), grouped]).partition("kind: List\n")
    path = write(tmp_path, "order.yaml", head.rstrip("\n") + "\n" + unsorted + "\nkind: List\n"
                 + tail)
    objects = read(path)
    assert [type(o).__name__ for o in objects] == ["Node", "Pod", "Pod"]
    assert [o.metadata.name for o in objects[1:]] == ["early", "late"]
    assert objects == read_whole(path, monkeypatch)

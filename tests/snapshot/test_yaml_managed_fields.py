"""A YAML List item's managedFields are cut out of its text before rapidyaml parses it
(yamlcheck.without_managed_fields): what is kept must read as PyYAML reads the whole item, less
managedFields, and any text that could run across the cut keeps the item whole."""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import desched.snapshot.loader as loader
from desched.errors import InputError
from desched.snapshot import yamlcheck, yamlstream

MANAGED = [{"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubelet",
            "operation": "Update", "time": "2026-10-21T07:21:15Z",
            "fieldsV1": {"f:status": {"f:conditions": {'k:{"type":"Ready"}': {".": {}}}}}}]


def item(metadata: dict[str, Any], managed: Any = MANAGED, **rest: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "managedFields": managed, **metadata},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}, **rest}


def as_list_item(obj: dict[str, Any], width: int = 80, style: str | None = None) -> bytes:
    """The object as one `- ` item of kubectl's List (keys sorted, sequences not indented)."""
    text = yaml.safe_dump([obj], width=width, default_style=style, default_flow_style=False,
                          allow_unicode=True)
    return text.encode()


def pyyaml_less_managed(text: bytes) -> Any:
    (obj,) = yaml.load(text.decode(), Loader=yamlcheck.SnapshotLoader)
    obj["metadata"].pop("managedFields", None)
    return msgspec.json.decode(msgspec.json.encode(obj))


def fast(text: bytes, tmp_path: Path) -> tuple[yamlcheck.Kept | None, Any]:
    """What the cut keeps, and rapidyaml's reading of the item through it (None: PyYAML's)."""
    path = tmp_path / "item.yaml"
    path.write_bytes(text)
    with path.open("rb") as handle:
        mm = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        kept = yamlcheck.without_managed_fields(mm, 0, len(text))
        parser = yamlstream.Parser()
        with parser.quiet():
            out = parser.item_to_json(mm, yamlstream.Span(0, len(text)))
        mm.close()
    try:
        return kept, None if out is None else msgspec.json.decode(out)
    except msgspec.DecodeError:
        return kept, None  # not JSON: the loader's decoding fails, and PyYAML decides


def test_a_kubectl_pod_is_read_without_its_managed_fields(tmp_path: Path) -> None:
    text = as_list_item(item({"labels": {"app": "a", "pod-template-hash": "41152685e7"},
                              "annotations": {"note": "x " * 30}}, status={"message": "y " * 60}))
    kept, got = fast(text, tmp_path)
    assert kept is not None and b"managedFields" not in kept.text
    assert kept.tokens == {b"41152685e7"}
    assert len(kept.text) < len(text) - 150
    assert got == pyyaml_less_managed(text)
    assert got["metadata"]["labels"]["pod-template-hash"] == "41152685e7"
    # A string folded over lines before managedFields (kubectl folds at 80 columns) could, for
    # all a cheap check can tell, still be open at managedFields' line: the item is read whole.
    text = as_list_item(item({"annotations": {"note": "x " * 60}}))
    kept, got = fast(text, tmp_path)
    assert kept is None and got == pyyaml_less_managed(text) | {
        "metadata": got["metadata"]} and "managedFields" in got["metadata"]


@pytest.mark.parametrize("text", [
    # a quoted scalar in managedFields left open, its next line in column 4 (spec-invalid,
    # but PyYAML reads it: the key `name` is inside the string)
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    managedFields:\n    - manager: 'abc\n"
    b"    name: x'\n    namespace: ns\n",
    # the same before managedFields: its line is inside an annotation's string
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    annotations:\n      a: \"abc\n"
    b"    managedFields:\n    - x\"\n    name: p\n",
    # a flow collection running across the end of managedFields' value
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    managedFields: [a,\n"
    b"    b]\n    name: p\n",
    # a comment line in column 2 within managedFields' value
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    managedFields:\n  # note\n"
    b"    - manager: x\n    name: p\n",
    # managedFields under spec, not metadata
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p\n  spec:\n    managedFields:\n"
    b"    - x\n    nodeName: n\n",
    # metadata a block scalar whose text holds the managedFields line (found in review)
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    |\n    name: p\n    managedFields:\n"
    b"    - x\n    note: y\n  spec: s\n",
    # metadata's keys deeper than column 4, or metadata a sequence: PyYAML refuses the item
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n      name: p\n    managedFields:\n"
    b"    - x\n  spec: s\n",
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    - a\n    managedFields:\n    - x\n",
    # managedFields metadata's only key: cut, metadata would read as null, not {}
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    managedFields:\n    - manager: m\n"
    b"  spec: {}\n",
    # a quote left open in the head, and one after a suspect key whose colon the check takes
    b'- apiVersion: "v1\n  kind: Pod\n  metadata:\n    managedFields:\n    - x\n'
    b'    name: p\n  spec: s"\n',
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    0o17: 'x\n    managedFields:\n"
    b"    - y\n    name: z'\n",
    # a tab, a NEL, a lone CR inside managedFields' value
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    managedFields:\n    - manager:\tx\n"
    b"    name: p\n",
    "- apiVersion: v1\n  kind: Pod\n  metadata:\n    managedFields:\n    - manager: x\x85"
    "    name: y\n    name: p\n".encode(),
    b"- apiVersion: v1\n  kind: Pod\n  metadata:\n    managedFields:\n    - manager: x\r"
    b"    name: y\n    name: p\n",
])
def test_text_that_could_run_across_the_cut_keeps_the_item_whole(
        text: bytes, tmp_path: Path) -> None:
    kept, _ = fast(text, tmp_path)
    assert kept is None


def test_the_cut_text_is_checked_as_a_whole_item_is(tmp_path: Path) -> None:
    # A YAML 1.1 boolean after managedFields, a value of its own: PyYAML reads the item.
    text = as_list_item(item({}, spec_flag="x")).replace(b"spec_flag: x", b"spec_flag: yes")
    kept, got = fast(text, tmp_path)
    assert kept is not None and kept.tokens == {b"yes"} and got is None


# Any text, and text made of what decides where YAML scalars end (quotes, colons, dashes,
# brackets, comment marks, spaces, digits and `e`s) so that more items are cut.
_TEXT = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
    st.text(alphabet="ab :'\"-#{}[],.e019\\\n", max_size=40))
_VALUE = st.recursive(st.one_of(_TEXT, st.integers(), st.booleans(), st.none()),
                      lambda inner: st.one_of(st.lists(inner, max_size=3),
                                              st.dictionaries(_TEXT, inner, max_size=3)),
                      max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(annotations=st.dictionaries(_TEXT, _TEXT, max_size=3), managed=_VALUE,
       status=st.dictionaries(_TEXT, _VALUE, max_size=2), width=st.sampled_from([20, 80]),
       style=st.sampled_from([None, '"', "'"]))
def test_any_item_reads_as_pyyaml_reads_it_less_managed_fields(
        annotations: dict[str, str], managed: Any, status: dict[str, Any], width: int,
        style: str | None, tmp_path_factory: pytest.TempPathFactory) -> None:
    obj = item({"annotations": annotations}, managed, status=status)
    text = as_list_item(obj, width, style)
    kept, got = fast(text, tmp_path_factory.mktemp("item"))
    if got is not None:
        if kept is None:  # read whole: managedFields as written (a scalar, say)
            got["metadata"].pop("managedFields")
        assert got == pyyaml_less_managed(text)


@settings(max_examples=300, deadline=None)
@given(managed=_VALUE, width=st.sampled_from([20, 80]), style=st.sampled_from([None, '"', "'"]))
def test_any_managed_fields_are_cut_or_the_item_read_whole(
        managed: Any, width: int, style: str | None,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """What managedFields hold decides only whether they can be cut, never what the rest reads."""
    obj = item({"labels": {"app": "a"}}, managed, status={"phase": "Running"})
    text = as_list_item(obj, width, style)
    kept, got = fast(text, tmp_path_factory.mktemp("item"))
    if got is not None:
        if kept is None:
            got["metadata"].pop("managedFields")
        assert got == pyyaml_less_managed(text)


def _loaded(path: Path, whole: bool) -> Any:
    """The loader's objects, or its error (InputError), with or without the item pieces."""
    with pytest.MonkeyPatch.context() as patch:
        if whole:  # PyYAML reads the whole file, as before rapidyaml
            patch.setattr(yamlstream, "documents", lambda mm, size: None)
        try:
            return list(loader.read_objects(str(path), warn=lambda message: None))
        except InputError:
            return InputError


@settings(max_examples=40, deadline=None)
@given(values=st.lists(_TEXT, min_size=1, max_size=5))
def test_a_kubectl_list_loads_as_pyyaml_reading_it_whole_loads(
        values: list[str], tmp_path_factory: pytest.TempPathFactory) -> None:
    """End to end, through the loader's runs of items and its PyYAML fallbacks: pods whose
    labels, annotations, managers and messages (folded at 80 columns) hold any text."""
    pods = [item({"name": f"p{i}", "uid": f"u{i}", "labels": {"app": "a", "v": value},
                  "annotations": {"note": value}},
                 [{**MANAGED[0], "manager": value}],
                 status={"phase": "Pending", "conditions": [
                     {"type": "PodScheduled", "status": "False", "message": value * 4}]})
            for i, value in enumerate(values)]
    text = yaml.safe_dump({"apiVersion": "v1", "items": pods, "kind": "List",
                           "metadata": {"resourceVersion": ""}}, allow_unicode=True)
    path = tmp_path_factory.mktemp("list") / "cluster.yaml"
    path.write_text(text)
    assert _loaded(path, whole=False) == _loaded(path, whole=True)

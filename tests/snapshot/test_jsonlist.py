"""One large list document (`kubectl get -o json`), decoded an item at a time in place: the same
objects as any other path, whatever the layout, and errors that name the item."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from desched.errors import InputError
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.loader import load_snapshot, read_objects


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"pool": "a"}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def pod(name: str, node_name: str = "n0") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}",
                         "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "rs", "uid": "rs-uid", "controller": True}],
                         "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]},
            "spec": {"nodeName": node_name, "containers": [
                {"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "PodScheduled", "status": "True"}]}}


def kubectl_json(items: list[dict[str, Any]], kind: str = "List") -> str:
    """What `kubectl get -o json` prints: keys sorted, four-space indent."""
    return json.dumps({"apiVersion": "v1", "items": items, "kind": kind,
                       "metadata": {"resourceVersion": ""}}, indent=4, sort_keys=True) + "\n"


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def reference(tmp_path: Path, items: list[dict[str, Any]]) -> ClusterSnapshot:
    """The same objects, one per line: the JSON-lines path."""
    text = "".join(json.dumps(item) + "\n" for item in items)
    return load_snapshot([write(tmp_path, "ref.jsonl", text)])


def without_conditions(p: Any) -> Any:
    return msgspec.structs.replace(p, status=msgspec.structs.replace(p.status, conditions=None))


def same(a: ClusterSnapshot, b: ClusterSnapshot) -> None:
    assert list(a.pods) == list(b.pods)
    assert list(a.nodes) == list(b.nodes)
    for key, p in a.pods.items():
        q = b.pods[key]
        # Conditions are decoded lazily from the text, whose layout differs.
        assert p.conditions == q.conditions and p.ready == q.ready
        assert without_conditions(p) == without_conditions(q)
    assert a.nodes == b.nodes


def test_kubectl_layout_gives_the_same_objects_in_order(tmp_path: Path) -> None:
    # More items than one batch, so pages are released between batches.
    items = [node(f"n{i}") for i in range(3)] + [pod(f"p{i:04d}", f"n{i % 3}")
                                                for i in range(1203)]
    snap = load_snapshot([write(tmp_path, "all.json", kubectl_json(items))])
    same(snap, reference(tmp_path, items))
    assert len(snap.pods) == 1203


def test_typed_list_whose_items_carry_no_kind(tmp_path: Path) -> None:
    pods = [pod(f"p{i}") for i in range(5)]
    bare = [{k: v for k, v in p.items() if k not in ("kind", "apiVersion")} for p in pods]
    snap = load_snapshot([write(tmp_path, "pods.json", kubectl_json(bare, kind="PodList"))])
    same(snap, reference(tmp_path, pods))


@pytest.mark.parametrize("layout", ["compact-items", "tabs", "two-space", "crlf"])
def test_other_layouts(tmp_path: Path, layout: str) -> None:
    items = [node("n0")] + [pod(f"p{i}") for i in range(7)]
    doc = {"kind": "List", "apiVersion": "v1", "items": items}
    if layout == "compact-items":  # API-server order, the items on one line after the header
        text = '{"kind": "List",\n"apiVersion": "v1", "items": ' + json.dumps(items) + "}\n"
    elif layout == "tabs":
        text = json.dumps(doc, indent="\t")
    elif layout == "two-space":
        text = json.dumps(doc, indent=2)
    else:
        text = json.dumps(doc, indent=4).replace("\n", "\r\n")
    snap = load_snapshot([write(tmp_path, "l.json", text)])
    same(snap, reference(tmp_path, items))


def test_an_item_closed_at_the_items_indentation_is_still_read_whole(tmp_path: Path) -> None:
    """A nested object closed at the items' own indentation fools the newline guess; the item
    is then found exactly."""
    text = ('{"apiVersion": "v1", "kind": "List", "items": [\n'
            '  {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"\n'
            '  }, "status": {"allocatable": {"cpu": "2"}}\n'
            '  },\n'
            '  {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}\n'
            ']}\n')
    snap = load_snapshot([write(tmp_path, "odd.json", text)])
    assert list(snap.nodes) == ["n0", "n1"]
    assert snap.nodes["n0"].allocatable["cpu"] == 2000


def test_brackets_in_strings_of_the_header(tmp_path: Path) -> None:
    text = json.dumps({"apiVersion": "v1", "items": [node("n0")], "kind": "List",
                       "metadata": {"continue": "a]b\"]", "resourceVersion": "1"}}, indent=4)
    assert list(load_snapshot([write(tmp_path, "h.json", text)]).nodes) == ["n0"]


def test_empty_list_and_unknown_kinds(tmp_path: Path) -> None:
    assert not load_snapshot([write(tmp_path, "e.json", kubectl_json([]))]).pods
    warnings: list[str] = []
    items = [node("n0"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}},
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"}},
             {"apiVersion": "example.com/v1", "kind": "Pod", "metadata": {"name": "fake"}}]
    snap = load_snapshot([write(tmp_path, "u.json", kubectl_json(items))],
                         warn=warnings.append)
    assert list(snap.nodes) == ["n0"] and not snap.pods
    assert any("2 object(s) of unsupported kind v1/ConfigMap" in w for w in warnings)
    assert any("example.com/v1/Pod" in w for w in warnings)
    services = kubectl_json([{"metadata": {"name": "s"}}] * 3, kind="ConfigMapList")
    warnings.clear()
    assert not list(read_objects(write(tmp_path, "s.json", services), warn=warnings.append))
    assert warnings == [f"{tmp_path}/s.json: ignoring 3 object(s) of unsupported kind "
                        "v1/ConfigMap"]


@pytest.mark.parametrize(("mangle", "fragment"), [
    (lambda t: t.replace('"name": "p3"', '"name": 5'), "document 1 item 4 (Pod): Expected"),
    (lambda t: t.replace('"name": "p3",', '"name": "p3"'), "document 1 item 4"),
    (lambda t: t.replace('"namespace": "ns"', '"namespace": "ns\u0001"', 1), "document 1 item 1"),
])
def test_a_bad_item_is_named(tmp_path: Path, mangle: Any, fragment: str) -> None:
    text = mangle(kubectl_json([node("n0")] + [pod(f"p{i}") for i in range(6)]))
    with pytest.raises(InputError) as err:
        load_snapshot([write(tmp_path, "bad.json", text)])
    message = str(err.value)
    assert fragment in message and "bad.json" in message and "\n" not in message


def test_a_truncated_document_is_an_error(tmp_path: Path) -> None:
    text = kubectl_json([node("n0"), pod("p0"), pod("p1")])
    cut = write(tmp_path, "cut.json", text[: len(text) * 2 // 3])
    with pytest.raises(InputError) as err:
        load_snapshot([cut])
    assert "cut.json" in str(err.value)

"""Snapshot files: YAML and JSON, objects and lists, JSON lines, kinds, errors, indices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from desched.errors import InputError
from desched.snapshot.loader import load_snapshot

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}


def pod(name: str, node: str = "n1", ns: str | None = "default", uid: str = "") -> dict:
    meta = {"name": name, "uid": uid or f"u-{name}",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "rs-uid",
                                 "controller": True}]}
    if ns is not None:
        meta["namespace"] = ns
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [
                {"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m"}}}]}}


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_yaml_documents_and_lists(tmp_path: Path) -> None:
    text = """
apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: v1
kind: PodList
items:
- metadata: {name: a, namespace: x}
  spec: {nodeName: n1}
- metadata: {name: b}
  spec: {nodeName: n1}
---
apiVersion: v1
kind: List
items:
- {apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: pdb, namespace: x},
   spec: {maxUnavailable: 1, selector: {matchLabels: {app: a}}}}
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 1000}
"""
    snap = load_snapshot([write(tmp_path, "s.yaml", text)])
    assert set(snap.nodes) == {"n1"}
    assert set(snap.pods) == {"x/a", "default/b"}          # missing namespace -> default
    assert [p.name for p in snap.pods_on_node("n1")] == ["a", "b"]
    assert snap.priority_classes["high"].value == 1000
    assert len(snap.pdbs_by_namespace["x"]) == 1
    assert "x" in snap.namespaces                            # implied by its pods


def test_json_single_document_and_concatenated(tmp_path: Path) -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": [NODE, pod("a")]}
    one = load_snapshot([write(tmp_path, "a.json", json.dumps(doc, indent=2))])
    assert len(one.pods) == 1 and len(one.nodes) == 1
    two = json.dumps(NODE, indent=2) + "\n" + json.dumps(pod("b"), indent=2)
    both = load_snapshot([write(tmp_path, "b.json", two)])
    assert set(both.pods) == {"default/b"}


def test_json_lines_pages(tmp_path: Path) -> None:
    lines = [json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": [NODE]}),
             json.dumps({"apiVersion": "v1", "items": [pod("a"), pod("b")], "kind": "PodList"}),
             json.dumps({"apiVersion": "v1", "kind": "PodList", "items": [pod("c", node="n2")]})]
    snap = load_snapshot([write(tmp_path, "c.jsonl", "\n".join(lines) + "\n")])
    assert set(snap.pods) == {"default/a", "default/b", "default/c"}
    assert snap.node_requested("n1") == {"cpu": 1000, "pods": 2}
    assert len(snap.pods_by_owner_uid["rs-uid"]) == 3


def test_several_files_and_yaml_json_agree(tmp_path: Path) -> None:
    import yaml

    y = load_snapshot([write(tmp_path, "p.yaml", yaml.safe_dump(pod("a")))])
    j = load_snapshot([write(tmp_path, "p.json", json.dumps(pod("a")))])
    assert y.pods["default/a"] == j.pods["default/a"]
    both = load_snapshot([str(tmp_path / "p.yaml"), write(tmp_path, "n.json", json.dumps(NODE))])
    assert len(both.pods) == 1 and len(both.nodes) == 1


def test_unknown_kinds_warn_and_are_ignored(tmp_path: Path) -> None:
    warnings: list[str] = []
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        NODE, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}},
        {"apiVersion": "example.com/v1", "kind": "Pod", "metadata": {"name": "fake"}}]})
    snap = load_snapshot([write(tmp_path, "u.json", text)], warn=warnings.append)
    assert len(snap.nodes) == 1 and not snap.pods
    assert any("ConfigMap" in w for w in warnings)
    assert any("example.com/v1/Pod" in w for w in warnings)


def test_quantities_may_be_yaml_numbers(tmp_path: Path) -> None:
    text = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: 4, memory: 8Gi, pods: 110}}
"""
    snap = load_snapshot([write(tmp_path, "n.yaml", text)])
    assert snap.nodes["n1"].allocatable == {"cpu": 4000, "memory": 8 * 2**30, "pods": 110}


def test_annotations_trimmed_to_the_ones_decisions_use(tmp_path: Path) -> None:
    body = pod("a")
    body["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        "descheduler.alpha.kubernetes.io/evict": "true"}
    snap = load_snapshot([write(tmp_path, "a.json", json.dumps(body))])
    assert dict(snap.pods["default/a"].annotations) == {
        "descheduler.alpha.kubernetes.io/evict": "true"}


@pytest.mark.parametrize(("name", "text", "fragment"), [
    ("bad.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: [\n", "invalid YAML"),
    ("bad.json", '{"apiVersion": "v1", "kind": "Node", ', "invalid JSON"),
    ("type.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {taints: 3}\n",
     "spec.taints"),
    ("scalar.yaml", "- a\n- b\n", "expected a Kubernetes object"),
    ("nokind.json", '{"metadata": {"name": "x"}}', "no kind"),
])
def test_bad_input_is_one_line_naming_the_file(tmp_path: Path, name: str, text: str,
                                               fragment: str) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(InputError) as info:
        load_snapshot([path])
    message = str(info.value)
    assert path in message and fragment in message and "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read snapshot file"):
        load_snapshot([str(tmp_path / "nope.yaml")])


def test_remove_pod_updates_every_index(tmp_path: Path) -> None:
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [NODE, pod("a"), pod("b")]})
    snap = load_snapshot([write(tmp_path, "r.json", text)])
    assert snap.node_requested("n1")["pods"] == 2
    snap.remove_pod(snap.pods["default/a"])
    assert set(snap.pods) == {"default/b"}
    assert [p.name for p in snap.pods_on_node("n1")] == ["b"]
    assert list(snap.pods_by_owner_uid["rs-uid"]) == ["default/b"]
    assert list(snap.pods_by_namespace["default"]) == ["default/b"]
    assert snap.node_requested("n1") == {"cpu": 500, "pods": 1}


def test_ready_nodes(tmp_path: Path) -> None:
    nodes = [dict(NODE, metadata={"name": f"n{i}", "labels": {"pool": "a" if i < 2 else "b"}},
                  status={"conditions": [{"type": "Ready",
                                          "status": "False" if i == 3 else "True"}]})
             for i in range(4)]
    nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "plain"}})
    snap = load_snapshot([write(tmp_path, "n.json", json.dumps({"kind": "List",
                                                                 "items": nodes}))])
    assert sorted(n.name for n in snap.ready_nodes()) == ["n0", "n1", "n2", "plain"]
    assert sorted(n.name for n in snap.ready_nodes(lambda labels: labels.get("pool") == "a")) \
        == ["n0", "n1"]


@pytest.mark.parametrize("name", ["s.yaml", "s.json", "s.jsonl", "list.json"])
def test_every_form_decodes_pods_through_the_pod_decoder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Pods of every form go through PodDecoder, which shares their repeated parts and copies
    their lazily decoded conditions out of what they were decoded from: a document (bytes) kept
    alive whole, or a memory-mapped file's pages faulted back in when a cycle reads them
    (measured: 828-933 MiB peak instead of 634-707 MiB for a whole simulate at 150,000 pods)."""
    from desched.model.pod_decoder import PodDecoder

    decoded: list[str] = []
    real_pod, real_page, real_run = \
        PodDecoder.decode, PodDecoder.decode_page, PodDecoder.decode_items

    def one(self: PodDecoder, data: Any) -> Any:
        pod = real_pod(self, data)
        decoded.append(pod.metadata.name)
        return pod

    def page(self: PodDecoder, data: Any) -> Any:
        out = real_page(self, data)
        decoded.extend(p.metadata.name for p in out.items)
        return out

    def run(self: PodDecoder, data: Any, **options: Any) -> Any:
        out = real_run(self, data, **options)
        decoded.extend(p.metadata.name for p in out)
        return out

    monkeypatch.setattr(PodDecoder, "decode", one)
    monkeypatch.setattr(PodDecoder, "decode_page", page)
    monkeypatch.setattr(PodDecoder, "decode_items", run)
    ready = pod("a")
    ready["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    pods = {"apiVersion": "v1", "kind": "PodList", "items": [ready]}
    mixed = {"apiVersion": "v1", "kind": "List", "items": [dict(ready, kind="Pod"), NODE]}
    import yaml

    text = {"s.yaml": yaml.safe_dump(pods), "s.json": json.dumps(pods, indent=2),
            "s.jsonl": json.dumps(pods) + "\n", "list.json": json.dumps(mixed)}[name]
    snap = load_snapshot([write(tmp_path, name, text)])
    assert snap.pods["default/a"].ready
    assert decoded == ["a"]


def test_large_yaml_read_whole_warns_what_it_costs_and_how_to_get_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    import desched.snapshot.loader as loader

    monkeypatch.setattr(loader, "YAML_WARN_BYTES", 10)
    warnings: list[str] = []
    # Read an object at a time: no warning, however large.
    load_snapshot([write(tmp_path, "pieces.yaml", yaml.safe_dump(NODE))], warn=warnings.append)
    assert warnings == []
    # A directive: PyYAML reads the whole file, which is what the warning is about.
    path = write(tmp_path, "big.yaml", "%YAML 1.1\n---\n" + yaml.safe_dump(NODE))
    snap = load_snapshot([path], warn=warnings.append)
    assert list(snap.nodes) == ["n1"]
    assert len(warnings) == 1 and "big.yaml" in warnings[0] and "kubectl get -o json" in warnings[0]

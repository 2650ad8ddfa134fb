"""The API server's own List form, one line for the whole list (`kubectl get --raw
/api/v1/pods`, curl, client libraries' json.dump): decoded an item at a time in place like
kubectl's pretty List, not taken for one huge JSON line and decoded whole."""

from __future__ import annotations

import io
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from test_jsonlist import kubectl_json, node, pod, reference, same, write

from desched.errors import InputError
from desched.snapshot import loader
from desched.snapshot.loader import load_snapshot

COMPACT = (",", ":")


def heavy_pod(i: int) -> dict[str, Any]:
    """A pod of about 6 KB, most of it managedFields (4-5 KB in real clusters), which the loader
    skips."""
    p = pod(f"p{i:05d}", f"n{i % 4}")
    p["metadata"]["managedFields"] = [
        {"manager": manager, "operation": "Update", "apiVersion": "v1",
         "fieldsV1": {f"f:{manager}-{k}": {} for k in range(64)}}
        for manager in ("kubectl-client-side-apply", "kube-controller-manager", "kubelet")]
    return p


def cluster(pods: int) -> list[dict[str, Any]]:
    return [node(f"n{i}") for i in range(4)] + [heavy_pod(i) for i in range(pods)]


def api_list(items: list[dict[str, Any]], separators: tuple[str, str] = COMPACT,
             kind: str = "List", items_first: bool = False) -> str:
    """One line, as the API server and json.dump write it."""
    header: dict[str, Any] = {"kind": kind, "apiVersion": "v1",
                              "metadata": {"resourceVersion": "12345"}}
    doc = {"items": items, **header} if items_first else {**header, "items": items}
    return json.dumps(doc, separators=separators) + "\n"


@pytest.mark.slow
def test_a_large_compact_list_is_decoded_item_by_item(tmp_path: Path) -> None:
    items = cluster(8_000)
    path = write(tmp_path, "compact.json", api_list(items))
    size = Path(path).stat().st_size
    assert size > 40 << 20
    tracemalloc.start()
    try:
        snap = load_snapshot([path])
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Decoded whole, the line is first copied (the whole file), then every object made at once;
    # streamed, the peak is the decoded snapshot itself (about 1/5 of the file) and one batch.
    assert peak < size / 3, f"peak {peak >> 20} MiB for {size >> 20} MiB of text"
    assert peak - kept < size / 20, f"{(peak - kept) >> 20} MiB freed after the load"
    assert len(snap.pods) == 8_000 and list(snap.nodes) == ["n0", "n1", "n2", "n3"]
    same(snap, reference(tmp_path, items))
    same(snap, load_snapshot([write(tmp_path, "pretty.json", kubectl_json(items))]))


@pytest.mark.parametrize(("separators", "items_first"), [
    (COMPACT, False), ((", ", ": "), False), ((", ", ": "), True), ((" ,  ", " :\t"), True)])
def test_any_whitespace_and_header_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         separators: tuple[str, str], items_first: bool) -> None:
    monkeypatch.setattr(loader, "STREAM_LINE", 0)  # stream small lines too
    items = cluster(1_203)
    text = api_list(items, separators, items_first=items_first)
    snap = load_snapshot([write(tmp_path, "l.json", text)])
    same(snap, reference(tmp_path, items))


def test_typed_lists_whose_items_carry_no_kind(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`kubectl get --raw /api/v1/pods` and `/api/v1/nodes`: a PodList's items have no kind;
    two such lines in one file, and the same split over two files."""
    monkeypatch.setattr(loader, "STREAM_LINE", 0)
    items = cluster(700)
    bare = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")} for item in items]
    nodes = api_list(bare[:4], kind="NodeList", items_first=True)
    pods = api_list(bare[4:], kind="PodList")
    expected = reference(tmp_path, items)
    same(load_snapshot([write(tmp_path, "both.json", nodes + pods)]), expected)
    same(load_snapshot([write(tmp_path, "nodes.json", nodes),
                        write(tmp_path, "pods.json", pods)]), expected)


def test_standard_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe cannot be mapped: it is spooled to a temporary file, then read as any file."""
    monkeypatch.setattr(loader, "STREAM_LINE", 0)
    items = cluster(600)
    stdin = io.TextIOWrapper(io.BytesIO(api_list(items).encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    same(load_snapshot(["-"]), reference(tmp_path, items))


def test_a_bad_item_is_named_by_line_and_item(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "STREAM_LINE", 0)
    first = api_list(cluster(3))
    second = api_list(cluster(8)).replace('"name":"p00005"', '"name":5')
    with pytest.raises(InputError) as err:
        load_snapshot([write(tmp_path, "bad.json", first + second)])
    assert "line 2 item 9 (Pod)" in str(err.value) and "bad.json" in str(err.value)
    truncated = api_list(cluster(8))[:-200]
    with pytest.raises(InputError) as err:
        load_snapshot([write(tmp_path, "cut.json", truncated)])
    assert "cut.json" in str(err.value)


def test_kinds_interleaved_and_unsupported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each joint found names the next item's kind: a change of kind, or an item of a kind the
    loader skips, must not decode an item as the kind before it."""
    monkeypatch.setattr(loader, "STREAM_LINE", 0)
    pods = [heavy_pod(i) for i in range(40)]
    mixed: list[dict[str, Any]] = []
    for i, p in enumerate(pods):
        mixed += [p, node(f"n{i}")] if i % 3 else [p, p | {"kind": "ConfigMap"}]
    warnings: list[str] = []
    snap = load_snapshot([write(tmp_path, "m.json", api_list(mixed))], warn=warnings.append)
    expected = [item for item in mixed if item["kind"] != "ConfigMap"]
    same(snap, reference(tmp_path, expected))
    assert any("14 object(s) of unsupported kind v1/ConfigMap" in w for w in warnings)


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records how many pods each run decoded in one call."""
    from desched.model.pod_decoder import PodDecoder

    runs: list[int] = []
    real = PodDecoder.decode_items

    def counted(self: PodDecoder, data: Any, **options: Any) -> Any:
        pods = real(self, data, **options)
        runs.append(len(pods))
        return pods

    monkeypatch.setattr(PodDecoder, "decode_items", counted)
    return runs


@pytest.mark.parametrize("layout", ["compact", "pretty"])
def test_a_podlist_is_decoded_a_run_of_items_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """`kubectl get --raw /api/v1/pods` (one line) or a pretty PodList: once an item's end is
    known, hundreds of items decode in one call; every pod as the JSON-lines path reads it."""
    monkeypatch.setattr(loader, "STREAM_LINE", 0)
    monkeypatch.setattr(loader, "LIST_RUN", 50_000)
    runs = _count_runs(monkeypatch)
    items = cluster(300)
    bare = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")}
            for item in items[4:]]
    text = api_list(bare, kind="PodList") if layout == "compact" \
        else kubectl_json(bare, kind="PodList")
    snap = load_snapshot([write(tmp_path, "pods.json", text)])
    same(snap, reference(tmp_path, [i for i in items if i["kind"] == "Pod"]))
    assert len(runs) > 5 and sum(runs) > 250  # the first items are read one at a time


def test_an_item_end_guessed_inside_an_item_is_read_item_by_item(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A nested list whose objects start with `metadata` looks like the joint between items:
    a run cut there does not decode, and its items are read one at a time."""
    monkeypatch.setattr(loader, "STREAM_LINE", 0)
    monkeypatch.setattr(loader, "LIST_RUN", 20_000)
    runs = _count_runs(monkeypatch)
    items = [heavy_pod(i) for i in range(120)]
    for item in items:
        item["spec"]["extra"] = [{"metadata": {"name": "x"}}, {"metadata": {"name": "y"}}] * 40
    bare = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")}
            for item in items]
    snap = load_snapshot([write(tmp_path, "pods.json", api_list(bare, kind="PodList"))])
    same(snap, reference(tmp_path, items))
    assert runs and sum(runs) < 120  # runs were read, and some were cut inside an item


def test_a_bad_item_in_a_run_is_named_as_item_by_item(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "STREAM_LINE", 0)
    monkeypatch.setattr(loader, "LIST_RUN", 30_000)
    bare = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")}
            for item in cluster(60)[4:]]
    text = api_list(bare, kind="PodList").replace('"name":"p00040"', '"name":5')
    with pytest.raises(InputError) as err:
        load_snapshot([write(tmp_path, "bad.json", text)])
    assert "line 1 item 40 (Pod)" in str(err.value)
    assert "Expected `str`, got `int` - at `$.metadata.name`" in str(err.value)


@pytest.mark.parametrize("layout", ["compact", "pretty"])
def test_a_kind_list_of_pods_is_read_in_runs_and_what_is_no_pod_item_by_item(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """kubectl's `kind: List`: nodes, then pods, with an item of no kind and a Pod of another
    API group among them. Runs decode the pods; a run holding anything else is read one item
    at a time, so those two are counted as unsupported, never taken for pods."""
    monkeypatch.setattr(loader, "STREAM_LINE", 0)
    monkeypatch.setattr(loader, "LIST_RUN", 30_000)
    runs = _count_runs(monkeypatch)
    items = cluster(400)
    odd = [{k: v for k, v in heavy_pod(9000).items() if k != "kind"},
           dict(heavy_pod(9001), apiVersion="example.com/v1")]
    mixed = items[:200] + odd + items[200:]
    text = api_list(mixed) if layout == "compact" else kubectl_json(mixed)
    warnings: list[str] = []
    snap = load_snapshot([write(tmp_path, "list.json", text)], warn=warnings.append)
    same(snap, reference(tmp_path, items))
    assert len(runs) > 3 and sum(runs) > 200
    assert any(w.endswith("1 object(s) of unsupported kind v1/") for w in warnings), warnings
    assert any("example.com/v1/Pod" in w for w in warnings), warnings

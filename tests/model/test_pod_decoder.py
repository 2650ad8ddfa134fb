"""The two-step pod decoder gives the pods the exact decoders give, shares what replicas repeat,
reports errors as they do, and keeps nothing of its input."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

import desched.model.pod_decoder as pod_decoder
from desched.model.kinds import JSON_DECODERS, PAGE_DECODERS
from desched.model.meta import EMPTY_MAP, trim_annotations
from desched.model.pod import Pod
from desched.model.pod_decoder import PodDecoder

ROOT = Path(__file__).resolve().parents[2]


def _body(name: str, owner: str | None = "rs-1", cpu: str = "100m", team: str = "a",
          restarts: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name, "namespace": "d", "labels": {"app": "web", "team": team},
        "annotations": {"sidecar.istio.io/status": "{...}",
                        "descheduler.alpha.kubernetes.io/evict": "true"}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                    "name": owner, "uid": owner, "controller": True}]
    return {
        "metadata": meta,
        "spec": {"nodeName": f"node-{name}",
                 "containers": [{"image": "web:1", "resources": {"requests": {"cpu": cpu}}}],
                 "volumes": [{"name": f"kube-api-access-{name}", "emptyDir": {}}],
                 "tolerations": [{"key": "pool", "operator": "Exists"}],
                 "nodeSelector": {"pool": "blue"},
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "pool", "operator": "In", "values": ["blue"]}]}]}}},
                 "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                                "whenUnsatisfiable": "DoNotSchedule"}]},
        "status": {"phase": "Running", "containerStatuses": [{"restartCount": restarts}],
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _page(*bodies: dict[str, Any]) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "PodList", "items": list(bodies)}).encode()


def _exact(data: bytes) -> tuple[Pod, ...]:
    pods: tuple[Pod, ...] = PAGE_DECODERS["PodList"].decode(data).items
    for pod in pods:
        trim_annotations(pod.metadata)
    return pods


def test_pods_equal_what_the_exact_decoder_gives() -> None:
    data = _page(_body("a"), _body("b", cpu="200m", restarts=2), _body("c", owner=None),
                 _body("d", owner="rs-2", team="b"))
    page = PodDecoder().decode_page(data)
    assert (page.kind, page.api_version) == ("PodList", "v1")
    assert page.items == _exact(data)
    assert page.items[0].ready and page.items[1].requests["cpu"] == 200


def test_generated_production_cluster_decodes_as_the_exact_decoder(tmp_path: Path) -> None:
    """Pods of the production generator (Helm labels, managedFields, istio annotations, spread,
    pool affinity, init containers): every one equal to the exact decoder's."""
    subprocess.run([sys.executable, str(ROOT / "bench" / "generate_production.py"), "--nodes",
                    "40", "--pods", "1200", "--out", str(tmp_path)], check=True,
                   capture_output=True)
    decoder, checked = PodDecoder(), 0
    for line in (tmp_path / "cluster.jsonl").read_bytes().splitlines():
        if b'"PodList"' in line[:200]:
            items = decoder.decode_page(line).items
            assert items == _exact(line)
            checked += len(items)
    assert checked == 1200


def test_replicas_share_their_repeated_parts() -> None:
    a, b = PodDecoder().decode_page(_page(_body("a"), _body("b"))).items
    for part in ("containers", "volumes", "tolerations", "node_selector", "affinity",
                 "topology_spread_constraints"):
        assert getattr(b.spec, part) is getattr(a.spec, part), part
    assert b.metadata.labels is a.metadata.labels
    assert b.metadata.owner_references is a.metadata.owner_references
    assert b.status.container_statuses is a.status.container_statuses
    assert (b.metadata.name, b.spec.node_name) == ("b", "node-b")


def test_parts_that_differ_are_not_shared() -> None:
    a, b = PodDecoder().decode_page(_page(_body("a"), _body("b", cpu="200m", team="b",
                                                              restarts=3))).items
    assert b.spec.containers is not a.spec.containers
    assert (a.requests["cpu"], b.requests["cpu"]) == (100, 200)
    assert (a.metadata.labels["team"], b.metadata.labels["team"]) == ("a", "b")
    assert b.status.container_statuses[0].restart_count == 3
    assert b.spec.tolerations is a.spec.tolerations


def test_a_part_written_differently_but_equal_is_shared() -> None:
    first = _body("a")
    second = _body("b")
    second["metadata"]["labels"] = {"team": "a", "app": "web"}  # other order, same map
    second["spec"]["tolerations"] = [{"operator": "Exists", "key": "pool"}]
    a, b = PodDecoder().decode_page(_page(first, second)).items
    assert b.metadata.labels is a.metadata.labels
    assert b.spec.tolerations is a.spec.tolerations


def test_pods_of_other_owners_or_none_share_nothing() -> None:
    a, b, c = PodDecoder().decode_page(_page(_body("a", owner="x"), _body("b", owner="y"),
                                             _body("c", owner=None))).items
    assert a.spec.containers == b.spec.containers == c.spec.containers
    assert a.spec.containers is not b.spec.containers
    assert c.spec.containers is not a.spec.containers


def test_only_annotations_a_decision_reads_are_kept() -> None:
    bare = _body("b")
    del bare["metadata"]["annotations"]["descheduler.alpha.kubernetes.io/evict"]
    # Named only in a value: no key kept.
    bare["metadata"]["annotations"]["note"] = '"descheduler.alpha.kubernetes.io/evict'
    kept, none = PodDecoder().decode_page(_page(_body("a"), bare)).items
    assert kept.metadata.annotations == {"descheduler.alpha.kubernetes.io/evict": "true"}
    assert none.metadata.annotations is EMPTY_MAP


def test_a_single_pod_decodes_like_the_exact_decoder() -> None:
    body = dict(_body("a"), kind="Pod", apiVersion="v1")
    data = json.dumps(body).encode()
    pod = PodDecoder().decode(data)
    exact: Pod = JSON_DECODERS["Pod"].decode(data)
    trim_annotations(exact.metadata)
    assert pod == exact
    with pytest.raises(msgspec.ValidationError) as err:
        PodDecoder().decode(json.dumps(dict(body, kind="Node")).encode())
    with pytest.raises(msgspec.ValidationError) as exact_err:
        JSON_DECODERS["Pod"].decode(json.dumps(dict(body, kind="Node")).encode())
    assert str(err.value) == str(exact_err.value)


@pytest.mark.parametrize(("path", "value"), [
    (("spec", "containers", 0, "image"), 5),
    (("spec", "containers", 0, "resources", "requests", "cpu"), "lots"),
    (("metadata", "labels", "app"), ["web"]),
    (("spec", "affinity", "nodeAffinity"), []),
    (("metadata", "ownerReferences", 0, "uid"), {}),
    (("spec", "tolerations", 0, "effect"), "Sometimes"),
    (("metadata", "annotations", "sidecar.istio.io/status"), 5),
])
def test_errors_name_the_full_path_as_the_exact_decoder_does(
        path: tuple[str | int, ...], value: Any) -> None:
    bad = copy.deepcopy(_body("b"))
    into: Any = bad
    for step in path[:-1]:
        into = into[step]
    into[path[-1]] = value
    # The bad pod follows a good replica, so its part is compared before it is decoded.
    data = _page(_body("a"), bad)
    with pytest.raises(msgspec.ValidationError) as err:
        PodDecoder().decode_page(data)
    with pytest.raises(msgspec.ValidationError) as exact:
        PAGE_DECODERS["PodList"].decode(data)
    assert str(err.value) == str(exact.value)
    assert "$.items[1]." in str(err.value)


def test_nothing_decoded_keeps_its_input_alive() -> None:
    """Conditions stay raw JSON until read: copied, so no pod holds the page it came from."""
    data = _page(_body("a"), _body("b"))
    before = sys.getrefcount(data)
    decoder = PodDecoder()
    pods = decoder.decode_page(data).items
    assert sys.getrefcount(data) == before
    assert all(pod.ready for pod in pods)


def test_owners_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past OWNERS_LIMIT owners the decoder forgets the first pods it kept: a later replica of
    a forgotten owner is decoded on its own, one of the latest owner still shares its parts."""
    monkeypatch.setattr(pod_decoder, "OWNERS_LIMIT", 2)
    decoder = PodDecoder()
    bodies = [*(_body(f"p{i}", owner=f"rs-{i}") for i in range(5)),
              _body("again-0", owner="rs-0"), _body("again-4", owner="rs-4")]
    pods = decoder.decode_page(_page(*bodies)).items
    assert [pod.metadata.name for pod in pods] == [*(f"p{i}" for i in range(5)),
                                                   "again-0", "again-4"]
    assert pods[5].spec.containers == pods[0].spec.containers
    assert pods[5].spec.containers is not pods[0].spec.containers
    assert pods[6].spec.containers is pods[4].spec.containers

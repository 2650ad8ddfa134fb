"""Pods and nodes decoded from Kubernetes protobuf equal the same objects decoded from JSON, and a
body built byte by byte from the wire format decodes to what its bytes say."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from protobuf_fixtures import (
    MINIMAL_POD,
    NODE,
    RICH_POD,
    T1,
    comparable,
    envelope,
    list_body,
    message,
)

from desched.live.client import decode_status
from desched.model.kinds import JSON_DECODERS
from desched.model.meta import Shared, trim_annotations
from desched.model.proto_decode import (
    MAGIC,
    ProtobufError,
    decode_list,
    decode_object,
    unwrap,
)


def from_json(kind: str, obj: dict[str, Any]) -> Any:
    decoded = JSON_DECODERS[kind].decode(msgspec.json.encode(obj))
    trim_annotations(decoded.metadata)  # as the informer does after decoding
    return decoded


def same_both_ways(kind: str, *objects: dict[str, Any]) -> list[Any]:
    items, rv, token = decode_list(list_body(kind, list(objects), rv="42", token="next"), kind)
    assert (rv, token) == ("42", "next")
    assert [comparable(o) for o in items] == [comparable(from_json(kind, o)) for o in objects]
    return items


def test_a_rich_pod_decodes_as_from_json() -> None:
    pod = same_both_ways("Pod", RICH_POD)[0]
    assert pod.spec.priority == 0 and pod.spec.termination_grace_period_seconds == 30
    assert [ref.controller for ref in pod.metadata.owner_references] == [True, False, None]
    assert pod.metadata.deletion_timestamp == datetime(2026, 11, 20, 8, 30, 15, tzinfo=UTC)
    assert dict(pod.metadata.annotations) == {"descheduler.alpha.kubernetes.io/evict": "true",
                                              "kubernetes.io/config.source": "api"}
    assert pod.requests == {"cpu": 760, "memory": 2 * 1024 ** 3, "ephemeral-storage": 1000,
                            "nvidia.com/gpu": 1}
    assert pod.has_local_storage and pod.pvc_names == ["data-0"]
    assert pod.spec.affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution[
        0].pod_affinity_term.namespace_selector is not None


def test_shared_strings_are_the_instances_json_decoding_gives() -> None:
    pod = same_both_ways("Pod", RICH_POD)[0]
    twin = from_json("Pod", RICH_POD)
    assert type(pod.spec.node_name) is Shared
    assert pod.spec.node_name is twin.spec.node_name
    assert pod.metadata.namespace is twin.metadata.namespace
    assert pod.spec.containers[0].resources.requests["cpu"] is \
        twin.spec.containers[0].resources.requests["cpu"]


def test_absent_fields_stay_absent() -> None:
    pod = same_both_ways("Pod", MINIMAL_POD)[0]
    assert pod.spec.priority is None and pod.spec.affinity is None
    assert pod.spec.containers[0].resources is not None  # present, empty, as Go writes it
    assert pod.status.start_time is None and pod.conditions == ()
    assert pod.metadata.creation_timestamp is None  # a zero Time: an empty message


def test_replicas_differ_only_where_their_fields_do() -> None:
    """The structs built once per template are copied per pod: names, nodes and times stay
    each pod's own."""
    second = {**RICH_POD, "metadata": {**RICH_POD["metadata"], "name": "web-7f9c-fghij",
                                       "uid": "u-2", "creationTimestamp": T1},
              "spec": {**RICH_POD["spec"], "nodeName": "node-4"}}
    first, other = same_both_ways("Pod", RICH_POD, second)
    assert (first.name, other.name) == ("web-7f9c-abcde", "web-7f9c-fghij")
    assert (first.node_name, other.node_name) == ("node-3", "node-4")
    assert first.metadata.creation_timestamp != other.metadata.creation_timestamp
    assert first.spec is not other.spec and first.status is not other.status
    assert first.spec.containers is other.spec.containers  # the repeated part is shared


def test_nodes_decode_as_from_json() -> None:
    node = same_both_ways("Node", NODE, {"metadata": {"name": "bare"}})[0]
    assert node.allocatable == {"cpu": 63500, "memory": 250 * 1024 ** 3, "pods": 110}
    assert node.spec.unschedulable and node.spec.taints[1].effect == "NoExecute"


def test_an_empty_list() -> None:
    assert decode_list(list_body("Pod", [], rv="5"), "Pod") == ([], "5", "")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _ld(number: int, payload: bytes | str) -> bytes:
    """A length-delimited field (wire type 2)."""
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def test_bytes_written_from_the_wire_format_decode() -> None:
    """A PodList page spelled out by hand from generated.proto's field numbers, with fields
    desched does not declare (managedFields, env, hostIP) that must be skipped."""
    label = _ld(1, "app") + _ld(2, "web")
    managed = _ld(1, "kubectl") + _ld(2, "Update")  # ManagedFieldsEntry: manager, operation
    meta = (_ld(1, "web-1") + _ld(3, "prod") + _ld(5, "uid-1")
            + _ld(8, _int(1, 1_790_899_200)) + _ld(11, label) + _ld(17, managed)
            + _ld(13, _ld(1, "ReplicaSet") + _ld(3, "web") + _ld(4, "rs-uid")
                  + _ld(5, "apps/v1") + _int(6, 1)))
    quantity = _ld(1, "cpu") + _ld(2, _ld(1, "250m"))
    container = (_ld(1, "app") + _ld(2, "nginx:1") + _ld(7, _ld(1, "A") + _ld(2, "b"))
                 + _ld(8, _ld(2, quantity)))
    spec = _ld(2, container) + _ld(10, "node-1") + _int(25, 7) + _ld(19, "default-scheduler")
    condition = _ld(1, "Ready") + _ld(2, "True") + _ld(4, _int(1, 1_790_899_260))
    status = _ld(1, "Running") + _ld(2, condition) + _ld(5, "10.0.0.1") + _ld(9, "Burstable")
    page = _ld(1, _ld(2, "1234") + _ld(3, "tok")) + _ld(2, _ld(1, meta) + _ld(2, spec)
                                                        + _ld(3, status))
    body = MAGIC + _ld(1, _ld(1, "v1") + _ld(2, "PodList")) + _ld(2, page)

    assert unwrap(body)[:2] == ("v1", "PodList")
    items, rv, token = decode_list(body, "Pod")
    assert (rv, token) == ("1234", "tok")
    (pod,) = items
    assert (pod.name, pod.namespace, pod.metadata.uid) == ("web-1", "prod", "uid-1")
    assert pod.metadata.creation_timestamp == datetime(2026, 10, 2, tzinfo=UTC)
    assert dict(pod.labels) == {"app": "web"}
    ref = pod.controller
    assert ref is not None and (ref.api_version, ref.kind, ref.name, ref.uid) == (
        "apps/v1", "ReplicaSet", "web", "rs-uid")
    assert pod.spec.containers[0].image == "nginx:1"
    assert dict(pod.spec.containers[0].resources.requests) == {"cpu": "250m"}
    assert pod.requests == {"cpu": 250}
    assert (pod.node_name, pod.priority, pod.spec.scheduler_name) == (
        "node-1", 7, "default-scheduler")
    assert (pod.status.phase, pod.qos_class, pod.ready) == ("Running", "Burstable", True)
    assert pod.condition("Ready").last_transition_time == datetime(2026, 10, 2, 0, 1,
                                                                   tzinfo=UTC)


def test_a_protobuf_status_is_read_as_an_error() -> None:
    status = message("Status", {"status": "Failure", "reason": "Expired", "code": 410,
                                "message": "too old resource version: 5 (900)"})
    body = envelope("Status", status.SerializeToString())
    found = decode_status(body)
    assert found is not None
    assert (found.code, found.reason, found.message) == (
        410, "Expired", "too old resource version: 5 (900)")
    assert decode_status(b'{"kind":"Status","code":410,"reason":"Expired"}').code == 410


@pytest.mark.parametrize(("change", "error"), [
    (lambda p: p["status"].update(phase="Sleeping"), "status.phase: invalid value 'Sleeping'"),
    (lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="lots"),
     "spec.containers[0].resources.requests"),
    (lambda p: p["spec"]["tolerations"][0].update(effect="Never"), "spec.tolerations"),
])
def test_invalid_values_are_refused_with_the_pod_and_field(change: Any, error: str) -> None:
    bad = msgspec.json.decode(msgspec.json.encode(RICH_POD))
    bad["metadata"]["name"] = "broken"
    change(bad)
    with pytest.raises(ProtobufError, match=r"Pod broken: .*" + error.replace("[", r"\[")
                       .replace("]", r"\]")):
        decode_list(list_body("Pod", [bad]), "Pod")
    with pytest.raises(msgspec.ValidationError):  # the JSON path refuses it too
        from_json("Pod", bad)


@pytest.mark.parametrize("body", [b"", b"k8s", b'{"kind":"PodList"}', MAGIC + b"\x12\x05ab",
                                  MAGIC + b"\x0b"])
def test_malformed_bodies_raise_protobuf_errors(body: bytes) -> None:
    with pytest.raises(ProtobufError):
        decode_list(body, "Pod")


def test_the_wrong_kind_is_refused() -> None:
    with pytest.raises(ProtobufError, match="expected a PodList, got NodeList"):
        decode_list(list_body("Node", [NODE]), "Pod")
    single = envelope("Node", message("Node", NODE).SerializeToString())
    assert decode_object(single, "Node").name == "node-3"
    with pytest.raises(ProtobufError, match="expected a Pod, got Node"):
        decode_object(single, "Pod")

"""Pod facts: effective requests (PodRequests), QoS class, owner and storage detection."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import decode


def make(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None,
         **spec: Any) -> Any:
    body: dict[str, Any] = {"containers": containers, **spec}
    if init:
        body["initContainers"] = init
    return decode("Pod", {"metadata": {"name": "p"}, "spec": body})


def c(cpu: str | None = None, mem: str | None = None, lim_cpu: str | None = None,
      lim_mem: str | None = None, restart: str | None = None) -> dict[str, Any]:
    req = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}
    lim = {k: v for k, v in (("cpu", lim_cpu), ("memory", lim_mem)) if v is not None}
    out: dict[str, Any] = {"name": "c", "image": "i", "resources": {"requests": req,
                                                                    "limits": lim}}
    if restart:
        out["restartPolicy"] = restart
    return out


def test_sum_of_containers() -> None:
    pod = make([c("100m", "100Mi"), c("200m", "50Mi")])
    assert pod.requests == {"cpu": 300, "memory": 150 * 2**20}


def test_init_container_max() -> None:
    pod = make([c("100m")], init=[c("500m"), c("200m")])
    assert pod.requests["cpu"] == 500


def test_sidecar_adds_to_sum_and_to_later_init_containers() -> None:
    # sidecar 100m runs alongside the app (200m) and alongside the later init container (300m).
    pod = make([c("200m")], init=[c("100m", restart="Always"), c("300m")])
    assert pod.requests["cpu"] == 400  # max(200+100, 100+300)


def test_overhead_added() -> None:
    pod = make([c("100m")], overhead={"cpu": "50m", "memory": "10Mi"})
    assert pod.requests == {"cpu": 150, "memory": 10 * 2**20}


def test_limits_default_requests() -> None:
    pod = make([c(lim_cpu="1", lim_mem="1Gi")])
    assert pod.requests == {"cpu": 1000, "memory": 2**30}


def test_pod_level_resources_replace_aggregate() -> None:
    pod = make([c("100m", "1Gi")], resources={"requests": {"cpu": "2"}})
    assert pod.requests == {"cpu": 2000, "memory": 2**30}


@pytest.mark.parametrize(("containers", "qos"), [
    ([c()], "BestEffort"),
    ([c("100m")], "Burstable"),
    ([c("1", "1Gi", "1", "1Gi")], "Guaranteed"),
    ([c(lim_cpu="1", lim_mem="1Gi")], "Guaranteed"),       # requests default to limits
    ([c("500m", "1Gi", "1", "1Gi")], "Burstable"),
    ([c("1", "1Gi", "1", "1Gi"), c("100m")], "Burstable"),
])
def test_qos(containers: list[dict[str, Any]], qos: str) -> None:
    assert make(containers).qos_class == qos


def test_status_qos_wins() -> None:
    pod = decode("Pod", {"metadata": {"name": "p"}, "status": {"qosClass": "Guaranteed"}})
    assert pod.qos_class == "Guaranteed"


def test_owner_and_classes() -> None:
    pod = decode("Pod", {"metadata": {
        "name": "p", "annotations": {"kubernetes.io/config.source": "file"},
        "ownerReferences": [{"kind": "DaemonSet", "name": "ds", "uid": "u", "controller": True}]},
        "spec": {"volumes": [{"name": "v", "emptyDir": {}},
                             {"name": "w", "persistentVolumeClaim": {"claimName": "data"}}]}})
    assert pod.is_daemonset and pod.is_static and not pod.is_mirror
    assert pod.controller is not None and pod.controller.name == "ds"
    assert pod.has_local_storage
    assert pod.pvc_names == ["data"]


def test_conditions_decoded_lazily() -> None:
    pod = decode("Pod", {"metadata": {"name": "p"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    ready = pod.condition("Ready")
    assert ready is not None and ready.status == "True"
    assert ready.last_transition_time is not None and ready.last_transition_time.year == 2026
    assert pod.condition("PodScheduled") is None


def test_detach_lets_the_decoded_buffer_go() -> None:
    """A pod's lazily decoded conditions are a view that keeps the whole input alive (a list
    page, a file mapping) until detached."""
    import sys

    import msgspec

    from desched.model.kinds import JSON_DECODERS
    from desched.model.sharing import detach

    page = msgspec.json.encode({
        "metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": []},
        "status": {"phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True"}]}}) + b" " * 1_000_000
    baseline = sys.getrefcount(page)
    pod = JSON_DECODERS["Pod"].decode(page)
    assert sys.getrefcount(page) > baseline  # held by the Raw
    detach([pod, object()])
    assert sys.getrefcount(page) == baseline
    assert pod.ready and pod.condition("Ready") is not None
    empty = JSON_DECODERS["Pod"].decode(b'{"metadata": {"name": "q"}}')
    detach([empty])
    assert not empty.status.conditions and not empty.ready


def test_the_first_ready_condition_decides_readiness_either_way() -> None:
    from desched.model.kinds import JSON_DECODERS

    body = (b'{"metadata": {"name": "p"}, "status": {"conditions": ['
            b'{"type": "Ready", "status": "False"}, {"type": "Ready", "status": "True"}]}}')
    lean = JSON_DECODERS["Pod"].decode(body)
    assert lean.ready is False
    decoded_first = JSON_DECODERS["Pod"].decode(body)
    assert decoded_first.condition("Ready") is not None
    assert decoded_first.ready is False


_CONDITION = st.fixed_dictionaries(
    {"type": st.sampled_from(["Ready", "PodScheduled", "ContainersReady", "Initialized"]),
     "status": st.sampled_from(["True", "False", "Unknown"])},
    optional={"reason": st.sampled_from(["Ready", "PodCompleted", 'say "Ready"', ""]),
              "message": st.text(alphabet='Ready"{},:[] \\', max_size=30),
              "lastProbeTime": st.none()})


@settings(max_examples=400, deadline=None)
@given(conditions=st.lists(st.tuples(_CONDITION, st.booleans()), max_size=4),
       compact=st.booleans())
def test_readiness_read_off_the_text_is_the_decoders(
        conditions: list[tuple[dict[str, Any], bool]], compact: bool) -> None:
    """Conditions as an API server writes them are read without decoding; written any other
    way (spaces, status before type, Ready twice, a reason of Ready) they are decoded: either
    way the answer is the first Ready condition's."""
    import json

    from desched.model.kinds import JSON_DECODERS

    # Each condition with its status first or its type first.
    written = [{"status": c["status"], **c} if status_first else c
               for c, status_first in conditions]
    separators = (",", ":") if compact else (", ", ": ")
    body = json.dumps({"metadata": {"name": "p"}, "status": {"conditions": written}},
                      separators=separators).encode()
    expected = next((c["status"] == "True" for c in written if c["type"] == "Ready"), False)
    assert JSON_DECODERS["Pod"].decode(body).ready is expected


def test_readiness_of_conditions_written_two_ways_is_the_first_ready_ones() -> None:
    """Hand-edited text: the first Ready condition is not written as an API server writes it,
    a later one is: the decoder answers, from the first."""
    from desched.model.kinds import JSON_DECODERS

    body = (b'{"metadata":{"name":"p"},"status":{"conditions":[{"type": "Ready", '
            b'"status": "False"},{"type":"Ready","status":"True"}]}}')
    assert JSON_DECODERS["Pod"].decode(body).ready is False

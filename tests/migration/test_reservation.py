"""The Reservation a ReservationFirst job creates (Koordinator's
CreateOrUpdateReservationOptions): from the pod by default; the job's
`reservationOptions.template` overrides it field by field, its `spec.template` standing for
the pod's; what no template changes (no nodeName, away from the pod's node, allocateOnce); and
the `DisablePVCReservation` gate."""

from __future__ import annotations

from typing import Any

import pytest

from desched.migration import reservation as rsv

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
AWAY = {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7f", "uid": "rs-uid",
      "controller": True}
VOLUMES = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
           {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
           {"name": "config", "configMap": {"name": "web"}},
           {"name": "tmp", "emptyDir": {}}]


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web-0", "namespace": "shop", "uid": "pod-uid",
                         "labels": {"app": "web"}, "annotations": {"a": "1"},
                         "ownerReferences": [RS]},
            "spec": {"nodeName": "n1", "schedulerName": "koord-scheduler",
                     "containers": [{"name": "c", "image": "web:1"}], **spec},
            "status": {"phase": "Running"}}


def job(template: dict[str, Any] | None = None, ttl: str | None = "5m") -> dict[str, Any]:
    spec: dict[str, Any] = {"podRef": {"namespace": "shop", "name": "web-0"}}
    if ttl is not None:
        spec["ttl"] = ttl
    if template is not None:
        spec["reservationOptions"] = {"template": template}
    return {"metadata": {"name": "job-1", "uid": "job-uid"}, "spec": spec}


def terms(reservation: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = reservation["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    return list(affinity[REQUIRED]["nodeSelectorTerms"])


def test_from_the_pod_without_a_template() -> None:
    r = rsv.build(job(), pod(), 1700000000000)
    assert r["metadata"]["name"] == "job-uid"
    assert r["metadata"]["labels"] == {rsv.CREATED_BY_LABEL: rsv.CREATED_BY,
                                       rsv.ORDER_LABEL: "1700000000000"}
    assert r["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    spec = r["spec"]
    assert spec["owners"] == [{"controller": {**RS, "namespace": "shop"}}]
    assert spec["allocateOnce"] is True and spec["ttl"] == "5m"
    assert spec["template"]["metadata"] == {"labels": {"app": "web"}, "annotations": {"a": "1"}}
    assert "nodeName" not in spec["template"]["spec"]
    assert spec["template"]["spec"]["schedulerName"] == "koord-scheduler"
    assert terms(r) == [{"matchFields": [AWAY]}]


def test_the_template_overrides_name_labels_annotations_and_spec_fields() -> None:
    template = {"metadata": {"name": "mine", "labels": {"team": "a"},
                             "annotations": {"note": "x"}},
                "spec": {"ttl": "30m", "allocatePolicy": "Restricted",
                         "taints": [{"key": "k", "effect": "NoSchedule"}]}}
    r = rsv.build(job(template), pod(), 1)
    assert r["metadata"]["name"] == "mine"
    assert r["metadata"]["labels"] == {"team": "a", rsv.CREATED_BY_LABEL: rsv.CREATED_BY,
                                       rsv.ORDER_LABEL: "1"}
    assert r["metadata"]["annotations"] == {"note": "x"}
    spec = r["spec"]
    assert (spec["ttl"], spec["allocatePolicy"]) == ("30m", "Restricted")
    assert spec["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    # What the template leaves out comes from the pod.
    assert spec["owners"] == [{"controller": {**RS, "namespace": "shop"}}]
    assert spec["template"]["metadata"]["labels"] == {"app": "web"}


@pytest.mark.parametrize(("template_spec", "ttl"), [
    ({"expires": "2026-11-28T10:00:00Z"}, None),  # expires: the job's ttl is not added
    ({"ttl": "1h"}, "1h"),
    ({}, "5m"),
])
def test_the_jobs_ttl_only_without_the_templates_ttl_or_expires(
        template_spec: dict[str, Any], ttl: str | None) -> None:
    assert rsv.build(job({"spec": template_spec}), pod(), 1)["spec"].get("ttl") == ttl


def test_the_templates_pod_template_stands_for_the_pods() -> None:
    """Koordinator takes the template's spec.template whole: none of the pod's fields are
    merged into it, yet it gets no nodeName, the affinity away from the pod's node (added to
    each of its own required terms) and allocateOnce, whatever it says."""
    own = {"metadata": {"labels": {"app": "other"}},
           "spec": {"nodeName": "n9", "containers": [{"name": "big", "image": "big:2"}],
                    "affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In",
                                               "values": ["a"]}]},
                        {"matchExpressions": [{"key": "pool", "operator": "In",
                                               "values": ["b"]}]}]}}}}}
    r = rsv.build(job({"spec": {"template": own, "allocateOnce": False}}), pod(), 1)
    spec = r["spec"]
    assert spec["allocateOnce"] is True
    assert spec["template"]["metadata"] == {"labels": {"app": "other"}}
    assert spec["template"]["spec"]["containers"] == [{"name": "big", "image": "big:2"}]
    assert "nodeName" not in spec["template"]["spec"]
    assert "schedulerName" not in spec["template"]["spec"]  # not the pod's
    assert [t["matchFields"] for t in terms(r)] == [[AWAY], [AWAY]]
    assert [t["matchExpressions"][0]["values"] for t in terms(r)] == [["a"], ["b"]]


def test_the_templates_owners_stand_for_the_pods_controller() -> None:
    owners = [{"labelSelector": {"matchLabels": {"app": "web"}}}]
    assert rsv.build(job({"spec": {"owners": owners}}), pod(), 1)["spec"]["owners"] == owners
    # Empty owners are no owners: the pod's controller (len(owners) == 0 in Koordinator).
    assert rsv.build(job({"spec": {"owners": []}}), pod(), 1)["spec"]["owners"] == [
        {"controller": {**RS, "namespace": "shop"}}]


def test_a_bare_pod_needs_the_templates_owners() -> None:
    bare = pod()
    bare["metadata"]["ownerReferences"] = []
    with pytest.raises(rsv.BuildError, match="no controller"):
        rsv.build(job(), bare, 1)
    owners = [{"object": {"name": "web-0", "namespace": "shop"}}]
    assert rsv.build(job({"spec": {"owners": owners}}), bare, 1)["spec"]["owners"] == owners


def test_the_template_is_not_changed() -> None:
    template = {"spec": {"template": {"spec": {"nodeName": "n9"}}}}
    j = job(template)
    rsv.build(j, pod(), 1)
    assert j["spec"]["reservationOptions"]["template"] == template


@pytest.mark.parametrize(("gate", "kept"), [
    (False, ["data", "scratch", "config", "tmp"]),
    (True, ["config", "tmp"]),
])
def test_disable_pvc_reservation_drops_pvc_and_ephemeral_volumes(gate: bool,
                                                                 kept: list[str]) -> None:
    r = rsv.build(job(), pod(volumes=VOLUMES), 1, disable_pvc_reservation=gate)
    assert [v["name"] for v in r["spec"]["template"]["spec"]["volumes"]] == kept


def test_disable_pvc_reservation_applies_to_the_templates_pod_template() -> None:
    own = {"spec": {"containers": [], "volumes": VOLUMES}}
    r = rsv.build(job({"spec": {"template": own}}), pod(), 1, disable_pvc_reservation=True)
    assert [v["name"] for v in r["spec"]["template"]["spec"]["volumes"]] == ["config", "tmp"]

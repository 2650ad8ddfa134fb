"""Pods and nodes for the protobuf tests, and protobuf bodies made from JSON-shaped objects as
the API server would send them, through the message classes desched declares
(desched.model.proto_schema) and the JSON names of their fields.

What differs between the two forms is converted as Kubernetes does: a timestamp becomes a Time
message (seconds), a quantity a Quantity message (its text), a volume's inlined source the
Volume's volumeSource field. Fields desched does not declare are left out (the tests that need
unknown fields on the wire add them as bytes)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from desched.model.pod import Pod
from desched.model.proto_decode import MAGIC
from desched.model.proto_schema import CLASSES, MESSAGES


def message(name: str, value: dict[str, Any]) -> Any:
    msg = CLASSES[name]()
    fill(msg, name, value)
    return msg


def fill(msg: Any, name: str, value: dict[str, Any]) -> None:
    if name == "Volume":
        value = {"volumeSource": value}
    for field, _, kind in MESSAGES[name]:
        if field not in value or value[field] is None:
            continue
        item = value[field]
        if kind.startswith("{"):
            target = getattr(msg, field)
            for key, entry in item.items():
                if kind == "{string}":
                    target[key] = entry
                else:
                    fill(target[key], kind[1:-1], _scalar_or_message(kind[1:-1], entry))
        elif kind.startswith("*"):
            inner = kind[1:]
            target = getattr(msg, field)
            if inner in CLASSES:
                for entry in item:
                    fill(target.add(), inner, _scalar_or_message(inner, entry))
            else:
                target.extend(item)
        elif kind in CLASSES:
            sub = getattr(msg, field)
            sub.SetInParent()  # present even when empty, as Go writes a set pointer
            fill(sub, kind, _scalar_or_message(kind, item))
        else:
            setattr(msg, field, item)


def _scalar_or_message(kind: str, value: Any) -> dict[str, Any]:
    if kind == "Time":
        return {"seconds": int(datetime.fromisoformat(value).timestamp())}
    if kind == "Quantity":
        return {"string": str(value)}
    return dict(value)


def envelope(kind: str, raw: bytes, api_version: str = "v1") -> bytes:
    """The "k8s\\0" + runtime.Unknown body the API server sends for a message."""
    unknown = CLASSES["Unknown"](raw=raw)
    unknown.typeMeta.apiVersion = api_version
    unknown.typeMeta.kind = kind
    return MAGIC + unknown.SerializeToString()


def list_body(kind: str, items: list[dict[str, Any]], rv: str = "7", token: str = "") -> bytes:
    """A protobuf <kind>List page of these JSON-shaped objects."""
    page = message(f"{kind}List", {"metadata": {"resourceVersion": rv, "continue": token},
                                   "items": items})
    return envelope(f"{kind}List", page.SerializeToString())


T0 = "2026-10-02T00:00:00Z"
T1 = "2026-11-20T08:30:15Z"

RICH_POD: dict[str, Any] = {
    "metadata": {
        "name": "web-7f9c-abcde", "namespace": "prod", "uid": "u-1", "resourceVersion": "99",
        "creationTimestamp": T0, "deletionTimestamp": T1,
        "labels": {"app": "web", "pod-template-hash": "7f9c", "app.kubernetes.io/name": "web"},
        "annotations": {"descheduler.alpha.kubernetes.io/evict": "true",
                        "kubectl.kubernetes.io/last-applied-configuration": "{}" * 50,
                        "kubernetes.io/config.source": "api"},
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7f9c", "uid": "rs-1",
             "controller": True},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "cm-1",
             "controller": False},
            {"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "s-1"}]},
    "spec": {
        "nodeName": "node-3", "schedulerName": "default-scheduler", "priority": 0,
        "priorityClassName": "low", "terminationGracePeriodSeconds": 30,
        "nodeSelector": {"pool": "a", "disk": "ssd"},
        "containers": [
            {"name": "app", "image": "registry/web:1", "resources": {
                "requests": {"cpu": "250m", "memory": "1Gi", "ephemeral-storage": "1e3"},
                "limits": {"cpu": "2", "memory": "1.5Gi", "nvidia.com/gpu": "1"}}},
            {"name": "bare", "image": "registry/side:2"}],
        "initContainers": [{"name": "sidecar", "image": "registry/proxy:1",
                            "restartPolicy": "Always",
                            "resources": {"requests": {"cpu": "0.5"}}}],
        "overhead": {"cpu": "10m"},
        "resources": {"requests": {"memory": "2Gi"}},
        "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "host", "hostPath": {"path": "/x"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
                    {"name": "eph", "ephemeral": {"volumeClaimTemplate": {}}},
                    {"name": "cfg", "configMap": {"name": "cm"}}],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web",
                         "effect": "NoSchedule"},
                        {"operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                      "values": ["node-9"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [
                        {"key": "zone", "operator": "Exists"}]}}]},
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}},
                     "topologyKey": "kubernetes.io/hostname", "namespaces": ["prod"],
                     "matchLabelKeys": ["pod-template-hash"]}],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": {
                        "labelSelector": {"matchExpressions": [
                            {"key": "tier", "operator": "In", "values": ["db", "cache"]}]},
                        "namespaceSelector": {},
                        "topologyKey": "topology.kubernetes.io/zone"}}]}},
        "topologySpreadConstraints": [
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "web"}}, "minDomains": 3,
             "nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Ignore",
             "matchLabelKeys": ["pod-template-hash"]},
            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
             "whenUnsatisfiable": "ScheduleAnyway"}],
        "resourceClaims": [{"name": "gpu"}]},
    "status": {
        "phase": "Running", "qosClass": "Burstable", "reason": "", "startTime": T0,
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": T1},
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        "containerStatuses": [
            {"name": "app", "restartCount": 4, "state": {"waiting": {
                "reason": "CrashLoopBackOff"}}},
            {"name": "bare", "restartCount": 0, "state": {"terminated": {
                "reason": "Error", "exitCode": 137}}}],
        "initContainerStatuses": [{"name": "sidecar", "restartCount": 1, "state": {}}]},
}

MINIMAL_POD: dict[str, Any] = {"metadata": {"name": "p", "namespace": "default"},
                               "spec": {"containers": [{"name": "c", "image": "i",
                                                        "resources": {}}]},
                               "status": {}}

NODE: dict[str, Any] = {
    "metadata": {"name": "node-3", "uid": "n-1", "creationTimestamp": T0,
                 "labels": {"kubernetes.io/hostname": "node-3", "pool": "a"},
                 "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
    "spec": {"unschedulable": True, "taints": [
        {"key": "dedicated", "value": "web", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": T1}]},
    "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
               "allocatable": {"cpu": "63500m", "memory": "250Gi", "pods": "110"},
               "conditions": [{"type": "Ready", "status": "True"},
                              {"type": "MemoryPressure", "status": "False"}],
               "images": [{"names": ["registry/web@sha256:1", "registry/web:1"],
                           "sizeBytes": 123456789}]},
}


def comparable(obj: Any) -> Any:
    """A pod's conditions as read (JSON text kept for later decoding differs in spelling)."""
    if isinstance(obj, Pod):
        conditions = obj.conditions
        obj.status.conditions = msgspec.Raw()
        obj.cached_conditions = None
        return obj, conditions
    return obj

"""The kinds a snapshot understands, their API groups, and decoders for them."""

from __future__ import annotations

from typing import Any

import msgspec

from desched.model.meta import shared_hook
from desched.model.node import Node
from desched.model.objects import (
    WORKLOAD_TYPES,
    Namespace,
    NodeMetric,
    NodeMetrics,
    PersistentVolumeClaim,
    PodDisruptionBudget,
    PodMetrics,
    PodMigrationJob,
    PriorityClass,
    Reservation,
    Service,
    SnapshotInfo,
)
from desched.model.pod import Pod

# kind -> the API groups it may come from ("" is the core group).
KIND_GROUPS: dict[str, tuple[str, ...]] = {
    "Node": ("",),
    "Pod": ("",),
    "Namespace": ("",),
    "PersistentVolumeClaim": ("",),
    "ReplicationController": ("",),
    "Service": ("",),
    "PodDisruptionBudget": ("policy",),
    "PriorityClass": ("scheduling.k8s.io",),
    "ReplicaSet": ("apps",),
    "Deployment": ("apps",),
    "StatefulSet": ("apps",),
    "DaemonSet": ("apps",),
    "Job": ("batch",),
    "NodeMetric": ("slo.koordinator.sh",),
    "NodeMetrics": ("metrics.k8s.io",),
    "PodMetrics": ("metrics.k8s.io",),
    "PodMigrationJob": ("scheduling.koordinator.sh",),
    "Reservation": ("scheduling.koordinator.sh",),
    "SnapshotInfo": ("desched.io",),
}

TYPES: dict[str, type] = {
    "Node": Node,
    "Pod": Pod,
    "Namespace": Namespace,
    "PersistentVolumeClaim": PersistentVolumeClaim,
    "PodDisruptionBudget": PodDisruptionBudget,
    "PriorityClass": PriorityClass,
    "NodeMetric": NodeMetric,
    "NodeMetrics": NodeMetrics,
    "PodMetrics": PodMetrics,
    "PodMigrationJob": PodMigrationJob,
    "Reservation": Reservation,
    "SnapshotInfo": SnapshotInfo,
    "Service": Service,
    **{t.__name__: t for t in WORKLOAD_TYPES},
}

KubeObject = Any  # one of TYPES' values


def api_group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


# One decoder per kind for JSON bytes (items of a typed list carry no kind of their own).
JSON_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    kind: msgspec.json.Decoder(t, dec_hook=shared_hook) for kind, t in TYPES.items()
}


def _page_type(kind: str, item: type) -> type:
    return msgspec.defstruct(
        f"{kind}List",
        [("kind", str, ""), ("api_version", str, ""), ("items", tuple[item, ...], ())],  # type: ignore[valid-type]
        rename="camel",
        module=__name__,
    )


# Decoders for whole typed list pages (PodList, NodeList...): one call per page, no per-item work.
PAGE_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    f"{kind}List": msgspec.json.Decoder(_page_type(kind, t), dec_hook=shared_hook)
    for kind, t in TYPES.items()
}

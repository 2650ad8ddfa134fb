"""One instance of each repeated part of a pod, shared between the replicas that carry it.

The replicas of one workload decode to equal label maps, containers, volumes, tolerations,
node selectors, owner references and container statuses, held once per pod. desched never
modifies these parts of a decoded pod (a replacement or a moved pod gets new structs), so equal
parts can be one object: at 150,000 pods they were most of what a pod cost in memory
(bench/README.md, "Memory per pod"). Each pod is compared with the parts of the first pod seen
of the same owner, part by part, with the structs' own equality (C code, no keys built in
Python).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from desched.model.meta import OwnerReference
from desched.model.pod import (
    Affinity,
    Container,
    ContainerStatus,
    Pod,
    Toleration,
    TopologySpreadConstraint,
    Volume,
)
from desched.util.memo import remember


class _Parts(msgspec.Struct, gc=False):
    """The shareable parts of an owner's first pod: kept instead of the pod, so an owner's
    entry holds no name, status or conditions of a pod that may be long gone."""

    owner_references: tuple[OwnerReference, ...]
    labels: Mapping[str, str]
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    volumes: tuple[Volume, ...]
    tolerations: tuple[Toleration, ...]
    node_selector: Mapping[str, str]
    affinity: Affinity | None
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...]
    container_statuses: tuple[ContainerStatus, ...]


# Owner UID -> the parts of its first pod seen. Bounded: a long-running process meets new
# owners (each Job of a CronJob is one); a 150,000-pod cluster has about 8,000.
_first_of_owner: dict[str, _Parts] = {}
_OWNERS_LIMIT = 50_000


def share_parts(pod: Pod) -> None:
    """Replace the pod's parts that equal those of the first pod of its owner with theirs."""
    meta, spec = pod.metadata, pod.spec
    refs = meta.owner_references
    if not refs:
        return
    first = _first_of_owner.get(refs[0].uid)
    if first is None:
        remember(_first_of_owner, refs[0].uid, _Parts(
            refs, meta.labels, spec.containers, spec.init_containers, spec.volumes,
            spec.tolerations, spec.node_selector, spec.affinity,
            spec.topology_spread_constraints, pod.status.container_statuses),
            limit=_OWNERS_LIMIT)
        return
    if refs == first.owner_references:
        meta.owner_references = first.owner_references
    if meta.labels == first.labels:
        meta.labels = first.labels
    if spec.containers == first.containers:
        spec.containers = first.containers
    if spec.init_containers and spec.init_containers == first.init_containers:
        spec.init_containers = first.init_containers
    if spec.volumes == first.volumes:
        spec.volumes = first.volumes
    if spec.tolerations == first.tolerations:
        spec.tolerations = first.tolerations
    if spec.node_selector and spec.node_selector == first.node_selector:
        spec.node_selector = first.node_selector
    if spec.affinity is not None and spec.affinity == first.affinity:
        spec.affinity = first.affinity
    if spec.topology_spread_constraints \
            and spec.topology_spread_constraints == first.topology_spread_constraints:
        spec.topology_spread_constraints = first.topology_spread_constraints
    statuses = pod.status.container_statuses
    if statuses and statuses == first.container_statuses:
        pod.status.container_statuses = first.container_statuses


def detach(objs: Iterable[object]) -> None:
    """Make freshly decoded pods independent of the buffer they were decoded from, and lean.

    A Raw keeps its whole input alive: a list page of 500 pods for as long as one of its pods
    lives, or the pages of a memory-mapped file, faulted back in when the conditions are read.
    So the lazily decoded conditions are copied out, and the repeated parts shared."""
    for obj in objs:
        if type(obj) is Pod:
            raw = obj.status.conditions
            if raw:
                obj.status.conditions = raw.copy()
            share_parts(obj)

"""One instance of each repeated part of a pod, shared between the replicas that carry it.

The replicas of one workload decode to equal label maps, containers, volumes, tolerations,
node selectors, owner references and container statuses, held once per pod. desched never
modifies these parts of a decoded pod (a replacement or a moved pod gets new structs), so equal
parts can be one object: at 150,000 pods they were most of what a pod cost in memory
(bench/README.md, "Memory per pod"). Each pod is compared with the first pod seen of the same
owner, part by part, with the structs' own equality (C code, no keys built in Python).
"""

from __future__ import annotations

from collections.abc import Iterable

from desched.model.pod import Pod
from desched.util.memo import remember

# The first pod seen of each owner UID. Bounded: a long-running process meets new owners.
_first_of_owner: dict[str, Pod] = {}


def share_parts(pod: Pod) -> None:
    """Replace the pod's parts that equal those of the first pod of its owner with theirs."""
    meta = pod.metadata
    refs = meta.owner_references
    if not refs:
        return
    first = _first_of_owner.get(refs[0].uid)
    if first is None:
        remember(_first_of_owner, refs[0].uid, pod)
        return
    if first is pod:
        return
    first_meta, spec, first_spec = first.metadata, pod.spec, first.spec
    if refs == first_meta.owner_references:
        meta.owner_references = first_meta.owner_references
    if meta.labels == first_meta.labels:
        meta.labels = first_meta.labels
    if spec.containers == first_spec.containers:
        spec.containers = first_spec.containers
    if spec.init_containers and spec.init_containers == first_spec.init_containers:
        spec.init_containers = first_spec.init_containers
    if spec.volumes == first_spec.volumes:
        spec.volumes = first_spec.volumes
    if spec.tolerations == first_spec.tolerations:
        spec.tolerations = first_spec.tolerations
    if spec.node_selector and spec.node_selector == first_spec.node_selector:
        spec.node_selector = first_spec.node_selector
    if spec.affinity is not None and spec.affinity == first_spec.affinity:
        spec.affinity = first_spec.affinity
    if spec.topology_spread_constraints \
            and spec.topology_spread_constraints == first_spec.topology_spread_constraints:
        spec.topology_spread_constraints = first_spec.topology_spread_constraints
    statuses = pod.status.container_statuses
    if statuses and statuses == first.status.container_statuses:
        pod.status.container_statuses = first.status.container_statuses


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

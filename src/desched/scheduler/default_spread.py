"""The selector kube-scheduler gives a pod's default topology spread constraints
(helper.DefaultSelector): the selectors of the Services that select the pod, and of its
controlling ReplicaSet, StatefulSet or ReplicationController. A pod nothing selects gets no
default constraints."""

from __future__ import annotations

from desched.model.meta import LabelSelector, LabelSelectorRequirement
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot

# The controller kinds whose selector joins the default one, by API version.
_OWNER_KINDS = {("ReplicaSet", "apps/v1"), ("StatefulSet", "apps/v1"),
                ("ReplicationController", "v1")}


def _controller(pod: Pod) -> tuple[str, str] | None:
    """(kind, name) of the pod's controller when it is one whose selector counts. A snapshot
    written by hand may leave an owner's apiVersion out: the kind alone decides then."""
    for ref in pod.metadata.owner_references:
        if ref.controller:
            if (ref.kind, ref.api_version or _default_version(ref.kind)) in _OWNER_KINDS:
                return ref.kind, ref.name
            return None
    return None


def _default_version(kind: str) -> str:
    return "v1" if kind == "ReplicationController" else "apps/v1"


def default_selector(pod: Pod, snapshot: ClusterSnapshot) -> LabelSelector | None:
    """The pod's default spreading selector, or None when it is empty (no constraints then)."""
    namespace = pod.namespace
    labels = pod.metadata.labels
    merged: dict[str, str] = {}
    for service in snapshot.services_by_namespace.get(namespace, {}).values():
        selector = service.spec.selector
        if selector is None:
            continue
        if all(labels.get(k) == v for k, v in selector.items()):
            merged.update(selector)
    expressions: list[LabelSelectorRequirement] = []
    owner = _controller(pod)
    if owner is not None:
        kind, name = owner
        workload = snapshot.workloads.get((kind, namespace, name))
        if workload is not None and kind == "ReplicationController":
            merged.update(workload.spec.selector or {})
        elif workload is not None and workload.spec.selector is not None:
            own = workload.spec.selector
            for k, v in (own.match_labels or {}).items():
                if merged.get(k, v) == v:
                    merged[k] = v  # the same requirement, kept indexable (matchLabels)
                else:  # a Service asks another value: both must hold (nothing matches)
                    expressions.append(LabelSelectorRequirement(key=k, operator="In",
                                                                values=(v,)))
            expressions += own.match_expressions or []
    if not merged and not expressions:
        return None
    return LabelSelector(match_labels=merged or None, match_expressions=expressions or None)

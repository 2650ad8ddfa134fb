"""The API resources desched reads: where each kind lives on the API server."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from desched.errors import InputError


@dataclass(frozen=True)
class Resource:
    kind: str
    group: str  # "" is the core group
    version: str
    plural: str
    namespaced: bool
    # CRDs and aggregated APIs may be absent: a 404 skips the kind with a note instead of failing.
    optional: bool = False
    # metrics.k8s.io serves get/list only, so its kinds are re-listed periodically.
    watchable: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The cluster-wide collection path (every namespace for namespaced kinds)."""
        prefix = f"/apis/{self.group}" if self.group else "/api"
        return f"{prefix}/{self.version}/{self.plural}"

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def label(self) -> str:
        """How messages name it: `pods`, `deployments.apps/v1`."""
        return f"{self.plural}.{self.api_version}" if self.group else self.plural


def _r(kind: str, group_version: str, plural: str, namespaced: bool, *, optional: bool = False,
       watchable: bool = True) -> Resource:
    group, _, version = group_version.rpartition("/")
    return Resource(kind, group, version, plural, namespaced, optional, watchable)


# Listed in the order a snapshot is written and built: cluster-scoped context first, pods after the
# objects that describe them, usage data last.
RESOURCES: tuple[Resource, ...] = (
    _r("Namespace", "v1", "namespaces", False),
    _r("Node", "v1", "nodes", False),
    _r("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False),
    _r("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", True),
    _r("PersistentVolumeClaim", "v1", "persistentvolumeclaims", True),
    _r("ReplicationController", "v1", "replicationcontrollers", True),
    _r("Service", "v1", "services", True),
    _r("ReplicaSet", "apps/v1", "replicasets", True),
    _r("Deployment", "apps/v1", "deployments", True),
    _r("StatefulSet", "apps/v1", "statefulsets", True),
    _r("DaemonSet", "apps/v1", "daemonsets", True),
    _r("Job", "batch/v1", "jobs", True),
    _r("Pod", "v1", "pods", True),
    _r("NodeMetric", "slo.koordinator.sh/v1alpha1", "nodemetrics", False, optional=True),
    _r("NodeMetrics", "metrics.k8s.io/v1beta1", "nodes", False, optional=True,
       watchable=False),
    _r("PodMetrics", "metrics.k8s.io/v1beta1", "pods", True, optional=True, watchable=False),
    _r("PodMigrationJob", "scheduling.koordinator.sh/v1alpha1", "podmigrationjobs", False,
       optional=True),
    _r("Reservation", "scheduling.koordinator.sh/v1alpha1", "reservations", False,
       optional=True),
)

BY_KIND: dict[str, Resource] = {r.kind: r for r in RESOURCES}


def resources_for(kinds: Iterable[str] | None = None) -> tuple[Resource, ...]:
    """The resources for the given kinds (all when None), in RESOURCES order."""
    if kinds is None:
        return RESOURCES
    wanted = set(kinds)
    unknown = sorted(wanted - BY_KIND.keys())
    if unknown:
        raise InputError("", f"unknown kind(s) {', '.join(unknown)}; known: "
                             f"{', '.join(r.kind for r in RESOURCES)}")
    return tuple(r for r in RESOURCES if r.kind in wanted)

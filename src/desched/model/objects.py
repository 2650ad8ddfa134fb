"""The other kinds a snapshot may hold: budgets, namespaces, priority classes, owners,
metrics, CRs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from desched.model.meta import EMPTY_MAP, LabelSelector, ObjectMeta, Time

IntOrString = int | str
ResourceList = Mapping[str, str | int | float]


def _meta() -> Any:
    return msgspec.field(default_factory=ObjectMeta)


class PDBSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    min_available: IntOrString | None = None
    max_unavailable: IntOrString | None = None
    selector: LabelSelector | None = None
    unhealthy_pod_eviction_policy: str = ""


class PDBStatus(msgspec.Struct, rename="camel", omit_defaults=True):
    disruptions_allowed: int | None = None
    current_healthy: int | None = None
    desired_healthy: int | None = None
    expected_pods: int | None = None


class PodDisruptionBudget(msgspec.Struct, tag_field="kind", tag="PodDisruptionBudget",
                          rename="camel", omit_defaults=True):
    metadata: ObjectMeta = _meta()
    spec: PDBSpec = msgspec.field(default_factory=PDBSpec)
    status: PDBStatus | None = None


class Namespace(msgspec.Struct, tag_field="kind", tag="Namespace", rename="camel",
                omit_defaults=True):
    metadata: ObjectMeta = _meta()


class PriorityClass(msgspec.Struct, tag_field="kind", tag="PriorityClass", rename="camel",
                    omit_defaults=True):
    metadata: ObjectMeta = _meta()
    value: int = 0
    global_default: bool = False


class PVCSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    storage_class_name: str | None = None


class PersistentVolumeClaim(msgspec.Struct, tag_field="kind", tag="PersistentVolumeClaim",
                            rename="camel", omit_defaults=True):
    metadata: ObjectMeta = _meta()
    spec: PVCSpec = msgspec.field(default_factory=PVCSpec)


class WorkloadSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    replicas: int | None = None
    selector: LabelSelector | None = None
    parallelism: int | None = None


class WorkloadStatus(msgspec.Struct, rename="camel", omit_defaults=True):
    replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    desired_number_scheduled: int | None = None


def _workload(kind: str) -> type:
    return msgspec.defstruct(
        kind,
        [
            ("metadata", ObjectMeta, msgspec.field(default_factory=ObjectMeta)),
            ("spec", WorkloadSpec, msgspec.field(default_factory=WorkloadSpec)),
            ("status", WorkloadStatus, msgspec.field(default_factory=WorkloadStatus)),
        ],
        tag_field="kind",
        tag=kind,
        rename="camel",
        omit_defaults=True,
        module=__name__,
    )


ReplicaSet = _workload("ReplicaSet")
StatefulSet = _workload("StatefulSet")
DaemonSet = _workload("DaemonSet")
Job = _workload("Job")
class DeploymentMeta(ObjectMeta, kw_only=True):
    """A Deployment's metadata with what a surge-first restart reads: `generation` (a rollout
    in progress is one the controller has not observed yet) and `resourceVersion` (the restart's
    patch is conditional on it). Kept off ObjectMeta, which every pod carries."""

    generation: int | None = None
    resource_version: str = ""


class RollingUpdate(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    max_surge: IntOrString | None = None
    max_unavailable: IntOrString | None = None


class DeploymentStrategy(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    type: str = ""  # "" reads as RollingUpdate, the API server's default
    rolling_update: RollingUpdate | None = None


class DeploymentSpec(WorkloadSpec, kw_only=True):
    strategy: DeploymentStrategy | None = None
    paused: bool = False


class DeploymentStatus(WorkloadStatus, kw_only=True):
    observed_generation: int | None = None
    updated_replicas: int | None = None


class Deployment(msgspec.Struct, tag_field="kind", tag="Deployment", rename="camel",
                 omit_defaults=True):
    """Like the other workloads, plus its rollout strategy and progress (framework/moves)."""

    metadata: DeploymentMeta = msgspec.field(default_factory=DeploymentMeta)
    spec: DeploymentSpec = msgspec.field(default_factory=DeploymentSpec)
    status: DeploymentStatus = msgspec.field(default_factory=DeploymentStatus)


class RCSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    replicas: int | None = None
    selector: Mapping[str, str] | None = None  # a plain label map, unlike the apps/v1 kinds


class ReplicationController(msgspec.Struct, tag_field="kind", tag="ReplicationController",
                            rename="camel", omit_defaults=True):
    metadata: ObjectMeta = _meta()
    spec: RCSpec = msgspec.field(default_factory=RCSpec)
    status: WorkloadStatus = msgspec.field(default_factory=WorkloadStatus)


class ServiceSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    selector: Mapping[str, str] | None = None
    type: str = ""


class Service(msgspec.Struct, tag_field="kind", tag="Service", rename="camel",
              omit_defaults=True):
    """What kube-scheduler reads of a Service: the pods it selects are spread by default."""
    metadata: ObjectMeta = _meta()
    spec: ServiceSpec = msgspec.field(default_factory=ServiceSpec)

WORKLOAD_TYPES = (ReplicaSet, Deployment, StatefulSet, DaemonSet, Job, ReplicationController)


# --- Koordinator NodeMetric (slo.koordinator.sh/v1alpha1) ---------------------------------------

class ResourceMap(msgspec.Struct, rename="camel", omit_defaults=True):
    resources: ResourceList = EMPTY_MAP


class AggregatedUsage(msgspec.Struct, rename="camel", omit_defaults=True):
    usage: Mapping[str, ResourceMap] = EMPTY_MAP
    duration: str = ""


class NodeMetricInfo(msgspec.Struct, rename="camel", omit_defaults=True):
    node_usage: ResourceMap | None = None
    system_usage: ResourceMap | None = None
    aggregated_node_usages: tuple[AggregatedUsage, ...] = ()
    aggregated_system_usages: tuple[AggregatedUsage, ...] = ()


class PodMetricInfo(msgspec.Struct, rename="camel", omit_defaults=True):
    name: str = ""
    namespace: str = ""
    pod_usage: ResourceMap | None = None
    priority: str = ""
    qos: str = ""


class NodeMetricStatus(msgspec.Struct, rename="camel", omit_defaults=True):
    update_time: Time | None = None
    node_metric: NodeMetricInfo | None = None
    pods_metric: tuple[PodMetricInfo, ...] = ()


class NodeMetricCollectPolicy(msgspec.Struct, rename="camel", omit_defaults=True):
    aggregate_duration_seconds: int | None = None
    report_interval_seconds: int | None = None


class NodeMetricSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    metric_collect_policy: NodeMetricCollectPolicy | None = None


class NodeMetric(msgspec.Struct, tag_field="kind", tag="NodeMetric", rename="camel",
                 omit_defaults=True):
    metadata: ObjectMeta = _meta()
    spec: NodeMetricSpec = msgspec.field(default_factory=NodeMetricSpec)
    status: NodeMetricStatus = msgspec.field(default_factory=NodeMetricStatus)


# --- metrics.k8s.io/v1beta1 -----------------------------------------------------------------

class NodeMetrics(msgspec.Struct, tag_field="kind", tag="NodeMetrics", rename="camel",
                  omit_defaults=True):
    metadata: ObjectMeta = _meta()
    timestamp: Time | None = None
    window: str = ""
    usage: ResourceList = EMPTY_MAP


class ContainerMetrics(msgspec.Struct, rename="camel", omit_defaults=True):
    name: str = ""
    usage: ResourceList = EMPTY_MAP


class PodMetrics(msgspec.Struct, tag_field="kind", tag="PodMetrics", rename="camel",
                 omit_defaults=True):
    metadata: ObjectMeta = _meta()
    timestamp: Time | None = None
    window: str = ""
    containers: tuple[ContainerMetrics, ...] = ()


# --- Koordinator scheduling.koordinator.sh/v1alpha1 ------------------------------------------

class ObjectRef(msgspec.Struct, rename="camel", omit_defaults=True):
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""


class Condition(msgspec.Struct, rename="camel", omit_defaults=True):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: Time | None = None
    last_probe_time: Time | None = None


class ReservationOptions(msgspec.Struct, rename="camel", omit_defaults=True):
    reservation_ref: ObjectRef | None = None
    template: dict[str, Any] | None = None


class PodMigrationJobSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    paused: bool = False
    ttl: str | None = None
    mode: str = ""
    pod_ref: ObjectRef | None = None
    reservation_options: ReservationOptions | None = None
    delete_options: dict[str, Any] | None = None


class PodMigrationJobStatus(msgspec.Struct, rename="camel", omit_defaults=True):
    phase: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    conditions: tuple[Condition, ...] = ()
    node_name: str = ""
    pod_ref: ObjectRef | None = None


class PodMigrationJob(msgspec.Struct, tag_field="kind", tag="PodMigrationJob", rename="camel",
                      omit_defaults=True):
    metadata: ObjectMeta = _meta()
    spec: PodMigrationJobSpec = msgspec.field(default_factory=PodMigrationJobSpec)
    status: PodMigrationJobStatus = msgspec.field(default_factory=PodMigrationJobStatus)


class ReservationOwner(msgspec.Struct, rename="camel", omit_defaults=True):
    object: ObjectRef | None = None
    controller: dict[str, Any] | None = None
    label_selector: LabelSelector | None = None


class ReservationSpec(msgspec.Struct, rename="camel", omit_defaults=True):
    template: dict[str, Any] | None = None
    owners: tuple[ReservationOwner, ...] = ()
    ttl: str | None = None
    expires: Time | None = None
    allocate_once: bool | None = None
    unschedulable: bool = False


class ReservationStatus(msgspec.Struct, rename="camel", omit_defaults=True):
    phase: str = ""
    conditions: tuple[Condition, ...] = ()
    current_owners: tuple[ObjectRef, ...] = ()
    node_name: str = ""
    allocatable: ResourceList = EMPTY_MAP
    allocated: ResourceList = EMPTY_MAP


class Reservation(msgspec.Struct, tag_field="kind", tag="Reservation", rename="camel",
                  omit_defaults=True):
    metadata: ObjectMeta = _meta()
    spec: ReservationSpec = msgspec.field(default_factory=ReservationSpec)
    status: ReservationStatus = msgspec.field(default_factory=ReservationStatus)


# --- desched.io/v1alpha1 ----------------------------------------------------------------------

SNAPSHOT_INFO_API_VERSION = "desched.io/v1alpha1"


class SnapshotInfo(msgspec.Struct, tag_field="kind", tag="SnapshotInfo", rename="camel",
                   omit_defaults=True):
    """What `desched snapshot` records about a capture: metadata.creationTimestamp is when the
    capture finished (the clock simulate and explain use by default), `server` where from."""

    metadata: ObjectMeta = _meta()
    server: str = ""

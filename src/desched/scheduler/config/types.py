"""The KubeSchedulerConfiguration file as kube-scheduler's config API types it
(`pkg/scheduler/apis/config/types.go`, `types_pluginargs.go`) and koord-scheduler's
LoadAwareSchedulingArgs: the versions read, the file's schema and the plugin args desched reads.

Fields desched does not read are `Any`: only their names matter (unknown ones are reported),
kube-scheduler validates their values. The args types keep the file's shape (`weight: 0` is
"unset"); defaults.py turns them into a profile's values.
"""

from __future__ import annotations

from typing import Any

import msgspec

from desched.decoding.go import Int32, Int64
from desched.model.meta import LabelSelector
from desched.model.pod import NodeAffinity

GROUP = "kubescheduler.config.k8s.io"
V1, V1BETA3, V1BETA2 = f"{GROUP}/v1", f"{GROUP}/v1beta3", f"{GROUP}/v1beta2"
API_VERSIONS = (V1, V1BETA3, V1BETA2)
KIND = "KubeSchedulerConfiguration"
LOAD_AWARE = "LoadAwareScheduling"

# v1beta2's top level has two more (removed in v1beta3).
V1BETA2_EXTRA = ("healthzBindAddress", "metricsBindAddress")


class Plugin(msgspec.Struct):
    name: str = ""
    weight: Int32 | None = None


class PluginSet(msgspec.Struct):
    enabled: list[Plugin] = []
    disabled: list[Plugin] = []


class Plugins(msgspec.Struct, rename="camel"):
    pre_enqueue: PluginSet | None = None
    queue_sort: PluginSet | None = None
    pre_filter: PluginSet | None = None
    filter: PluginSet | None = None
    post_filter: PluginSet | None = None
    pre_score: PluginSet | None = None
    score: PluginSet | None = None
    reserve: PluginSet | None = None
    permit: PluginSet | None = None
    pre_bind: PluginSet | None = None
    bind: PluginSet | None = None
    post_bind: PluginSet | None = None
    multi_point: PluginSet | None = None
    placement_generate: PluginSet | None = None
    placement_score: PluginSet | None = None


class PluginConfig(msgspec.Struct):
    name: str = ""
    args: Any = None


class KubeSchedulerProfile(msgspec.Struct, rename="camel"):
    scheduler_name: str | None = None
    percentage_of_nodes_to_score: Int32 | None = None  # v1 only
    plugins: Plugins | None = None
    plugin_config: list[PluginConfig] = []


class LeaderElection(msgspec.Struct, rename="camel"):
    leader_elect: Any = None
    lease_duration: Any = None
    renew_deadline: Any = None
    retry_period: Any = None
    resource_lock: Any = None
    resource_name: Any = None
    resource_namespace: Any = None


class ClientConnection(msgspec.Struct, rename="camel"):
    kubeconfig: Any = None
    accept_content_types: Any = None
    content_type: Any = None
    qps: Any = None
    burst: Any = None


class TLSConfig(msgspec.Struct, rename="camel"):
    insecure: Any = None
    server_name: Any = None
    cert_file: Any = None
    key_file: Any = None
    c_a_file: Any = msgspec.field(default=None, name="caFile")
    cert_data: Any = None
    key_data: Any = None
    c_a_data: Any = msgspec.field(default=None, name="caData")


class ManagedResource(msgspec.Struct, rename="camel"):
    name: Any = None
    ignored_by_scheduler: Any = None


class Extender(msgspec.Struct, rename="camel"):
    url_prefix: Any = msgspec.field(default=None, name="urlPrefix")
    filter_verb: Any = None
    preempt_verb: Any = None
    prioritize_verb: Any = None
    weight: Any = None
    bind_verb: Any = None
    enable_https: Any = msgspec.field(default=None, name="enableHTTPS")
    tls_config: TLSConfig | None = msgspec.field(default=None, name="tlsConfig")
    http_timeout: Any = msgspec.field(default=None, name="httpTimeout")
    node_cache_capable: Any = None
    managed_resources: list[ManagedResource] = []
    ignorable: Any = None


class KubeSchedulerConfiguration(msgspec.Struct, rename="camel"):
    parallelism: Any = None
    leader_election: LeaderElection | None = None
    client_connection: ClientConnection | None = None
    enable_profiling: Any = None
    enable_contention_profiling: Any = None
    percentage_of_nodes_to_score: Int32 | None = None
    pod_initial_backoff_seconds: Any = None
    pod_max_backoff_seconds: Any = None
    profiles: list[KubeSchedulerProfile] = []
    extenders: list[Extender] = []
    delay_cache_until_active: Any = None


# -- plugin args ------------------------------------------------------------------------------


class ScoringResource(msgspec.Struct):
    """A ResourceSpec as the file writes it (weight 0: unset)."""
    name: str = ""
    weight: Int64 = 0


class UtilizationShapePoint(msgspec.Struct):
    utilization: Int32 = 0
    score: Int32 = 0


class RequestedToCapacityRatioParam(msgspec.Struct):
    shape: list[UtilizationShapePoint] = []


class ScoringStrategy(msgspec.Struct, rename="camel"):
    type: str = ""
    resources: list[ScoringResource] = []
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None


class NodeResourcesFitArgs(msgspec.Struct, rename="camel"):
    ignored_resources: list[str] = []
    ignored_resource_groups: list[str] = []
    scoring_strategy: ScoringStrategy | None = None


class NodeResourcesBalancedAllocationArgs(msgspec.Struct):
    resources: list[ScoringResource] = []


class SpreadConstraint(msgspec.Struct, rename="camel"):
    """A core/v1 TopologySpreadConstraint, decoded loosely so validation words its errors."""
    max_skew: Int32 = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: LabelSelector | None = None
    min_domains: Int32 | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = []


class PodTopologySpreadArgs(msgspec.Struct, rename="camel"):
    default_constraints: list[SpreadConstraint] = []
    defaulting_type: str = ""


class InterPodAffinityArgs(msgspec.Struct, rename="camel"):
    hard_pod_affinity_weight: Int32 | None = None
    ignore_preferred_terms_of_existing_pods: bool = False


class NodeAffinityArgs(msgspec.Struct, rename="camel"):
    added_affinity: NodeAffinity | None = None


class LoadAwareAggregated(msgspec.Struct, rename="camel"):
    usage_thresholds: dict[str, Int64] = {}
    usage_aggregation_type: str = ""
    usage_aggregated_duration: Any = None
    score_aggregation_type: str = ""
    score_aggregated_duration: Any = None


class LoadAwareSchedulingArgs(msgspec.Struct, rename="camel"):
    """koord-scheduler's (`pkg/scheduler/apis/config/v1`)."""
    filter_expired_node_metrics: bool | None = None
    node_metric_expiration_seconds: Int64 | None = None
    enable_schedule_when_node_metrics_expired: bool | None = None
    resource_weights: dict[str, Int64] = {}
    dominant_resource_weight: Int64 = 0
    usage_thresholds: dict[str, Int64] = {}
    prod_usage_thresholds: dict[str, Int64] = {}
    prod_usage_include_sys: bool = False
    score_according_prod_usage: bool | None = None
    estimator: str = ""
    estimated_scaling_factors: dict[str, Int64] | None = None
    estimated_seconds_after_pod_scheduled: Int64 | None = None
    estimated_seconds_after_initialized: Int64 | None = None
    allow_customize_estimation: bool = False
    aggregated: LoadAwareAggregated | None = None
    supported_resources: list[str] = []


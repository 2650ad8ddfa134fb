"""MigrationControllerArgs (descheduler/v1alpha2, docs/migration.md): the strict wire
type, SetDefaults_MigrationControllerArgs, ValidateMigrationControllerArgs with Koordinator's
messages (plus what Koordinator only rejects when it builds the plugin), and the conversion into
the arbitrator's settings."""

from __future__ import annotations

import msgspec

from desched.decoding.go import Int32
from desched.migration.arbitration import GATES, JOB_MODES, RESERVATION_FIRST, Settings
from desched.migration.limiter import LIMITER_KINDS, WORKLOAD, LimiterConfig
from desched.migration.limits import IntOrPercent, int_or_percent_error
from desched.migration.policies import EVICTION, POLICIES, DeleteOptions
from desched.model.labels import (
    SelectorError,
    matcher_unless_empty,
    parse_selector_string,
)
from desched.model.meta import LabelSelector
from desched.policy_files.args import Namespaces, PriorityThreshold, validate_label_selector
from desched.util.duration import Duration, format_duration, parse_duration
from desched.util.gofloat import go_float

DEFAULT_MAX_CONCURRENT_RECONCILES = 1
DEFAULT_MAX_MIGRATING_PER_NODE = 2
DEFAULT_JOB_TTL = "5m"
DEFAULT_SCHEDULER_NAMES = ("koord-scheduler",)
DEFAULT_EVICT_QPS = 10.0
DEFAULT_EVICT_BURST = 1
DEFAULT_OBJECT_LIMITER_DURATION = "5m"
DEFAULT_ARBITRATION_INTERVAL = "500ms"


class MigrationObjectLimiter(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                             omit_defaults=True):
    duration: Duration | None = None  # unset is 0, which switches the limiter off
    max_migrating: IntOrPercent | None = None
    burst: int = 0


class ArbitrationArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                      omit_defaults=True):
    # Go decodes an absent `enabled` as false, but Koordinator never reads it. desched honours
    # the flag, so only an explicit false switches arbitration off.
    enabled: bool | None = None
    interval: Duration | None = None


class MigrationControllerArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True,
                              omit_defaults=True):
    dry_run: bool = False
    max_concurrent_reconciles: Int32 | None = None
    evict_failed_bare_pods: bool = False
    evict_all_bare_pods: bool = False
    evict_local_storage_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    priority_threshold: PriorityThreshold | None = None
    label_selector: LabelSelector | None = None
    namespaces: Namespaces | None = None
    node_fit: bool = False
    node_selector: str = ""
    skip_eviction_gates: list[str] | None = None
    max_migrating_globally: Int32 | None = None
    max_migrating_per_node: Int32 | None = None
    max_migrating_per_namespace: Int32 | None = None
    max_migrating_per_workload: IntOrPercent | None = None
    max_unavailable_per_workload: IntOrPercent | None = None
    skip_check_expected_replicas: bool | None = None
    object_limiters: dict[str, MigrationObjectLimiter] | None = None
    default_job_mode: str = ""
    default_job_ttl: Duration | None = msgspec.field(default=None, name="defaultJobTTL")
    scheduler_names: list[str] | None = None
    evict_qps: float | str | None = msgspec.field(default=None, name="evictQPS")
    evict_burst: Int32 | None = None
    eviction_policy: str = ""
    default_delete_options: DeleteOptions | None = None
    arbitration_args: ArbitrationArgs | None = None


def default(args: MigrationControllerArgs) -> None:
    """SetDefaults_MigrationControllerArgs, in place."""
    if args.max_concurrent_reconciles is None:
        args.max_concurrent_reconciles = DEFAULT_MAX_CONCURRENT_RECONCILES
    if args.max_migrating_per_node is None:
        args.max_migrating_per_node = DEFAULT_MAX_MIGRATING_PER_NODE
    if not args.default_job_mode:
        args.default_job_mode = RESERVATION_FIRST
    if not args.scheduler_names:
        args.scheduler_names = list(DEFAULT_SCHEDULER_NAMES)
    if args.default_job_ttl is None:
        args.default_job_ttl = DEFAULT_JOB_TTL
    if not args.eviction_policy:
        args.eviction_policy = EVICTION
    if args.evict_qps is None:
        args.evict_qps = DEFAULT_EVICT_QPS
    if args.evict_burst is None:
        args.evict_burst = DEFAULT_EVICT_BURST
    if not args.object_limiters:
        # Only an empty map is defaulted: {workload: {duration: 0s}} switches limiting off.
        args.object_limiters = {
            WORKLOAD: MigrationObjectLimiter(duration=DEFAULT_OBJECT_LIMITER_DURATION)}
    if args.arbitration_args is None:
        args.arbitration_args = ArbitrationArgs(enabled=True,
                                                interval=DEFAULT_ARBITRATION_INTERVAL)
    if args.arbitration_args.enabled is None:
        args.arbitration_args.enabled = True
    if args.arbitration_args.interval is None:
        args.arbitration_args.interval = DEFAULT_ARBITRATION_INTERVAL


def evict_qps(value: float | str | None) -> float:
    """Float64OrString.FloatValue(): a string that does not parse is 0."""
    if value is None:
        return 0.0
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return 0.0
    return float(value)


def _invalid(path: str, value: str, detail: str) -> str:
    return f"{path}: Invalid value: {value}: {detail}"


def _go_strings(values: list[str]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}" if values \
        else "[]string(nil)"


def validate(args: MigrationControllerArgs) -> list[str]:
    """ValidateMigrationControllerArgs after defaulting, message for message; then what
    Koordinator refuses only when it builds the plugin (evictionPolicy, priorityThreshold,
    nodeSelector). Duration syntax is the decoder's (metav1.Duration)."""
    errs: list[str] = []
    for field, value in (("maxMigratingGlobally", args.max_migrating_globally),
                         ("maxMigratingPerNamespace", args.max_migrating_per_namespace),
                         ("maxMigratingPerNode", args.max_migrating_per_node)):
        if value is not None and value < 0:
            errs.append(_invalid(field, str(value), f"{field} should be greater or equal 0"))
    for field, iop in (("maxMigratingPerWorkload", args.max_migrating_per_workload),
                       ("maxUnavailablePerWorkload", args.max_unavailable_per_workload)):
        problem = int_or_percent_error(iop) if iop is not None else None
        if problem is not None:
            # Koordinator's message ends with a space.
            errs.append(_invalid(field, str(iop), f"{field} is invalid, err: {problem} "))
    qps = evict_qps(args.evict_qps)
    if qps <= 0:
        shown = args.evict_qps if isinstance(args.evict_qps, str) else go_float(qps)
        errs.append(_invalid("evictQPS", str(shown), "evictQPS must be greater than 0"))
    burst = args.evict_burst if args.evict_burst is not None else 0
    if burst <= 0:
        errs.append(_invalid("evictBurst", str(burst), "evictBurst must be greater than 0"))
    errs.extend(validate_label_selector(args.label_selector))
    ns = args.namespaces
    if ns is not None and ns.include and ns.exclude:
        shown = (f"&config.Namespaces{{Include:{_go_strings(ns.include)}, "
                 f"Exclude:{_go_strings(ns.exclude)}}}")
        errs.append(_invalid("namespaces", shown,
                             "only one of Include/Exclude namespaces can be set"))
    reconciles = args.max_concurrent_reconciles or 0
    if reconciles < 1:
        errs.append(_invalid("maxConcurrentReconciles", str(reconciles),
                             "maxConcurrentReconciles should be greater than or equal to 1"))
    if args.default_job_mode not in JOB_MODES:
        errs.append(_invalid("defaultJobMode", f'"{args.default_job_mode}"',
                             "defaultJobMode must be ReservationFirst or EvictDirectly"))
    ttl = parse_duration(args.default_job_ttl) if args.default_job_ttl is not None else None
    if ttl is not None and ttl < 0:
        errs.append(_invalid("defaultJobTTL", format_duration(ttl),
                             "defaultJobTTL should be positive or zero"))
    supported = ", ".join(f'"{g}"' for g in GATES)
    for i, gate in enumerate(args.skip_eviction_gates or []):
        if gate not in GATES:
            errs.append(f'skipEvictionGates[{i}]: Unsupported value: "{gate}": supported '
                        f"values: {supported}")
    # Rejected by Koordinator when it constructs the plugin rather than by the validator.
    if args.eviction_policy not in POLICIES:
        policies = ", ".join(f'"{p}"' for p in POLICIES)
        errs.append(f'evictionPolicy: Unsupported value: "{args.eviction_policy}": supported '
                    f"values: {policies}")
    pt = args.priority_threshold
    if pt is not None and pt.value is not None and pt.name:
        errs.append("priority threshold misconfigured, only one of priorityThreshold fields "
                    "can be set")
    if args.node_selector:
        try:
            parse_selector_string(args.node_selector)
        except SelectorError as err:
            errs.append(f"nodeSelector: {err}")
    return errs


def settings(args: MigrationControllerArgs) -> Settings:
    """The arbitrator's view of defaulted, validated args."""
    selector = matcher_unless_empty(args.label_selector)
    pt = args.priority_threshold
    arbitration = args.arbitration_args
    return Settings(
        job_mode=args.default_job_mode or RESERVATION_FIRST,
        scheduler_names=frozenset(args.scheduler_names or DEFAULT_SCHEDULER_NAMES),
        namespaces=args.namespaces,
        gates=frozenset(args.skip_eviction_gates or ()),
        max_migrating_globally=args.max_migrating_globally,
        max_migrating_per_node=args.max_migrating_per_node,
        max_migrating_per_namespace=args.max_migrating_per_namespace,
        max_migrating_per_workload=args.max_migrating_per_workload,
        max_unavailable_per_workload=args.max_unavailable_per_workload,
        skip_check_expected_replicas=bool(args.skip_check_expected_replicas),
        arbitration_enabled=arbitration is None or arbitration.enabled is not False,
        evict_failed_bare_pods=args.evict_failed_bare_pods,
        evict_all_bare_pods=args.evict_all_bare_pods,
        evict_local_storage_pods=args.evict_local_storage_pods,
        evict_system_critical_pods=args.evict_system_critical_pods,
        ignore_pvc_pods=args.ignore_pvc_pods,
        # Only the value: Koordinator's own filter ignores priorityThreshold.name.
        priority_threshold=pt.value if pt is not None else None,
        label_selector=selector,
    )


def limiter_configs(args: MigrationControllerArgs) -> list[LimiterConfig]:
    """The object limiters Koordinator builds: `workload` and `namespace` (other keys are
    accepted and ignored, as the map's keys are plain strings there)."""
    configs: list[LimiterConfig] = []
    for kind in LIMITER_KINDS:
        limiter = (args.object_limiters or {}).get(kind)
        if limiter is None:
            continue
        seconds = parse_duration(limiter.duration) if limiter.duration else 0.0
        configs.append(LimiterConfig(kind, seconds, limiter.max_migrating, limiter.burst))
    return configs


"""DefaultEvictor: upstream's Filter / PreEvictionFilter plugin (and Koordinator's evict plugin).

Decides whether a pod may be evicted at all: mirror, static and terminating pods never; then the
pod protections (defaults: local storage, system-critical, bare pods, DaemonSet pods; extras: PVC
pods, pods without a PDB, pods with resource claims), label selector, minReplicas and minPodAge.
The `descheduler.alpha.kubernetes.io/evict` annotation bypasses every Filter check.
PreEvictionFilter checks nodeFit and the namespace label selector.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta

import msgspec

from desched.errors import InputError, quote, shown
from desched.framework.registry import NodeScope, PluginSpec, Scope
from desched.framework.types import Handle
from desched.model.labels import (
    compile_selector,
    empty_set_warnings,
    matcher_unless_empty,
    parse_selector_string,
    selector_is_empty,
)
from desched.model.meta import LabelSelector
from desched.model.pod import SYSTEM_CRITICAL_PRIORITY, Pod
from desched.policy_files.args import PriorityThreshold, validate_label_selector
from desched.predicates.nodefit import pod_fits_any_other_node
from desched.util.duration import Duration, format_duration, parse_duration

EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
PREFER_NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
MANDATORY_NO_EVICTION = ("pod has the descheduler.alpha.kubernetes.io/prefer-no-eviction "
                         "annotation and noEvictionPolicy is Mandatory")

DEFAULT_PROTECTIONS = ("PodsWithLocalStorage", "SystemCriticalPods", "FailedBarePods",
                       "DaemonSetPods")
EXTRA_PROTECTIONS = ("PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims")


class StorageClassRef(msgspec.Struct, forbid_unknown_fields=True):
    name: str = ""


class PVCProtectionConfig(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    protected_storage_classes: list[StorageClassRef] = []


class ProtectionsConfig(msgspec.Struct, forbid_unknown_fields=True):
    pods_with_pvc: PVCProtectionConfig | None = msgspec.field(default=None, name="PodsWithPVC")


class PodProtections(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    default_disabled: list[str] = []
    extra_enabled: list[str] = []
    config: ProtectionsConfig | None = None


class DefaultEvictorArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    node_selector: str = ""
    evict_local_storage_pods: bool = False
    evict_daemon_set_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    evict_failed_bare_pods: bool = False
    ignore_pods_without_pdb: bool = msgspec.field(default=False, name="ignorePodsWithoutPDB")
    label_selector: LabelSelector | None = None
    priority_threshold: PriorityThreshold | None = None
    node_fit: bool = False
    min_replicas: int = 0
    min_pod_age: Duration | None = None
    no_eviction_policy: str = ""
    namespace_label_selector: LabelSelector | None = None
    pod_protections: PodProtections | None = None


def validate(args: DefaultEvictorArgs) -> list[str]:
    """Upstream's ValidateDefaultEvictorArgs, message for message."""
    errs: list[str] = []
    pt = args.priority_threshold
    if pt is not None and pt.value is not None and pt.name:
        errs.append("priority threshold misconfigured, only one of priorityThreshold fields can "
                    "be set")
    if args.min_replicas < 0:
        errs.append(f"minReplicas must be a non-negative number, got {args.min_replicas}")
    if args.no_eviction_policy not in ("", "Preferred", "Mandatory"):
        errs.append('noEvictionPolicy accepts only ["Preferred" "Mandatory"] values')
    prot = args.pod_protections or PodProtections()
    legacy = (args.evict_local_storage_pods or args.evict_daemon_set_pods
              or args.evict_system_critical_pods or args.ignore_pvc_pods
              or args.evict_failed_bare_pods or args.ignore_pods_without_pdb)
    if legacy and (prot.extra_enabled or prot.default_disabled):
        errs.append("cannot use Deprecated fields alongside PodProtections.ExtraEnabled or "
                    "PodProtections.DefaultDisabled")
    for item in prot.extra_enabled:
        if item not in EXTRA_PROTECTIONS:
            errs.append(f'invalid pod protection policy in ExtraEnabled: "{item}". Valid options '
                        f"are: [{' '.join(EXTRA_PROTECTIONS)}]")
    for item in prot.default_disabled:
        if item not in DEFAULT_PROTECTIONS:
            errs.append(f'invalid pod protection policy in DefaultDisabled: "{item}". Valid '
                        f"options are: [{' '.join(DEFAULT_PROTECTIONS)}]")
    if len(set(prot.default_disabled)) != len(prot.default_disabled):
        errs.append("PodProtections.DefaultDisabled contains duplicate entries")
    if len(set(prot.extra_enabled)) != len(prot.extra_enabled):
        errs.append("PodProtections.ExtraEnabled contains duplicate entries")
    if "PodsWithPVC" in prot.extra_enabled and prot.config and prot.config.pods_with_pvc:
        for i, sc in enumerate(prot.config.pods_with_pvc.protected_storage_classes):
            if not sc.name:
                errs.append(f"PodProtections.Config.PodsWithPVC.ProtectedStorageClasses[{i}] name "
                            f"cannot be empty")
    errs.extend(validate_label_selector(args.label_selector))
    errs.extend(validate_label_selector(args.namespace_label_selector))
    return errs


def effective_protections(args: DefaultEvictorArgs) -> set[str]:
    """The protections in force: the podProtections lists when either is non-empty, otherwise
    the legacy booleans (getEffectivePodProtections)."""
    prot = args.pod_protections or PodProtections()
    if prot.default_disabled or prot.extra_enabled:
        on = set(DEFAULT_PROTECTIONS) - set(prot.default_disabled)
        return on | set(prot.extra_enabled)
    on = set()
    if not args.evict_local_storage_pods:
        on.add("PodsWithLocalStorage")
    if not args.evict_system_critical_pods:
        on.add("SystemCriticalPods")
    if not args.evict_failed_bare_pods:
        on.add("FailedBarePods")
    if not args.evict_daemon_set_pods:
        on.add("DaemonSetPods")
    if args.ignore_pvc_pods:
        on.add("PodsWithPVC")
    if args.ignore_pods_without_pdb:
        on.add("PodsWithoutPDB")
    return on


Check = Callable[[Pod], str | None]
_tokens = itertools.count(1)  # one per DefaultEvictor instance, for the verdicts kept on pods


class DefaultEvictor:
    def __init__(self, args: DefaultEvictorArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.protections = effective_protections(args)
        # The threshold belongs to the SystemCriticalPods protection; with it off, upstream never
        # looks the priority class up (applySystemCriticalPodsProtection returns early).
        self.threshold = (self._resolve_threshold(args.priority_threshold)
                          if "SystemCriticalPods" in self.protections else SYSTEM_CRITICAL_PRIORITY)
        self.checks = self._build_checks()
        self._mandatory = args.no_eviction_policy == "Mandatory"
        # minReplicas counts the owner's pods, which evictions change: checked on every call.
        self.replica_check = (self._min_replicas_check(args.min_replicas)
                              if args.min_replicas > 1 else None)
        # Every other verdict depends only on the pod and the clock: computed once per pod and
        # kept on the pod under this instance's token (an int, so the pod holds no reference
        # back to the snapshot: pods are untracked by the garbage collector).
        self._token = next(_tokens)
        self._aside: dict[int, tuple[Pod, datetime, str | None]] = {}
        self.node_matcher = parse_selector_string(args.node_selector) if args.node_selector \
            else None
        self.namespace_matcher = matcher_unless_empty(args.namespace_label_selector)

    def _resolve_threshold(self, pt: PriorityThreshold | None) -> int:
        """Resolved once, as upstream does at load time; class names come from the snapshot."""
        if pt is None or (pt.value is None and not pt.name):
            return SYSTEM_CRITICAL_PRIORITY
        if pt.value is not None:
            value = pt.value
        else:
            pc = self.handle.snapshot.priority_classes.get(pt.name)
            if pc is None and self.handle.snapshot.placeholder:
                return SYSTEM_CRITICAL_PRIORITY  # looked up in the cluster's snapshot later
            if pc is None:
                raise InputError((self.handle.profile and f"profile {shown(self.handle.profile)}")
                                 or "",
                                 f"unable to get priority value from the priority class: "
                                 f"priorityclasses.scheduling.k8s.io {quote(pt.name)} not found")
            value = pc.value
        if value > SYSTEM_CRITICAL_PRIORITY:
            raise InputError("", f"priority threshold can't be greater than "
                                 f"{SYSTEM_CRITICAL_PRIORITY}")
        return value

    def _build_checks(self) -> list[Check]:
        on, args = self.protections, self.args
        checks: list[Check] = []
        if "SystemCriticalPods" in on:
            critical_msg = "pod has system critical priority and is protected against eviction"
            threshold = self.threshold

            def critical(pod: Pod) -> str | None:
                prio = pod.spec.priority
                if prio is not None and prio >= SYSTEM_CRITICAL_PRIORITY:
                    return critical_msg
                if prio is not None and prio >= threshold:
                    return "pod has higher priority than specified priority class threshold"
                return None
            checks.append(critical)
        if "FailedBarePods" in on:
            checks.append(lambda pod: None if pod.metadata.owner_references
                          else "pod does not have any ownerRefs")
        else:
            checks.append(lambda pod: None if pod.metadata.owner_references
                          or pod.status.phase == "Failed"
                          else "pod does not have any ownerRefs and is not in failed phase")
        if "PodsWithLocalStorage" in on:
            checks.append(lambda pod: "pod has local storage and is protected against eviction"
                          if pod.has_local_storage else None)
        if "DaemonSetPods" in on:
            ds_msg = "pod is related to daemonset and is protected against eviction"

            def daemonset(pod: Pod) -> str | None:
                for ref in pod.metadata.owner_references:  # Pod.is_daemonset, minus a generator
                    if ref.kind == "DaemonSet":
                        return ds_msg
                return None
            checks.append(daemonset)
        if "PodsWithPVC" in on:
            checks.append(self._pvc_check())
        if "PodsWithoutPDB" in on:
            msg = "pod is not covered by a PodDisruptionBudget and is protected against eviction"
            snapshot = self.handle.snapshot
            checks.append(lambda pod: None if snapshot.pdbs_for_pod(pod) else msg)
        if "PodsWithResourceClaims" in on:
            checks.append(lambda pod: "pod has ResourceClaims and is protected against eviction"
                          if pod.spec.resource_claims else None)
        if not selector_is_empty(args.label_selector):
            match = compile_selector(args.label_selector)
            checks.append(lambda pod: None if match(pod.metadata.labels) else
                          "pod labels do not match the labelSelector filter in the policy "
                          "parameter")
        if args.min_pod_age is not None:
            checks.append(self._min_age_check(parse_duration(args.min_pod_age)))
        return checks

    def _pvc_check(self) -> Check:
        msg = "pod with PVC is protected against eviction"
        prot = self.args.pod_protections
        classes = {sc.name for sc in prot.config.pods_with_pvc.protected_storage_classes} \
            if prot and prot.config and prot.config.pods_with_pvc else set()
        pvcs = self.handle.snapshot.pvcs

        def check(pod: Pod) -> str | None:
            for volume in pod.spec.volumes:
                if volume.persistent_volume_claim is not None:
                    break
            else:
                return None  # most pods: no claim, and no list of them built
            claims = pod.pvc_names
            if not classes:
                return msg
            for claim in claims:
                pvc = pvcs.get(f"{pod.namespace}/{claim}")
                # A claim we cannot resolve, or one without a class, leaves the pod protected.
                if pvc is None or not pvc.spec.storage_class_name:
                    return f"{msg} (unable to resolve the storage class of PVC {claim})"
                if pvc.spec.storage_class_name in classes:
                    return f"{msg} (storage class {pvc.spec.storage_class_name})"
            return None
        return check

    def _min_replicas_check(self, minimum: int) -> Check:
        by_owner = self.handle.snapshot.pods_by_owner_uid

        def check(pod: Pod) -> str | None:
            refs = pod.metadata.owner_references
            if len(refs) != 1:
                return None
            count = len(by_owner.get(refs[0].uid, ()))
            if count < minimum:
                return f"owner has {count} replicas which is less than minReplicas of {minimum}"
            return None
        return check

    def _min_age_check(self, seconds: float) -> Check:
        text = format_duration(seconds)
        limit = timedelta(seconds=seconds)
        handle = self.handle

        def check(pod: Pod) -> str | None:
            start = pod.status.start_time
            if start is None or handle.now - start < limit:
                return f"pod age is not older than MinPodAge: {text} seconds"
            return None
        return check

    # -- extension points ------------------------------------------------------------------------
    def filter(self, pod: Pod) -> str | None:
        if self.replica_check is not None:
            return self._filter_with_replicas(pod, self.replica_check)
        # Without minReplicas the whole verdict, the annotations' part too, is the pod's and
        # the clock's: kept on the pod, so a pod asked again (each plugin asks) is answered
        # without a look at its annotations.
        now = self.handle.clock.now
        cached = pod.cached_verdict
        if cached is not None and cached[0] == self._token and cached[1] == now:
            return cached[2]
        annotations = pod.metadata.annotations
        if annotations and EVICT_ANNOTATION in annotations:
            verdict = None  # it lets every check pass
        elif annotations and self._mandatory and PREFER_NO_EVICTION_ANNOTATION in annotations:
            verdict = MANDATORY_NO_EVICTION
        else:
            return self._static_verdict(pod, now, cached)
        return self._keep(pod, now, cached, verdict)

    def _filter_with_replicas(self, pod: Pod, replica_check: Check) -> str | None:
        """filter() with minReplicas, which evictions change: the annotations bypass it, so
        they are read first, and the rest of the verdict is kept as without it."""
        annotations = pod.metadata.annotations
        if annotations:
            if EVICT_ANNOTATION in annotations:
                return None
            if self._mandatory and PREFER_NO_EVICTION_ANNOTATION in annotations:
                return MANDATORY_NO_EVICTION
        now = self.handle.clock.now
        cached = pod.cached_verdict
        if cached is not None and cached[0] == self._token and cached[1] == now:
            verdict = cached[2]
        else:
            verdict = self._static_verdict(pod, now, cached)
        replicas = replica_check(pod)
        if replicas is not None:
            return replicas if verdict is None else f"{verdict}; {replicas}"
        return verdict

    def _static_verdict(self, pod: Pod, now: datetime,
                        cached: tuple[int, datetime, str | None] | None) -> str | None:
        """The checks' verdict, computed once per pod and clock and kept."""
        if cached is not None and cached[1] == now:
            # Another profile's DefaultEvictor holds the pod's slot in this cycle: ours is
            # kept aside rather than the two taking turns recomputing.
            kept = self._aside.get(id(pod))
            if kept is not None and kept[0] is pod and kept[1] == now:
                return kept[2]
        reasons = self._static_reasons(pod)
        return self._keep(pod, now, cached, "; ".join(reasons) if reasons else None)

    def _keep(self, pod: Pod, now: datetime, cached: tuple[int, datetime, str | None] | None,
              verdict: str | None) -> str | None:
        if cached is not None and cached[1] == now:
            self._aside[id(pod)] = (pod, now, verdict)
        else:
            pod.cached_verdict = (self._token, now, verdict)
        return verdict

    def protection(self, pod: Pod) -> str | None:
        """Every verdict of filter() holds whichever plugin asks (framework.types.Protects)."""
        return self.filter(pod)

    def _static_reasons(self, pod: Pod) -> list[str]:
        reasons = []
        meta = pod.metadata
        if meta.annotations:
            if pod.is_mirror:
                reasons.append("pod is a mirror pod")
            if pod.is_static:
                reasons.append("pod is a static pod")
        if meta.deletion_timestamp is not None:
            reasons.append("pod is terminating")
        for check in self.checks:
            reason = check(pod)
            if reason is not None:
                reasons.append(reason)
        return reasons

    def pre_eviction_filter(self, pod: Pod) -> str | None:
        snapshot = self.handle.snapshot
        if self.args.node_fit:
            nodes = snapshot.ready_nodes(self.node_matcher)
            if not pod_fits_any_other_node(pod, nodes, snapshot):
                return ("pod does not fit on any other node because of nodeSelector(s), "
                        "Taint(s), or nodes marked as unschedulable")
        if self.namespace_matcher is not None and not self.namespace_matcher(
                snapshot.namespace_labels(pod.namespace)):
            return "pod's namespace does not match the namespaceLabelSelector"
        return None


def node_fit_scope(node_selector: str, node_fit: bool) -> tuple[NodeScope, ...]:
    """nodeSelector: the nodes nodeFit looks at (DefaultEvictor's, and MigrationController's,
    which hands both to a DefaultEvictor). Whether a pod is kept when it matches no node
    depends on who asks nodeFit: the effect is said as such."""
    if not node_selector:
        return ()
    effect = ("its nodeFit finds no other node for any pod" if node_fit
              else "it scopes only nodeFit, which is off")
    return (NodeScope("nodeSelector", node_selector, parse_selector_string(node_selector),
                      effect),)


SPEC = PluginSpec(
    name="DefaultEvictor",
    extension_points=frozenset({"filter", "preevictionfilter", "evict"}),
    args_type=DefaultEvictorArgs,
    factory=DefaultEvictor,
    validate=validate,
    warnings=lambda args: empty_set_warnings("nodeSelector", args.node_selector),
    scope=lambda args: Scope(nodes=node_fit_scope(args.node_selector, args.node_fit)),
)

"""Pod: the lean struct and the facts descheduling derives from it (requests, QoS, owner,
storage)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

import msgspec

from desched.errors import InputError
from desched.model.meta import (
    EMPTY_MAP,
    LabelSelector,
    ObjectMeta,
    OwnerReference,
    Quantity,
    Shared,
    Time,
    controller_ref,
    shared_hook,
)
from desched.model.quantity import QuantityError, resource_amount
from desched.util.memo import remember

# Closed value sets decode to one shared string object each (msgspec returns the Literal's value).
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""]
ConditionStatus = Literal["True", "False", "Unknown", ""]


class ResourceRequirements(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    requests: Mapping[str, Quantity] = EMPTY_MAP
    limits: Mapping[str, Quantity] = EMPTY_MAP


class Container(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    """Only what requests and duplicate detection need (upstream's NodeFit ignores ports)."""

    image: Shared = Shared("")
    resources: ResourceRequirements | None = None
    restart_policy: str = ""


class Present(msgspec.Struct, gc=False):
    """A volume source desched only needs to know is there (hostPath, emptyDir)."""


class PVCSource(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    claim_name: str = ""


class Volume(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    host_path: Present | None = None
    empty_dir: Present | None = None
    persistent_volume_claim: PVCSource | None = None
    ephemeral: Present | None = None


class NodeSelectorRequirement(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    key: Shared = Shared("")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = "In"
    values: tuple[Shared, ...] = ()


class NodeSelectorTerm(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class NodeSelector(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class PreferredSchedulingTerm(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    weight: int = 0
    preference: NodeSelectorTerm = msgspec.field(default_factory=NodeSelectorTerm)


class NodeAffinity(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()


class PodAffinityTerm(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    label_selector: LabelSelector | None = None
    namespaces: tuple[Shared, ...] = ()
    topology_key: Shared = Shared("")
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


class WeightedPodAffinityTerm(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    weight: int = 0
    pod_affinity_term: PodAffinityTerm = msgspec.field(default_factory=PodAffinityTerm)


class PodAffinity(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    required_during_scheduling_ignored_during_execution: tuple[PodAffinityTerm, ...] = ()
    preferred_during_scheduling_ignored_during_execution: tuple[WeightedPodAffinityTerm, ...] = ()


class Affinity(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    key: str = ""
    operator: Literal["Exists", "Equal", ""] = ""
    value: str = ""
    effect: TaintEffect = ""
    toleration_seconds: int | None = None


class TopologySpreadConstraint(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    max_skew: int = 1
    topology_key: Shared = Shared("")
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway", ""] = ""
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    match_label_keys: tuple[str, ...] = ()


class PodSpec(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    node_name: Shared = Shared("")
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: Mapping[str, Quantity] = EMPTY_MAP
    resources: ResourceRequirements | None = None
    node_selector: Mapping[str, str] = EMPTY_MAP
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    priority: int | None = None
    priority_class_name: Shared = Shared("")
    scheduler_name: Shared = Shared("")
    volumes: tuple[Volume, ...] = ()
    resource_claims: tuple[Present, ...] = ()
    termination_grace_period_seconds: int | None = None


class ContainerStateWaiting(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    reason: Shared = Shared("")


class ContainerStateTerminated(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    reason: Shared = Shared("")
    exit_code: int = 0


class ContainerState(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    waiting: ContainerStateWaiting | None = None
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    restart_count: int = 0
    state: ContainerState | None = None


class PodCondition(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    type: Shared = Shared("")
    status: ConditionStatus = ""
    reason: Shared = Shared("")
    last_transition_time: Time | None = None


class PodStatus(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Unknown", ""] = ""
    reason: Shared = Shared("")
    qos_class: Literal["Guaranteed", "Burstable", "BestEffort", ""] = ""
    start_time: Time | None = None
    # Decoded on first use (Pod.conditions): most pods' conditions are never read, and decoding
    # them eagerly costs a third of the load time. The raw text points into the snapshot file.
    conditions: msgspec.Raw = msgspec.Raw()
    container_statuses: tuple[ContainerStatus, ...] = ()
    init_container_statuses: tuple[ContainerStatus, ...] = ()
    ephemeral_container_statuses: tuple[ContainerStatus, ...] = ()


_conditions_decoder = msgspec.json.Decoder(tuple[PodCondition, ...], dec_hook=shared_hook)


class _TypeAndStatus(msgspec.Struct, gc=False):
    type: str = ""
    status: str = ""


# Readiness needs only two fields of each condition: no timestamps, no shared strings. Structs
# the collector does not track: a PDB's first count decodes its every pod's conditions, and
# with the collector running (desched run) tracked ones took twice as long to decode.
_readiness_decoder = msgspec.json.Decoder(list[_TypeAndStatus])

_READY = b'"type":"Ready"'
_READY_STATUS = ((b',"status":"True"', True), (b',"status":"False"', False),
                 (b',"status":"Unknown"', False))


def _written_ready(raw: bytes) -> bool | None:
    """Readiness read off conditions as an API server writes them (compact JSON, `type` then
    `status`), without decoding them: None when they are written otherwise, or name Ready more
    than once, so the decoder answers. The text is valid JSON (the page's decode checked it),
    and a quote inside a string is escaped: `"Ready"` is a string token, and `{"type":"Ready"`
    the start of an object whose key is `type`."""
    at = raw.find(_READY)
    if at < 1 or raw[at - 1] != 0x7B or raw.count(b'"Ready"') != 1:  # 0x7B: "{"
        return None
    after = at + len(_READY)
    for text, ready in _READY_STATUS:
        if raw.startswith(text, after):
            return ready
    return None


MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SOURCE_ANNOTATION = "kubernetes.io/config.source"
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
_QOS_RESOURCES = ("cpu", "memory")


# What kube-scheduler's NodeResourcesFit score counts for a container that requests no cpu or
# no memory (schedutil.DefaultMilliCPURequest, DefaultMemoryRequest): millicores, bytes.
NON_ZERO_DEFAULTS = {"cpu": 100, "memory": 200 * 1024 * 1024}


def _container_requests(container: Container, fill: bool = False) -> dict[str, int]:
    """A container's requests, with a limit standing in for a missing request (API defaulting);
    `fill`: cpu and memory it does not name at all count at NON_ZERO_DEFAULTS."""
    res = container.resources
    cached: dict[str, int] = {}
    if res is not None:
        cached = {name: resource_amount(name, q) for name, q in res.limits.items()}
        cached.update({name: resource_amount(name, q) for name, q in res.requests.items()})
    if fill:
        for name, amount in NON_ZERO_DEFAULTS.items():
            cached.setdefault(name, amount)
    return cached


# Effective requests by everything they are computed from (see _requests_key). Pods of one
# template repeat the same few: computed once per distinct key and shared between pods.
_pod_requests_cache: dict[tuple[object, ...], dict[str, int]] = {}
# id(containers) -> (the resource parts, their requests), with and without NON_ZERO_DEFAULTS.
# The entry holds the parts, so the id cannot be reused while it stands; `is` checks them all.
_RequestParts = tuple[tuple[object, object, object, object], dict[str, int]]
_requests_by_parts: tuple[dict[int, _RequestParts], dict[int, _RequestParts]] = ({}, {})


def _requests_key(spec: PodSpec) -> tuple[object, ...]:
    """The inputs of Pod._compute_requests, in order (dict order decides the order of the
    result). Resource items are pairs; the ints are separators, so the key reads back one way."""
    key: list[object] = []
    for container in spec.containers:
        res = container.resources
        if res is not None:
            key.extend(res.limits.items())
            key.append(1)
            key.extend(res.requests.items())
        key.append(2)
    if spec.init_containers:
        key.append(3)
        for container in spec.init_containers:
            res = container.resources
            if res is not None:
                key.extend(res.limits.items())
                key.append(1)
                key.extend(res.requests.items())
            key.append(4 if container.restart_policy == "Always" else 2)
    if spec.resources is not None and spec.resources.requests:
        key.append(5)
        key.extend(spec.resources.requests.items())
    if spec.overhead:
        key.append(6)
        key.extend(spec.overhead.items())
    return tuple(key)


def _add(into: dict[str, int], other: dict[str, int]) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, 0) + amount


def _max(into: dict[str, int], other: dict[str, int]) -> None:
    for name, amount in other.items():
        if amount > into.get(name, 0):
            into[name] = amount


class Pod(msgspec.Struct, tag_field="kind", tag="Pod", rename="camel", omit_defaults=True,
          gc=False):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)
    # Derived facts, computed on first use. Their wire names cannot occur in Kubernetes JSON.
    cached_requests: dict[str, int] | None = msgspec.field(default=None, name="~requests")
    cached_non_zero: dict[str, int] | None = msgspec.field(default=None, name="~nonzero")
    cached_qos: str = msgspec.field(default="", name="~qos")
    cached_conditions: tuple[PodCondition, ...] | None = msgspec.field(
        default=None, name="~conditions")
    cached_signature: bytes | None = msgspec.field(default=None, name="~signature")
    cached_ready: bool | None = msgspec.field(default=None, name="~ready")
    cached_taint_free_signature: tuple[bytes, bytes] | None = msgspec.field(
        default=None, name="~tfsignature")
    # DefaultEvictor's clock-dependent verdict: (evictor token, now, reason or None). On the pod
    # rather than in a dict by id(pod): the pod is in cache when its filter is asked for.
    cached_verdict: tuple[int, datetime, str | None] | None = msgspec.field(
        default=None, name="~verdict")
    # "namespace/name", set by the snapshot the pod is added to (the string its indices are
    # keyed by): most checks of whether a pod is still there start from it. A copy made with
    # msgspec.structs.replace keeps it, so a copy must keep the name and namespace too.
    cached_key: str | None = msgspec.field(default=None, name="~key")

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def key(self) -> str:
        key = self.cached_key
        if key is None:
            return f"{self.metadata.namespace}/{self.metadata.name}"
        return key

    @property
    def node_name(self) -> str:
        return self.spec.node_name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.labels

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.metadata.annotations

    @property
    def owner_references(self) -> tuple[OwnerReference, ...]:
        return self.metadata.owner_references

    @property
    def priority(self) -> int | None:
        return self.spec.priority

    @property
    def terminal(self) -> bool:
        """Succeeded or Failed: upstream's ListPodsOnANode leaves these out."""
        return self.status.phase in ("Succeeded", "Failed")

    @property
    def terminating(self) -> bool:
        return self.metadata.deletion_timestamp is not None

    @property
    def conditions(self) -> tuple[PodCondition, ...]:
        if self.cached_conditions is None:
            raw = self.status.conditions
            try:
                self.cached_conditions = _conditions_decoder.decode(raw) if raw else ()
            except msgspec.DecodeError as err:
                raise InputError("snapshot", f"pod {self.key}: status.conditions: {err}") from None
        return self.cached_conditions

    @property
    def ready(self) -> bool:
        """Condition Ready is True (podutil.IsPodReady). Reads the conditions' type and status
        only, unless they are decoded already: PDB and workload counts ask this of every pod."""
        ready = self.cached_ready
        if ready is None:
            if self.cached_conditions is not None:
                found = self.condition("Ready")
                ready = found is not None and found.status == "True"
            elif not self.status.conditions:
                ready = False
            elif (ready := _written_ready(bytes(self.status.conditions))) is not None:
                pass
            else:
                try:
                    conditions = _readiness_decoder.decode(self.status.conditions)
                except msgspec.DecodeError as err:
                    raise InputError("snapshot",
                                     f"pod {self.key}: status.conditions: {err}") from None
                # The first Ready condition decides, as condition("Ready") reads it.
                ready = False
                for c in conditions:
                    if c.type == "Ready":
                        ready = c.status == "True"
                        break
            self.cached_ready = ready
        return ready

    def condition(self, type_: str) -> PodCondition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None

    @property
    def requests(self) -> dict[str, int]:
        """Effective requests (see _compute_requests). The dict is shared between pods with the
        same resource spec: callers must not modify it."""
        requests = self.cached_requests
        if requests is None:
            requests = self.cached_requests = self._requests(False)
        return requests

    @property
    def non_zero_requests(self) -> dict[str, int]:
        """Requests as kube-scheduler's resource scores count them: a container that names no
        cpu or memory request counts 100m / 200Mi of it. Shared between pods with the same
        resource spec: callers must not modify it."""
        requests = self.cached_non_zero
        if requests is None:
            requests = self.cached_non_zero = self._requests(True)
        return requests

    def _requests(self, fill: bool) -> dict[str, int]:
        """The shared requests dict for this pod's resource spec. Replicas share their resource
        parts (model.sharing), so the parts themselves find it first; else the key built from
        every quantity."""
        spec = self.spec
        by_parts = _requests_by_parts[fill]
        known = by_parts.get(id(spec.containers))
        if known is not None:
            containers, init_containers, resources, overhead = known[0]
            if (containers is spec.containers and init_containers is spec.init_containers
                    and resources is spec.resources and overhead is spec.overhead):
                return known[1]
        key = (fill, *_requests_key(spec))
        requests = _pod_requests_cache.get(key)
        if requests is None:
            try:
                requests = remember(_pod_requests_cache, key, self._compute_requests(fill),
                                    limit=100_000)
            except QuantityError as err:
                raise InputError("snapshot", f"pod {self.key}: {err}") from None
        parts = (spec.containers, spec.init_containers, spec.resources, spec.overhead)
        remember(by_parts, id(spec.containers), (parts, requests), limit=100_000)
        return requests

    def _compute_requests(self, fill: bool = False) -> dict[str, int]:
        """Effective requests as the scheduler computes them (resourcehelper.PodRequests).

        Sum of the containers; each init container runs alone (plus the sidecars started before it),
        so the pod needs the max of that and the sum; sidecars (restartPolicy Always) also add to
        the sum; pod-level resources replace the aggregate for the resources they name; overhead
        is added.
        """
        spec = self.spec
        total: dict[str, int] = {}
        for container in spec.containers:
            _add(total, _container_requests(container, fill))
        if spec.init_containers:
            sidecars: dict[str, int] = {}
            init_peak: dict[str, int] = {}
            for container in spec.init_containers:
                reqs = _container_requests(container, fill)
                if container.restart_policy == "Always":
                    _add(total, reqs)
                    _add(sidecars, reqs)
                    running = dict(sidecars)
                else:
                    running = dict(reqs)
                    _add(running, sidecars)
                _max(init_peak, running)
            _max(total, init_peak)
        if spec.resources is not None and spec.resources.requests:
            for name, q in spec.resources.requests.items():
                total[name] = resource_amount(name, q)
        if spec.overhead:
            _add(total, {name: resource_amount(name, q) for name, q in spec.overhead.items()})
        return total

    @property
    def request_keys(self) -> frozenset[str]:
        """Resource names any container or init container requests (key presence, as HNU checks)."""
        keys: set[str] = set()
        for container in (*self.spec.containers, *self.spec.init_containers):
            if container.resources is not None:
                keys.update(container.resources.requests)
        return frozenset(keys)

    @property
    def qos_class(self) -> str:
        """status.qosClass, or computed from the spec as the kubelet does (v1qos.GetPodQOS)."""
        if self.status.qos_class:
            return self.status.qos_class
        if not self.cached_qos:
            try:
                self.cached_qos = self._compute_qos()
            except QuantityError as err:  # only pods built in code: decoding checks quantities
                raise InputError("snapshot", f"pod {self.key}: {err}") from None
        return self.cached_qos

    def _compute_qos(self) -> str:
        requests: dict[str, int] = {}
        limits: dict[str, int] = {}
        guaranteed = True
        for container in (*self.spec.containers, *self.spec.init_containers):
            res = container.resources or ResourceRequirements()
            # The API server defaults a missing request to the limit; QoS sees the defaulted spec.
            defaulted = {**res.limits, **res.requests}
            for name in _QOS_RESOURCES:
                if name in defaulted:
                    amount = resource_amount(name, defaulted[name])
                    if amount != 0:
                        requests[name] = requests.get(name, 0) + amount
            found = set()
            for name in _QOS_RESOURCES:
                if name in res.limits:
                    amount = resource_amount(name, res.limits[name])
                    if amount != 0:
                        found.add(name)
                        limits[name] = limits.get(name, 0) + amount
            if len(found) != len(_QOS_RESOURCES):
                guaranteed = False
        if not requests and not limits:
            return "BestEffort"
        if guaranteed:
            for name, amount in requests.items():
                if limits.get(name) != amount:
                    guaranteed = False
                    break
        if guaranteed and len(requests) == len(limits):
            return "Guaranteed"
        return "Burstable"

    @property
    def controller(self) -> OwnerReference | None:
        return controller_ref(self.metadata)

    @property
    def is_mirror(self) -> bool:
        return MIRROR_ANNOTATION in self.metadata.annotations

    @property
    def is_static(self) -> bool:
        source = self.metadata.annotations.get(SOURCE_ANNOTATION)
        return source is not None and source != "api"

    @property
    def is_daemonset(self) -> bool:
        return any(ref.kind == "DaemonSet" for ref in self.metadata.owner_references)

    @property
    def has_local_storage(self) -> bool:
        """A hostPath or emptyDir volume (any medium), as upstream's IsPodWithLocalStorage."""
        # A loop, not any(): DefaultEvictor asks it of every pod, and a generator costs more.
        for v in self.spec.volumes:  # noqa: SIM110
            if v.host_path is not None or v.empty_dir is not None:
                return True
        return False

    @property
    def pvc_names(self) -> list[str]:
        names = []
        for v in self.spec.volumes:
            claim = v.persistent_volume_claim
            if claim is not None:
                names.append(claim.claim_name)
        return names

    def images(self) -> list[str]:
        return [c.image for c in self.spec.containers]


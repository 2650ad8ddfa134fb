"""Kubernetes protobuf bodies decoded into desched's lean structs (Pod, Node).

A protobuf body is the magic "k8s\\0" then a runtime.Unknown envelope: field 1 the TypeMeta
(apiVersion, kind), field 2 the object's own message bytes. The envelope is read here by hand
(two length-delimited fields: no copy of the page into a parsed message), the object by the
classes of desched.model.proto_schema.

The structs built here equal what the JSON decoders of desched.model.kinds build from the same
object's JSON: the same Shared strings (shared_hook), quantities checked to parse, absent optional
fields None or empty as in JSON, timestamps at second precision in UTC (the JSON form has no
more), the closed value sets checked, and status.conditions as the JSON text a pod decodes
lazily. Two wire facts make this so: a zero metav1.Time is written as an empty message (JSON
null), and Go writes a non-pointer string or struct even when empty, so presence is only judged
where the Go field is a pointer (HasField).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec
from google.protobuf.message import DecodeError as _ParseError

from desched.model.meta import (
    EMPTY_MAP,
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
    OwnerReference,
    Quantity,
    Shared,
    kept_annotations,
    shared_hook,
)
from desched.model.node import ContainerImage, Node, NodeCondition, NodeSpec, NodeStatus, Taint
from desched.model.pod import (
    Affinity,
    Container,
    ContainerState,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodSpec,
    PodStatus,
    PreferredSchedulingTerm,
    Present,
    PVCSource,
    ResourceRequirements,
    Toleration,
    TopologySpreadConstraint,
    Volume,
    WeightedPodAffinityTerm,
)
from desched.model.proto_schema import CLASSES
from desched.util.memo import remember

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


class ProtobufError(ValueError):
    """A protobuf body desched cannot decode (the message names what and where)."""


# -- the envelope, by hand -------------------------------------------------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ProtobufError("truncated varint in the protobuf envelope")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _length_delimited(buf: bytes, pos: int, end: int) -> dict[int, tuple[int, int]]:
    """Field number -> (start, end) of each length-delimited field in buf[pos:end] (the last
    one wins, as protobuf merges); varint fields are skipped, other wire types refused."""
    fields: dict[int, tuple[int, int]] = {}
    while pos < end:
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise ProtobufError("a field runs past the end of the protobuf envelope")
            fields[number] = (pos, pos + size)
            pos += size
        else:
            raise ProtobufError(f"unexpected wire type {wire} in the protobuf envelope")
    return fields


def unwrap(body: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, the object's message bytes) of a "k8s\\0" + runtime.Unknown body."""
    if not body.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf body (no k8s\\0 prefix)")
    envelope = _length_delimited(body, len(MAGIC), len(body))
    api_version = kind = ""
    if 1 in envelope:
        start, end = envelope[1]
        meta = _length_delimited(body, start, end)
        api_version = _text(body, meta.get(1))
        kind = _text(body, meta.get(2))
    encoding = _text(body, envelope.get(3))
    if encoding:
        raise ProtobufError(f"unsupported protobuf content encoding {encoding!r}")
    start, end = envelope.get(2, (0, 0))
    return api_version, kind, body[start:end]


def _text(buf: bytes, span: tuple[int, int] | None) -> str:
    return buf[span[0]:span[1]].decode() if span else ""


def decode_status(body: bytes) -> tuple[int, str, str] | None:
    """(code, reason, message) of a protobuf metav1.Status body (an error answer), else None."""
    try:
        _, kind, raw = unwrap(body)
        if kind != "Status":
            return None
        status = CLASSES["Status"].FromString(raw)
    except (ProtobufError, _ParseError, UnicodeDecodeError):
        return None
    return status.code, status.reason, status.message


# -- values ----------------------------------------------------------------------------------------

_times: dict[int, datetime] = {}


def _time(msg: Any) -> datetime | None:
    seconds = msg.seconds
    if not seconds and not msg.nanos:
        return None  # a zero metav1.Time: an empty message on the wire, null in JSON
    found = _times.get(seconds)
    if found is None:
        found = remember(_times, seconds, datetime.fromtimestamp(seconds, UTC))
    return found


def _choices(*values: str) -> dict[str, str]:
    return {value: value for value in values}


_PHASES = _choices("Pending", "Running", "Succeeded", "Failed", "Unknown", "")
_QOS = _choices("Guaranteed", "Burstable", "BestEffort", "")
_EFFECTS = _choices("NoSchedule", "PreferNoSchedule", "NoExecute", "")
_CONDITION_STATUS = _choices("True", "False", "Unknown", "")
_TOLERATION_OPERATORS = _choices("Exists", "Equal", "")
_SELECTOR_OPERATORS = _choices("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_UNSATISFIABLE = _choices("DoNotSchedule", "ScheduleAnyway", "")
_POLICIES = _choices("Honor", "Ignore")


def _choice(choices: dict[str, str], value: str, where: str) -> Any:
    """The value, checked against a closed set (a Literal field of the model): Any, as mypy
    cannot narrow a str to the Literal."""
    try:
        return choices[value]
    except KeyError:
        raise ProtobufError(f"{where}: invalid value {value!r} (expected one of "
                            f"{', '.join(repr(c) for c in choices)})") from None


def _shared(value: str) -> Shared:
    result: Shared = shared_hook(Shared, value)
    return result


def _quantities(entries: Any, where: str) -> Mapping[str, Quantity]:
    if not entries:
        return EMPTY_MAP
    try:
        return {name: shared_hook(Quantity, entries[name].string) for name in sorted(entries)}
    except ValueError as err:
        raise ProtobufError(f"{where}: {err}") from None


def _strings(entries: Any) -> Mapping[str, str]:
    """A map<string, string>, keys sorted as the API server's JSON has them."""
    return {key: entries[key] for key in sorted(entries)} if entries else EMPTY_MAP


# -- metadata and selectors ------------------------------------------------------------------------

def _meta(msg: Any) -> ObjectMeta:
    annotations: Mapping[str, str] = EMPTY_MAP
    if msg.annotations:
        # Only the annotations a decision can read (as trim_annotations keeps them).
        prefixes = kept_annotations()
        kept = {key: msg.annotations[key] for key in sorted(msg.annotations)
                if key.startswith(prefixes)}
        annotations = kept or EMPTY_MAP
    owners = tuple(
        OwnerReference(api_version=_shared(ref.apiVersion), kind=_shared(ref.kind),
                       name=_shared(ref.name), uid=_shared(ref.uid),
                       controller=ref.controller if ref.HasField("controller") else None)
        for ref in msg.ownerReferences)
    return ObjectMeta(
        name=msg.name, namespace=_shared(msg.namespace), uid=msg.uid,
        labels=_strings(msg.labels), annotations=annotations, owner_references=owners,
        creation_timestamp=_time(msg.creationTimestamp),
        deletion_timestamp=_time(msg.deletionTimestamp) if msg.HasField("deletionTimestamp")
        else None)


def _label_selector(msg: Any) -> LabelSelector:
    return LabelSelector(
        match_labels=dict(_strings(msg.matchLabels)) if msg.matchLabels else None,
        match_expressions=[LabelSelectorRequirement(key=e.key, operator=e.operator,
                                                    values=tuple(e.values))
                           for e in msg.matchExpressions] or None)


def _optional_selector(msg: Any, field: str) -> LabelSelector | None:
    return _label_selector(getattr(msg, field)) if msg.HasField(field) else None


def _requirements(items: Any, where: str) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(
        NodeSelectorRequirement(
            key=_shared(r.key),
            operator=_choice(_SELECTOR_OPERATORS, r.operator, where) if r.HasField("operator")
            else "In",
            values=tuple(_shared(v) for v in r.values))
        for r in items)


def _term(msg: Any, where: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=_requirements(msg.matchExpressions, where),
                            match_fields=_requirements(msg.matchFields, where))


def _pod_affinity_term(msg: Any) -> PodAffinityTerm:
    return PodAffinityTerm(
        label_selector=_optional_selector(msg, "labelSelector"),
        namespaces=tuple(_shared(n) for n in msg.namespaces),
        topology_key=_shared(msg.topologyKey),
        namespace_selector=_optional_selector(msg, "namespaceSelector"),
        match_label_keys=tuple(msg.matchLabelKeys),
        mismatch_label_keys=tuple(msg.mismatchLabelKeys))


def _pod_affinity(msg: Any) -> PodAffinity:
    return PodAffinity(
        required_during_scheduling_ignored_during_execution=tuple(
            _pod_affinity_term(t) for t in msg.requiredDuringSchedulingIgnoredDuringExecution),
        preferred_during_scheduling_ignored_during_execution=tuple(
            WeightedPodAffinityTerm(weight=t.weight,
                                    pod_affinity_term=_pod_affinity_term(t.podAffinityTerm))
            for t in msg.preferredDuringSchedulingIgnoredDuringExecution))


def _affinity(msg: Any) -> Affinity:
    node = None
    if msg.HasField("nodeAffinity"):
        na = msg.nodeAffinity
        where = "spec.affinity.nodeAffinity"
        required = None
        if na.HasField("requiredDuringSchedulingIgnoredDuringExecution"):
            required = NodeSelector(node_selector_terms=tuple(
                _term(t, where) for t in
                na.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms))
        node = NodeAffinity(
            required_during_scheduling_ignored_during_execution=required,
            preferred_during_scheduling_ignored_during_execution=tuple(
                PreferredSchedulingTerm(weight=t.weight, preference=_term(t.preference, where))
                for t in na.preferredDuringSchedulingIgnoredDuringExecution))
    return Affinity(
        node_affinity=node,
        pod_affinity=_pod_affinity(msg.podAffinity) if msg.HasField("podAffinity") else None,
        pod_anti_affinity=_pod_affinity(msg.podAntiAffinity)
        if msg.HasField("podAntiAffinity") else None)


# -- Pod -------------------------------------------------------------------------------------------

def _resources(msg: Any, where: str) -> ResourceRequirements:
    return ResourceRequirements(requests=_quantities(msg.requests, f"{where}.requests"),
                                limits=_quantities(msg.limits, f"{where}.limits"))


def _containers(items: Any, where: str) -> tuple[Container, ...]:
    return tuple(
        Container(image=_shared(c.image),
                  resources=_resources(c.resources, f"{where}[{i}].resources")
                  if c.HasField("resources") else None,
                  restart_policy=c.restartPolicy)
        for i, c in enumerate(items))


_PRESENT = Present()


def _volume(msg: Any) -> Volume:
    source = msg.volumeSource
    return Volume(
        host_path=_PRESENT if source.HasField("hostPath") else None,
        empty_dir=_PRESENT if source.HasField("emptyDir") else None,
        persistent_volume_claim=PVCSource(claim_name=source.persistentVolumeClaim.claimName)
        if source.HasField("persistentVolumeClaim") else None,
        ephemeral=_PRESENT if source.HasField("ephemeral") else None)


def _toleration(msg: Any) -> Toleration:
    return Toleration(
        key=msg.key, operator=_choice(_TOLERATION_OPERATORS, msg.operator, "spec.tolerations"),
        value=msg.value, effect=_choice(_EFFECTS, msg.effect, "spec.tolerations"),
        toleration_seconds=msg.tolerationSeconds if msg.HasField("tolerationSeconds") else None)


def _spread(msg: Any) -> TopologySpreadConstraint:
    where = "spec.topologySpreadConstraints"
    return TopologySpreadConstraint(
        max_skew=msg.maxSkew, topology_key=_shared(msg.topologyKey),
        when_unsatisfiable=_choice(_UNSATISFIABLE, msg.whenUnsatisfiable, where),
        label_selector=_optional_selector(msg, "labelSelector"),
        min_domains=msg.minDomains if msg.HasField("minDomains") else None,
        node_affinity_policy=_choice(_POLICIES, msg.nodeAffinityPolicy, where)
        if msg.HasField("nodeAffinityPolicy") else None,
        node_taints_policy=_choice(_POLICIES, msg.nodeTaintsPolicy, where)
        if msg.HasField("nodeTaintsPolicy") else None,
        match_label_keys=tuple(msg.matchLabelKeys))


def _spec(msg: Any) -> PodSpec:
    return PodSpec(
        node_name=_shared(msg.nodeName),
        containers=_containers(msg.containers, "spec.containers"),
        init_containers=_containers(msg.initContainers, "spec.initContainers"),
        overhead=_quantities(msg.overhead, "spec.overhead"),
        resources=_resources(msg.resources, "spec.resources")
        if msg.HasField("resources") else None,
        node_selector=_strings(msg.nodeSelector),
        affinity=_affinity(msg.affinity) if msg.HasField("affinity") else None,
        tolerations=tuple(_toleration(t) for t in msg.tolerations),
        topology_spread_constraints=tuple(_spread(t) for t in msg.topologySpreadConstraints),
        priority=msg.priority if msg.HasField("priority") else None,
        priority_class_name=_shared(msg.priorityClassName),
        scheduler_name=_shared(msg.schedulerName),
        volumes=tuple(_volume(v) for v in msg.volumes),
        resource_claims=tuple(_PRESENT for _ in msg.resourceClaims),
        termination_grace_period_seconds=msg.terminationGracePeriodSeconds
        if msg.HasField("terminationGracePeriodSeconds") else None)


def _container_statuses(items: Any) -> tuple[ContainerStatus, ...]:
    statuses = []
    for item in items:
        state = None
        if item.HasField("state"):
            s = item.state
            state = ContainerState(
                waiting=ContainerStateWaiting(reason=_shared(s.waiting.reason))
                if s.HasField("waiting") else None,
                terminated=ContainerStateTerminated(reason=_shared(s.terminated.reason),
                                                    exit_code=s.terminated.exitCode)
                if s.HasField("terminated") else None)
        statuses.append(ContainerStatus(restart_count=item.restartCount, state=state))
    return tuple(statuses)


_encode = msgspec.json.Encoder().encode


def _conditions(items: Any) -> msgspec.Raw:
    """The conditions as the JSON text Pod.conditions decodes on first use (only the fields
    PodCondition reads), so a pod decoded from protobuf reads them as one decoded from JSON."""
    if not items:
        return msgspec.Raw()
    conditions = []
    for c in items:
        condition: dict[str, Any] = {
            "type": c.type, "status": _choice(_CONDITION_STATUS, c.status, "status.conditions")}
        if c.reason:
            condition["reason"] = c.reason
        if c.HasField("lastTransitionTime"):
            condition["lastTransitionTime"] = _time(c.lastTransitionTime)
        conditions.append(condition)
    return msgspec.Raw(_encode(conditions))


def _status(msg: Any) -> PodStatus:
    return PodStatus(
        phase=_choice(_PHASES, msg.phase, "status.phase"),
        reason=_shared(msg.reason),
        qos_class=_choice(_QOS, msg.qosClass, "status.qosClass"),
        start_time=_time(msg.startTime) if msg.HasField("startTime") else None,
        conditions=_conditions(msg.conditions),
        container_statuses=_container_statuses(msg.containerStatuses),
        init_container_statuses=_container_statuses(msg.initContainerStatuses),
        ephemeral_container_statuses=_container_statuses(msg.ephemeralContainerStatuses))


# Replicas of one workload carry the same labels, owner, containers, volumes and tolerations.
# Once unknown fields are discarded, each part's serialization (less its per-pod fields) is a
# key to the structs built from it the first time: a pod then costs a few C calls and struct
# copies instead of a walk over every field. Bounded memos (a long-running process meets new
# templates), smaller than util.memo's default: a key is a few hundred bytes.
_TEMPLATE_LIMIT = 20_000
_metas: dict[bytes, ObjectMeta] = {}
_specs: dict[bytes, PodSpec] = {}
_affinities: dict[bytes, Affinity] = {}
_statuses: dict[bytes, PodStatus] = {}


def _template(table: dict[bytes, Any], msg: Any, build: Callable[[Any], Any]) -> Any:
    key = msg.SerializeToString(deterministic=True)
    found = table.get(key)
    if found is None:
        found = remember(table, key, build(msg), limit=_TEMPLATE_LIMIT)
    return found


def _pod_meta(msg: Any) -> ObjectMeta:
    name, uid = msg.name, msg.uid
    created = _time(msg.creationTimestamp)
    deleted = _time(msg.deletionTimestamp) if msg.HasField("deletionTimestamp") else None
    for field in ("name", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
        msg.ClearField(field)
    shared = _template(_metas, msg, _meta)
    return msgspec.structs.replace(shared, name=name, uid=uid, creation_timestamp=created,
                                   deletion_timestamp=deleted)


def _pod_spec(msg: Any) -> PodSpec:
    """The node name is each pod's own; so is the affinity of a DaemonSet's pods (a matchFields
    term naming their node), so it has a template of its own and the rest of the spec is shared
    by every pod of the DaemonSet."""
    node_name = msg.nodeName
    affinity = _template(_affinities, msg.affinity, _affinity) if msg.HasField("affinity") \
        else None
    msg.ClearField("nodeName")
    msg.ClearField("affinity")
    return msgspec.structs.replace(_template(_specs, msg, _spec), node_name=_shared(node_name),
                                   affinity=affinity)


def pod(msg: Any) -> Pod:
    """A Pod from its message, once the message's unknown fields are discarded (see
    decode_list): the message is cleared of its per-pod fields on the way."""
    return Pod(metadata=_pod_meta(msg.metadata), spec=_pod_spec(msg.spec),
               status=msgspec.structs.replace(_template(_statuses, msg.status, _status)))


# -- Node ------------------------------------------------------------------------------------------

def node(msg: Any) -> Node:
    spec, status = msg.spec, msg.status
    taints = tuple(Taint(key=_shared(t.key), value=_shared(t.value),
                         effect=_choice(_EFFECTS, t.effect, "spec.taints"))
                   for t in spec.taints)
    return Node(
        metadata=_meta(msg.metadata),
        spec=NodeSpec(unschedulable=spec.unschedulable, taints=taints),
        status=NodeStatus(
            # Node quantities stay plain strings, as the JSON decoder keeps them.
            capacity={k: status.capacity[k].string for k in sorted(status.capacity)}
            if status.capacity else EMPTY_MAP,
            allocatable={k: status.allocatable[k].string for k in sorted(status.allocatable)}
            if status.allocatable else EMPTY_MAP,
            conditions=tuple(NodeCondition(type=c.type, status=c.status)
                             for c in status.conditions),
            images=tuple(ContainerImage(names=tuple(_shared(n) for n in i.names),
                                        size_bytes=i.sizeBytes)
                         for i in status.images)))


# -- lists and objects -----------------------------------------------------------------------------

# kind -> how one message of it becomes a lean struct. The kinds desched asks protobuf for.
OBJECTS: dict[str, Callable[[Any], Any]] = {"Pod": pod, "Node": node}


def _parse(kind: str, raw: bytes) -> Any:
    try:
        return CLASSES[kind].FromString(raw)
    except _ParseError as err:
        raise ProtobufError(f"cannot parse a {kind} message: {err}") from None


def _build(kind: str, msg: Any) -> Any:
    name = getattr(getattr(msg, "metadata", None), "name", "")
    try:
        return OBJECTS[kind](msg)
    except ProtobufError as err:
        raise ProtobufError(f"{kind} {name}: {err}") from None


def decode_list(body: bytes, kind: str) -> tuple[list[Any], str, str]:
    """(lean objects, the list's resourceVersion, its continue token) of a protobuf list page
    of `kind` (Pod or Node)."""
    _, list_kind, raw = unwrap(body)
    if list_kind != f"{kind}List":
        raise ProtobufError(f"expected a {kind}List, got {list_kind or 'no kind'}")
    page = _parse(list_kind, raw)
    page.DiscardUnknownFields()  # so a part's serialization holds only what desched reads
    items = [_build(kind, item) for item in page.items]
    return items, page.metadata.resourceVersion, getattr(page.metadata, "continue")


def decode_object(body: bytes, kind: str) -> Any:
    """The lean object of a protobuf body holding one `kind` (Pod or Node)."""
    _, found, raw = unwrap(body)
    if found != kind:
        raise ProtobufError(f"expected a {kind}, got {found or 'no kind'}")
    msg = _parse(kind, raw)
    msg.DiscardUnknownFields()
    return _build(kind, msg)


# -- watch events ----------------------------------------------------------------------------------

# The annotation of the bookmark that ends a watch-list stream's initial events.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def decode_event(frame: bytes, kind: str) -> tuple[str, Any, str, bool]:
    """One protobuf watch event (a metav1.WatchEvent, its object enveloped as a body is):
    (type, the lean object or None for BOOKMARK and ERROR, the object's resourceVersion,
    whether it is the bookmark that ends the initial events). An ERROR's object is its
    (code, reason, message)."""
    try:
        event = CLASSES["WatchEvent"].FromString(frame)
    except _ParseError as err:
        raise ProtobufError(f"cannot parse a watch event: {err}") from None
    body = event.object.raw
    if event.type == "ERROR":
        status = decode_status(body)
        return "ERROR", status or (500, "", "undecodable ERROR event"), "", False
    _, found, raw = unwrap(body)
    if found != kind:
        raise ProtobufError(f"expected a {kind} in a watch event, got {found or 'no kind'}")
    msg = _parse(kind, raw)
    meta = msg.metadata
    rv = meta.resourceVersion
    if event.type == "BOOKMARK":
        return "BOOKMARK", None, rv, meta.annotations.get(INITIAL_EVENTS_END) == "true"
    msg.DiscardUnknownFields()
    return event.type, _build(kind, msg), rv, False

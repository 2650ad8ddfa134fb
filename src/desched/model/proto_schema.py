"""Protobuf message classes for the parts of Kubernetes' built-in kinds that desched reads.

The API server answers `Accept: application/vnd.kubernetes.protobuf` for built-in kinds with the
messages of Kubernetes' generated.proto files (k8s.io/api/core/v1, apimachinery's meta/v1 and
runtime). Only the fields the lean structs of desched.model read are declared here, under their
wire numbers; the parser skips every other field (managedFields, env, probes...), so a pod costs
the parse of what desched keeps. Classes are built at import from this table (no generated
code) and parsed by the protobuf package's C backend (upb).

Field notation: "string", "int32", "int64", "bool", "bytes" are optional scalars; a capitalised
name is an optional message; "*T" is repeated T; "{T}" is a map from string to T.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "desched.k8s"

_SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
}

_NODE_SELECTOR_REQUIREMENT = [("key", 1, "string"), ("operator", 2, "string"),
                              ("values", 3, "*string")]

MESSAGES: dict[str, list[tuple[str, int, str]]] = {
    # apimachinery: runtime, meta/v1, api/resource
    "TypeMeta": [("apiVersion", 1, "string"), ("kind", 2, "string")],
    # What every protobuf body is wrapped in, after the 4-byte magic "k8s\0".
    "Unknown": [("typeMeta", 1, "TypeMeta"), ("raw", 2, "bytes"),
                ("contentEncoding", 3, "string"), ("contentType", 4, "string")],
    "RawExtension": [("raw", 1, "bytes")],
    "WatchEvent": [("type", 1, "string"), ("object", 2, "RawExtension")],
    "ListMeta": [("resourceVersion", 2, "string"), ("continue", 3, "string")],
    "Status": [("status", 2, "string"), ("message", 3, "string"), ("reason", 4, "string"),
               ("code", 6, "int32")],
    "Time": [("seconds", 1, "int64"), ("nanos", 2, "int32")],
    "Quantity": [("string", 1, "string")],
    "OwnerReference": [("apiVersion", 5, "string"), ("kind", 1, "string"), ("name", 3, "string"),
                       ("uid", 4, "string"), ("controller", 6, "bool")],
    "ObjectMeta": [("name", 1, "string"), ("namespace", 3, "string"), ("uid", 5, "string"),
                   ("resourceVersion", 6, "string"), ("creationTimestamp", 8, "Time"),
                   ("deletionTimestamp", 9, "Time"), ("labels", 11, "{string}"),
                   ("annotations", 12, "{string}"), ("ownerReferences", 13, "*OwnerReference")],
    "LabelSelectorRequirement": _NODE_SELECTOR_REQUIREMENT,
    "LabelSelector": [("matchLabels", 1, "{string}"),
                      ("matchExpressions", 2, "*LabelSelectorRequirement")],
    # core/v1: Pod
    "Present": [],  # a message desched only needs to know is there (hostPath, emptyDir...)
    "ResourceRequirements": [("limits", 1, "{Quantity}"), ("requests", 2, "{Quantity}")],
    "Container": [("image", 2, "string"), ("resources", 8, "ResourceRequirements"),
                  ("restartPolicy", 24, "string")],
    "PersistentVolumeClaimVolumeSource": [("claimName", 1, "string")],
    "VolumeSource": [("hostPath", 1, "Present"), ("emptyDir", 2, "Present"),
                     ("persistentVolumeClaim", 10, "PersistentVolumeClaimVolumeSource"),
                     ("ephemeral", 29, "Present")],
    "Volume": [("volumeSource", 2, "VolumeSource")],  # inlined in JSON
    "NodeSelectorRequirement": _NODE_SELECTOR_REQUIREMENT,
    "NodeSelectorTerm": [("matchExpressions", 1, "*NodeSelectorRequirement"),
                         ("matchFields", 2, "*NodeSelectorRequirement")],
    "NodeSelector": [("nodeSelectorTerms", 1, "*NodeSelectorTerm")],
    "PreferredSchedulingTerm": [("weight", 1, "int32"), ("preference", 2, "NodeSelectorTerm")],
    "NodeAffinity": [("requiredDuringSchedulingIgnoredDuringExecution", 1, "NodeSelector"),
                     ("preferredDuringSchedulingIgnoredDuringExecution", 2,
                      "*PreferredSchedulingTerm")],
    "PodAffinityTerm": [("labelSelector", 1, "LabelSelector"), ("namespaces", 2, "*string"),
                        ("topologyKey", 3, "string"), ("namespaceSelector", 4, "LabelSelector"),
                        ("matchLabelKeys", 5, "*string"), ("mismatchLabelKeys", 6, "*string")],
    "WeightedPodAffinityTerm": [("weight", 1, "int32"), ("podAffinityTerm", 2, "PodAffinityTerm")],
    # PodAffinity and PodAntiAffinity have the same fields.
    "PodAffinity": [("requiredDuringSchedulingIgnoredDuringExecution", 1, "*PodAffinityTerm"),
                    ("preferredDuringSchedulingIgnoredDuringExecution", 2,
                     "*WeightedPodAffinityTerm")],
    "Affinity": [("nodeAffinity", 1, "NodeAffinity"), ("podAffinity", 2, "PodAffinity"),
                 ("podAntiAffinity", 3, "PodAffinity")],
    "Toleration": [("key", 1, "string"), ("operator", 2, "string"), ("value", 3, "string"),
                   ("effect", 4, "string"), ("tolerationSeconds", 5, "int64")],
    "TopologySpreadConstraint": [("maxSkew", 1, "int32"), ("topologyKey", 2, "string"),
                                 ("whenUnsatisfiable", 3, "string"),
                                 ("labelSelector", 4, "LabelSelector"),
                                 ("minDomains", 5, "int32"), ("nodeAffinityPolicy", 6, "string"),
                                 ("nodeTaintsPolicy", 7, "string"),
                                 ("matchLabelKeys", 8, "*string")],
    "PodSpec": [("volumes", 1, "*Volume"), ("containers", 2, "*Container"),
                ("terminationGracePeriodSeconds", 4, "int64"), ("nodeSelector", 7, "{string}"),
                ("nodeName", 10, "string"), ("affinity", 18, "Affinity"),
                ("schedulerName", 19, "string"), ("initContainers", 20, "*Container"),
                ("tolerations", 22, "*Toleration"), ("priorityClassName", 24, "string"),
                ("priority", 25, "int32"), ("overhead", 32, "{Quantity}"),
                ("topologySpreadConstraints", 33, "*TopologySpreadConstraint"),
                ("resourceClaims", 39, "*Present"), ("resources", 40, "ResourceRequirements")],
    "PodCondition": [("type", 1, "string"), ("status", 2, "string"),
                     ("lastTransitionTime", 4, "Time"), ("reason", 5, "string")],
    "ContainerStateWaiting": [("reason", 1, "string")],
    "ContainerStateTerminated": [("exitCode", 1, "int32"), ("reason", 3, "string")],
    "ContainerState": [("waiting", 1, "ContainerStateWaiting"),
                       ("terminated", 3, "ContainerStateTerminated")],
    "ContainerStatus": [("state", 2, "ContainerState"), ("restartCount", 5, "int32")],
    "PodStatus": [("phase", 1, "string"), ("conditions", 2, "*PodCondition"),
                  ("reason", 4, "string"), ("startTime", 7, "Time"),
                  ("containerStatuses", 8, "*ContainerStatus"), ("qosClass", 9, "string"),
                  ("initContainerStatuses", 10, "*ContainerStatus"),
                  ("ephemeralContainerStatuses", 13, "*ContainerStatus")],
    "Pod": [("metadata", 1, "ObjectMeta"), ("spec", 2, "PodSpec"), ("status", 3, "PodStatus")],
    "PodList": [("metadata", 1, "ListMeta"), ("items", 2, "*Pod")],
    # core/v1: Node
    "Taint": [("key", 1, "string"), ("value", 2, "string"), ("effect", 3, "string")],
    "NodeSpec": [("unschedulable", 4, "bool"), ("taints", 5, "*Taint")],
    "NodeCondition": [("type", 1, "string"), ("status", 2, "string")],
    "ContainerImage": [("names", 1, "*string"), ("sizeBytes", 2, "int64")],
    "NodeStatus": [("capacity", 1, "{Quantity}"), ("allocatable", 2, "{Quantity}"),
                   ("conditions", 4, "*NodeCondition"), ("images", 8, "*ContainerImage")],
    "Node": [("metadata", 1, "ObjectMeta"), ("spec", 2, "NodeSpec"), ("status", 3, "NodeStatus")],
    "NodeList": [("metadata", 1, "ListMeta"), ("items", 2, "*Node")],
}


def _field(message: descriptor_pb2.DescriptorProto, name: str, number: int, kind: str) -> None:
    F = descriptor_pb2.FieldDescriptorProto
    field = message.field.add(name=name, number=number, json_name=name)
    if kind.startswith("{"):
        # A map is a repeated nested entry message (key = 1, value = 2) marked map_entry.
        entry = message.nested_type.add(name=name[0].upper() + name[1:] + "Entry")
        entry.options.map_entry = True
        _field(entry, "key", 1, "string")
        _field(entry, "value", 2, kind[1:-1])
        field.label = F.LABEL_REPEATED
        field.type = F.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{message.name}.{entry.name}"
        return
    if kind.startswith("*"):
        field.label = F.LABEL_REPEATED
        kind = kind[1:]
    else:
        field.label = F.LABEL_OPTIONAL
    if kind in _SCALARS:
        field.type = _SCALARS[kind]
    else:
        field.type = F.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{kind}"


def _build() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(name="desched/k8s.proto", package=PACKAGE,
                                              syntax="proto2")  # proto2: scalar presence
    for name, fields in MESSAGES.items():
        message = file.message_type.add(name=name)
        for field in fields:
            _field(message, *field)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
            for name in MESSAGES}


CLASSES: dict[str, Any] = _build()

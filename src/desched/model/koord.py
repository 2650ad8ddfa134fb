"""Koordinator's pod and node classification (apis/extension):
koord priority class, koord QoS class, the eviction-cost and pod-deletion-cost annotations and the
node's raw allocatable."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Final

from desched.model.node import Node
from desched.model.pod import Pod
from desched.model.quantity import QuantityError, resource_amount

PRIORITY_CLASS_LABEL: Final = "koordinator.sh/priority-class"
QOS_CLASS_LABEL: Final = "koordinator.sh/qosClass"
EVICTION_COST_ANNOTATION: Final = "scheduling.koordinator.sh/eviction-cost"
POD_DELETION_COST_ANNOTATION: Final = "controller.kubernetes.io/pod-deletion-cost"
RAW_ALLOCATABLE_ANNOTATION: Final = "node.koordinator.sh/raw-allocatable"

PRIORITY_PROD: Final = "koord-prod"
PRIORITY_MID: Final = "koord-mid"
PRIORITY_BATCH: Final = "koord-batch"
PRIORITY_FREE: Final = "koord-free"
PRIORITY_NONE: Final = ""
PRIORITY_CLASSES = frozenset({PRIORITY_PROD, PRIORITY_MID, PRIORITY_BATCH, PRIORITY_FREE})

# Inclusive spec.priority ranges of each class (build-time variables in Koordinator).
PRIORITY_RANGES: tuple[tuple[str, int, int], ...] = (
    (PRIORITY_PROD, 9000, 9999),
    (PRIORITY_MID, 7000, 7999),
    (PRIORITY_BATCH, 5000, 5999),
    (PRIORITY_FREE, 3000, 3999),
)

QOS_LSE: Final = "LSE"
QOS_LSR: Final = "LSR"
QOS_LS: Final = "LS"
QOS_BE: Final = "BE"
QOS_SYSTEM: Final = "SYSTEM"
QOS_NONE: Final = ""
QOS_CLASSES = frozenset({QOS_LSE, QOS_LSR, QOS_LS, QOS_BE, QOS_SYSTEM})

# Kubernetes QoS -> koord QoS when the pod carries no valid koord QoS label.
_FROM_KUBE_QOS = {"Guaranteed": QOS_LSR, "Burstable": QOS_LS, "BestEffort": QOS_BE}
# koord QoS -> priority class when neither the label nor spec.priority gives one.
_PRIORITY_FROM_QOS = {QOS_SYSTEM: PRIORITY_PROD, QOS_LSE: PRIORITY_PROD, QOS_LSR: PRIORITY_PROD,
                      QOS_LS: PRIORITY_PROD, QOS_BE: PRIORITY_BATCH}

_INT = re.compile(r"[+-]?[0-9]+")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def priority_class_from_priority(priority: int | None) -> str:
    if priority is None:
        return PRIORITY_NONE
    for name, low, high in PRIORITY_RANGES:
        if low <= priority <= high:
            return name
    return PRIORITY_NONE


def koord_qos_class(pod: Pod) -> str:
    """GetPodQoSClassWithDefault: a valid koord QoS label, else the Kubernetes QoS mapped."""
    label = pod.metadata.labels.get(QOS_CLASS_LABEL)
    if label in QOS_CLASSES:
        return label
    return _FROM_KUBE_QOS.get(pod.qos_class, QOS_NONE)


def priority_class(pod: Pod) -> str:
    """GetPodPriorityClassWithDefault: the priority-class label (an unknown value gives none),
    else the class of spec.priority's range, else the class of the koord QoS. So a plain
    Burstable or Guaranteed pod counts as koord-prod and a BestEffort one as koord-batch."""
    labels = pod.metadata.labels
    if PRIORITY_CLASS_LABEL in labels:
        label = labels[PRIORITY_CLASS_LABEL]
        found = label if label in PRIORITY_CLASSES else PRIORITY_NONE
    else:
        found = priority_class_from_priority(pod.spec.priority)
    if found != PRIORITY_NONE:
        return found
    return _PRIORITY_FROM_QOS.get(koord_qos_class(pod), PRIORITY_NONE)


def is_prod(pod: Pod) -> bool:
    return priority_class(pod) == PRIORITY_PROD


def _int32_annotation(annotations: Mapping[str, str], key: str) -> int:
    """Kubernetes' GetDeletionCostFromPodAnnotations rules: a missing or invalid value is 0;
    "+10" and "008" are invalid (first character must be '-', a lone "0" or 1-9)."""
    text = annotations.get(key)
    if not text:
        return 0
    first = text[0]
    if not (first == "-" or text == "0" or "1" <= first <= "9"):
        return 0
    if _INT.fullmatch(text) is None:
        return 0
    value = int(text)
    return value if _INT32_MIN <= value <= _INT32_MAX else 0


def eviction_cost(pod: Pod) -> int:
    """scheduling.koordinator.sh/eviction-cost; lower is evicted first."""
    return _int32_annotation(pod.metadata.annotations, EVICTION_COST_ANNOTATION)


def pod_deletion_cost(pod: Pod) -> int:
    """controller.kubernetes.io/pod-deletion-cost; lower is evicted first."""
    return _int32_annotation(pod.metadata.annotations, POD_DELETION_COST_ANNOTATION)


def raw_allocatable(node: Node) -> dict[str, int]:
    """The node.koordinator.sh/raw-allocatable annotation (a JSON ResourceList) when present and
    valid, replacing allocatable as a whole (a resource it omits has capacity 0); allocatable
    otherwise. cpu in millicores."""
    text = node.metadata.annotations.get(RAW_ALLOCATABLE_ANNOTATION)
    if text is None:
        return node.allocatable
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            return node.allocatable
        return {str(name): resource_amount(str(name), q) for name, q in raw.items()
                if isinstance(q, str | int | float)}
    except (ValueError, QuantityError):
        return node.allocatable

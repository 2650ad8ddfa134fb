"""Node: only what scheduling predicates and utilization need."""

from __future__ import annotations

import functools
from collections.abc import Mapping

import msgspec

from desched.errors import InputError
from desched.model.meta import EMPTY_MAP, ObjectMeta, Shared
from desched.model.pod import TaintEffect
from desched.model.quantity import QuantityError, resource_amount


class Taint(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    key: Shared = Shared("")
    value: Shared = Shared("")
    effect: TaintEffect = ""


class NodeCondition(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    type: str = ""
    status: str = ""


class NodeSpec(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()


class ContainerImage(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    names: tuple[Shared, ...] = ()
    size_bytes: int = 0


class NodeStatus(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    capacity: Mapping[str, str | int | float] = EMPTY_MAP
    allocatable: Mapping[str, str | int | float] = EMPTY_MAP
    conditions: tuple[NodeCondition, ...] = ()
    images: tuple[ContainerImage, ...] = ()  # what the kubelet has pulled (ImageLocality)


class Node(msgspec.Struct, tag_field="kind", tag="Node", rename="camel", dict=True,
           omit_defaults=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.labels

    @functools.cached_property
    def allocatable(self) -> dict[str, int]:
        """status.allocatable when set, else status.capacity (as upstream's NodeUtilization)."""
        source = self.status.allocatable or self.status.capacity
        try:
            return {name: resource_amount(name, q) for name, q in source.items()}
        except QuantityError as err:
            raise InputError("snapshot", f"node {self.name}: status.allocatable: {err}") from None

    @functools.cached_property
    def ready(self) -> bool:
        """Upstream's IsReady: false only when a NodeReady condition is present and not True."""
        for cond in self.status.conditions:
            if cond.type == "Ready" and cond.status != "True":
                return False
        return True

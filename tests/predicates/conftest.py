"""Builders for the predicate tests: pods, nodes and snapshots from Kubernetes-shaped dicts."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

try:
    import desched  # noqa: F401
except ImportError:  # running from a checkout without an installed package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from desched.model.meta import shared_hook
from desched.model.node import Node
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot


def build_pod(
    name: str = "p",
    namespace: str = "default",
    node: str = "",
    labels: dict[str, str] | None = None,
    requests: dict[str, Any] | None = None,
    phase: str = "Running",
    **spec: Any,
) -> Pod:
    """A pod with one container requesting `requests`; extra keyword arguments are camelCase
    PodSpec fields (nodeSelector, affinity, tolerations...)."""
    container: dict[str, Any] = {"name": "c"}
    if requests:
        container["resources"] = {"requests": requests}
    body = {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [container], **spec},
        "status": {"phase": phase},
    }
    return msgspec.convert(body, Pod, dec_hook=shared_hook)


def build_node(
    name: str = "n",
    labels: dict[str, str] | None = None,
    allocatable: dict[str, Any] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> Node:
    body = {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {"allocatable": allocatable or {}},
    }
    return msgspec.convert(body, Node, dec_hook=shared_hook)


def build_snapshot(*objects: Pod | Node) -> ClusterSnapshot:
    snap = ClusterSnapshot()
    for obj in objects:
        snap.add(obj)
    snap.finish()
    return snap


def convert(body: dict[str, Any], typ: type[Any]) -> Any:
    """Any model struct (Toleration, NodeSelectorTerm...) from its camelCase dict."""
    return msgspec.convert(body, typ, dec_hook=shared_hook)


@pytest.fixture
def make_pod() -> Callable[..., Pod]:
    return build_pod


@pytest.fixture
def make_node() -> Callable[..., Node]:
    return build_node


@pytest.fixture
def make_snapshot() -> Callable[..., ClusterSnapshot]:
    return build_snapshot


@pytest.fixture
def make() -> Callable[[dict[str, Any], type[Any]], Any]:
    return convert

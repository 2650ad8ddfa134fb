"""DefaultEvictor's `noEvictionPolicy: Preferred` (and unset, which acts as it): a pod annotated
descheduler.alpha.kubernetes.io/prefer-no-eviction stays evictable but goes last among pods of
equal priority and QoS (SortPodsBasedOnPriorityLowToHigh), so a plugin that stops once a node
is relieved keeps it; `Mandatory` keeps it whatever the plugin needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import NOW
from desched.simulate.simulation import run_simulation

PREFER_NO = "descheduler.alpha.kubernetes.io/prefer-no-eviction"


def _pod(name: str, node: str, cpu: str, annotated: bool, priority: int = 0) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "default", "uid": f"u-{name}",
        "annotations": {PREFER_NO: "true"} if annotated else {},
        "creationTimestamp": "2026-11-01T00:00:00Z",
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "rs",
                             "controller": True}]},
        "spec": {"nodeName": node, "priority": priority, "containers": [
            {"name": "c", "image": "web:1", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def _run(tmp_path: Path, policy_value: str | None, annotated: set[str],
         priorities: dict[str, int] | None = None) -> list[str]:
    """n1 at 90% cpu (p-0, p-1, p-2, 300m each, listed in that order), n2 and n3 empty:
    LowNodeUtilization (20/50) evicts two pods to bring n1 to 30%."""
    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
         "status": {"allocatable": {"cpu": "1", "memory": "8Gi", "pods": "20"}}}
        for n in ("n1", "n2", "n3")]
    items += [_pod(f"p-{i}", "n1", "300m", f"p-{i}" in annotated,
                   (priorities or {}).get(f"p-{i}", 0)) for i in range(3)]
    evictor_args = {} if policy_value is None else {"noEvictionPolicy": policy_value}
    policy = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [{
        "name": "p",
        "pluginConfig": [
            {"name": "DefaultEvictor", "args": evictor_args},
            {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20},
                                                    "targetThresholds": {"cpu": 50}}}],
        "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
    cluster, policy_path = tmp_path / "cluster.yaml", tmp_path / "policy.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    policy_path.write_text(yaml.safe_dump(policy))
    result = run_simulation(str(policy_path), [str(cluster)], NOW, 1, False)
    return [e.pod for e in result.evictions]


def test_without_the_annotation_the_listed_order_decides(tmp_path: Path) -> None:
    assert _run(tmp_path, "Preferred", set()) == ["p-0", "p-1"]


@pytest.mark.parametrize("value", ["Preferred", "", None])
def test_preferred_evicts_the_annotated_pod_last(tmp_path: Path, value: str | None) -> None:
    assert _run(tmp_path, value, {"p-0"}) == ["p-1", "p-2"]
    assert _run(tmp_path, value, {"p-1"}) == ["p-0", "p-2"]


def test_preferred_is_evicted_when_the_node_needs_it(tmp_path: Path) -> None:
    """Two annotated pods and two evictions needed: the annotated pods are still evictable."""
    assert _run(tmp_path, "Preferred", {"p-0", "p-1"}) == ["p-2", "p-0"]


def test_priority_and_qos_come_before_the_annotation(tmp_path: Path) -> None:
    """The annotation breaks ties only: a lower-priority annotated pod still goes first."""
    assert _run(tmp_path, "Preferred", {"p-0"}, {"p-1": 100, "p-2": 100}) == ["p-0", "p-1"]


def test_mandatory_never_evicts_the_annotated_pod(tmp_path: Path) -> None:
    assert _run(tmp_path, "Mandatory", {"p-0", "p-1"}) == ["p-2"]

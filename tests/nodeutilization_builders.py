"""Upstream's nodeutilization test builders (test_utils.go BuildTestPod / BuildTestNode and
friends), shared by the LowNodeUtilization and HighNodeUtilization tests."""

from __future__ import annotations

from typing import Any

from builders import node, pod

GPU = "nvidia.com/gpu"
LOW_PRIORITY, HIGH_PRIORITY = 100, 10000
OWNERS = {"rs": ("ReplicaSet", "replicaset-1"), "ds": ("DaemonSet", "daemonset-1"),
          "pod": ("Pod", "pod-1"), None: None}
MIRROR = {"kubernetes.io/config.mirror": "m", "kubernetes.io/config.source": "api"}


def mk(name: str, node_name: str, cpu: int = 400, memory: int = 0, owner: str | None = "rs",
       best_effort: bool = False, extended: dict[str, str] | None = None,
       spec: dict[str, Any] | None = None, **kw: Any) -> Any:
    """Upstream's BuildTestPod: one container requesting `cpu` millicores and `memory` bytes."""
    requests: dict[str, str] = {} if best_effort else {"cpu": f"{cpu}m", "memory": str(memory)}
    requests.update(extended or {})
    full_spec = {"containers": [{"name": "main", "image": "app:1",
                                 "resources": {"requests": requests}}], **(spec or {})}
    return pod(name, node_name, owner=OWNERS[owner], spec=full_spec, **kw)


def mk_node(name: str, cpu: int = 4000, memory: int = 3000, pods: int = 10,
            **kw: Any) -> Any:
    """Upstream's BuildTestNode: allocatable cpu millicores, memory bytes and pods."""
    kw.setdefault("labels", {})
    return node(name, cpu=f"{cpu}m", memory=str(memory), pods=str(pods), **kw)


def local_storage(name: str, node_name: str = "n1", **kw: Any) -> Any:
    """A mirror pod with hostPath/emptyDir storage (never evictable)."""
    return mk(name, node_name, owner="pod",
              annotations=MIRROR,
              spec={"volumes": [{"name": "sample", "hostPath": {"path": "somePath"},
                                 "emptyDir": {}}]}, **kw)


def critical(name: str, node_name: str = "n1", **kw: Any) -> Any:
    return mk(name, node_name, owner="pod", namespace="kube-system", priority=2_000_000_000,
              **kw)

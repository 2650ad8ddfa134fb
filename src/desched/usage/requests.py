"""Usage by pod requests (upstream's requestedUsageClient)."""

from __future__ import annotations

from collections.abc import Sequence

from desched.model.node import Node
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage.base import Amounts
from desched.util.memo import remember


class RequestedUsage:
    """Usage = the summed effective requests of the node's non-terminal pods; `pods` = their
    count. Every node can be measured, so `sync` never leaves one out."""

    pod_usage_known = True

    def __init__(self, snapshot: ClusterSnapshot, names: Sequence[str]) -> None:
        self.snapshot = snapshot
        self.names = tuple(names)
        self._usage: dict[str, Amounts] = {}
        self._pods: dict[str, list[Pod]] = {}
        # id(requests dict) -> (that dict, the usage read from it): pods of one resource spec
        # share their requests dict (Pod.requests), and LowNodeUtilization asks this of every
        # pod it tries to evict.
        self._by_requests: dict[int, tuple[dict[str, int], Amounts]] = {}

    def sync(self, nodes: Sequence[Node]) -> dict[str, str]:
        self._usage.clear()
        self._pods.clear()
        snapshot = self.snapshot
        for node in nodes:
            name = node.name
            requested = snapshot.node_requested(name)
            self._usage[name] = {r: requested.get(r, 0) for r in self.names}
            self._pods[name] = snapshot.pods_on_node(name)
        return {}

    def node_usage(self, node: str) -> Amounts:
        return self._usage[node]

    def pods(self, node: str) -> list[Pod]:
        return self._pods[node]

    def pod_usage(self, pod: Pod) -> Amounts:
        """Shared by the pods of one resource spec: callers must not modify it."""
        requests = pod.requests
        known = self._by_requests.get(id(requests))
        if known is not None and known[0] is requests:
            return known[1]
        usage = {r: requests.get(r, 0) for r in self.names}
        remember(self._by_requests, id(requests), (requests, usage))
        return usage

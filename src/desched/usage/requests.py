"""Usage by pod requests (upstream's requestedUsageClient)."""

from __future__ import annotations

from collections.abc import Sequence

from desched.model.node import Node
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage.base import Amounts


class RequestedUsage:
    """Usage = the summed effective requests of the node's non-terminal pods; `pods` = their
    count. Every node can be measured, so `sync` never leaves one out."""

    pod_usage_known = True

    def __init__(self, snapshot: ClusterSnapshot, names: Sequence[str]) -> None:
        self.snapshot = snapshot
        self.names = tuple(names)
        self._usage: dict[str, Amounts] = {}
        self._pods: dict[str, list[Pod]] = {}

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
        requests = pod.requests
        return {r: requests.get(r, 0) for r in self.names}

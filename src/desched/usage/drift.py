"""The pods that left or arrived on each node since a measurement was taken.

Usage measured outside the snapshot's pods (metrics.k8s.io NodeMetrics, a Prometheus query) does
not know about pods that moved afterwards: evictions earlier in a run, or in earlier simulated
cycles, and the replacements placed since. A `PodMoves` made when the measurement is taken (before
the first eviction) tells, per node, which pods to take off (-1) and which to add (+1); the usage
source corrects the measurement with the moved pods' own usage.
"""

from __future__ import annotations

from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot


class PodMoves:
    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self._origin = {key: pod for key, pod in snapshot.pods.items()
                        if pod.node_name and not pod.terminal}
        self._stamp = (snapshot.additions, len(snapshot.pods))

    def since(self) -> dict[str, list[tuple[Pod, int]]]:
        """Node -> (pod, -1 left / +1 arrived) since this was made; one pass over the pods, and
        none at all while no pod was added or removed."""
        snapshot = self.snapshot
        additions = snapshot.additions
        if (additions, len(snapshot.pods)) == self._stamp:
            return {}
        moves: dict[str, list[tuple[Pod, int]]] = {}
        pods = snapshot.pods
        for key, old in self._origin.items():
            current = pods.get(key)
            if current is old or (current is not None and not current.terminal
                                  and current.node_name == old.node_name):
                continue
            moves.setdefault(old.node_name, []).append((old, -1))
        if additions != self._stamp[0]:
            for key, pod in pods.items():
                if not pod.node_name or pod.terminal:
                    continue
                origin = self._origin.get(key)
                if origin is None or origin.node_name != pod.node_name:
                    moves.setdefault(pod.node_name, []).append((pod, +1))
        return moves

"""Building clusters and runs for the tests of moves (framework/moves): Deployments with their
rollout status, StatefulSets, their pods on a tainted node, and a cycle run through the real
Descheduler with RemovePodsViolatingNodeTaints as the plugin that wants the pods moved."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from builders import NOW, decode, node, pod, snapshot
from desched.executors.simulation import SimulationExecutor
from desched.framework.decisions import Decision, DecisionLog
from desched.framework.evictor import ExecutionResult, RestartOrder
from desched.framework.moves import MoveTracker
from desched.framework.policy import Policy
from desched.framework.runner import Descheduler
from desched.framework.types import Clock
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import policy_from_document
from desched.snapshot.cluster import ClusterSnapshot

NS = "shop"
TAINT = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
TAINTS_PLUGIN = "RemovePodsViolatingNodeTaints"


def nodes() -> list[Any]:
    """n1 tainted (its pods must move), n2 and n3 free."""
    return [node("n1", taints=[TAINT]), node("n2"), node("n3")]


def policy(moves: dict[str, Any] | None, **top: Any) -> Policy:
    doc: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", **top,
        "profiles": [{"name": "p", "pluginConfig": [{"name": TAINTS_PLUGIN}],
                      "plugins": {"deschedule": {"enabled": [TAINTS_PLUGIN]}}}]}
    if moves is not None:
        doc["moves"] = moves
    return policy_from_document("policy.yaml", doc, PLUGINS)


def deployment(name: str, replicas: int, *, strategy: dict[str, Any] | None = None,
               paused: bool = False, generation: int = 1, observed: int | None = 1,
               updated: int | None = None, ready: int | None = None,
               annotations: dict[str, str] | None = None) -> list[Any]:
    """A Deployment `name` (its rollout finished unless told otherwise) and its ReplicaSet
    `<name>-rs`."""
    spec: dict[str, Any] = {"replicas": replicas, "paused": paused}
    if strategy is not None:
        spec["strategy"] = strategy
    status = {"observedGeneration": observed, "replicas": replicas,
              "updatedReplicas": replicas if updated is None else updated,
              "readyReplicas": replicas if ready is None else ready,
              "availableReplicas": replicas if ready is None else ready}
    meta = {"name": name, "namespace": NS, "uid": f"uid-Deployment-{name}",
            "generation": generation,
            "resourceVersion": "7", "annotations": annotations or {}}
    return [decode("Deployment", {"metadata": meta, "spec": spec, "status": status}),
            decode("ReplicaSet", {
                "metadata": {"name": f"{name}-rs", "namespace": NS,
                             "uid": f"uid-ReplicaSet-{name}-rs",
                             "ownerReferences": [{"kind": "Deployment", "name": name,
                                                  "uid": f"uid-Deployment-{name}",
                                                  "controller": True}]},
                "spec": {"replicas": replicas}})]


def statefulset(name: str, replicas: int) -> Any:
    return decode("StatefulSet", {"metadata": {"name": name, "namespace": NS,
                                               "uid": f"uid-StatefulSet-{name}"},
                                  "spec": {"replicas": replicas}})


def replica(name: str, node_name: str = "n1", owner: str = "web-rs", kind: str = "ReplicaSet",
            ready: bool = True) -> Any:
    """A pod of `owner` (for a Deployment `web`, its ReplicaSet `web-rs`)."""
    return pod(name, node_name, namespace=NS, owner=(kind, owner), ready=ready,
               labels={"app": owner.removesuffix("-rs")})


class RestartingExecutor(SimulationExecutor):
    """The simulation executor, remembering every restart order and budget check."""

    def __init__(self, snap: ClusterSnapshot) -> None:
        super().__init__(snap)
        self.orders: list[RestartOrder] = []
        self.checked: list[str] = []

    def check_budget(self, p: Any) -> ExecutionResult:
        self.checked.append(p.key)
        return super().check_budget(p)

    def restart(self, order: RestartOrder) -> ExecutionResult:
        self.orders.append(order)
        return super().restart(order)


@dataclass
class Run:
    """Cycles of one policy over snapshots, one tracker throughout (as `desched run` keeps
    one per Runner), each cycle at its own time."""

    policy: Policy
    tracker: MoveTracker = field(default_factory=MoveTracker)
    log: DecisionLog = field(default_factory=DecisionLog)
    executors: list[RestartingExecutor] = field(default_factory=list)
    descheduler: Descheduler | None = None

    def cycle(self, snap: ClusterSnapshot, number: int = 1, now: datetime = NOW) -> None:
        executor = RestartingExecutor(snap)
        self.executors.append(executor)
        self.descheduler = Descheduler(self.policy, snap, executor, Clock(now), self.log,
                                       moves=self.tracker)
        self.descheduler.run_cycle(number)

    def outcomes(self, cycle: int | None = None) -> dict[str, str]:
        """Pod name -> its last outcome (in `cycle`, or any)."""
        return {d.pod: d.outcome for d in self.log.decisions
                if cycle is None or d.cycle == cycle}

    def decision(self, name: str, cycle: int | None = None) -> Decision:
        return next(d for d in reversed(self.log.decisions)
                    if d.pod == name and (cycle is None or d.cycle == cycle))


def cluster(*objects: Any) -> ClusterSnapshot:
    return snapshot(*nodes(), *objects)

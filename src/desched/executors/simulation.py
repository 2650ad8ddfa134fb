"""The simulation executor: Eviction-API semantics against the snapshot."""

from __future__ import annotations

from desched.executors.pdb import BudgetTracker
from desched.framework.evictor import ExecutionResult, RestartOrder
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot

_EVICTED = ExecutionResult(True)  # frozen: one instance serves every eviction
_RESTARTED = ExecutionResult(True, "restarted")


class SimulationExecutor:
    """Evicting removes the pod from the snapshot, so later plugins and cycles no longer see it.
    A pod covered by a PodDisruptionBudget is evicted only while the budget allows it."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.budgets = BudgetTracker(snapshot)
        self.evicted: list[Pod] = []
        # The last refusal and its result: a budget that refuses one eviction refuses the rest
        # of its pods' attempts with the same text until something changes.
        self._refused: tuple[str, ExecutionResult] = ("", _EVICTED)

    def evict(self, pod: Pod, profile: str, plugin: str, reason: str) -> ExecutionResult:
        if self.snapshot.pods.get(pod.cached_key or pod.key) is not pod:
            return ExecutionResult(False, "failed", f'pods "{pod.name}" not found')
        budgets = self.budgets
        pdb, refusal = budgets.check(pod)
        if refusal is not None:
            last = self._refused
            if last[0] is not refusal:
                last = self._refused = (refusal, ExecutionResult(False, "pdb-blocked", refusal))
            return last[1]
        if pdb is not None:
            budgets.consume(pdb, pod)
        budgets.record_removal(pod)
        self.snapshot.remove_pod(pod)
        self.evicted.append(pod)
        return _EVICTED

    def set_unschedulable(self, node: str, unschedulable: bool) -> ExecutionResult:
        """A cordon as the API would carry it out: the snapshot's node is marked, so the
        scheduler model and later cycles no longer place pods on it."""
        if not self.snapshot.set_unschedulable(node, unschedulable):
            return ExecutionResult(False, "failed", f'nodes "{node}" not found')
        return _EVICTED

    def check_budget(self, pod: Pod) -> ExecutionResult:
        """What the API would answer a dry-run eviction: the budget is asked, not used."""
        _, refusal = self.budgets.check(pod)
        if refusal is not None:
            return ExecutionResult(False, "pdb-blocked", refusal)
        return _EVICTED

    def restart(self, order: RestartOrder) -> ExecutionResult:
        """The Deployment's pods leave the snapshot as evicted ones do (with --reschedule they
        are recreated and placed like any replacement). A rollout is not an eviction: no
        budget is used up, but the pods count as expected, and missing, until replaced."""
        for pod in order.pods:
            if self.snapshot.pods.get(pod.key) is pod:
                self.budgets.record_removal(pod)
                self.snapshot.remove_pod(pod)
                self.evicted.append(pod)
        return _RESTARTED

"""Every PodDisruptionBudget of a namespace counted in one pass over its pods.

A budget's first count walked the pods its selector matches, through an index of them built
for that budget alone (and kept current through every later removal); a cycle that evicts
across a cluster counts nearly every budget, so the namespaces' pods were indexed and walked
budget by budget. One pass over the namespace finds each pod's budgets by its label map
(replicas share theirs: model.sharing) and counts them all; the tracker keeps the counts
current through its own removal records (executors/pdb.py).
"""

from __future__ import annotations

from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot

_TERMINAL = ("Succeeded", "Failed")


class Owned:
    """A budget's pods with one owner-reference tuple: one of them (any resolves alike) and
    how many there are."""

    __slots__ = ("pod", "pods")

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        self.pods = 1


class BudgetCount:
    """One budget's pods as the pass found them: the non-terminal ones, the healthy ones
    (active and Ready), and per distinct owner-reference tuple a pod that has it and how many
    do, all that the expected count's workload resolution reads (replicas share their
    references)."""

    __slots__ = ("healthy", "live", "owners")

    def __init__(self) -> None:
        self.live = 0
        self.healthy = 0
        self.owners: dict[int, Owned] = {}  # id(owner references) -> their pods


def count_namespace(snapshot: ClusterSnapshot, namespace: str) -> dict[int, BudgetCount]:
    """id(budget) -> its count, for every budget of the namespace."""
    counts = {id(pdb): BudgetCount() for pdb in snapshot.pdbs_by_namespace.get(namespace, ())}
    labels: object = None
    found: list[BudgetCount] = []
    for pod in snapshot.pods_by_namespace.get(namespace, {}).values():
        meta = pod.metadata
        if meta.labels is not labels:  # a run of replicas: their budgets found once
            labels = meta.labels
            found = [counts[id(pdb)] for pdb in snapshot.pdbs_for_pod(pod)]
        if not found:
            continue
        owner = id(meta.owner_references)
        if pod.status.phase in _TERMINAL:
            for count in found:
                _owned(count, owner, pod)
            continue
        healthy = meta.deletion_timestamp is None and pod.ready  # workloads.is_available
        for count in found:
            count.live += 1
            count.healthy += healthy
            _owned(count, owner, pod)
    return counts


def _owned(count: BudgetCount, owner: int, pod: Pod) -> None:
    entry = count.owners.get(owner)
    if entry is None:
        count.owners[owner] = Owned(pod)
    else:
        entry.pods += 1

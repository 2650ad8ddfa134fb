"""PodDisruptionBudget arithmetic as the policy/v1 Eviction API applies it."""

from __future__ import annotations

import math
from collections.abc import Collection

from desched.executors.budget_pass import Owned, count_namespace
from desched.model.objects import PodDisruptionBudget
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.workloads import Workload, WorkloadResolver

# Healthy for the disruption controller is what a workload counts as available: active (not
# terminating, not finished) and Ready.
from desched.snapshot.workloads import is_available as is_healthy

_TERMINAL = ("Succeeded", "Failed")
# What `check` found for no pod (its list is never read: no pod is None).
_NOT_CHECKED: tuple[Pod | None, list[PodDisruptionBudget]] = (None, [])
# `check`'s answer for a pod no budget covers (or that the API lets go past them).
_NO_BUDGET: tuple[PodDisruptionBudget | None, str | None] = (None, None)
TOO_MANY_REQUESTS = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS = ("This pod has more than one PodDisruptionBudget, which the eviction "
                 "subresource does not support.")


_IGNORED_PHASES = ("Succeeded", "Failed", "Pending")


def can_ignore_pdb(pod: Pod) -> bool:
    """The Eviction API skips the budget for pods that are done, not started, or going away."""
    return pod.status.phase in _IGNORED_PHASES or pod.metadata.deletion_timestamp is not None


def _scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent with rounding up."""
    if isinstance(value, int):
        return value
    text = value.strip()
    if text.endswith("%"):
        return math.ceil(int(text[:-1]) * total / 100)
    return int(text)


class BudgetTracker:
    """Disruptions allowed per PDB over a whole run: status.disruptionsAllowed minus the
    evictions made so far when the status is present, otherwise computed from the healthy pods in
    the snapshot (evicted pods still count as expected: their workload wants them back)."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.evicted: dict[int, int] = {}  # disruptions used per PDB
        self.removed: dict[int, int] = {}  # evicted non-terminal pods per PDB (still expected)
        # Per PDB: (snapshot.additions when counted, non-terminal pods, healthy pods). Kept
        # current by record_removal, recounted when pods were added since.
        self._live: dict[int, tuple[int, int, int]] = {}
        # The budgets `check` found for a pod, for the record_removal of the same eviction.
        self._checked: tuple[Pod | None, list[PodDisruptionBudget]] = _NOT_CHECKED
        self._workloads = WorkloadResolver(snapshot)
        # Per evicted pod: the budget it used up, and the budgets it still counts as expected in.
        self._consumed: dict[str, int] = {}
        self._removed_from: dict[str, list[int]] = {}
        # Per PDB: workload key -> replicas, for the workloads of pods evicted so far.
        self._evicted_workloads: dict[int, dict[str, int]] = {}
        # Per PDB: (snapshot.additions when counted, _counts' answer). A budget that refuses an
        # eviction is asked again for each pod it covers, and each time counting resolves every
        # one of them. record_removal drops the answers it makes stale.
        self._counted: dict[int, tuple[int, tuple[int, int, int]]] = {}
        # Per PDB: (snapshot.additions, its disruptions used, the refusal naming its numbers).
        self._refusals: dict[int, tuple[int, int, str]] = {}
        # Per PDB: (snapshot.additions, other removals, _expected_scale's answer). An eviction
        # through record_removal of a pod whose workload resolves leaves the answer as it was
        # (the workload stays wanted, as evicted); record_removal drops it for any other pod,
        # and another removal or an addition has it computed again.
        self._scales: dict[int, tuple[int, int, int | None]] = {}
        # Removals recorded here (record_removal): the snapshot's other removals (a planner's
        # moves, --reschedule's placements) are `snapshot.removals` less these.
        self._recorded = 0
        # Namespace -> snapshot.additions at its pass (budget_pass): every budget of a
        # namespace counted at once, once per generation of the snapshot.
        self._passes: dict[str, int] = {}
        # Per PDB a pass counted and nobody asked about yet: (snapshot.additions, other
        # removals) then. Asked after other removals, the budget is counted alone, as before.
        self._pending: dict[int, tuple[int, int]] = {}
        # Per PDB: (snapshot.additions, other removals, its pods by owner-reference tuple) from
        # its pass, for the expected count; record_removal takes out the pods whose workload
        # no eviction record keeps wanted.
        self._owners: dict[int, tuple[int, int, dict[int, Owned]]] = {}

    def _expected_scale(self, pdb: PodDisruptionBudget) -> int | None:
        """The disruption controller's expected count for maxUnavailable and percentage
        minAvailable: the replicas its pods' controllers want (a workload short of pods must not
        look healthy). None when a pod's controller cannot be resolved: then the pods count."""
        additions, others = self.snapshot.additions, self._other_removals()
        known = self._scales.get(id(pdb))
        if known is not None and known[0] == additions and known[1] == others:
            return known[2]
        owners = self._owners.get(id(pdb))
        if owners is not None and owners[0] == additions and owners[1] == others:
            scale = self._scale(pdb, [owned.pod for owned in owners[2].values()])
        else:
            scale = self._scale(pdb, self.snapshot.pods_of_pdb(pdb))
        self._scales[id(pdb)] = (additions, others, scale)
        return scale

    def _other_removals(self) -> int:
        """Pods removed from the snapshot other than through record_removal."""
        return self.snapshot.removals - self._recorded

    def _scale(self, pdb: PodDisruptionBudget, members: Collection[Pod]) -> int | None:
        wanted = dict(self._evicted_workloads.get(id(pdb), {}))
        refs: object = None
        for pod in members:
            # Replicas share their owner references (model.sharing), and the pods of one
            # budget one namespace: equal references resolve alike.
            if pod.metadata.owner_references is refs:
                continue
            refs = pod.metadata.owner_references
            workload = self._workloads.resolve(pod)
            if not isinstance(workload, Workload):
                return None
            wanted[workload.key] = workload.replicas
        return sum(wanted.values()) if wanted else None

    def _live_counts(self, pdb: PodDisruptionBudget) -> tuple[int, int]:
        additions = self.snapshot.additions
        entry = self._live.get(id(pdb))
        if entry is None or entry[0] != additions:
            namespace = pdb.metadata.namespace or "default"
            if self._passes.get(namespace) != additions:
                self._pass(namespace)
                entry = self._live.get(id(pdb))
        pending = self._pending.pop(id(pdb), None)
        if pending is not None and pending != (additions, self._other_removals()):
            entry = None  # pods left since the pass that it did not see go: counted alone
        if entry is None or entry[0] != additions:
            live = healthy = 0
            for p in self.snapshot.pods_of_pdb(pdb):
                if p.status.phase in _TERMINAL:
                    continue
                live += 1
                if p.metadata.deletion_timestamp is None and p.ready:  # is_healthy, inlined
                    healthy += 1
            entry = self._live[id(pdb)] = (self.snapshot.additions, live, healthy)
        return entry[1], entry[2]

    def _pass(self, namespace: str) -> None:
        """Count every budget of the namespace not counted in this generation yet."""
        additions, others = self.snapshot.additions, self._other_removals()
        self._passes[namespace] = additions
        live, pending, owners = self._live, self._pending, self._owners
        for pdb_id, count in count_namespace(self.snapshot, namespace).items():
            entry = live.get(pdb_id)
            if entry is not None and entry[0] == additions:
                continue  # asked already in this generation: kept current by record_removal
            live[pdb_id] = (additions, count.live, count.healthy)
            pending[pdb_id] = (additions, others)
            owners[pdb_id] = (additions, others, count.owners)

    def _counts(self, pdb: PodDisruptionBudget) -> tuple[int, int, int]:
        """(expected, current healthy, desired healthy)."""
        additions = self.snapshot.additions
        known = self._counted.get(id(pdb))
        if known is not None and known[0] == additions:
            return known[1]
        counts = self._count(pdb)
        self._counted[id(pdb)] = (additions, counts)
        return counts

    def _count(self, pdb: PodDisruptionBudget) -> tuple[int, int, int]:
        live, healthy = self._live_counts(pdb)
        expected = live + self.removed.get(id(pdb), 0)
        spec = pdb.spec
        if spec.max_unavailable is not None or isinstance(spec.min_available, str):
            scale = self._expected_scale(pdb)
            if scale is not None:
                expected = scale
        if spec.max_unavailable is not None:
            desired = max(0, expected - _scaled(spec.max_unavailable, expected))
        elif spec.min_available is not None:
            desired = _scaled(spec.min_available, expected)
        else:
            desired = expected  # a budget that names neither allows no voluntary disruption
        return expected, healthy, desired

    def _healthy(self, pdb: PodDisruptionBudget) -> tuple[int, int]:
        """(current healthy, desired healthy): the budget's status where it has them (the
        disruption controller's), else counted from the snapshot."""
        status = pdb.status
        if status is not None and status.current_healthy is not None \
                and status.desired_healthy is not None:
            return status.current_healthy, status.desired_healthy
        _, healthy, desired = self._counts(pdb)
        return healthy, desired

    def allowed(self, pdb: PodDisruptionBudget) -> int:
        status = pdb.status
        if status is not None and status.disruptions_allowed is not None:
            return status.disruptions_allowed - self.evicted.get(id(pdb), 0)
        _, healthy, desired = self._counts(pdb)
        return max(0, healthy - desired)

    def check(self, pod: Pod) -> tuple[PodDisruptionBudget | None, str | None]:
        """The budget an eviction of this pod draws on, or why the API would refuse it."""
        # can_ignore_pdb, inlined: asked for every eviction attempt.
        if pod.status.phase in _IGNORED_PHASES or pod.metadata.deletion_timestamp is not None:
            self._checked = _NOT_CHECKED
            return _NO_BUDGET
        # From here the pod is neither finished nor terminating: healthy is Ready.
        pdbs = self.snapshot.pdbs_for_pod(pod)
        self._checked = (pod, pdbs)
        if not pdbs:
            return _NO_BUDGET
        if len(pdbs) > 1:
            return None, MULTIPLE_PDBS
        pdb = pdbs[0]
        ready = pod.cached_ready  # Pod.ready once known, without the call
        if ready is None:
            ready = pod.ready
        if ready:
            # Most attempts are repeats of a refusal that still stands (_standing_refusal,
            # inlined: asked for most attempts).
            known = self._refusals.get(id(pdb))
            if known is not None and known[0] == self.snapshot.additions \
                    and known[1] == self.evicted.get(id(pdb), 0):
                return None, known[2]
        else:
            policy = pdb.spec.unhealthy_pod_eviction_policy
            if policy == "AlwaysAllow":
                return None, None
            healthy, desired = self._healthy(pdb)
            if healthy >= desired and desired > 0:
                return None, None  # an unhealthy pod of a healthy budget: no disruption used
            # Otherwise the ordinary check decides, as the API's checkAndDecrement does.
        allowed = self.allowed(pdb)
        if allowed < 0:
            return None, "pdb disruptions allowed is negative"
        if allowed == 0:
            return None, self._refusal(pdb)
        return pdb, None

    def _forget_owners(self, pod: Pod, pdbs: list[PodDisruptionBudget]) -> None:
        """The pod leaving was counted in the budgets' expected count by its own workload,
        which none of the rest may want (and no eviction record keeps): out of the pass's
        pods, and the count made again."""
        owner = id(pod.metadata.owner_references)
        for pdb in pdbs:
            self._scales.pop(id(pdb), None)
            passed = self._owners.get(id(pdb))
            if passed is None:
                continue
            owned = passed[2].get(owner)
            if owned is not None:
                owned.pods -= 1
                if not owned.pods:
                    del passed[2][owner]

    def _stale(self, pdb_id: int) -> None:
        """The budget's pods or evictions changed: what was counted of it is void."""
        self._counted.pop(pdb_id, None)
        self._refusals.pop(pdb_id, None)

    def _standing_refusal(self, pdb: PodDisruptionBudget) -> str | None:
        """The budget's last refusal while its evictions, counts and pods are as they were then
        (_stale drops it when they change), else None."""
        known = self._refusals.get(id(pdb))
        if known is not None and known[0] == self.snapshot.additions \
                and known[1] == self.evicted.get(id(pdb), 0):
            return known[2]
        return None

    def _refusal(self, pdb: PodDisruptionBudget) -> str:
        standing = self._standing_refusal(pdb)
        if standing is not None:
            return standing
        text = f"{TOO_MANY_REQUESTS} ({self.describe(pdb)})"
        self._refusals[id(pdb)] = (self.snapshot.additions, self.evicted.get(id(pdb), 0), text)
        return text

    def describe(self, pdb: PodDisruptionBudget) -> str:
        """The budget and its numbers, as `kubectl get pdb` would show them now."""
        healthy, desired = self._healthy(pdb)
        meta = pdb.metadata
        return (f"PodDisruptionBudget {meta.namespace or 'default'}/{meta.name}: healthy "
                f"{healthy}, desired healthy {desired}, disruptionsAllowed "
                f"{max(0, self.allowed(pdb))}")

    def consume(self, pdb: PodDisruptionBudget, pod: Pod | None = None) -> None:
        self.evicted[id(pdb)] = self.evicted.get(id(pdb), 0) + 1
        if pod is not None:
            self._consumed[pod.key] = id(pdb)

    def replaced(self, pod: Pod) -> None:
        """The evicted pod's replacement is running (simulate --reschedule): the budgets it
        drew on recover, as they do once the disruption controller sees the new pod Ready."""
        used = self._consumed.pop(pod.key, None)
        if used is not None and self.evicted.get(used, 0) > 0:
            self.evicted[used] -= 1
        for pdb_id in self._removed_from.pop(pod.key, ()):
            self._stale(pdb_id)
            if self.removed.get(pdb_id, 0) > 0:
                self.removed[pdb_id] -= 1

    def record_removal(self, pod: Pod) -> None:
        """An evicted pod keeps counting as expected for every budget covering it, however it
        got past them (unready, Pending): its workload wants it back."""
        checked, self._checked = self._checked, _NOT_CHECKED
        pdbs = checked[1] if checked[0] is pod else self.snapshot.pdbs_for_pod(pod)
        self._recorded += 1  # the caller removes the pod next
        for pdb in pdbs:
            self._stale(id(pdb))  # a finished pod's workload counted too
        if pod.terminal:
            self._forget_owners(pod, pdbs)
            return
        healthy = is_healthy(pod)
        workload = self._workloads.resolve(pod)
        self._removed_from[pod.key] = [id(pdb) for pdb in pdbs]
        if not isinstance(workload, Workload):
            self._forget_owners(pod, pdbs)
        for pdb in pdbs:
            self.removed[id(pdb)] = self.removed.get(id(pdb), 0) + 1
            if isinstance(workload, Workload):
                # Wanted still, as evicted: the expected count stands.
                self._evicted_workloads.setdefault(id(pdb), {})[workload.key] = \
                    workload.replicas
            entry = self._live.get(id(pdb))
            if entry is not None:
                self._live[id(pdb)] = (entry[0], entry[1] - 1, entry[2] - healthy)

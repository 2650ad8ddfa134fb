"""The workload behind a pod, its expected replicas and which of its pods are available.

Used by the PodDisruptionBudget executor, the migration limits and the simulation's replacement
pods alike, so it lives beside the snapshot it reads rather than in any one of them.

Koordinator resolves a pod's workload through its controllerfinder and reads the replica count
from `spec.replicas` (or the /scale subresource). A workload it cannot find reads as 0 replicas,
which silently rejects the pod (expectedReplicas 0 == maxMigrating 0). Here an unresolved workload
is a value of its own, `Unresolved`, carrying the reason, so the rejection can say why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from desched.model.meta import controller_ref
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot

RESOLVED_KINDS = ("ReplicaSet", "Deployment", "StatefulSet", "ReplicationController")

Owner = tuple[str, str, str]  # kind, name, uid


@dataclass(frozen=True, slots=True)
class Workload:
    """The object whose replicas a pod counts against: a ReplicaSet's Deployment when it has
    one. `owners` are the direct controllers of its pods (a Deployment's ReplicaSets)."""

    kind: str
    namespace: str
    name: str
    replicas: int
    owners: tuple[Owner, ...]
    key: str = field(init=False, compare=False)  # "kind/namespace/name"

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.kind}/{self.namespace}/{self.name}")

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Unresolved:
    """No replica count could be found for the pod's controller; `reason` says why."""

    reason: str


def _replicas(obj: Any) -> int:
    # The API server defaults spec.replicas to 1; a hand-written file may leave it out.
    replicas = obj.spec.replicas
    return 1 if replicas is None else int(replicas)


def is_available(pod: Pod) -> bool:
    """Active (not Succeeded/Failed, not terminating) and Ready: kubecontroller.IsPodActive and
    podutil.IsPodReady."""
    if pod.terminal or pod.metadata.deletion_timestamp is not None:
        return False
    return pod.ready


class WorkloadResolver:
    """Resolves pods to workloads over one snapshot. Workload objects do not change during a run,
    so resolutions are memoized; the pods of a workload are read live (evictions remove them)."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self._memo: dict[tuple[str, str, str, str], Workload | Unresolved] = {}
        self._names: dict[tuple[str, str, str, str], str] = {}  # name_of's, by the same key
        self._replica_sets: dict[tuple[str, str], list[Any]] | None = None
        # workload key -> (snapshot.additions, its unavailable pods then)
        self._unavailable: dict[str, tuple[int, list[Pod]]] = {}

    def resolve(self, pod: Pod) -> Workload | Unresolved | None:
        """The pod's workload; None for a pod without a controller owner reference."""
        ref = controller_ref(pod.metadata)
        if ref is None:
            return None
        memo_key = (ref.kind, pod.namespace, ref.name, ref.uid)
        found = self._memo.get(memo_key)
        if found is None:
            found = self._memo[memo_key] = self._resolve(ref.kind, pod.namespace, ref.name,
                                                         ref.uid)
        return found

    def name_of(self, pod: Pod) -> str:
        """The workload a pod belongs to, as a report names it: the Deployment behind its
        ReplicaSet where the snapshot has both, else its controller, else the pod itself.
        Kept per controller: a report names the workload of every pod a cycle held back."""
        ref = controller_ref(pod.metadata)
        if ref is None:
            return f"Pod {pod.key}"
        memo_key = (ref.kind, pod.namespace, ref.name, ref.uid)
        name = self._names.get(memo_key)
        if name is None:
            found = self.resolve(pod)
            name = self._names[memo_key] = (str(found) if isinstance(found, Workload)
                                            else f"{ref.kind} {pod.namespace}/{ref.name}")
        return name

    def _object(self, kind: str, namespace: str, name: str, uid: str) -> Any:
        """The object, or an Unresolved saying why not."""
        obj = self.snapshot.workloads.get((kind, namespace, name))
        if obj is None:
            return Unresolved(f"{kind} {namespace}/{name} is not in the snapshot")
        found_uid = obj.metadata.uid
        if uid and found_uid and found_uid != uid:
            return Unresolved(f"{kind} {namespace}/{name} in the snapshot has uid {found_uid}, "
                              f"not the owner reference's {uid}")
        return obj

    def _resolve(self, kind: str, namespace: str, name: str,
                 uid: str) -> Workload | Unresolved:
        if kind not in RESOLVED_KINDS:
            if kind == "Job":
                return Unresolved(f"Job {namespace}/{name} has no replica count (batch Jobs "
                                  f"have no /scale subresource)")
            return Unresolved(f"{kind} {namespace}/{name}: desched resolves replica counts only "
                              f"for {', '.join(RESOLVED_KINDS)}")
        obj = self._object(kind, namespace, name, uid)
        if isinstance(obj, Unresolved):
            return obj
        own: Owner = (kind, name, uid or obj.metadata.uid)
        if kind == "ReplicaSet":
            parent = controller_ref(obj.metadata)
            if parent is not None and parent.kind == "Deployment":
                deployment = self._object("Deployment", namespace, parent.name, parent.uid)
                if isinstance(deployment, Unresolved):
                    return Unresolved(f"ReplicaSet {namespace}/{name}: its {deployment.reason}")
                return self._deployment(deployment, namespace, parent.name, own)
        if kind == "Deployment":
            return self._deployment(obj, namespace, name, own)
        return Workload(kind, namespace, name, _replicas(obj), (own,))

    def _deployment(self, deployment: Any, namespace: str, name: str,
                    pod_owner: Owner) -> Workload:
        """A Deployment counts the pods of every ReplicaSet it controls (old and new during a
        rollout), plus those of the controller the pod names."""
        owners: dict[Owner, None] = {pod_owner: None}
        for rs in self._replica_sets_of(namespace, name, deployment.metadata.uid):
            owners[("ReplicaSet", rs.metadata.name, rs.metadata.uid)] = None
        return Workload("Deployment", namespace, name, _replicas(deployment), tuple(owners))

    def _replica_sets_of(self, namespace: str, deployment: str, uid: str) -> list[Any]:
        if self._replica_sets is None:
            index: dict[tuple[str, str], list[Any]] = {}
            for (kind, ns, _), obj in self.snapshot.workloads.items():
                parent = controller_ref(obj.metadata) if kind == "ReplicaSet" else None
                if parent is not None and parent.kind == "Deployment":
                    index.setdefault((ns, parent.name), []).append(obj)
            self._replica_sets = index
        return [rs for rs in self._replica_sets.get((namespace, deployment), ())
                if not uid or not (ref := controller_ref(rs.metadata)) or not ref.uid
                or ref.uid == uid]

    def pods(self, workload: Workload) -> list[Pod]:
        """The workload's pods now in the snapshot (terminal ones included, as Koordinator lists
        them by owner UID)."""
        snapshot = self.snapshot
        found: dict[str, Pod] = {}
        by_name: set[tuple[str, str]] = set()
        for kind, name, uid in workload.owners:
            if uid:
                found.update(snapshot.pods_by_owner_uid.get(uid, {}))
            else:
                by_name.add((kind, name))
        if by_name:
            # Owners without a uid (hand-written files): match the controller by kind and name.
            for key, pod in snapshot.pods_by_namespace.get(workload.namespace, {}).items():
                ref = controller_ref(pod.metadata)
                if ref is not None and (ref.kind, ref.name) in by_name:
                    found[key] = pod
        return list(found.values())

    def unavailable(self, workload: Workload) -> list[Pod]:
        """The workload's pods that are not active or not Ready. Pods only change by being added
        (which bumps snapshot.additions) or removed, so the list is kept until an addition and
        re-checked against the snapshot on each read."""
        snapshot = self.snapshot
        cached = self._unavailable.get(workload.key)
        if cached is None or cached[0] != snapshot.additions:
            pods = [p for p in self.pods(workload) if not is_available(p)]
            cached = self._unavailable[workload.key] = (snapshot.additions, pods)
        pods_now = snapshot.pods
        return [p for p in cached[1] if pods_now.get(p.key) is p]

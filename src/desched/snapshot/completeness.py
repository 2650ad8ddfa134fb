"""What a snapshot lacks that the run needs: no Node at all is an input error; a kind the policy
reads and the snapshot does not hold (the controllers its pods name, NodeMetric, metrics.k8s.io,
Services) is one warning per kind, saying who needs it and how to get it.

A missing kind does not stop a run: the plugins still decide, but on less than the cluster
holds (MigrationController keeps every pod whose workload it cannot resolve, LowNodeLoad
measures nothing), and the report alone would read as a policy that found nothing to do."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from desched.errors import InputError, quote
from desched.model.meta import ObjectMeta, controller_ref
from desched.model.objects import Namespace
from desched.model.pod import Pod
from desched.model.resources import BY_KIND
from desched.snapshot.cluster import ClusterSnapshot
from desched.snapshot.workloads import RESOLVED_KINDS

Warn = Callable[[str], None]

# The loader's warning about objects of a kind it does not read (snapshot/loader.read_batches).
_IGNORING = re.compile(r": ignoring ([0-9]+) object\(s\) of unsupported kind (\S+)$")
# How to get every kind at once.
SNAPSHOT_COMMAND = "`desched snapshot`"


class LoadWarnings:
    """The loader's warnings, passed on as they come, except those naming kinds it ignored:
    held until the snapshot is known to hold nodes, because without any they belong in the one
    line of the error (a policy file given as --snapshot is nothing but an ignored kind)."""

    def __init__(self, warn: Warn) -> None:
        self.warn = warn
        self.held: list[str] = []
        self.ignored: Counter[str] = Counter()

    def __call__(self, message: str) -> None:
        found = _IGNORING.search(message)
        if found is None:
            self.warn(message)
            return
        self.held.append(message)
        # "descheduler/v1alpha2/DeschedulerPolicy": the kind is what a reader recognizes.
        self.ignored[found.group(2).rpartition("/")[2]] += int(found.group(1))

    def release(self) -> None:
        for message in self.held:
            self.warn(message)
        self.held.clear()


# Groups kubectl resolves a plural in without being told (NodeMetric and metrics.k8s.io's
# NodeMetrics share the plural `nodemetrics`: those are named with their group).
_BUILT_IN = frozenset({"", "apps", "batch", "policy", "scheduling.k8s.io"})


def fetch(kind: str) -> str:
    """The kubectl command that lists `kind` as a snapshot reads it."""
    resource = BY_KIND[kind]
    name = resource.plural if resource.group in _BUILT_IN \
        else f"{resource.plural}.{resource.group}"
    every = " -A" if resource.namespaced else ""
    return f"`kubectl get {name}{every} -o json`"


def require_nodes(snapshot: ClusterSnapshot, paths: list[str], ignored: Counter[str]) -> None:
    """InputError naming the files and what they held when the snapshot has no Node: every
    plugin needs nodes, and a run over none would report '0 nodes' and succeed."""
    if snapshot.nodes:
        return
    found = [_count(n, kind) for kind, n in _held(snapshot) if n]
    found += [_count(n, kind) for kind, n in sorted(ignored.items())]
    where = ", ".join(paths)
    raise InputError("", f"snapshot {where} holds no Node (found: {', '.join(found) or 'nothing'})"
                         f"; every plugin works on nodes: capture the cluster with "
                         f"{SNAPSHOT_COMMAND}, or add {fetch('Node')}")


def _count(n: int, kind: str) -> str:
    return kind if n == 1 else f"{n} {kind}"


def _held(snapshot: ClusterSnapshot) -> list[tuple[str, int]]:
    """Objects per kind the snapshot holds, as read (not the namespaces its pods imply)."""
    workloads = Counter(kind for kind, _, _ in snapshot.workloads)
    read = [ns for ns in snapshot.namespaces.values()
            if ns != Namespace(metadata=ObjectMeta(name=ns.metadata.name))]
    return [("Pod", len(snapshot.pods)), ("Namespace", len(read)),
            ("PodDisruptionBudget", sum(map(len, snapshot.pdbs_by_namespace.values()))),
            ("PriorityClass", len(snapshot.priority_classes)),
            ("PersistentVolumeClaim", len(snapshot.pvcs)), *sorted(workloads.items()),
            ("Service", sum(map(len, snapshot.services_by_namespace.values()))),
            ("NodeMetric", len(snapshot.node_metrics)),
            ("NodeMetrics", len(snapshot.metrics_nodes)),
            ("PodMetrics", len(snapshot.metrics_pods)),
            ("PodMigrationJob", len(snapshot.migration_jobs)),
            ("Reservation", len(snapshot.reservations)),
            ("SnapshotInfo", int(snapshot.captured_at is not None))]


# Controller kind -> "namespace/name" -> the pods that name it (or whose ReplicaSet names it).
Absent = dict[str, dict[str, list[Pod]]]


@dataclass
class Needs:
    """Who in this run reads which kind and why, as "MigrationController (a pod's workload)";
    filled from the policy and the flags (desched/simulate/preflight.py), with the controllers
    the pods name and the snapshot lacks when a use of them was looked for."""

    # kind -> its uses, in the order they were added, each once
    uses: dict[str, dict[str, None]] = field(default_factory=dict)
    absent: Absent = field(default_factory=dict)

    def add(self, kinds: Iterable[str], use: str) -> None:
        for kind in kinds:
            self.uses.setdefault(kind, {})[use] = None


def missing(snapshot: ClusterSnapshot, needs: Needs) -> list[str]:
    """One line per needed kind the snapshot lacks: for controllers, those its pods (and
    ReplicaSets) name and it does not hold; for the other kinds, holding none at all."""
    lines = []
    counts = dict(_held(snapshot))
    for kind, uses in needs.uses.items():
        fix = f"add {fetch(kind)} to the snapshot, or use {SNAPSHOT_COMMAND}"
        by = " and by ".join(uses)
        if kind in needs.absent:
            names = sorted(needs.absent[kind])
            shown = ", ".join(quote(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
            named_by = "ReplicaSets" if kind == "Deployment" else "pods"
            lines.append(f"the snapshot lacks {len(names)} {kind}(s) that {named_by} name as "
                         f"their controller ({shown}), needed by {by}; {fix}")
        elif kind not in RESOLVED_KINDS and not counts.get(kind):
            lines.append(f"the snapshot holds no {kind} ({BY_KIND[kind].api_version}), needed "
                         f"by {by}; {fix}")
    return lines


def absent_controllers(snapshot: ClusterSnapshot) -> Absent:
    """The controllers whose replica count desched reads that the snapshot's pods name, or
    their ReplicaSets name for a Deployment, and the snapshot does not hold: one pass over the
    pods, done once per run and only when some use of them was found."""
    held = snapshot.workloads
    absent: Absent = {}
    for pod in snapshot.pods.values():
        namespace, ref = pod.namespace, controller_ref(pod.metadata)
        if ref is None or ref.kind not in RESOLVED_KINDS:
            continue
        owner = held.get((ref.kind, namespace, ref.name))
        if owner is not None and ref.kind == "ReplicaSet":
            ref = controller_ref(owner.metadata)  # the Deployment behind it, if any
            if ref is None or ref.kind != "Deployment":
                continue
            owner = held.get((ref.kind, namespace, ref.name))
        if owner is None:
            absent.setdefault(ref.kind, {}).setdefault(f"{namespace}/{ref.name}", []).append(pod)
    return absent

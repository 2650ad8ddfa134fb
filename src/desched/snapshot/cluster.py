"""ClusterSnapshot: the objects of one cluster state and the indices plugins need."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

import msgspec

from desched.errors import InputError
from desched.model.labels import Matcher, SelectorError, compile_selector
from desched.model.meta import LabelSelector, ObjectMeta, Shared, trim_annotations
from desched.model.node import Node
from desched.model.objects import (
    WORKLOAD_TYPES,
    Namespace,
    NodeMetric,
    NodeMetrics,
    PersistentVolumeClaim,
    PodDisruptionBudget,
    PodMetrics,
    PodMigrationJob,
    PriorityClass,
    Reservation,
    Service,
    SnapshotInfo,
)
from desched.model.pod import Pod

_WORKLOADS = tuple(WORKLOAD_TYPES)
_TERMINAL = ("Succeeded", "Failed")

LabelIndex = dict[str, dict[str, dict[str, Pod]]]  # label key -> value -> pods (by pod key)


_PERCENT = re.compile(r"^[0-9]+%$")


def _check_budget(pdb: PodDisruptionBudget) -> None:
    """Reject a budget the API server would not have stored, at load time with its name."""
    where = f"PodDisruptionBudget {pdb.metadata.namespace or 'default'}/{pdb.metadata.name}"
    for field, value in (("minAvailable", pdb.spec.min_available),
                         ("maxUnavailable", pdb.spec.max_unavailable)):
        if isinstance(value, str) and not _PERCENT.match(value):
            raise InputError("snapshot", f"{where}: spec.{field}: {value!r} is neither an "
                                         f"integer nor a percentage")
    try:
        compile_selector(pdb.spec.selector)
    except SelectorError as err:
        raise InputError("snapshot", f"{where}: spec.selector: {err}") from None


_REMOVAL_LOG_MAX = 1_000_000


class ClusterSnapshot:
    """Objects by kind plus indices: pods by node, namespace and owner UID; PDBs by namespace.

    Pods are keyed by "namespace/name". Removing a pod (an eviction in simulation) updates every
    index, so later plugins in the same cycle no longer see it.
    """

    def __init__(self, *, placeholder: bool = False) -> None:
        # A placeholder stands in for a cluster not read yet: plugins are built on it only to
        # check a policy, and must not refuse what the cluster may hold (a priority class).
        self.placeholder = placeholder
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}
        self.pods_by_node: dict[str, dict[str, Pod]] = {}
        self.pods_by_namespace: dict[str, dict[str, Pod]] = {}
        self.pods_by_owner_uid: dict[str, dict[str, Pod]] = {}
        self.namespaces: dict[str, Namespace] = {}
        self.pdbs_by_namespace: dict[str, list[PodDisruptionBudget]] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.pvcs: dict[str, PersistentVolumeClaim] = {}
        self.workloads: dict[tuple[str, str, str], Any] = {}
        self.services_by_namespace: dict[str, dict[str, Service]] = {}
        self.node_metrics: dict[str, NodeMetric] = {}
        self.metrics_nodes: dict[str, NodeMetrics] = {}
        self.metrics_pods: dict[str, PodMetrics] = {}
        self.migration_jobs: dict[str, PodMigrationJob] = {}
        self.reservations: dict[str, Reservation] = {}
        # When `desched snapshot` finished capturing (the latest, over several files).
        self.captured_at: datetime | None = None
        self._pdb_selectors: dict[int, Matcher] = {}
        # namespace -> (its PDB count when built, the budgets by one of their matchLabels pairs
        # (None: no matchLabels) with their position and matcher, and the answers by the
        # id of the label map asked about: replicas share theirs, see model.sharing).
        self._pdb_checks: dict[str, tuple[int, dict[tuple[str, str] | None, list[tuple[
            int, PodDisruptionBudget, Matcher]]], dict[int, tuple[Mapping[str, str], list[
                PodDisruptionBudget]]]]] = {}
        self._node_requested: dict[str, dict[str, int]] = {}
        self._node_non_zero: dict[str, tuple[int, int]] = {}
        # Succeeded/Failed pods per node: most nodes have none, and listing their pods then
        # needs no look at each pod.
        self._terminal_on_node: dict[str, int] = {}
        self._ready_nodes: dict[int, tuple[Matcher | None, list[Node]]] = {}
        # Caches other modules derive from the snapshot (e.g. NodeFit results). They may assume
        # that pods only go away, unless `additions` changed since they were filled.
        self.caches: dict[str, Any] = {}
        self.additions = 0
        # Pods added after finish() (replacements, re-added dry-run pods), in order: indices
        # built once over the snapshot catch up on these instead of rebuilding.
        self.finished = False
        self.added_since_finish: list[Pod] = []
        # Node name -> a counter bumped whenever a pod comes to or leaves the node: what per-node
        # derived figures (the load-aware model's estimates) are checked against.
        self.node_version: dict[str, int] = {}
        # The node of every pod removed, in order: a node can only start to fit a pod it did
        # not fit when pods leave it, so cached "fits nowhere" answers re-check just these.
        self.removed_from: list[str] = []
        # Pods removed so far, on a node or not: what counts kept current by their own
        # removal records (executors/pdb.py) check that no other removal happened.
        self.removals = 0
        # namespace -> label key -> value -> pods: built on first use for the label keys PDB
        # selectors there name, kept current.
        self._label_index: dict[str, LabelIndex] = {}
        # PDB (by id) -> the pods its selector matches; built on first use, then kept current.
        self._pdb_members: dict[int, dict[str, Pod]] = {}
        # Pod key -> the member maps above holding it, so removing a pod touches only those.
        self._member_of: dict[str, list[dict[str, Pod]]] = {}

    # -- building ----------------------------------------------------------------------------------
    def add(self, obj: Any) -> None:
        meta = obj.metadata
        if meta.annotations:
            trim_annotations(meta)
        if type(obj) is Pod:
            self.add_pod(obj)
        elif isinstance(obj, Node):
            self.nodes[meta.name] = obj
            self._ready_nodes.clear()
            self.caches.pop("nodeindex", None)
        elif isinstance(obj, PodDisruptionBudget):
            _check_budget(obj)
            self.pdbs_by_namespace.setdefault(meta.namespace or "default", []).append(obj)
        elif isinstance(obj, Namespace):
            self.namespaces[meta.name] = obj
        elif isinstance(obj, PriorityClass):
            self.priority_classes[meta.name] = obj
        elif isinstance(obj, PersistentVolumeClaim):
            self.pvcs[f"{meta.namespace or 'default'}/{meta.name}"] = obj
        elif isinstance(obj, _WORKLOADS):
            self.workloads[(type(obj).__name__, meta.namespace or "default", meta.name)] = obj
        elif isinstance(obj, Service):
            self.services_by_namespace.setdefault(meta.namespace or "default", {})[
                meta.name] = obj
        elif isinstance(obj, NodeMetric):
            self.node_metrics[meta.name] = obj
        elif isinstance(obj, NodeMetrics):
            self.metrics_nodes[meta.name] = obj
        elif isinstance(obj, PodMetrics):
            self.metrics_pods[f"{meta.namespace or 'default'}/{meta.name}"] = obj
        elif isinstance(obj, PodMigrationJob):
            self.migration_jobs[meta.name] = obj
        elif isinstance(obj, Reservation):
            self.reservations[meta.name] = obj
        elif isinstance(obj, SnapshotInfo):
            at = meta.creation_timestamp
            if at is not None and (self.captured_at is None or at > self.captured_at):
                self.captured_at = at

    def add_all(self, objs: tuple[Any, ...]) -> None:
        """Add a page of objects; a page of pods takes a tight loop (150k pods at load)."""
        if objs and type(objs[0]) is Pod and all(type(o) is Pod for o in objs):
            add_pod = self.add_pod
            for pod in objs:
                if pod.metadata.annotations:
                    trim_annotations(pod.metadata)
                add_pod(pod)
            return
        for obj in objs:
            self.add(obj)

    def add_pod(self, pod: Pod) -> None:
        meta = pod.metadata
        if not meta.namespace:
            meta.namespace = Shared("default")
        key = pod.cached_key = f"{meta.namespace}/{meta.name}"
        pods = self.pods
        if key in pods:
            self.remove_pod(pods[key])
        pods[key] = pod
        self.additions += 1
        if self.finished:
            self.added_since_finish.append(pod)
        node_name = pod.spec.node_name
        if node_name:
            self._shift_requested(node_name, pod, 1)
            self.node_version[node_name] = self.node_version.get(node_name, 0) + 1
            on_node = self.pods_by_node.get(node_name)
            if on_node is None:
                on_node = self.pods_by_node[node_name] = {}
            on_node[key] = pod
            if pod.status.phase in _TERMINAL:
                self._terminal_on_node[node_name] = self._terminal_on_node.get(node_name, 0) + 1
        in_ns = self.pods_by_namespace.get(meta.namespace)
        if in_ns is None:
            in_ns = self.pods_by_namespace[meta.namespace] = {}
        in_ns[key] = pod
        indexed = self._label_index.get(meta.namespace)
        if indexed:
            for name, by_value in indexed.items():
                value = meta.labels.get(name)
                if value is not None:
                    by_value.setdefault(value, {})[key] = pod
        if self._pdb_members:
            # The budgets matching the pod, memoized per label map (replicas share theirs):
            # a pod put back (simulate --reschedule, moves) is not matched against each one.
            for pdb in self.pdbs_for_pod(pod):
                members = self._pdb_members.get(id(pdb))
                if members is not None:
                    members[key] = pod
                    self._member_of.setdefault(key, []).append(members)
        by_owner = self.pods_by_owner_uid
        for ref in meta.owner_references:
            if ref.uid:
                owned = by_owner.get(ref.uid)
                if owned is None:
                    owned = by_owner[ref.uid] = {}
                owned[key] = pod

    def finish(self) -> None:
        """Resolve what can only be resolved once everything is read."""
        self.finished = True
        for name in self.pods_by_namespace:
            if name not in self.namespaces:
                # A namespace referenced by pods but not dumped: it exists, with no labels.
                self.namespaces[name] = Namespace(metadata=ObjectMeta(name=name))

    def copy(self) -> ClusterSnapshot:
        """The same cluster in containers of its own, to run a simulation on while this one stays
        as it is (`simulate --outcomes` runs again and again on what was loaded once). A run
        adds and removes pods and replaces usage samples, never changes an object in place (a
        pod's caches hold what it is, not where the run is), so the objects are shared and the
        containers copied: the pods' indices, the samples, every map by kind. What is derived
        from them (request sums, label and budget indices, ready nodes, other modules' caches)
        is left to be built again as a fresh load would. Tens of milliseconds at 150,000 pods."""
        other = ClusterSnapshot(placeholder=self.placeholder)
        other.nodes = dict(self.nodes)
        other.pods = dict(self.pods)
        other.pods_by_node = {name: dict(pods) for name, pods in self.pods_by_node.items()}
        other.pods_by_namespace = {name: dict(pods)
                                   for name, pods in self.pods_by_namespace.items()}
        other.pods_by_owner_uid = {uid: dict(pods) for uid, pods in self.pods_by_owner_uid.items()}
        other.namespaces = dict(self.namespaces)
        other.pdbs_by_namespace = {name: list(pdbs)
                                   for name, pdbs in self.pdbs_by_namespace.items()}
        other.priority_classes = dict(self.priority_classes)
        other.pvcs = dict(self.pvcs)
        other.workloads = dict(self.workloads)
        other.services_by_namespace = {name: dict(services)
                                       for name, services in self.services_by_namespace.items()}
        other.node_metrics = dict(self.node_metrics)
        other.metrics_nodes = dict(self.metrics_nodes)
        other.metrics_pods = dict(self.metrics_pods)
        other.migration_jobs = dict(self.migration_jobs)
        other.reservations = dict(self.reservations)
        other.captured_at = self.captured_at
        other._terminal_on_node = dict(self._terminal_on_node)
        other.additions = self.additions
        other.finished = self.finished
        other.added_since_finish = list(self.added_since_finish)
        other.node_version = dict(self.node_version)
        other.removed_from = list(self.removed_from)
        other.removals = self.removals
        return other

    def remove_pod(self, pod: Pod) -> None:
        key = pod.key
        if self.pods.get(key) is not pod:
            return
        del self.pods[key]
        self.removals += 1
        node_name = pod.spec.node_name
        if node_name:
            self._shift_requested(node_name, pod, -1)
            self.node_version[node_name] = self.node_version.get(node_name, 0) + 1
            if len(self.removed_from) >= _REMOVAL_LOG_MAX:
                self.removed_from = []  # a new list: readers notice the restart
                self.additions += 1  # what was derived from the log is void
            self.removed_from.append(node_name)
        by_node = self.pods_by_node.get(node_name)
        if by_node is not None and by_node.pop(key, None) is not None \
                and pod.status.phase in _TERMINAL:
            self._terminal_on_node[node_name] -= 1
        self.pods_by_namespace.get(pod.namespace, {}).pop(key, None)
        indexed = self._label_index.get(pod.namespace)
        if indexed:
            labels = pod.metadata.labels
            for name, by_value in indexed.items():
                value = labels.get(name)
                if value is not None:
                    by_value.get(value, {}).pop(key, None)
        for members in self._member_of.pop(key, ()):
            members.pop(key, None)
        for ref in pod.metadata.owner_references:
            owned = self.pods_by_owner_uid.get(ref.uid)
            if owned is not None:
                owned.pop(key, None)

    def set_unschedulable(self, node_name: str, unschedulable: bool) -> bool:
        """Cordon or uncordon a node (a plugin's autoCordon, carried out by the executor): the
        node becomes a new struct (nodes are never changed in place) and what was derived from
        the old one is dropped. False when the snapshot has no such node."""
        node = self.nodes.get(node_name)
        if node is None:
            return False
        if node.spec.unschedulable != unschedulable:
            new = self.nodes[node_name] = msgspec.structs.replace(
                node, spec=msgspec.structs.replace(node.spec, unschedulable=unschedulable))
            self._ready_nodes.clear()
            # What other modules derived from the old node goes, but for a cache that can take
            # the new one in (`node_replaced`: the node index, which a drain would otherwise
            # rebuild at every cordon).
            for name, cache in list(self.caches.items()):
                replaced = getattr(cache, "node_replaced", None)
                if replaced is None:
                    del self.caches[name]
                else:
                    replaced(node, new)
            self.additions += 1
        return True

    def _shift_requested(self, node_name: str, pod: Pod, sign: int) -> None:
        """The node's request sums, where kept, plus (sign 1) a pod coming to it or less (sign
        -1) one leaving it; new dicts, as a caller may hold the old ones. Evictions remove pods
        one by one from nodes whose sums NodeFit and the utilization plugins read again after
        each, and replacements are placed one by one on nodes the scheduler model reads."""
        if pod.status.phase in _TERMINAL:
            return  # never counted
        cached = self._node_requested.get(node_name)
        if cached is not None:
            shifted = dict(cached)
            for name, amount in pod.requests.items():
                if name != "pods":  # the count below replaces a request of that name
                    shifted[name] = shifted.get(name, 0) + sign * amount
            shifted["pods"] = cached["pods"] + sign
            self._node_requested[node_name] = shifted
        non_zero = self._node_non_zero.get(node_name)
        if non_zero is not None:
            requests = pod.non_zero_requests
            self._node_non_zero[node_name] = (non_zero[0] + sign * requests.get("cpu", 0),
                                              non_zero[1] + sign * requests.get("memory", 0))

    # -- queries -----------------------------------------------------------------------------------
    def pods_on_node(self, node_name: str, include_terminal: bool = False) -> list[Pod]:
        """Upstream's ListPodsOnANode (no Succeeded/Failed) or ListAllPodsOnANode."""
        pods = self.pods_by_node.get(node_name)
        if not pods:
            return []
        if include_terminal or not self._terminal_on_node.get(node_name):
            return list(pods.values())
        return [p for p in pods.values() if p.status.phase not in _TERMINAL]

    def node_requested(self, node_name: str) -> dict[str, int]:
        """Sum of the effective requests of the node's non-terminal pods, plus `pods` = their
        count. Cached per node; adding or removing a pod on the node invalidates it."""
        cached = self._node_requested.get(node_name)
        if cached is None:
            cached = {}
            count = 0
            for pod in self.pods_on_node(node_name):
                count += 1
                for name, amount in pod.requests.items():
                    cached[name] = cached.get(name, 0) + amount
            cached["pods"] = count
            self._node_requested[node_name] = cached
        return cached

    def node_non_zero_requested(self, node_name: str) -> tuple[int, int]:
        """(millicores, bytes) the node's non-terminal pods request as kube-scheduler's
        resource scores count them (Pod.non_zero_requests). Cached like node_requested."""
        cached = self._node_non_zero.get(node_name)
        if cached is None:
            cpu = memory = 0
            for pod in self.pods_on_node(node_name):
                requests = pod.non_zero_requests
                cpu += requests.get("cpu", 0)
                memory += requests.get("memory", 0)
            cached = self._node_non_zero[node_name] = (cpu, memory)
        return cached

    def all_nodes(self) -> list[Node]:
        """Every node, ready or not, in one shared list (callers must not modify it): what
        kube-scheduler counts pods over for spreading and pod affinity."""
        cached = self._ready_nodes.get(-1)
        if cached is None:
            cached = self._ready_nodes[-1] = (None, list(self.nodes.values()))
        return cached[1]

    def ready_nodes(self, selector: Matcher | None = None) -> list[Node]:
        """Ready nodes (unschedulable ones included), optionally filtered by a label matcher.
        Memoized per matcher (nodeFit asks for the same set once per candidate pod): the list
        is shared, callers must not modify it."""
        key = id(selector)
        cached = self._ready_nodes.get(key)
        if cached is None or cached[0] is not selector:
            nodes = [n for n in self.nodes.values()
                     if n.ready and (selector is None or selector(n.metadata.labels))]
            cached = self._ready_nodes[key] = (selector, nodes)
        return cached[1]

    def _pdb_matcher(self, pdb: PodDisruptionBudget) -> Matcher:
        matcher = self._pdb_selectors.get(id(pdb))
        if matcher is None:
            matcher = self._pdb_selectors[id(pdb)] = compile_selector(pdb.spec.selector)
        return matcher

    def pdbs_for_pod(self, pod: Pod) -> list[PodDisruptionBudget]:
        """PDBs in the pod's namespace whose selector matches the pod (a nil selector matches
        nothing, an empty one everything, as the disruption controller treats them)."""
        pdbs = self.pdbs_by_namespace.get(pod.metadata.namespace)
        if not pdbs:
            return []
        built = self._pdb_checks.get(pod.metadata.namespace)
        if built is None or built[0] != len(pdbs):
            by_pair: dict[tuple[str, str] | None, list[tuple[int, PodDisruptionBudget,
                                                              Matcher]]] = {}
            for index, pdb in enumerate(pdbs):
                selector = pdb.spec.selector
                # The selector requires every matchLabels pair: filed under one of them, a
                # budget is only looked at for pods carrying it.
                pair = next(iter(selector.match_labels.items())) \
                    if selector is not None and selector.match_labels else None
                by_pair.setdefault(pair, []).append((index, pdb, self._pdb_matcher(pdb)))
            built = self._pdb_checks[pod.metadata.namespace] = (len(pdbs), by_pair, {})
        by_pair, answers = built[1], built[2]
        labels = pod.metadata.labels
        known = answers.get(id(labels))
        if known is not None and known[0] is labels:
            return known[1]
        found: list[tuple[int, PodDisruptionBudget]] = []
        for checks in (by_pair.get(None, ()),
                       *(by_pair.get(item, ()) for item in labels.items())):
            for index, pdb, matcher in checks:
                if matcher(labels):
                    found.append((index, pdb))
        if len(found) > 1:
            found.sort(key=lambda entry: entry[0])  # the namespace's order, as before
        result = [pdb for _, pdb in found]
        # Held with the map itself, so its id is not reused while the answer stands.
        answers[id(labels)] = (labels, result)
        return result

    def pods_of_pdb(self, pdb: PodDisruptionBudget) -> Collection[Pod]:
        """The pods a PDB covers: indexed on first use and kept current as pods come and go,
        because every eviction of a covered pod re-counts its budget."""
        members = self._pdb_members.get(id(pdb))
        if members is None:
            matcher = self._pdb_matcher(pdb)
            namespace = pdb.metadata.namespace or "default"
            members = {}
            member_of = self._member_of
            # Replicas share their label map (model.sharing): matched once per run of them.
            labels: Mapping[str, str] | None = None
            matched = False
            for key, pod in self.candidates(namespace, pdb.spec.selector):
                if pod.metadata.labels is not labels:
                    labels = pod.metadata.labels
                    matched = matcher(labels)
                if matched:
                    members[key] = pod
                    held = member_of.get(key)
                    if held is None:
                        member_of[key] = [members]
                    else:
                        held.append(members)
            self._pdb_members[id(pdb)] = members
        return members.values()

    def candidates(self, namespace: str,
                    selector: LabelSelector | None) -> Iterable[tuple[str, Pod]]:
        """Pods that may match a selector: for matchLabels, the smallest bucket of the
        namespace's label index (the caller still applies the whole selector)."""
        if selector is None or not selector.match_labels:
            return self.pods_by_namespace.get(namespace, {}).items()
        indexed = self._label_index.setdefault(namespace, {})
        if not indexed.keys() >= selector.match_labels.keys():
            # Only the label keys selectors name (every PDB's here at once): indexing every
            # label of every pod costs several times more.
            names = set(selector.match_labels)
            for pdb in self.pdbs_by_namespace.get(namespace, ()):
                if pdb.spec.selector is not None and pdb.spec.selector.match_labels:
                    names.update(pdb.spec.selector.match_labels)
            pods = self.pods_by_namespace.get(namespace, {})
            for name in names - indexed.keys():
                by_value: dict[str, dict[str, Pod]] = {}
                for key, pod in pods.items():
                    value = pod.metadata.labels.get(name)
                    if value is not None:
                        bucket = by_value.get(value)
                        if bucket is None:
                            bucket = by_value[value] = {}
                        bucket[key] = pod
                indexed[name] = by_value
        buckets = [indexed[name].get(value, {})
                   for name, value in selector.match_labels.items()]
        return min(buckets, key=len).items()

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        ns = self.namespaces.get(name)
        return ns.metadata.labels if ns is not None else {}

    def all_pods(self) -> Iterable[Pod]:
        return self.pods.values()

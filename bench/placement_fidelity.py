"""Placement fidelity: desched's scheduler model against the real kube-scheduler.

For each scenario the script builds a cluster on a real control plane (Nodes written by hand, no
kubelet; ReplicaSets whose pods the real kube-scheduler places), takes `desched snapshot`, asks
`desched simulate --reschedule --scheduler kube-default` what one cycle of the policy evicts and
where the replacements land, runs the same policy for real (`desched run --once`), waits until
the ReplicaSet controller has recreated the evicted pods and kube-scheduler has bound them, and
compares:

- evictions: the predicted and the real set of evicted pods;
- placements: per owner, the multiset of *node classes* the replacements landed on. Nodes with
  the same allocatable, the same labels (but the hostname), the same taints and the same pods
  (by owner) before the cycle are interchangeable: kube-scheduler picks among equal scores at
  random, so a prediction is right when it names a node of the class the pod really went to;
- balance after the cycle: cpu-request utilization per node (percent), its population std and
  max, predicted vs real.

simulate assumes the order an idle server keeps: each replacement placed before the next
eviction, an evicted pod without a grace period gone before its replacement is scheduled. A
loaded server may take another (an eviction writes the pod's deletionTimestamp, then deletes it;
the ReplicaSet controller creates the replacement on the first write and kube-scheduler may place
it before the second). When simulate's prediction falls short, the model is replayed in the
order the Timeline (a watch: the server's order) recorded (`replay`), and the placements and the
balance are judged by the outcome of that order that explains most ("order" in the result).

    .venv/bin/python bench/placement_fidelity.py --kubeconfig K [--scenario NAME ...]
        [--out results.json]
    .venv/bin/python bench/placement_fidelity.py --realk8s /work/rk8s ...   # starts and stops it

The control plane must have a kube-scheduler and the ReplicaSet controller, and no schedulable
node of its own (see tests/e2e/README.md, "Placement fidelity"). The scenarios delete every Node
and Namespace labelled `desched-fidelity` before they start.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import math
import os
import random
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from lightkube import ApiError, Client, codecs
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.apps_v1 import ReplicaSet
from lightkube.resources.core_v1 import Namespace, Node, Pod
from lightkube.types import PatchType

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "fidelity"
LABEL = "desched-fidelity"  # on the scenario's nodes and namespace: the scenario's name
IMAGE = "registry.k8s.io/pause:3.10"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
HOSTNAME = "kubernetes.io/hostname"
NAME = "app.kubernetes.io/name"
POOL = "node-pool"
MOST_ALLOCATED = "most-allocated"  # the second kube-scheduler's profile (schedulerName)
PENDING = "(pending)"  # the class of a replacement no node took
GATE = "desched.io/fidelity-hold"  # gated mode: replacements wait here until all evictions are done
MODES = ("interleaved", "gated")


# -- what a scenario is made of -------------------------------------------------------------------

@dataclass
class NodeSpec:
    name: str  # the node's name (the scenario's name is prefixed)
    cpu: str
    memory: str
    zone: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    pods: int = 110


@dataclass
class Workload:
    """A ReplicaSet: `replicas` pods of one container requesting cpu and memory (limits equal
    to requests when `guaranteed`). `spec` is merged into the pod template's spec (nodeSelector,
    affinity, tolerations, topologySpreadConstraints, schedulerName)."""

    name: str
    replicas: int
    cpu: str
    memory: str
    guaranteed: bool = False
    spec: dict[str, Any] = field(default_factory=dict)
    grace: int = 0  # terminationGracePeriodSeconds (the harness finishes the deletion then)


@dataclass
class Phase:
    """Nodes to add, then ReplicaSets to create and ReplicaSets to resize; the cluster settles
    (every pod bound, or unschedulable, and Running) before the next phase."""

    nodes: list[NodeSpec] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    scale: dict[str, int] = field(default_factory=dict)


@dataclass
class Scenario:
    name: str
    summary: str
    phases: list[Phase]
    policy: Callable[[str, str], dict[str, Any]]  # (scenario name, namespace) -> policy
    deterministic: bool = True  # False: kube-scheduler samples nodes (percentageOfNodesToScore)
    most_allocated: bool = False  # needs the second kube-scheduler and --scheduler-config
    reported: str = ""  # figures the issue reported, for the table's reader
    settle_timeout: float = 180.0


def _policy(scenario: str, plugins: list[tuple[str, str, dict[str, Any] | None]],
            **top: Any) -> dict[str, Any]:
    """An upstream DeschedulerPolicy (v1alpha2) with one profile; `plugins` are (extension
    point, plugin, args). The top-level nodeSelector keeps it on the scenario's nodes."""
    config: list[dict[str, Any]] = [{"name": "DefaultEvictor"}]
    points: dict[str, dict[str, list[str]]] = {}
    for point, name, args in plugins:
        config.append({"name": name, **({"args": args} if args else {})})
        points.setdefault(point, {"enabled": []})["enabled"].append(name)
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "nodeSelector": f"{LABEL}={scenario}", **top,
            "profiles": [{"name": "fidelity", "pluginConfig": config, "plugins": points}]}


def _lnu(low: int = 20, high: int = 50) -> tuple[str, str, dict[str, Any]]:
    return ("balance", "LowNodeUtilization",
            {"thresholds": {"cpu": low}, "targetThresholds": {"cpu": high}})


def _anti(key: str, app: str, weight: int | None = None) -> dict[str, Any]:
    """A pod anti-affinity term against app.kubernetes.io/name=app over `key`: required, or
    preferred with `weight`."""
    term = {"labelSelector": {"matchLabels": {NAME: app}}, "topologyKey": key}
    if weight is None:
        return {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": term}]}


def _spread(key: str, skew: int, when: str, app: str) -> dict[str, Any]:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {NAME: app}}}


def _nodes(prefix: str, count: int, cpu: str, memory: str, zones: list[str],
           start: int = 1, **kw: Any) -> list[NodeSpec]:
    return [NodeSpec(f"{prefix}-{i}", cpu, memory, zones[(i - start) % len(zones)], **kw)
            for i in range(start, start + count)]


# -- the scenarios --------------------------------------------------------------------------------

def _zones_phases() -> list[Phase]:
    """The issue's cluster: four 8-cpu nodes in za/zb take every pod; then three empty 16-cpu
    nodes join za/zb and two empty 4-cpu nodes a new zone zc."""
    return [
        Phase(nodes=[NodeSpec("za-1", "8", "32Gi", "za"), NodeSpec("za-2", "8", "32Gi", "za"),
                     NodeSpec("zb-1", "8", "32Gi", "zb"), NodeSpec("zb-2", "8", "32Gi", "zb")],
              workloads=[Workload("web", 24, "500m", "1Gi"), Workload("api", 12, "1", "2Gi")]),
        Phase(nodes=[NodeSpec("za-3", "16", "64Gi", "za"), NodeSpec("zb-3", "16", "64Gi", "zb"),
                     NodeSpec("zb-4", "16", "64Gi", "zb"), NodeSpec("zc-1", "4", "16Gi", "zc"),
                     NodeSpec("zc-2", "4", "16Gi", "zc")]),
    ]


def zones_lnu() -> Scenario:
    return Scenario(
        "zones-lnu", "issue cluster, LowNodeUtilization cpu 20/50", _zones_phases(),
        lambda sc, ns: _policy(sc, [_lnu(20, 50)]),
        reported="8/8, 5 of 8 on the predicted node, std/max 20.9/50.0 vs 18.4/50.0")


def zones_dup() -> Scenario:
    return Scenario(
        "zones-dup", "issue cluster, RemoveDuplicates", _zones_phases(),
        lambda sc, ns: _policy(sc, [("balance", "RemoveDuplicates",
                                     {"namespaces": {"include": [ns]}})]),
        reported="16/16, 11 of 16 on the predicted node, std/max 13.9/43.8 vs 18.2/62.5")


def taints() -> Scenario:
    """Three full nodes; then two nodes tainted dedicated=batch:NoSchedule, two tainted
    spot=true:PreferNoSchedule and a smaller (6-cpu) untainted one. One workload tolerates both
    taints, one only the spot taint, one neither."""
    dedicated = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
    spot = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}
    tolerate_dedicated = {"key": "dedicated", "operator": "Equal", "value": "batch",
                          "effect": "NoSchedule"}
    tolerate_spot = {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}
    return Scenario(
        "taints", "NoSchedule/PreferNoSchedule taints, LowNodeUtilization cpu 20/50", [
            Phase(nodes=_nodes("a", 3, "8", "32Gi", ["za", "zb", "zc"]),
                  workloads=[
                      Workload("tolerant", 10, "500m", "1Gi",
                               spec={"tolerations": [tolerate_dedicated, tolerate_spot]}),
                      Workload("spot-ok", 8, "500m", "1Gi",
                               spec={"tolerations": [tolerate_spot]}),
                      Workload("plain", 10, "1", "2Gi", guaranteed=True)]),
            Phase(nodes=[*_nodes("dedicated", 2, "8", "32Gi", ["za", "zb"], taints=[dedicated]),
                         *_nodes("spot", 2, "8", "32Gi", ["za", "zc"], taints=[spot]),
                         NodeSpec("small-1", "6", "24Gi", "zb")]),
        ],
        lambda sc, ns: _policy(sc, [_lnu(20, 50)]))


def anti_affinity() -> Scenario:
    """Four full nodes in za/zb: a cache with required anti-affinity per node, a db with
    required anti-affinity per zone, web with preferred anti-affinity per node, api with
    preferred anti-affinity per zone; then four empty nodes of different sizes (za 8 cpu, zb 12,
    two of 16 in a new zone zc: no coin toss between zones)."""
    return Scenario(
        "anti-affinity", "required/preferred pod anti-affinity (hostname, zone), LNU cpu 20/50", [
            Phase(nodes=_nodes("n", 4, "8", "32Gi", ["za", "zb"]),
                  workloads=[
                      Workload("cache", 4, "1", "4Gi", spec={"affinity": {
                          "podAntiAffinity": _anti(HOSTNAME, "cache")}}),
                      Workload("db", 2, "1", "4Gi", spec={"affinity": {
                          "podAntiAffinity": _anti(ZONE, "db")}}),
                      Workload("web", 16, "500m", "1Gi", spec={"affinity": {
                          "podAntiAffinity": _anti(HOSTNAME, "web", 100)}}),
                      Workload("api", 8, "1", "2Gi", guaranteed=True, spec={"affinity": {
                          "podAntiAffinity": _anti(ZONE, "api", 50)}})]),
            Phase(nodes=[NodeSpec("n-5", "8", "32Gi", "za"), NodeSpec("n-6", "12", "48Gi", "zb"),
                         *_nodes("n", 2, "16", "64Gi", ["zc"], start=7)]),
        ],
        lambda sc, ns: _policy(sc, [_lnu(20, 50)]))


def spread() -> Scenario:
    """Four full nodes in za/zb: front spreads over zones (maxSkew 1, DoNotSchedule) and nodes
    (maxSkew 2, ScheduleAnyway), back over nodes (maxSkew 1, ScheduleAnyway), worker has only
    the system defaults; then four empty nodes, two in a new zone zc. The topology-spread
    plugin (hard and soft constraints) and LowNodeUtilization evict."""
    return Scenario(
        "spread", "topologySpreadConstraints, RemovePodsViolatingTSC + LNU cpu 20/50", [
            Phase(nodes=_nodes("n", 4, "8", "32Gi", ["za", "zb"]),
                  workloads=[
                      Workload("front", 12, "500m", "1Gi", spec={"topologySpreadConstraints": [
                          _spread(ZONE, 1, "DoNotSchedule", "front"),
                          _spread(HOSTNAME, 2, "ScheduleAnyway", "front")]}),
                      Workload("back", 12, "1", "2Gi", spec={"topologySpreadConstraints": [
                          _spread(HOSTNAME, 1, "ScheduleAnyway", "back")]}),
                      Workload("worker", 8, "500m", "1Gi")]),
            Phase(nodes=_nodes("n", 4, "8", "32Gi", ["za", "zb", "zc", "zc"], start=5)),
        ],
        lambda sc, ns: _policy(sc, [
            ("balance", "RemovePodsViolatingTopologySpreadConstraint",
             {"constraints": ["DoNotSchedule", "ScheduleAnyway"],
              "namespaces": {"include": [ns]}}),
            _lnu(20, 50)], maxNoOfPodsToEvictPerNode=4))


def _pools_phases(grace: int = 0) -> list[Phase]:
    def pool(name: str) -> dict[str, Any]:
        return {"nodeSelector": {POOL: name}}
    return [Phase(nodes=[*_nodes("general", 2, "8", "32Gi", ["za", "zb"],
                                 labels={POOL: "general"}),
                         *_nodes("highmem", 2, "8", "64Gi", ["za", "zb"],
                                 labels={POOL: "highmem"}),
                         *_nodes("compute", 3, "16", "32Gi", ["za", "zb", "zc"],
                                 labels={POOL: "compute"})],
                  workloads=[Workload("web", 14, "500m", "1Gi", spec=pool("general"), grace=grace),
                             Workload("api", 6, "1", "2Gi", spec=pool("general"), grace=grace),
                             Workload("cache", 6, "1", "8Gi", guaranteed=True,
                                      spec=pool("highmem"), grace=grace),
                             Workload("batch", 42, "1", "1Gi", spec=pool("compute"),
                                      grace=grace),
                             Workload("misc", 6, "500m", "512Mi", grace=grace)]),
            Phase(nodes=[NodeSpec(f"general-{i}", cpu, f"{4 * int(cpu)}Gi", zone,
                                  labels={POOL: "general"})
                         for i, cpu, zone in ((3, "8", "za"), (4, "12", "zb"), (5, "16", "zc"))])]


def pools() -> Scenario:
    """Three pools by nodeSelector: general (two full 8-cpu nodes, then empty ones of 8, 12 and
    16 cpu join),
    highmem, and compute, nearly full (88 %): its evicted pods can only come back to it. One
    workload has no nodeSelector and may go to any pool."""
    return Scenario(
        "pools", "node pools by nodeSelector, compute pool nearly full, LNU cpu 20/50",
        _pools_phases(), lambda sc, ns: _policy(sc, [_lnu(20, 50)], maxNoOfPodsToEvictPerNode=3))


def graceful() -> Scenario:
    """The pools cluster with terminationGracePeriodSeconds 10: an evicted pod stays on its
    node, Terminating, for 10 s (the harness, as a kubelet, then finishes the deletion). Its
    requests still count there while its replacement is scheduled, so some compute
    replacements find no room until the evicted pods are gone."""
    return Scenario(
        "graceful", "pools cluster, evicted pods terminate for 10 s, LNU cpu 20/50",
        _pools_phases(grace=10),
        lambda sc, ns: _policy(sc, [_lnu(20, 50)], maxNoOfPodsToEvictPerNode=3))


def most_allocated() -> Scenario:
    """kube-scheduler's MostAllocated scoring (a second kube-scheduler process whose profile
    `most-allocated` the pods name): two nodes take api and web (14 of 16 cpu); three nodes
    join and a worker workload arrives, most of which has to go to the new nodes; api shrinks
    from 8 to 4. HighNodeUtilization (cpu 45) empties the lightly used new nodes onto the first
    two."""
    ma = {"schedulerName": MOST_ALLOCATED}
    return Scenario(
        "most-allocated", "MostAllocated profile, HighNodeUtilization cpu 45", [
            Phase(nodes=_nodes("n", 2, "8", "32Gi", ["za", "zb"]),
                  workloads=[Workload("api", 8, "1", "2Gi", spec=ma),
                             Workload("web", 12, "500m", "1Gi", spec=ma)]),
            Phase(nodes=_nodes("n", 3, "8", "32Gi", ["za", "zb", "zc"], start=3),
                  workloads=[Workload("worker", 10, "500m", "1Gi", spec=ma)]),
            Phase(scale={"api": 4}),
        ],
        lambda sc, ns: _policy(sc, [("balance", "HighNodeUtilization",
                                     {"thresholds": {"cpu": 45}})]),
        most_allocated=True)


def scale(nodes: int = 200, added: int = 40, seed: int = 7) -> Scenario:
    """`nodes` nodes in three pools over three zones take about 2,700 pods (35 ReplicaSets, a
    few with spreading or anti-affinity); then `added` empty nodes join the general and
    compute pools. LowNodeUtilization, at most 25 evictions. With 200 nodes and more,
    kube-scheduler scores only a sample of the feasible nodes (percentageOfNodesToScore), from
    where its previous search stopped: the placements are not reproducible."""
    rng = random.Random(seed)
    zones = ["za", "zb", "zc"]
    general, highmem = nodes * 7 // 10, nodes * 3 // 20
    compute = nodes - general - highmem
    first = [*_nodes("general", general, "8", "32Gi", zones, labels={POOL: "general"}),
             *_nodes("highmem", highmem, "8", "64Gi", zones, labels={POOL: "highmem"}),
             *_nodes("compute", compute, "16", "32Gi", zones, labels={POOL: "compute"})]
    later = [*_nodes("general", added * 3 // 4, "8", "32Gi", zones, start=general + 1,
                     labels={POOL: "general"}),
             *_nodes("compute", added - added * 3 // 4, "16", "32Gi", zones,
                     start=compute + 1, labels={POOL: "compute"})]
    workloads: list[Workload] = []

    def fill(pool: str, cpu_total: float, count: int, sizes: list[tuple[str, str, float]],
             extra: Callable[[int, str], dict[str, Any]]) -> None:
        weights = [rng.uniform(0.5, 1.5) for _ in range(count)]
        for i, weight in enumerate(weights):
            cpu, memory, cores = rng.choice(sizes)
            name = f"{pool}-app-{i + 1}"
            replicas = max(2, round(cpu_total * weight / sum(weights) / cores))
            workloads.append(Workload(name, replicas, cpu, memory, guaranteed=rng.random() < 0.3,
                                      spec={"nodeSelector": {POOL: pool}, **extra(i, name)}))

    def general_extra(i: int, name: str) -> dict[str, Any]:
        if i % 8 == 3:
            return {"topologySpreadConstraints": [_spread(ZONE, 1, "ScheduleAnyway", name)]}
        if i % 8 == 5:
            return {"affinity": {"podAntiAffinity": _anti(HOSTNAME, name, 100)}}
        return {}

    fill("general", general * 8 * 0.74, 25,
         [("250m", "512Mi", 0.25), ("500m", "1Gi", 0.5), ("750m", "1536Mi", 0.75)],
         general_extra)
    fill("highmem", highmem * 8 * 0.45, 5, [("1", "8Gi", 1.0), ("500m", "4Gi", 0.5)],
         lambda i, name: {})
    fill("compute", compute * 16 * 0.55, 5, [("2", "2Gi", 2.0), ("1", "1Gi", 1.0)],
         lambda i, name: {})
    return Scenario(
        "scale", f"{nodes}+{added} nodes, 3 pools x 3 zones, LNU cpu 20/50, at most 25 "
        "evictions (sampled: percentageOfNodesToScore)",
        [Phase(nodes=first, workloads=workloads), Phase(nodes=later)],
        lambda sc, ns: _policy(sc, [_lnu(20, 50)], maxNoOfPodsToEvictTotal=25),
        deterministic=False, settle_timeout=900.0)


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "zones-lnu": zones_lnu, "zones-dup": zones_dup, "taints": taints,
    "anti-affinity": anti_affinity, "spread": spread, "pools": pools, "graceful": graceful,
    "most-allocated": most_allocated, "scale": scale,
}
DETERMINISTIC = [name for name, build in SCENARIOS.items() if build().deterministic]


# -- the cluster ----------------------------------------------------------------------------------

def stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ready(now: str) -> dict[str, str]:
    return {"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "desched placement fidelity: no kubelet", "lastHeartbeatTime": now,
            "lastTransitionTime": now}


def owner_of(pod: dict[str, Any]) -> str:
    refs = pod["metadata"].get("ownerReferences") or []
    return str(refs[0]["name"]) if refs else ""


def _unschedulable(pod: dict[str, Any]) -> bool:
    """kube-scheduler tried and found no node (not: the pod waits at a scheduling gate)."""
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _template_hash(template: dict[str, Any]) -> str:
    """A stand-in for the Deployment controller's pod-template-hash (10 characters)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return "".join("bcdfghjklmnpqrstvwxz2456789"[int(c, 16)] for c in digest[:10])


class Kube:
    """A real API server, as the scenarios use it (lightkube's sync client)."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self.client = Client(config=KubeConfig.from_file(kubeconfig),
                             field_manager="desched-fidelity")
        self.nodes: list[str] = []
        self._running: set[str] = set()  # pods already reported Running
        self._beat = 0.0

    def close(self) -> None:
        self.client.close()

    # -- cleanup ---------------------------------------------------------------------------------
    def cleanup(self) -> None:
        """Every namespace and node an earlier scenario left (label desched-fidelity). Once its
        namespace is terminating nothing creates a pod there again, and its pods are deleted at
        once: when none is left, no pod of the old scenario is on a node of the next (whose
        nodes have the same names); the namespace controller finishes removing the rest (the
        ReplicaSets, the namespace) in the background, seconds later."""
        namespaces = [ns.metadata.name for ns in self.client.list(Namespace, labels={LABEL: None})]
        for name in namespaces:
            self._ignore_missing(lambda n=name: self.client.delete(Namespace, n))
            for pod in self.client.list(Pod, namespace=name):
                self._ignore_missing(lambda p=pod.metadata.name, n=name: self.client.delete(
                    Pod, p, namespace=n, grace_period=0))
        for node in self.client.list(Node, labels={LABEL: None}):
            self._ignore_missing(lambda n=node.metadata.name: self.client.delete(Node, n))
        self._wait("the old namespaces' pods to go", lambda: not any(
            any(True for _ in self.client.list(Pod, namespace=name)) for name in namespaces),
            timeout=120)
        self.nodes = []
        self._running = set()

    # -- building --------------------------------------------------------------------------------
    def namespace(self, scenario: str) -> str:
        name = f"fid-{scenario}-{secrets.token_hex(2)}"
        self._create({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": name, "labels": {LABEL: scenario}}})
        try:  # kind-like clusters admit pods only once the default ServiceAccount exists
            self._create({"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": "default", "namespace": name}})
        except ApiError as err:
            if err.status.code != 409:
                raise
        return name

    def add_node(self, scenario: str, spec: NodeSpec) -> str:
        name = f"{scenario}-{spec.name}"
        labels = {HOSTNAME: name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  LABEL: scenario, **spec.labels}
        if spec.zone:
            labels |= {ZONE: spec.zone, REGION: "fidelity"}
        self._create({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": labels},
                      "spec": {"taints": spec.taints} if spec.taints else {}})
        resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods),
                     "ephemeral-storage": "100Gi"}
        self.client.patch(Node.Status, name, {"status": {
            "capacity": resources, "allocatable": resources, "conditions": [_ready(stamp())],
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.36.2", "architecture": "amd64",
                         "operatingSystem": "linux", "containerRuntimeVersion": "none",
                         "kernelVersion": "", "osImage": "", "kubeProxyVersion": "",
                         "machineID": "", "systemUUID": "", "bootID": ""}}},
            patch_type=PatchType.MERGE)
        self.nodes.append(name)
        return name

    def heartbeat(self, force: bool = False) -> None:
        """Report the nodes Ready again (a node lifecycle controller, where one runs, marks a
        node without heartbeats Unknown after 40-50 s)."""
        if not force and time.monotonic() - self._beat < 15:
            return
        self._beat = time.monotonic()
        now = stamp()
        self._parallel(lambda name: self.client.patch(
            Node.Status, name, {"status": {"conditions": [_ready(now)]}},
            patch_type=PatchType.MERGE), self.nodes)

    def add_workload(self, ns: str, scenario: str, w: Workload) -> None:
        resources: dict[str, Any] = {"requests": {"cpu": w.cpu, "memory": w.memory}}
        if w.guaranteed:
            resources["limits"] = dict(resources["requests"])
        spec = {"terminationGracePeriodSeconds": w.grace, "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "containers": [{"name": "app", "image": IMAGE, "resources": resources}],
                **w.spec}
        app = {NAME: w.name, "app.kubernetes.io/part-of": scenario}
        labels = {**app, "pod-template-hash": _template_hash({"labels": app, "spec": spec})}
        selector = {NAME: w.name, "pod-template-hash": labels["pod-template-hash"]}
        self._create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                      "metadata": {"name": w.name, "namespace": ns, "labels": labels},
                      "spec": {"replicas": w.replicas, "selector": {"matchLabels": selector},
                               "template": {"metadata": {"labels": labels}, "spec": spec}}})

    def finish(self, ns: str, pod: str) -> None:
        """A kubelet's last word on a deleted pod: its containers stopped, the deletion is
        done."""
        self._ignore_missing(lambda: self.client.delete(Pod, pod, namespace=ns, grace_period=0))

    def resize(self, ns: str, name: str, replicas: int) -> None:
        self.client.patch(ReplicaSet, name, {"spec": {"replicas": replicas}}, namespace=ns,
                          patch_type=PatchType.MERGE)

    # -- gated mode ------------------------------------------------------------------------------
    def hold(self, ns: str) -> None:
        """Pods the ReplicaSets create from now on wait at a scheduling gate."""
        for rs in self.client.list(ReplicaSet, namespace=ns):
            self.client.patch(ReplicaSet, rs.metadata.name, {"spec": {"template": {"spec": {
                "schedulingGates": [{"name": GATE}]}}}}, namespace=ns,
                patch_type=PatchType.MERGE)

    def replacements(self, ns: str, known: set[str], timeout: float) -> list[dict[str, Any]]:
        """Until every ReplicaSet has its replicas again: the pods not in `known`."""
        deadline = time.monotonic() + timeout
        while True:
            want = {rs.metadata.name: rs.spec.replicas
                    for rs in self.client.list(ReplicaSet, namespace=ns)}
            pods = self.pods(ns)
            have = Counter(owner_of(p) for p in pods)
            if all(have.get(name, 0) == count for name, count in want.items()):
                return [p for p in pods if p["metadata"]["name"] not in known]
            if time.monotonic() > deadline:
                raise TimeoutError(f"{ns}: replacements not created after {timeout:g}s")
            time.sleep(0.2)

    def release(self, ns: str, names: list[str], timeout: float = 60.0) -> None:
        """Lift the gate of each pod in turn, and wait until kube-scheduler has bound it (or
        found no node) before the next: one placement at a time, in this order."""
        for name in names:
            self.client.patch(Pod, name, {"spec": {"schedulingGates": None}}, namespace=ns,
                              patch_type=PatchType.MERGE)
            deadline = time.monotonic() + timeout
            while True:
                pod = self.client.get(Pod, name, namespace=ns).to_dict()
                if pod["spec"].get("nodeName") or _unschedulable(pod):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{ns}/{name}: not scheduled {timeout:g}s after its "
                                       f"gate was lifted")
                time.sleep(0.02)

    # -- pods ------------------------------------------------------------------------------------
    def pods(self, ns: str, terminating: bool = False) -> list[dict[str, Any]]:
        """The namespace's pods (but those being deleted, unless `terminating`), as dicts."""
        return [p for p in (pod.to_dict() for pod in self.client.list(Pod, namespace=ns))
                if terminating or not p["metadata"].get("deletionTimestamp")]

    def node_objects(self) -> list[dict[str, Any]]:
        return [self.client.get(Node, name).to_dict() for name in self.nodes]

    def mark_running(self, ns: str, pods: list[dict[str, Any]]) -> None:
        """What a kubelet would report for each bound pod: Running, Ready, a container
        running."""
        todo = [p for p in pods if p["spec"].get("nodeName")
                and p["metadata"]["name"] not in self._running
                and (p.get("status") or {}).get("phase") != "Running"]
        now = stamp()

        def report(pod: dict[str, Any]) -> None:
            name = pod["metadata"]["name"]
            conditions = [{"type": kind, "status": "True", "lastTransitionTime": now}
                          for kind in ("PodScheduled", "Initialized", "ContainersReady",
                                       "Ready")]
            try:
                self.client.patch(Pod.Status, name, {"status": {
                    "phase": "Running", "startTime": now, "conditions": conditions,
                    "hostIP": "10.255.0.1", "podIP": "10.255.0.2",
                    "containerStatuses": [{"name": "app", "image": IMAGE, "imageID": "",
                                           "ready": True, "started": True, "restartCount": 0,
                                           "state": {"running": {"startedAt": now}}}]}},
                    namespace=ns, patch_type=PatchType.MERGE)
            except ApiError as err:
                if err.status.code != 404:
                    raise
            self._running.add(name)
        self._parallel(report, todo)

    def settle(self, ns: str, timeout: float) -> list[dict[str, Any]]:
        """Until every ReplicaSet has its replicas, no pod is terminating and each pod is bound
        (and reported Running) or kube-scheduler found no node for it; the pods. Once every pod
        is bound nothing is left to happen; a pod kube-scheduler found no node for may yet be
        placed (it tries again when a pod goes), so then nothing must change for a second."""
        deadline = time.monotonic() + timeout
        last: tuple[tuple[str, str], ...] | None = None
        since = 0.0
        while True:
            self.heartbeat()
            want = {rs.metadata.name: rs.spec.replicas
                    for rs in self.client.list(ReplicaSet, namespace=ns)}
            everything = self.pods(ns, terminating=True)
            pods = [p for p in everything if not p["metadata"].get("deletionTimestamp")]
            self.mark_running(ns, pods)
            have = Counter(owner_of(p) for p in pods)
            done = (len(pods) == len(everything)
                    and all(have.get(name, 0) == count for name, count in want.items())
                    and all(p["spec"].get("nodeName") or _unschedulable(p) for p in pods))
            state = tuple(sorted((p["metadata"]["name"], p["spec"].get("nodeName") or "")
                                 for p in pods))
            now = time.monotonic()
            if done and all(p["spec"].get("nodeName") for p in pods):
                return pods
            if not done or state != last:
                last, since = state, now
            elif now - since >= 1.0:
                return pods
            if now > deadline:
                raise TimeoutError(f"{ns}: pods not settled after {timeout:g}s "
                                   f"(replicas wanted {dict(want)}, have {dict(have)})")
            time.sleep(0.3 if len(pods) < 500 else 1.0)

    # -- helpers ---------------------------------------------------------------------------------
    def _create(self, obj: dict[str, Any]) -> Any:
        return self.client.create(codecs.from_dict(obj))

    def _parallel(self, action: Callable[[Any], object], items: list[Any]) -> None:
        if len(items) < 8:
            for item in items:
                action(item)
            return
        with ThreadPoolExecutor(max_workers=4) as pool:
            for _ in pool.map(action, items):
                pass

    @staticmethod
    def _ignore_missing(action: Callable[[], object]) -> None:
        try:
            action()
        except ApiError as err:
            if err.status.code != 404:
                raise

    @staticmethod
    def _wait(what: str, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
            time.sleep(0.2)


class Timeline:
    """Pod events in the namespace while desched runs (a watch), with the time each arrived:
    when each pod was evicted, each replacement created and bound."""

    def __init__(self, kubeconfig: str, ns: str, known: Iterable[str],
                 finish: Callable[[str], None] | None = None) -> None:
        self.client = Client(config=KubeConfig.from_file(kubeconfig),
                             field_manager="desched-fidelity")
        self.ns = ns
        self.known = set(known)
        # What a kubelet does when a pod is deleted with a grace period: stop it and finish the
        # deletion once the grace period is over (here: call `finish(pod)` then).
        self.finish = finish
        self._timers: list[threading.Timer] = []
        self._deleting: set[str] = set()
        self.events: list[tuple[float, str, str, str]] = []  # (time, what, pod, node)
        self._seen: set[str] = set()
        self._bound: set[str] = set()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()  # no event is recorded once the watching stopped
        self.t0 = 0.0
        self._thread = threading.Thread(target=self._watch, daemon=True)
        if not self.known:
            self._synced.set()

    def __enter__(self) -> Timeline:
        self._thread.start()
        self._synced.wait(timeout=30)
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop recording at once; the watch thread (a daemon, blocked until the stream's next
        event or its end) records nothing more and ends then."""
        with self._lock:
            self._stop.set()
        for timer in self._timers:
            timer.cancel()
        self.client.close()

    def _watch(self) -> None:
        try:
            for kind, pod in self.client.watch(Pod, namespace=self.ns):
                with self._lock:
                    if self._stop.is_set():
                        return
                    self._record(kind, pod)
        except Exception:  # the client closed under the watch, or the namespace went
            self._synced.set()

    def _record(self, kind: str, pod: Pod) -> None:
        """One event of the watch (under the lock)."""
        name = pod.metadata.name
        node = pod.spec.nodeName or ""
        now = time.monotonic()
        if kind == "ADDED" and name in self.known:
            self._seen.add(name)
            if node:
                self._bound.add(name)
            if self._seen >= self.known:
                self._synced.set()
            return
        if kind == "DELETED" or pod.metadata.deletionTimestamp is not None:
            if name not in self._deleting:  # evicted (deleted at once, or terminating)
                self._deleting.add(name)
                self.events.append((now, "evicted" if name in self.known else "deleted",
                                    name, node))
                if kind == "DELETED":  # no terminating phase seen: gone already
                    self.events.append((now, "gone", name, node))
                grace = pod.metadata.deletionGracePeriodSeconds or 0
                if kind != "DELETED" and self.finish is not None:
                    timer = threading.Timer(grace, self.finish, args=(name,))
                    timer.daemon = True
                    timer.start()
                    self._timers.append(timer)
            elif kind == "DELETED":
                self.events.append((now, "gone", name, node))
            self._seen.add(name)
            return
        if name not in self._seen:
            self._seen.add(name)
            self.events.append((now, "created", name, node))
        if node and name not in self._bound:
            self._bound.add(name)
            self.events.append((now, "bound", name, node))

    def wait_seen(self, bound: set[str], timeout: float) -> None:
        """Until the watch has seen each of these pods bound (or `timeout` is over)."""
        deadline = time.monotonic() + timeout
        while not bound <= self._bound and time.monotonic() < deadline:
            time.sleep(0.05)

    def created(self) -> list[str]:
        """Pods created while watching, in the order their creation was seen."""
        return [pod for _, what, pod, _ in self.events if what == "created"]

    def summary(self) -> dict[str, Any]:
        """The order of things: how far evictions and placements interleave."""
        events = [(round(t - self.t0, 3), what, pod, node) for t, what, pod, node in self.events]
        evicted = [e for e in events if e[1] == "evicted"]
        created = [e for e in events if e[1] == "created"]
        bound = [e for e in events if e[1] == "bound"]
        last_eviction = evicted[-1][0] if evicted else None
        return {
            "evictions": len(evicted),
            "firstEviction": evicted[0][0] if evicted else None,
            "lastEviction": last_eviction,
            "createdBeforeLastEviction": sum(1 for e in created if last_eviction is not None
                                             and e[0] < last_eviction),
            "boundBeforeLastEviction": sum(1 for e in bound if last_eviction is not None
                                           and e[0] < last_eviction),
            "lastBind": bound[-1][0] if bound else None,
            "events": events,
        }


# -- desched --------------------------------------------------------------------------------------

# The desched source tree the commands run (None: the installed one, i.e. the working tree),
# and the revision it was extracted from. --desched-rev sets both.
DESCHED_SRC: Path | None = None
DESCHED_REV: str | None = None


def desched(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`desched ARGS` as a process, as a user runs it; raises on a non-zero exit."""
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)  # only --kubeconfig names the cluster
    if DESCHED_SRC is not None:
        env["PYTHONPATH"] = str(DESCHED_SRC)
    proc = subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"desched {' '.join(args)} exited {proc.returncode}:\n"
                           f"{proc.stderr[-3000:]}")
    return proc


def use_revision(rev: str, workdir: Path) -> None:
    """Run desched from `git archive REV src` (a committed state of the code, without the
    working tree's edits in progress)."""
    global DESCHED_SRC, DESCHED_REV
    full = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                          capture_output=True, text=True, check=True).stdout.strip()
    target = workdir / f"desched-{full[:12]}"
    if not (target / "src" / "desched").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", full, "src"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    DESCHED_SRC, DESCHED_REV = target / "src", full


def has_scheduler_config() -> bool:
    """Whether this desched's simulate takes --scheduler-config (being added)."""
    return "--scheduler-config" in desched("simulate", "--help").stdout


def commit() -> str:
    """The code desched runs: the revision given, else HEAD and whether src/ has edits."""
    rev = DESCHED_REV or "HEAD"
    # The last commit that changed src/ (the bench's own commits do not change desched).
    proc = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--oneline", rev, "--", "src"],
                          capture_output=True, text=True, check=False)
    line = proc.stdout.strip()
    if len(line) > 90:
        line = line[:87] + "..."
    if DESCHED_REV is not None:
        return line + " (git archive of that commit)"
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return line + (" + uncommitted changes in src/ (working tree)" if dirty else "")


def evicted_in_log(stderr: str) -> list[str]:
    """Pods `desched run --log-format json` logged as evicted (namespace/name)."""
    pods = []
    for line in stderr.splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if str(entry.get("event", "")).startswith("Evicted pod") and "pod" in entry:
            pods.append(str(entry["pod"]))
    return pods


# -- the second kube-scheduler (MostAllocated) ----------------------------------------------------

def scheduler_config(kubeconfig: str, workdir: Path) -> Path:
    """bench/fidelity/most-allocated.yaml with the cluster's kubeconfig filled in: the
    configuration the second kube-scheduler runs and desched simulates."""
    config = yaml.safe_load((DATA / "most-allocated.yaml").read_text(encoding="utf-8"))
    config["clientConnection"]["kubeconfig"] = str(Path(kubeconfig).resolve())
    path = workdir / "most-allocated.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def find_kube_scheduler(kubeconfig: str, given: str | None) -> str | None:
    """--kube-scheduler, else realk8s's binary beside its kubeconfig, else $PATH."""
    if given:
        return given
    beside = Path(kubeconfig).resolve().parent / "bin" / "kube-scheduler"
    if beside.is_file():
        return str(beside)
    return shutil.which("kube-scheduler")


class SecondScheduler:
    """kube-scheduler --config F, run for one scenario (its log in the work directory)."""

    def __init__(self, binary: str, config: Path, log: Path) -> None:
        self.binary, self.config, self.log = binary, config, log
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> SecondScheduler:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([self.binary, f"--config={self.config}",
                                          "--secure-port=0", "--v=2"],
                                         stdout=out, stderr=subprocess.STDOUT)
        time.sleep(2)
        if self.proc.poll() is not None:
            raise RuntimeError(f"the second kube-scheduler exited: "
                               f"{self.log.read_text(errors='replace')[-2000:]}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- comparison -----------------------------------------------------------------------------------

_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6,
          "G": 10**9, "T": 10**12, "m": 1e-3}


def quantity(text: str | int | float) -> float:
    value = str(text)
    for suffix, factor in _UNITS.items():
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value)


def cpu_request(pod: dict[str, Any]) -> float:
    return sum(quantity(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0))
               for c in pod["spec"]["containers"])


def node_classes(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, str]:
    """node -> class id. Nodes are in one class when their allocatable, labels (but the
    hostname), taints, unschedulable flag and pods before the cycle (owners, counted) are
    the same."""
    on: dict[str, Counter[str]] = {n["metadata"]["name"]: Counter() for n in nodes}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node in on:
            on[node][owner_of(pod)] += 1
    keys: dict[str, str] = {}
    for n in nodes:
        name = n["metadata"]["name"]
        labels = {k: v for k, v in (n["metadata"].get("labels") or {}).items() if k != HOSTNAME}
        taints = sorted(json.dumps(t, sort_keys=True) for t in n["spec"].get("taints") or [])
        keys[name] = json.dumps([n["status"]["allocatable"], labels, taints,
                                 bool(n["spec"].get("unschedulable")),
                                 sorted(on[name].items())], sort_keys=True)
    ids: dict[str, str] = {}
    out: dict[str, str] = {}
    for name in sorted(keys):
        # A class is named after its first node, with the number of nodes it holds.
        ids.setdefault(keys[name], name)
    sizes = Counter(keys.values())
    for name, key in keys.items():
        size = sizes[key]
        out[name] = ids[key] if size == 1 else f"{ids[key]} (+{size - 1})"
    return out


def utilization(nodes: list[dict[str, Any]], placed: Iterable[tuple[str, float]]
                ) -> dict[str, float]:
    """Per node, cpu requests as a percentage of allocatable cpu."""
    used = {n["metadata"]["name"]: 0.0 for n in nodes}
    for node, cpu in placed:
        if node in used:
            used[node] += cpu
    return {n["metadata"]["name"]: 100.0 * used[n["metadata"]["name"]]
            / quantity(n["status"]["allocatable"]["cpu"]) for n in nodes}


def spread_of(values: dict[str, float]) -> dict[str, float]:
    points = list(values.values())
    mean = sum(points) / len(points)
    std = math.sqrt(sum((v - mean) ** 2 for v in points) / len(points))
    return {"std": round(std, 2), "max": round(max(points), 2), "mean": round(mean, 2)}


def multiset_match(predicted: list[tuple[str, str]], real: list[tuple[str, str]]) -> int:
    """How many predicted (owner, class) placements a real one matches, one to one."""
    return sum((Counter(predicted) & Counter(real)).values())


_REPLACEMENT = re.compile(r"-r\d+$")
WORLDS = 64  # replay: at most this many orders of decisions followed


def replay(snapshot: Path, ns: str, events: list[tuple[float, str, str, str]],
           owners: dict[str, str], gated: bool = False, scheduler_config: Path | None = None
           ) -> list[dict[str, str | None]]:
    """desched's model (kube-default, in process) placing the replacements in the order the
    timeline recorded (the watch's order, the server's): each replacement in a state of the
    cluster kube-scheduler could have scheduled it in, anywhere between its creation and its
    bind (gated: just before its bind), with the evicted pods not yet gone still on their nodes,
    terminating, and the replacements bound before it where the model put them. Each distinct
    choice is followed: the possible outcomes, as {replacement: node or None}.

    An eviction writes the pod's deletionTimestamp and then deletes it; the ReplicaSet
    controller creates the replacement on the first write, and on a loaded server kube-scheduler
    may place it before the second, with the evicted pod's requests still counted on its node.
    `desched simulate` assumes the pod is gone (terminationGracePeriodSeconds 0) and that each
    replacement is placed before the next eviction: the order an idle server keeps."""
    if DESCHED_SRC is not None and str(DESCHED_SRC) not in sys.path:
        sys.path.insert(0, str(DESCHED_SRC))
    import msgspec

    from desched.scheduler.config import load_scheduler_config
    from desched.scheduler.kube_default import KubeDefault
    from desched.scheduler.placement import bind, replacement
    from desched.scheduler.profile import DEFAULT_CONFIG
    from desched.snapshot.clock import snapshot_clock
    from desched.snapshot.loader import load_snapshot

    snap = load_snapshot([str(snapshot)], warn=lambda text: None)
    config = (load_scheduler_config(str(scheduler_config))[0] if scheduler_config is not None
              else DEFAULT_CONFIG)
    model = KubeDefault(config)
    now = snapshot_clock(snap).now
    nodes = snap.ready_nodes()
    base = {pod.name: pod for pod in snap.pods_by_namespace.get(ns, {}).values()}
    end = len(events)
    evicted: dict[str, int] = {}
    gone: dict[str, int] = {}
    created: dict[str, int] = {}
    bound: dict[str, int] = {}
    for i, (_, what, name, _node) in enumerate(events):
        if what == "evicted" and name in base:
            evicted.setdefault(name, i)
        elif what == "gone" and name in base:
            gone.setdefault(name, i)
        elif what == "created":
            created.setdefault(name, i)
        elif what == "bound" and name in created:
            bound.setdefault(name, i)
    template: dict[str, Any] = {}  # owner -> one of its evicted pods
    for name in evicted:
        template.setdefault(owners.get(name, ""), base[name])
    fresh: dict[str, Any] = {}
    for name in created:
        old = template.get(owners.get(name, ""))
        if old is not None:
            pod = replacement(old, 1, now)
            fresh[name] = msgspec.structs.replace(pod, metadata=msgspec.structs.replace(
                pod.metadata, name=name, uid=f"{old.metadata.uid}-{name}"))
    dying = {name: msgspec.structs.replace(base[name], metadata=msgspec.structs.replace(
        base[name].metadata, deletion_timestamp=now)) for name in evicted}
    placed: dict[tuple[str, str], Any] = {}

    def where(name: str, at: int, world: dict[str, str | None]) -> str | None:
        """The model's node for replacement `name` in the state after events[:at + 1]."""
        removed = [base[x] for x, i in evicted.items() if i <= at]
        added = [dying[x] for x, i in evicted.items() if i <= at and gone.get(x, end) > at]
        for other, i in bound.items():
            node = world.get(other)
            if i <= at and other != name and node:
                if (other, node) not in placed:
                    placed[other, node] = bind(fresh[other], node, now)
                added.append(placed[other, node])
        for pod in removed:
            snap.remove_pod(pod)
        for pod in added:
            snap.add_pod(pod)
        try:
            return model.place(fresh[name], nodes, snap, now).node
        finally:
            for pod in added:
                snap.remove_pod(pod)
            for pod in removed:
                snap.add_pod(pod)

    changes = {i for i, e in enumerate(events) if e[1] in ("evicted", "gone", "bound")}
    worlds: list[dict[str, str | None]] = [{}]
    for name in sorted(fresh, key=lambda n: (bound.get(n, end), created[n])):
        last = bound.get(name, end) - 1
        moments = [last] if gated else [created[name], *(
            i for i in range(created[name] + 1, last + 1) if i in changes)]
        grown: list[dict[str, str | None]] = []
        for world in worlds:
            choices: list[str | None] = []
            for at in moments:
                node = where(name, at, world)
                if node not in choices:
                    choices.append(node)
            if len(choices) > 1 and None in choices:  # it waits until a node fits
                choices.remove(None)
            grown += [{**world, name: node} for node in choices]
        worlds = grown[:WORLDS]
    return worlds




def compare(nodes: list[dict[str, Any]], before: list[dict[str, Any]],
            after: list[dict[str, Any]], simulated: dict[str, Any],
            created: list[str] | None = None,
            worlds: list[dict[str, str | None]] | None = None) -> dict[str, Any]:
    """The prediction (simulate's JSON) against what happened (pods before and after; the
    replacements in the order they were created when `created` says it). `worlds`: the model's
    placements in the order the timeline recorded (`replay`); when one of them matches better
    than simulate's, whose order an idle server keeps, the server took another order and the
    placements and the balance are judged by it ("order": "timeline")."""
    ns = before[0]["metadata"]["namespace"] if before else ""
    by_name = {p["metadata"]["name"]: p for p in before}
    classes = node_classes(nodes, before)

    def klass(node: str | None) -> str:
        return classes.get(node or "", PENDING if not node else f"{node} (not scenario)")

    pred_evicted = sorted(e["pod"] for e in simulated["evictions"] if e["namespace"] == ns)
    after_names = {p["metadata"]["name"] for p in after}
    real_evicted = sorted(name for name in by_name if name not in after_names)
    pred_placed: list[dict[str, Any]] = []
    for entry in simulated.get("rescheduled", []):
        namespace, _, name = entry["pod"].partition("/")
        if namespace != ns:
            continue
        # `replaces` names the evicted pod (newer desched); else the name tells (`<pod>-r1`).
        replaces = str(entry.get("replaces") or "").partition("/")[2]
        old = by_name.get(replaces or _REPLACEMENT.sub("", name))
        pred_placed.append({"pod": name, "owner": owner_of(old) if old else "?",
                            "cpu": cpu_request(old) if old else 0.0, "node": entry["node"],
                            "class": klass(entry["node"]),
                            "tiedNodes": int(entry.get("tiedNodes") or 1),
                            # kube-scheduler would score only a sample of the nodes (from 100)
                            "scoredNodes": entry.get("scoredNodes")})
    order = {name: i for i, name in enumerate(created or [])}
    new = sorted((p for p in after if p["metadata"]["name"] not in by_name),
                 key=lambda p: (order.get(p["metadata"]["name"], len(order)),
                                p["metadata"].get("creationTimestamp") or ""))
    real_placed = [{"pod": p["metadata"]["name"], "owner": owner_of(p), "cpu": cpu_request(p),
                    "node": p["spec"].get("nodeName"),
                    "class": klass(p["spec"].get("nodeName"))} for p in new]
    sizes = Counter(classes.values())
    # A tie among more nodes than the predicted node's class holds spans classes: kube-scheduler
    # tosses a coin between them, and the outcome by class is not reproducible.
    across = sum(1 for p in pred_placed if p["tiedNodes"] > sizes.get(p["class"], 1))
    real_pairs = [(p["owner"], p["class"]) for p in real_placed]
    matched = multiset_match([(p["owner"], p["class"]) for p in pred_placed], real_pairs)
    same_node = multiset_match([(p["owner"], p["node"] or PENDING) for p in pred_placed],
                               [(p["owner"], p["node"] or PENDING) for p in real_placed])

    gone = set(pred_evicted)
    predicted_after = [(p["spec"].get("nodeName"), cpu_request(p)) for p in before
                       if p["metadata"]["name"] not in gone]
    predicted_after += [(p["node"], p["cpu"]) for p in pred_placed if p["node"]]
    real_after = [(p["spec"].get("nodeName"), cpu_request(p)) for p in after]
    util_before = utilization(nodes, [(p["spec"].get("nodeName"), cpu_request(p))
                                      for p in before])
    util_pred = utilization(nodes, predicted_after)
    util_real = utilization(nodes, real_after)
    real_balance = spread_of(util_real)

    def off(util: dict[str, float]) -> float:
        figures = spread_of(util)
        return max(abs(figures[m] - real_balance[m]) for m in ("std", "max"))

    simulate_figures = {"matched": matched, "sameNode": same_node,
                        "balance": spread_of(util_pred)}
    # The model in the order the server took (replay), when it explains more than simulate's.
    judged_by, replayed = "simulate", None
    best = (matched, -off(util_pred))
    survivors = [(p["spec"].get("nodeName"), cpu_request(p)) for p in before
                 if p["metadata"]["name"] not in set(real_evicted)]
    for number, world in enumerate(worlds or [], 1):
        if set(world) != {p["pod"] for p in real_placed}:
            continue  # not every replacement replayed (another owner's, say)
        placed = [{"pod": p["pod"], "owner": p["owner"], "cpu": p["cpu"],
                   "node": world[p["pod"]], "class": klass(world[p["pod"]])}
                  for p in real_placed]
        util = utilization(nodes, [*survivors, *((p["node"], p["cpu"]) for p in placed
                                                 if p["node"])])
        score = (multiset_match([(p["owner"], p["class"]) for p in placed], real_pairs),
                 -off(util))
        if score > best:
            best, replayed, util_pred = score, placed, util
            judged_by = f"timeline ({number} of {len(worlds or [])})"
            matched = score[0]
            same_node = multiset_match([(p["owner"], p["node"] or PENDING) for p in placed],
                                       [(p["owner"], p["node"] or PENDING) for p in real_placed])
    total = max(len(pred_placed), len(real_placed))
    return {
        "evictions": {"predicted": pred_evicted, "real": real_evicted,
                      "same": pred_evicted == real_evicted,
                      "common": len(set(pred_evicted) & set(real_evicted))},
        "placements": {"predicted": pred_placed, "real": real_placed, "matched": matched,
                       "total": total, "sameNode": same_node,
                       "tied": sum(1 for p in pred_placed if p["tiedNodes"] > 1),
                       "tiedAcrossClasses": across,
                       "sampled": sum(1 for p in pred_placed if p["scoredNodes"]),
                       "fraction": round(matched / total, 4) if total else 1.0,
                       "order": judged_by, "replayed": replayed,
                       "worlds": len(worlds) if worlds is not None else None,
                       "simulate": simulate_figures},
        "balance": {"before": spread_of(util_before), "predicted": spread_of(util_pred),
                    "real": real_balance},
        "utilization": {"before": _rounded(util_before), "predicted": _rounded(util_pred),
                        "real": _rounded(util_real)},
        "classes": {name: classes[name] for name in sorted(classes)},
    }


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 2) for k, v in sorted(values.items())}


# -- one scenario ---------------------------------------------------------------------------------

# Scenarios delete every node and namespace labelled desched-fidelity: on one machine, runs of the
# bench and of tests/e2e/test_e2e_placement.py (and its xdist workers) take turns.
LOCK = Path("/tmp/desched-fidelity.lock")


@contextlib.contextmanager
def cluster_turn() -> Iterator[None]:
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass
class Options:
    kubeconfig: str
    workdir: Path
    kube_scheduler: str | None = None
    keep: bool = False
    # interleaved: as a cluster does it (each replacement is created and scheduled as soon as
    # its pod is evicted, while desched goes on evicting). gated: replacements wait at a
    # scheduling gate until the run is over, then are released one at a time in the order
    # they were created: every eviction first, then every placement (what desched's model
    # assumed before db34714); it tells scoring errors from ordering errors.
    mode: str = "interleaved"
    log: Callable[[str], None] = field(default=lambda text: print(text, file=sys.stderr,
                                                                     flush=True))


def build(kube: Kube, scenario: Scenario, opts: Options) -> tuple[str, list[dict[str, Any]]]:
    """The scenario's cluster, settled: its namespace and pods."""
    kube.cleanup()
    ns = kube.namespace(scenario.name)
    pods: list[dict[str, Any]] = []
    for number, phase in enumerate(scenario.phases, 1):
        for spec in phase.nodes:
            kube.add_node(scenario.name, spec)
        for workload in phase.workloads:
            kube.add_workload(ns, scenario.name, workload)
        for name, replicas in phase.scale.items():
            kube.resize(ns, name, replicas)
        started = time.monotonic()
        pods = kube.settle(ns, scenario.settle_timeout)
        opts.log(f"  phase {number}: {len(kube.nodes)} nodes, {len(pods)} pods "
                 f"({time.monotonic() - started:.1f} s)")
    return ns, pods


def run_scenario(scenario: Scenario, opts: Options,
                 kube: Kube | None = None) -> dict[str, Any]:
    """Build, predict, run, compare (waiting for the cluster's turn). The result is JSON-ready;
    `skipped` says why a scenario could not run."""
    with cluster_turn():
        return _run_scenario(scenario, opts, kube)


def _run_scenario(scenario: Scenario, opts: Options, kube: Kube | None) -> dict[str, Any]:
    result: dict[str, Any] = {"scenario": scenario.name, "mode": opts.mode,
                              "summary": scenario.summary,
                              "deterministic": scenario.deterministic, "commit": commit(),
                              "reported": scenario.reported}
    extra: list[str] = []
    binary = None
    if scenario.most_allocated:
        if not has_scheduler_config():
            result["skipped"] = "this desched's simulate has no --scheduler-config"
            return result
        binary = find_kube_scheduler(opts.kubeconfig, opts.kube_scheduler)
        if binary is None:
            result["skipped"] = "no kube-scheduler binary for the second scheduler " \
                                "(--kube-scheduler)"
            return result
    work = opts.workdir / f"{scenario.name}-{opts.mode}"
    work.mkdir(parents=True, exist_ok=True)
    own = kube is None
    kube = kube or Kube(opts.kubeconfig)
    second: SecondScheduler | None = None
    try:
        if binary is not None:
            config = scheduler_config(opts.kubeconfig, work)
            extra = ["--scheduler-config", str(config)]
            second = SecondScheduler(binary, config, work / "kube-scheduler.log").__enter__()
        opts.log(f"{scenario.name}: building")
        ns, before = build(kube, scenario, opts)
        nodes = kube.node_objects()
        policy = work / "policy.yaml"
        policy.write_text(yaml.safe_dump(scenario.policy(scenario.name, ns), sort_keys=False),
                          encoding="utf-8")
        snap = work / "snap.json"
        kube.heartbeat(force=True)
        desched("snapshot", "--kubeconfig", opts.kubeconfig, "--out", str(snap))
        before = kube.pods(ns)  # the same state as the snapshot: the cluster is settled
        started = time.monotonic()
        sim = desched("simulate", "--policy", str(policy), "--snapshot", str(snap),
                      "--reschedule", "--scheduler", "kube-default", *extra,
                      "--output", "json")
        result["simulateSeconds"] = round(time.monotonic() - started, 2)
        (work / "simulate.json").write_text(sim.stdout, encoding="utf-8")
        simulated = json.loads(sim.stdout)
        opts.log(f"{scenario.name}: simulated {len(simulated['evictions'])} evictions; "
                 f"running desched ({opts.mode})")
        known = {p["metadata"]["name"] for p in before}
        if opts.mode == "gated":
            kube.hold(ns)
        with Timeline(opts.kubeconfig, ns, known, lambda pod: kube.finish(ns, pod)) as timeline:
            run = desched("run", "--once", "--policy", str(policy), "--kubeconfig",
                          opts.kubeconfig, "--log-format", "json")
            run_done = time.monotonic() - timeline.t0
            if opts.mode == "gated":
                waiting = {p["metadata"]["name"] for p in
                           kube.replacements(ns, known, scenario.settle_timeout)}
                seen = [name for name in timeline.created() if name in waiting]
                kube.release(ns, seen + sorted(waiting - set(seen)))
            after = kube.settle(ns, scenario.settle_timeout)
            # The watch has seen what the list shows (the replay reads its order).
            timeline.wait_seen({p["metadata"]["name"] for p in after if p["spec"].get("nodeName")
                                and p["metadata"]["name"] not in known}, timeout=30)
        (work / "run.log").write_text(run.stderr, encoding="utf-8")
        compared = compare(nodes, before, after, simulated, timeline.created())
        pl, bal = compared["placements"], compared["balance"]
        if pl["matched"] < pl["total"] or bal["predicted"] != bal["real"]:
            # Did the server take another order than simulate assumes? The model in its order.
            owners = {p["metadata"]["name"]: owner_of(p) for p in [*before, *after]}
            worlds = replay(snap, ns, timeline.summary()["events"], owners,
                            gated=opts.mode == "gated",
                            scheduler_config=Path(extra[1]) if extra else None)
            compared = compare(nodes, before, after, simulated, timeline.created(), worlds)
        result.update(compared)
        result["loggedEvictions"] = sorted(p.partition("/")[2] for p in evicted_in_log(run.stderr)
                                           if p.startswith(f"{ns}/"))
        result["timeline"] = timeline.summary() | {"runExited": round(run_done, 3)}
        result["cluster"] = {"nodes": len(nodes), "pods": len(before), "namespace": ns}
    finally:
        if second is not None:
            second.__exit__(None, None, None)
        if not opts.keep:
            try:
                kube.cleanup()
            except Exception as err:  # keep the result; the next scenario cleans up again
                opts.log(f"{scenario.name}: cleanup failed: {err}")
        if own:
            kube.close()
    (work / "result.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


# -- report ---------------------------------------------------------------------------------------

def table(results: list[dict[str, Any]]) -> str:
    """The summary table (one mode's results)."""
    head = ("scenario", "evictions pred/real (same set)", "replacements on predicted class",
            "std after pred vs real", "max after pred vs real")
    rows: list[tuple[str, ...]] = []
    for r in results:
        name = r["scenario"] + ("" if r.get("deterministic", True) else " (sampled)")
        if "skipped" in r:
            reason = r["skipped"].splitlines()[0]
            reason = reason if len(reason) <= 60 else reason[:57] + "..."
            rows.append((name, "skipped: " + reason, "", "", ""))
            continue
        ev, pl, bal = r["evictions"], r["placements"], r["balance"]
        same = "yes" if ev["same"] else f"no, {ev['common']} common"
        rows.append((
            name, f"{len(ev['predicted'])}/{len(ev['real'])} ({same})",
            f"{pl['matched']} of {pl['total']} ({100 * pl['fraction']:.0f} %; "
            f"same node {pl['sameNode']})",
            f"{bal['predicted']['std']:.1f} vs {bal['real']['std']:.1f}",
            f"{bal['predicted']['max']:.1f} vs {bal['real']['max']:.1f}"))
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]

    def line(row: tuple[str, ...]) -> str:
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |"
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *(line(row) for row in rows)])


def details(r: dict[str, Any]) -> str:
    """Per scenario: where the replacements went, predicted and real, and the order of events."""
    if "skipped" in r:
        return f"{r['scenario']} [{r.get('mode', '')}]: skipped: {r['skipped']}"
    lines = [f"{r['scenario']} [{r['mode']}]: {r['summary']} ({r['cluster']['nodes']} nodes, "
             f"{r['cluster']['pods']} pods; simulate {r['simulateSeconds']} s)"]
    if r.get("reported"):
        lines.append(f"  issue reported: {r['reported']}")
    ev = r["evictions"]
    if not ev["same"]:
        lines.append(f"  evicted only in the prediction: "
                     f"{sorted(set(ev['predicted']) - set(ev['real']))}")
        lines.append(f"  evicted only for real: {sorted(set(ev['real']) - set(ev['predicted']))}")
    pl = r["placements"]
    sides = [("predicted", pl["predicted"]), ("real", pl["real"])]
    if pl.get("replayed"):
        # The server took another order than simulate assumes (an evicted pod still there
        # when its replacement was scheduled, say): the model in that order explains more.
        sim = pl["simulate"]
        lines.append(f"  order: {pl['order']} (simulate's order: {sim['matched']} of "
                     f"{pl['total']} on the predicted class, balance std/max "
                     f"{sim['balance']['std']:.1f}/{sim['balance']['max']:.1f})")
        sides.insert(1, ("replayed", pl["replayed"]))
    for side, placements in sides:
        by_owner: dict[str, Counter[str]] = {}
        for p in placements:
            by_owner.setdefault(p["owner"], Counter())[p["class"]] += 1
        text = "; ".join(f"{owner}: " + ", ".join(f"{k} x{n}" for k, n in sorted(c.items()))
                         for owner, c in sorted(by_owner.items()))
        lines.append(f"  {side:9} {text}")
    if pl.get("tied"):
        lines.append(f"  ties: {pl['tied']} of {len(pl['predicted'])} predictions chose among "
                     f"equally scored nodes, {pl['tiedAcrossClasses']} among more nodes than "
                     f"the chosen node's class holds (kube-scheduler picks one at random; the "
                     f"classes may still come out the same)")
    if pl.get("sampled"):
        lines.append(f"  sampled: for {pl['sampled']} of {len(pl['predicted'])} predictions "
                     f"kube-scheduler scores only a sample of the feasible nodes "
                     f"(percentageOfNodesToScore), from where its previous search stopped")
    b = r["balance"]
    lines.append(f"  balance std/max: before {b['before']['std']:.1f}/{b['before']['max']:.1f}, "
                 f"predicted {b['predicted']['std']:.1f}/{b['predicted']['max']:.1f}, "
                 f"real {b['real']['std']:.1f}/{b['real']['max']:.1f}")
    t = r["timeline"]
    if t["evictions"]:
        lines.append(f"  timeline: {t['evictions']} evictions from {t['firstEviction']:.3f} s to "
                     f"{t['lastEviction']:.3f} s; {t['createdBeforeLastEviction']} replacements "
                     f"created and {t['boundBeforeLastEviction']} bound before the last "
                     f"eviction; last bind {t['lastBind']} s; desched exited "
                     f"{t['runExited']:.3f} s")
    return "\n".join(lines)


def merge(paths: list[Path]) -> list[dict[str, Any]]:
    """Saved results (--out files) as one list: a later file's results for a scenario and mode
    replace an earlier file's (a rerun)."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for path in paths:
        fresh: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in json.loads(path.read_text(encoding="utf-8"))["results"]:
            fresh.setdefault((r["scenario"], str(r.get("mode"))), []).append(r)
        runs.update(fresh)
    order = {name: i for i, name in enumerate(SCENARIOS)}
    return [r for key in sorted(runs, key=lambda k: (order.get(k[0], len(order)), k[1]))
            for r in runs[key]]


def report(merged: list[dict[str, Any]], files: int) -> str:
    """The details and tables of `merged` results."""
    heads = sorted({r.get("commit", "?") for r in merged})
    out = [f"# placement fidelity, desched {' / '.join(heads)} (from {files} file(s))"]
    out += [details(r) for r in merged]
    for mode in MODES:
        chosen = [r for r in merged if r.get("mode", mode) == mode]
        if chosen:
            out.append(f"\n{mode}: desched {' / '.join(heads)}\n" + table(chosen))
    return "\n".join(out)


# -- realk8s --------------------------------------------------------------------------------------

def start_realk8s(root: Path) -> str:
    env = dict(os.environ, RK8S_SCHEDULER="1",
               RK8S_CONTROLLERS="namespace,disruption,replicaset,deployment")
    proc = subprocess.run([str(root / "start.sh"), "--clean"], capture_output=True, text=True,
                          env=env, check=False, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"realk8s start.sh failed: {proc.stderr[-2000:]}")
    return proc.stdout.strip().splitlines()[-1]


def stop_realk8s(root: Path) -> None:
    subprocess.run([str(root / "stop.sh")], capture_output=True, check=False, timeout=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", help="admin kubeconfig of the control plane")
    parser.add_argument("--realk8s", type=Path,
                        help="start this realk8s (start.sh --clean with the scheduler and the "
                             "ReplicaSet controller) and stop it at the end")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS),
                        help="repeatable; default: all")
    parser.add_argument("--out", type=Path, help="write the results here (JSON)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/desched-fidelity"),
                        help="policies, snapshots, simulate output and logs per scenario")
    parser.add_argument("--kube-scheduler", help="kube-scheduler binary for the MostAllocated "
                        "scenario (default: realk8s's, beside the kubeconfig)")
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both",
                        help="interleaved: replacements are scheduled while desched still "
                             "evicts, as in any cluster; gated: they wait until the run is "
                             "over and are placed one by one (all evictions first); "
                             "default both")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each scenario (and mode) this many times")
    parser.add_argument("--desched-rev", help="run desched as committed at this revision "
                        "(git archive), not the working tree")
    parser.add_argument("--keep", action="store_true",
                        help="leave the last scenario's cluster in place")
    parser.add_argument("--report", type=Path, nargs="+", metavar="JSON",
                        help="print the details and tables of saved results (--out files; a "
                             "later file's rerun of a scenario replaces an earlier's; with --out, "
                             "write the merged results) and exit")
    args = parser.parse_args(argv)
    if args.report:
        merged = merge(args.report)
        print(report(merged, len(args.report)))
        if args.out:
            heads = sorted({r.get("commit", "?") for r in merged})
            args.out.write_text(json.dumps({"commit": " / ".join(heads), "results": merged},
                                           indent=1), encoding="utf-8")
        return 0
    if not args.kubeconfig and not args.realk8s:
        parser.error("give --kubeconfig or --realk8s")
    if args.desched_rev:
        use_revision(args.desched_rev, args.workdir)
    kubeconfig = args.kubeconfig
    if args.realk8s and not kubeconfig:
        kubeconfig = start_realk8s(args.realk8s)
    try:
        opts = Options(kubeconfig, args.workdir, args.kube_scheduler, args.keep)
        head = commit()
        print(f"# placement fidelity, desched {head}, {stamp()}", flush=True)
        results = []
        modes = MODES if args.mode == "both" else (args.mode,)
        for name in args.scenario or list(SCENARIOS):
            for mode in [m for m in modes for _ in range(args.repeat)]:
                opts.mode = mode
                started = time.monotonic()
                try:
                    result = run_scenario(SCENARIOS[name](), opts)
                except Exception as err:
                    result = {"scenario": name, "mode": mode, "commit": head,
                              "skipped": f"failed: {type(err).__name__}: {err}"}
                result["seconds"] = round(time.monotonic() - started, 1)
                results.append(result)
                print(details(result), flush=True)
            if args.out:
                args.out.write_text(json.dumps({"commit": head, "results": results}, indent=1),
                                    encoding="utf-8")
        for mode in modes:
            chosen = [r for r in results if r.get("mode", mode) == mode]
            print(f"\n{mode}: desched {head}\n" + table(chosen), flush=True)
    finally:
        if args.realk8s and not args.kubeconfig:
            stop_realk8s(args.realk8s)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The e2e suite's view of a real cluster (kind): a fresh namespace per test, fake nodes that no
kubelet runs, and the pods on them, whose status the test writes itself (as kwok would).

Objects are set up with lightkube's sync client. Pods are bound directly (spec.nodeName), so no
scheduler is involved; their status (Running, Ready, startTime) and the nodes' status (Ready,
allocatable, heartbeat) are written through the status subresources.

Every pod has an owner ReplicaSet, as desched's DefaultEvictor requires. The ReplicaSet controller
must not add pods of its own: its template names a ServiceAccount that does not exist (so its
pods are refused at admission) and a nodeSelector no node has (so a pod it did create would stay
unscheduled; when it is over its count it deletes unscheduled pods first)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError, Client, codecs
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.core_v1 import Namespace, Node, Pod, ServiceAccount
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.types import PatchType

E2E_ENV = "DESCHED_E2E_KUBECONFIG"
EVENTS = create_namespaced_resource("events.k8s.io", "v1", "Event", "events")
LABEL = "desched-e2e"  # on namespaces and fake nodes: the run's suffix
IMAGE = "registry.k8s.io/pause:3.10"
FAKE_TAINT = {"key": "desched-e2e/fake", "value": "true", "effect": "NoSchedule"}
CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
PodMigrationJob = create_global_resource("scheduling.koordinator.sh", "v1alpha1",
                                         "PodMigrationJob", "podmigrationjobs")


def stamp(ago: timedelta = timedelta(0)) -> str:
    return (datetime.now(UTC) - ago).strftime("%Y-%m-%dT%H:%M:%SZ")


def wait_until(what: str, check: Callable[[], bool], timeout: float = 60.0,
               every: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)


def stop_process(proc: subprocess.Popen[Any], timeout: float = 30.0) -> int:
    """SIGTERM, as a kubelet stops a pod, then SIGKILL after `timeout` seconds: the exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


@dataclass
class Cluster:
    client: Client
    kubeconfig: str
    workdir: Path
    suffix: str = field(default_factory=lambda: secrets.token_hex(3))
    nodes: list[str] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return f"desched-e2e-{self.suffix}"

    # -- lifecycle ---------------------------------------------------------------------------------
    def setup(self) -> None:
        self._create({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": self.ns, "labels": {LABEL: self.suffix}}})
        # Pods are refused until the namespace's default ServiceAccount exists.
        wait_until("the default ServiceAccount", lambda: self._exists(
            lambda: self.client.get(ServiceAccount, "default", namespace=self.ns)))

    def teardown(self) -> None:
        """Remove everything, even after a failed test. Pods on fake nodes never finish a
        graceful deletion (no kubelet), so they are deleted with a zero grace period."""
        errors: list[str] = []

        def attempt(action: Callable[[], object]) -> None:
            try:
                action()
            except ApiError as err:
                if err.status.code != 404:
                    errors.append(str(err))

        attempt(lambda: self.client.delete(Namespace, self.ns))
        for pod in self._list_pods():
            attempt(lambda name=pod.metadata.name: self.client.delete(
                Pod, name, namespace=self.ns, grace_period=0))
        for node in self.nodes:
            attempt(lambda name=node: self.client.delete(Node, name))
        # The namespace controller finishes the deletion in the background (about 5 s): the
        # namespace's name is random, so nothing waits for it.
        assert not errors, f"cleanup of {self.ns} failed: {errors}"

    # -- objects -----------------------------------------------------------------------------------
    def add_node(self, index: int, cpu: str = "8", memory: str = "16Gi") -> str:
        name = f"{self.ns}-n{index}"
        self._create({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": {
                          LABEL: self.suffix, "kubernetes.io/hostname": name,
                          "kubernetes.io/os": "linux", "type": "fake-node"}},
                      "spec": {"taints": [FAKE_TAINT]}})
        self.nodes.append(name)
        resources = {"cpu": cpu, "memory": memory, "pods": "110"}
        self.client.patch(Node.Status, name, {"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [self._ready_condition()]}}, patch_type=PatchType.MERGE)
        return name

    def heartbeat(self) -> None:
        """Report the fake nodes Ready again. Without a kubelet, the node lifecycle controller
        marks a node Unknown (and its pods not ready) about 40-50 s after the last heartbeat:
        call this just before running desched."""
        for name in self.nodes:
            self.client.patch(Node.Status, name, {"status": {
                "conditions": [self._ready_condition()]}}, patch_type=PatchType.MERGE)

    @staticmethod
    def _ready_condition() -> dict[str, Any]:
        now = stamp()
        return {"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "desched e2e fake node", "lastHeartbeatTime": now,
                "lastTransitionTime": now}

    def add_replicaset(self, name: str, replicas: int, labels: dict[str, str]) -> str:
        """A ReplicaSet owning `replicas` pods to be added with add_pod; its uid."""
        rs = self._create({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": self.ns, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "serviceAccountName": "desched-e2e-absent",
                         "automountServiceAccountToken": False,
                         "nodeSelector": {f"{LABEL}/no-such-node": "true"},
                         "containers": [{"name": "app", "image": IMAGE}]}}}})
        return str(rs.metadata.uid)

    def add_pod(self, name: str, node: str, owner: tuple[str, str], labels: dict[str, str],
                started: timedelta = timedelta(hours=2)) -> None:
        """A pod bound to `node`, reported Running and Ready, started `started` ago."""
        rs_name, rs_uid = owner
        self._create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.ns, "labels": labels,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": rs_name, "uid": rs_uid,
                                              "controller": True}]},
            "spec": {"nodeName": node, "automountServiceAccountToken": False,
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "app", "image": IMAGE, "resources": {
                         "requests": {"cpu": "100m", "memory": "64Mi"}}}]}})
        start = stamp(started)
        conditions = [{"type": kind, "status": "True", "lastTransitionTime": start}
                      for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
        self.client.patch(Pod.Status, name, {"status": {
            "phase": "Running", "startTime": start, "conditions": conditions,
            "hostIP": "10.255.0.1", "podIP": "10.255.0.2",
            "containerStatuses": [{"name": "app", "image": IMAGE, "imageID": "",
                                   "ready": True, "started": True, "restartCount": 0,
                                   "state": {"running": {"startedAt": start}}}],
        }}, namespace=self.ns, patch_type=PatchType.MERGE)

    def add_pdb(self, name: str, match_labels: dict[str, str], min_available: int) -> None:
        self._create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": name, "namespace": self.ns},
                      "spec": {"minAvailable": min_available,
                               "selector": {"matchLabels": match_labels}}})

    def wait_pdb(self, name: str, healthy: int, allowed: int) -> None:
        """Until the disruption controller has computed the budget: the Eviction API refuses
        every eviction the budget covers before that, for a reason unrelated to the test."""
        def computed() -> bool:
            pdb = self.client.get(PodDisruptionBudget, name, namespace=self.ns)
            status = pdb.status
            return (status is not None
                    and status.observedGeneration == pdb.metadata.generation
                    and status.currentHealthy == healthy
                    and status.disruptionsAllowed == allowed)
        wait_until(f"PodDisruptionBudget {name} to be computed", computed)

    # -- reading -----------------------------------------------------------------------------------
    def pod_state(self, name: str) -> str:
        """running, terminating (evicted, but no kubelet finishes the deletion) or gone."""
        try:
            pod = self.client.get(Pod, name, namespace=self.ns)
        except ApiError as err:
            if err.status.code == 404:
                return "gone"
            raise
        return "terminating" if pod.metadata.deletionTimestamp is not None else "running"

    def events(self) -> list[dict[str, Any]]:
        """events.k8s.io/v1 Events in the namespace, as dicts. Read as generic objects: the
        controllers' Events (written through core/v1) have no eventTime, which lightkube's
        typed Event requires."""
        return [e.to_dict() for e in self.client.list(EVENTS, namespace=self.ns)]

    def _list_pods(self) -> list[Pod]:
        try:
            return list(self.client.list(Pod, namespace=self.ns))
        except ApiError:
            return []

    # -- desched -----------------------------------------------------------------------------------
    def write(self, name: str, text: str) -> str:
        path = self.workdir / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    def desched(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """`desched ARGS` as a process, as a user runs it; fails the test on a non-zero exit."""
        env = dict(os.environ)
        env.pop("KUBECONFIG", None)  # only --kubeconfig names the cluster
        proc = subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                              text=True, timeout=timeout, env=env, check=False)
        assert proc.returncode == 0, (f"desched {' '.join(args)} exited {proc.returncode}:\n"
                                      f"{proc.stderr[-5000:]}")
        return proc

    # -- helpers -----------------------------------------------------------------------------------
    def _create(self, obj: dict[str, Any]) -> Any:
        return self.client.create(codecs.from_dict(obj))

    @staticmethod
    def _exists(get: Callable[[], object]) -> bool:
        try:
            get()
        except ApiError as err:
            if err.status.code == 404:
                return False
            raise
        return True


def install_crds(client: Client) -> None:
    """The CRDs of deploy/crds (PodMigrationJob, Reservation), unless the cluster has them
    already, once PodMigrationJobs are served."""
    for path in sorted(CRDS.glob("*.yaml")):
        for obj in codecs.load_all_yaml(path.read_text(encoding="utf-8")):
            try:
                client.create(obj)
            except ApiError as err:
                if err.status.code != 409:
                    raise

    def served() -> bool:
        try:
            list(client.list(PodMigrationJob))
        except (ApiError, httpx2.HTTPStatusError):  # a plain-text 404 until the CRD is served
            return False
        return True

    wait_until("the PodMigrationJob CRD to be served", served)


def json_log(stderr: str) -> list[dict[str, Any]]:
    """The JSON lines of `desched run --log-format json` (on stderr)."""
    lines = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
    return lines


def evicted_in_log(lines: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(namespace/pod, plugin) of every eviction a run logged (dry run or live)."""
    return {(e["pod"], e["strategy"]) for e in lines
            if str(e.get("event", "")).startswith("Evicted pod")}


@dataclass
class Scenario:
    """The objects one test works on, and the policy that applies to them."""

    cluster: Cluster
    policy: str
    old: list[str]  # PodLifeTime evicts these
    protected: str  # PodLifeTime wants it too, but its PodDisruptionBudget allows no disruption
    duplicates: list[str]  # RemoveDuplicates evicts 2 of these 4 (all on one of two nodes)

    def key(self, pod: str) -> str:
        return f"{self.cluster.ns}/{pod}"


MAX_AGE = 2  # seconds: PodLifeTime's maxPodLifeTimeSeconds

POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
nodeSelector: {label}={suffix}
profiles:
- name: e2e
  pluginConfig:
  - name: DefaultEvictor
  - name: PodLifeTime
    args:
      maxPodLifeTimeSeconds: {max_age}
      labelSelector:
        matchLabels: {{e2e-role: lifetime}}
      namespaces:
        include: [{ns}]
  - name: RemoveDuplicates
    args:
      namespaces:
        include: [{ns}]
  plugins:
    deschedule:
      enabled: [PodLifeTime]
    balance:
      enabled: [RemoveDuplicates]
"""


def build_scenario(cluster: Cluster) -> Scenario:
    """Two fake nodes; PodLifeTime pods (one covered by a budget that allows no disruption);
    four duplicates of one ReplicaSet on the first node. The policy touches only this namespace
    and these nodes (the cluster's own pods and nodes are never candidates)."""
    n0, n1 = cluster.add_node(0), cluster.add_node(1)
    lifetime = {"e2e-role": "lifetime"}
    old_labels = {"app": "old", **lifetime}
    old_rs = ("old", cluster.add_replicaset("old", 2, old_labels))
    cluster.add_pod("old-0", n0, old_rs, old_labels)
    cluster.add_pod("old-1", n1, old_rs, old_labels)
    protected_labels = {"app": "protected", **lifetime}
    protected_rs = ("protected", cluster.add_replicaset("protected", 1, protected_labels))
    cluster.add_pod("protected-0", n0, protected_rs, protected_labels)
    cluster.add_pdb("protected", {"app": "protected"}, min_available=1)
    dup_labels = {"app": "dup"}
    dup_rs = ("dup", cluster.add_replicaset("dup", 4, dup_labels))
    duplicates = [f"dup-{i}" for i in range(4)]
    for name in duplicates:
        cluster.add_pod(name, n0, dup_rs, dup_labels)
    created = time.monotonic()
    cluster.wait_pdb("protected", healthy=1, allowed=0)
    # PodLifeTime counts from creationTimestamp, which the server sets: wait it out.
    time.sleep(max(0.0, created + MAX_AGE + 1.5 - time.monotonic()))
    policy = cluster.write("policy.yaml", POLICY.format(
        label=LABEL, suffix=cluster.suffix, ns=cluster.ns, max_age=MAX_AGE))
    return Scenario(cluster, policy, ["old-0", "old-1"], "protected-0", duplicates)

"""Faults on the real thing, judged by the API server's own audit log: whatever happens to the
control plane or to desched, no pod receives two successful evictions, no budget's healthy
count drops below its minimum, two replicas never evict in overlapping windows, and desched
finishes a clean cycle after the fault.

These tests stop and restart control-plane processes, so each module gets a control plane of
its own (from KUBEBUILDER_ASSETS), never the one the other tests share.

The cluster: two nodes served by the stand-in kubelet (bench/kubelet.py: pods Ready 1 s after
they are bound, gone 1 s after their deletion), a Deployment of 12 pods that kube-scheduler
places, a budget of at most 3 unavailable, and PodLifeTime at 6 s: desched evicts all the
time, paced by the budget, while the Deployment brings replacements back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from controlplane import ASSETS_ENV, ControlPlane, running
from e2e_cluster import wait_until
from lightkube import Client, codecs
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace, Node, Pod

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from kubelet import Kubelet  # noqa: E402

pytestmark = [pytest.mark.needs("kube-controller-manager", "kube-scheduler"),
              pytest.mark.timeout(600)]

NS = "faults"
REPLICAS, MAX_UNAVAILABLE = 12, 3
POLICY = f"""\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
nodeSelector: fault={NS}
profiles:
- name: faults
  pluginConfig:
  - name: DefaultEvictor
  - name: PodLifeTime
    args:
      maxPodLifeTimeSeconds: 6
      namespaces:
        include: [{NS}]
  plugins:
    deschedule:
      enabled: [PodLifeTime]
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    assets = os.environ.get(ASSETS_ENV)
    if not assets:
        pytest.skip(f"e2e faults: set {ASSETS_ENV}; these tests restart and pause the control "
                    f"plane's processes, so they start their own")
    with running(Path(assets).resolve(), tmp_path_factory.mktemp("faults-plane")) as p:
        yield p


@pytest.fixture
def churn(plane: ControlPlane) -> Iterator[tuple[Client, Kubelet]]:
    """The namespace, nodes and Deployment described above, all pods Ready; removed after."""
    client = Client(config=KubeConfig.from_file(str(plane.kubeconfig)),
                    field_manager="desched-e2e")
    with Kubelet(client, [], ready_after=1.0, namespace=NS) as kubelet:
        client.create(codecs.from_dict({"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": NS}}))
        for i in range(2):
            kubelet.add_node(f"fault-n{i}", cpu="16", labels={"fault": NS})
        labels = {"app": "churn"}
        client.create(codecs.from_dict({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "churn", "namespace": NS},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "automountServiceAccountToken": False,
                         "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                         "resources": {"requests": {"cpu": "100m"}}}]}}}}))
        client.create(codecs.from_dict({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "churn", "namespace": NS},
            "spec": {"maxUnavailable": MAX_UNAVAILABLE, "selector": {"matchLabels": labels}}}))
        wait_until("the Deployment's pods to be Ready", lambda: ready_count(client) == REPLICAS,
                   timeout=120)
        plane.audit_from = len(plane.audit())  # judge this test's requests only
        try:
            yield client, kubelet
        finally:
            client.delete(Namespace, NS)
            for node in kubelet.nodes:
                client.delete(Node, node)
            for pod in client.list(Pod, namespace=NS):
                client.delete(Pod, pod.metadata.name, namespace=NS, grace_period=0)
            wait_until("the namespace to go", lambda: not any(
                ns.metadata.name == NS for ns in client.list(Namespace)), timeout=120)
            client.close()


def ready_count(client: Client) -> int:
    count = 0
    for pod in client.list(Pod, namespace=NS):
        if pod.metadata.deletionTimestamp is not None or pod.status is None:
            continue
        if any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []):
            count += 1
    return count


class ReadyWatch:
    """The lowest count of Ready pods seen, sampled every 100 ms (the budget's healthy count)."""

    def __init__(self, client: Client) -> None:
        self.client, self.lowest = client, REPLICAS
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ReadyWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.lowest = min(self.lowest, ready_count(self.client))
            except Exception:  # the API server is down: no sample
                continue


def desched_process(plane: ControlPlane, user: str, workdir: Path,
                    *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    kubeconfig = plane.write_kubeconfig(workdir / f"{user}.kubeconfig", user)
    policy = workdir / "policy.yaml"
    policy.write_text(POLICY)
    log = workdir / f"{user}.log"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "desched.cli", "run", "--policy", str(policy),
             "--kubeconfig", str(kubeconfig), "--interval", "1s", "--log-format", "json",
             *extra], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc, log


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def log_lines(log: Path) -> list[dict[str, Any]]:
    lines = []
    for text in log.read_text(errors="replace").splitlines():
        if text.startswith("{"):
            try:
                lines.append(json.loads(text))
            except ValueError:
                continue
    return lines


def finished_cycles(log: Path) -> int:
    return sum(1 for e in log_lines(log) if e.get("event") == "descheduling cycle finished")


def when(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


def evictions(plane: ControlPlane, ok: bool = True) -> list[dict[str, Any]]:
    """Eviction requests of this test in the audit log (successful ones by default), oldest
    first."""
    found = [e for e in plane.audit()[plane.audit_from:]
             if (e.get("objectRef") or {}).get("subresource") == "eviction"
             and e["objectRef"].get("namespace") == NS and e.get("verb") == "create"
             and (not ok or e.get("responseStatus", {}).get("code") in (200, 201))]
    return sorted(found, key=when)


def assert_no_pod_evicted_twice(plane: ControlPlane) -> None:
    seen: dict[str, int] = {}
    for e in evictions(plane):
        seen[e["objectRef"]["name"]] = seen.get(e["objectRef"]["name"], 0) + 1
    twice = {name: n for name, n in seen.items() if n > 1}
    assert not twice, f"pods with more than one successful eviction: {twice}"


def assert_only_evictions(plane: ControlPlane, users: set[str]) -> None:
    """desched removes pods through the Eviction API only: a DELETE would go around budgets."""
    deletes = [e for e in plane.audit()[plane.audit_from:] if e.get("verb") == "delete"
               and (e.get("objectRef") or {}).get("resource") == "pods"
               and e["user"]["username"] in users]
    assert not deletes, f"pods deleted by desched: {deletes[:3]}"


def test_an_api_server_restart_mid_cycle_evicts_no_pod_twice(
        plane: ControlPlane, churn: tuple[Client, Kubelet], tmp_path: Path) -> None:
    client, _ = churn
    with ReadyWatch(client) as ready:
        proc, log = desched_process(plane, "desched-a", tmp_path)
        try:
            wait_until("three evictions", lambda: len(evictions(plane)) >= 3, timeout=120)
            plane.restart_apiserver(down_for=3.0)
            restarted = time.monotonic()
            cycles = finished_cycles(log)
            before = len(evictions(plane))
            wait_until("a clean cycle and more evictions after the restart",
                       lambda: finished_cycles(log) > cycles + 1
                       and len(evictions(plane)) >= before + 3, timeout=180)
            recovered = time.monotonic() - restarted
        finally:
            stop(proc)
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert_no_pod_evicted_twice(plane)
    assert_only_evictions(plane, {"desched-a"})
    assert ready.lowest >= REPLICAS - MAX_UNAVAILABLE, \
        f"ready pods fell to {ready.lowest} (budget: at least {REPLICAS - MAX_UNAVAILABLE})"
    print(f"recovered {recovered:.1f} s after the restart")


def holder(client: Client) -> str | None:
    try:
        lease = client.get(Lease, "desched", namespace=NS)
    except Exception:
        return None
    return lease.spec.holderIdentity if lease.spec else None


def test_a_paused_leader_does_not_evict_once_another_has_taken_over(
        plane: ControlPlane, churn: tuple[Client, Kubelet], tmp_path: Path) -> None:
    client, _ = churn
    lease = ["--leader-elect", "--leader-elect-resource-namespace", NS,
             "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
             "--leader-elect-retry-period", "500ms"]
    with ReadyWatch(client) as ready:
        a, _ = desched_process(plane, "desched-a", tmp_path, *lease)
        wait_until("replica a to lead and evict", lambda: any(
            e["user"]["username"] == "desched-a" for e in evictions(plane)), timeout=120)
        b, log_b = desched_process(plane, "desched-b", tmp_path, *lease)
        try:
            leader = holder(client)
            wait_until("replica b to wait for the lease", lambda: any(
                e.get("event") == "waiting to become the leader" for e in log_lines(log_b)),
                timeout=60)
            a.send_signal(signal.SIGSTOP)  # past its lease: 4 s, then b takes over
            wait_until("replica b to take over", lambda: holder(client) not in (None, leader),
                       timeout=60)
            wait_until("replica b to evict", lambda: any(
                e["user"]["username"] == "desched-b" for e in evictions(plane)), timeout=120)
            a.send_signal(signal.SIGCONT)
            resumed = len(evictions(plane, ok=False))
            # The resumed replica has had time to act on its stale view: several of b's cycles.
            cycles = finished_cycles(log_b)
            wait_until("two more cycles of b", lambda: finished_cycles(log_b) >= cycles + 2,
                       timeout=60)
        finally:
            stop(a)
            stop(b)
    by_a = [e for e in evictions(plane) if e["user"]["username"] == "desched-a"]
    by_b = [e for e in evictions(plane) if e["user"]["username"] == "desched-b"]
    assert by_a and by_b
    assert when(by_a[-1]) < when(by_b[0]), (
        f"replica a evicted {by_a[-1]['objectRef']['name']} at {when(by_a[-1])}, after replica "
        f"b's first eviction at {when(by_b[0])}: the two led at once")
    late = [e for e in evictions(plane, ok=False)[resumed:]
            if e["user"]["username"] == "desched-a"]
    assert not late, f"the resumed old leader asked for evictions: {late[:3]}"
    assert_no_pod_evicted_twice(plane)
    assert_only_evictions(plane, {"desched-a", "desched-b"})
    assert ready.lowest >= REPLICAS - MAX_UNAVAILABLE

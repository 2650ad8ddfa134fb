"""Faults on a real control plane, judged by the API server's own audit log: what desched (and the
Go descheduler v0.36, where the fault applies) does when kube-apiserver dies mid-cycle or in the
middle of PodMigrationJob migrations, etcd stalls past the request timeout, the leader is paused
past its lease, the descheduler itself is killed mid-cycle, the API server throttles it, or its
watches come back to a resourceVersion etcd has compacted (410 Gone).

The cluster (its own control plane from tests/e2e/controlplane.py, kube-apiserver with
`--request-timeout=10s`): two 16-cpu nodes served by the stand-in kubelet (bench/kubelet.py: a
pod is Ready 1 s after it is bound and gone 1 s after its deletion), a Deployment of 12 pods that
kube-scheduler places, a PodDisruptionBudget of at most 3 unavailable, and PodLifeTime at 6 s:
the descheduler evicts all the time, paced by the budget, while the Deployment brings
replacements back.

Per fault: evictions requested and succeeded (audit log), pods that received two successful
evictions (must be 0), the lowest count of Ready pods against the budget's floor of 9 (sampled
every 100 ms; below it is a breach), whether two replicas evicted in overlapping windows, and the
seconds from the end of the fault to the next successful eviction (and, for desched, to the next
clean cycle in its log). Some faults add their own: the requests answered 429, the watches
answered 410 (and, for desched, cycles started before it had listed again: must be 0), the
PodMigrationJobs that ended Succeeded or Failed, stayed active (must be none) or were made
twice for a pod (must be 0).

    python bench/faults.py --assets DIR [--fault NAME ...] [--descheduler desched|go ...] [--out F]

tests/e2e/test_e2e_faults.py runs the same scenarios against desched and asserts the judgments."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Self

from kubelet import Kubelet
from lightkube import ApiError, Client, codecs
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace, Node, Pod

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import controlplane  # noqa: E402
from e2e_cluster import PodMigrationJob, install_crds, json_log  # noqa: E402

NS = "faults"
REPLICAS, MAX_UNAVAILABLE = 12, 3
FLOOR = REPLICAS - MAX_UNAVAILABLE
APISERVER_ARGS = ["--request-timeout=10s"]
LEASE = ["--leader-elect", "--leader-elect-resource-namespace", NS,
         "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
         "--leader-elect-retry-period", "500ms"]
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


def wait_until(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.2)


# -- the cluster ----------------------------------------------------------------------------------

def ready_count(client: Client) -> int:
    count = 0
    for pod in client.list(Pod, namespace=NS):
        if pod.metadata is None or pod.metadata.deletionTimestamp is not None:
            continue
        conditions = pod.status.conditions if pod.status is not None else None
        if any(c.type == "Ready" and c.status == "True" for c in conditions or []):
            count += 1
    return count


@contextmanager
def churn(plane: controlplane.ControlPlane) -> Iterator[Client]:
    """The namespace, nodes, Deployment and budget described above, every pod Ready; removed
    afterwards. The plane's audit log is judged from here on."""
    client = Client(config=KubeConfig.from_file(str(plane.kubeconfig)),
                    field_manager="desched-faults")
    with Kubelet(client, [], ready_after=1.0, namespace=NS) as kubelet:
        try:
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
                             "containers": [{"name": "app",
                                             "image": "registry.k8s.io/pause:3.10",
                                             "resources": {"requests": {"cpu": "100m"}}}]}}}}))
            client.create(codecs.from_dict({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "churn", "namespace": NS},
                "spec": {"maxUnavailable": MAX_UNAVAILABLE,
                         "selector": {"matchLabels": labels}}}))
            wait_until("the Deployment's pods to be Ready",
                       lambda: ready_count(client) == REPLICAS, timeout=120)
            plane.audit_from = len(plane.audit())
            yield client
        finally:
            _cleanup(client, kubelet.nodes)
            client.close()


def _cleanup(client: Client, nodes: set[str]) -> None:
    def quietly(action: Callable[[], object]) -> None:
        try:
            action()
        except ApiError as err:
            if err.status.code != 404:
                raise
    quietly(lambda: client.delete(Namespace, NS))
    for node in nodes:
        quietly(lambda n=node: client.delete(Node, n))
    for pod in client.list(Pod, namespace=NS):
        quietly(lambda p=pod: client.delete(Pod, p.metadata.name, namespace=NS, grace_period=0))
    wait_until("the namespace to go", lambda: not any(
        ns.metadata is not None and ns.metadata.name == NS
        for ns in client.list(Namespace)), timeout=120)


class Sampler:
    """Looks at the cluster every 100 ms on a thread of its own (`sample`), until the block
    ends; while the API server is down there is no sample."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.sample()
            except Exception:  # the API server is down: no sample
                continue

    def sample(self) -> None:
        raise NotImplementedError


class ReadyWatch(Sampler):
    """The lowest count of Ready pods seen (the budget's healthy count)."""

    def __init__(self, client: Client) -> None:
        super().__init__(client)
        self.lowest = REPLICAS

    def sample(self) -> None:
        self.lowest = min(self.lowest, ready_count(self.client))


class Relay:
    """A TCP relay on 127.0.0.1 in front of kube-apiserver, for the descheduler alone (the
    controllers, the kubelet and the judge talk to kube-apiserver directly), that a fault can
    cut: `cut()` closes every connection through it and refuses new ones (accepted and closed
    at once) until `heal()`: a partition between the descheduler and the API server, which
    itself keeps running."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.server = f"https://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._open = True
        self._sockets: set[socket.socket] = set()
        self.refused = 0  # connections refused while cut
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()
        self._listener.close()

    def cut(self) -> None:
        with self._lock:
            self._open = False
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _close(sock)

    def heal(self) -> None:
        with self._lock:
            self._open = True

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener is closed
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                accepted = self._open
                if accepted:
                    self._sockets |= {client, upstream}
            if not accepted:
                self.refused += 1
                _close(client)
                _close(upstream)
                continue
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        """One direction, until either end closes: then the connection is closed both ways."""
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        with self._lock:
            self._sockets -= {src, dst}
        _close(src)
        _close(dst)


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


# -- the descheduler ------------------------------------------------------------------------------

@dataclass
class Replica:
    user: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Runner:
    plane: controlplane.ControlPlane
    workdir: Path
    which: str = "desched"  # or go
    replicas: list[Replica] = field(default_factory=list)
    server: str | None = None  # a Relay's address, instead of kube-apiserver's own

    def start(self, user: str, *extra: str, policy_text: str = POLICY) -> Replica:
        kubeconfig = self.plane.write_kubeconfig(self.workdir / f"{user}.kubeconfig", user,
                                                 self.server)
        policy = self.workdir / "policy.yaml"
        policy.write_text(policy_text)
        if self.which == "go":
            command = [str(self.plane.assets / "descheduler"), "--kubeconfig", str(kubeconfig),
                       "--policy-config-file", str(policy), "--descheduling-interval", "1s",
                       "--secure-port=0", "--v=3", *extra]  # two replicas: no shared port
        else:
            command = [sys.executable, "-m", "desched", "run", "--policy", str(policy),
                       "--kubeconfig", str(kubeconfig), "--interval", "1s",
                       "--log-format", "json", *extra]
        log = self.workdir / f"{user}-{len(self.replicas)}.log"
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        with log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        replica = Replica(user, proc, log)
        self.replicas.append(replica)
        return replica

    def stop_all(self) -> None:
        for r in self.replicas:
            if r.proc.poll() is None:
                r.proc.send_signal(signal.SIGCONT)
                r.proc.terminate()
        for r in self.replicas:
            try:
                r.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait()


def log_text(log: Path) -> str:
    return log.read_text(errors="replace")


def log_lines(log: Path) -> list[dict[str, Any]]:
    return json_log(log_text(log))


def finished_cycles(log: Path) -> int:
    """desched's clean cycles so far: finished with result `completed`."""
    return sum(1 for e in log_lines(log) if e.get("event") == "descheduling cycle finished"
               and e.get("result") == "completed")


# -- the judge ------------------------------------------------------------------------------------

def when(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


def evictions(plane: controlplane.ControlPlane, ok: bool = True) -> list[dict[str, Any]]:
    """This scenario's eviction requests in the audit log (successful ones by default), oldest
    first."""
    found = [e for e in plane.audit()[plane.audit_from:]
             if (e.get("objectRef") or {}).get("subresource") == "eviction"
             and e["objectRef"].get("namespace") == NS and e.get("verb") == "create"
             and (not ok or e.get("responseStatus", {}).get("code") in (200, 201))]
    return sorted(found, key=when)


def judge(plane: controlplane.ControlPlane, users: set[str], lowest_ready: int,
          fault_ended: datetime | None) -> dict[str, Any]:
    done = evictions(plane)
    counts: dict[str, int] = {}
    for e in done:
        counts[e["objectRef"]["name"]] = counts.get(e["objectRef"]["name"], 0) + 1
    deletes = [e for e in plane.audit()[plane.audit_from:] if e.get("verb") == "delete"
               and (e.get("objectRef") or {}).get("resource") == "pods"
               and e["user"]["username"] in users]
    # Overlapping leaders: the successful evictions, in time order, change hands more than once
    # (a hand-over is one change; back and forth is two replicas acting at once).
    hands = [e["user"]["username"] for e in done]
    changes = sum(1 for a, b in itertools.pairwise(hands) if a != b)
    after = [e for e in done if fault_ended is not None and when(e) >= fault_ended]
    return {
        "evictionsRequested": len(evictions(plane, ok=False)),
        "evictionsSucceeded": len(done),
        "podsEvictedTwice": sum(1 for n in counts.values() if n > 1),
        "podsDeleted": len(deletes),
        "lowestReady": lowest_ready, "budgetFloor": FLOOR,
        "budgetBreached": lowest_ready < FLOOR,
        "overlappingLeaders": max(0, changes - 1) if len(users) > 1 else 0,
        "secondsToNextEviction": (round((when(after[0]) - fault_ended).total_seconds(), 1)
                                  if after and fault_ended is not None else None),
    }


def server_now(plane: controlplane.ControlPlane) -> datetime:
    """The API server's clock, as the audit log stamps it (one host here: the local clock)."""
    return datetime.now().astimezone()


# -- the faults -----------------------------------------------------------------------------------

APF_ARGS = ["--enable-priority-and-fairness=true"]
# desched-a's own priority level: one seat, no borrowing, no queue: a request beyond it is
# answered 429 at once (with Retry-After).
APF_OBJECTS: list[dict[str, Any]] = [
    {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
     "metadata": {"name": "desched-faults"},
     "spec": {"type": "Limited", "limited": {
         "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
         "limitResponse": {"type": "Reject"}}}},
    {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
     "metadata": {"name": "desched-faults"},
     "spec": {"priorityLevelConfiguration": {"name": "desched-faults"},
              "matchingPrecedence": 100, "distinguisherMethod": {"type": "ByUser"},
              "rules": [{"subjects": [{"kind": "User", "user": {"name": "desched-a"}}],
                         "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"],
                                            "resources": ["*"], "namespaces": ["*"],
                                            "clusterScope": True}],
                         "nonResourceRules": [{"verbs": ["*"],
                                               "nonResourceURLs": ["*"]}]}]}},
]


def throttled(plane: controlplane.ControlPlane, user: str) -> int:
    """The descheduler's requests (not the hogs', which share its user) that kube-apiserver
    answered 429 (API Priority and Fairness)."""
    return sum(1 for e in plane.audit()[plane.audit_from:]
               if e["user"]["username"] == user
               and str(e.get("userAgent", "")).startswith(("desched/", "descheduler/"))
               and e.get("responseStatus", {}).get("code") == 429)


def _first_evictions(plane: controlplane.ControlPlane, n: int = 3) -> None:
    wait_until(f"{n} evictions", lambda: len(evictions(plane)) >= n, timeout=120)


def _recovered(plane: controlplane.ControlPlane, runner: Runner, replica: Replica,
               more: int = 3) -> float:
    """Seconds until the descheduler has evicted `more` pods after now and (desched) finished two
    cycles: the first may have started before the fault ended."""
    started = time.monotonic()
    before = len(evictions(plane))
    cycles = finished_cycles(replica.log) if runner.which == "desched" else 0
    wait_until("evictions and a clean cycle after the fault", lambda: (
        len(evictions(plane)) >= before + more
        and (runner.which != "desched" or finished_cycles(replica.log) >= cycles + 2)),
        timeout=180)
    return round(time.monotonic() - started, 1)


def apiserver_restart(plane: controlplane.ControlPlane, runner: Runner) -> dict[str, Any]:
    """kube-apiserver SIGKILLed mid-cycle, back 3 s later (its watch cache starts over: the
    informers' resourceVersions are too old, 410 Gone)."""
    replica = runner.start("desched-a")
    _first_evictions(plane)
    plane.restart_apiserver(down_for=3.0)
    ended = server_now(plane)
    return {"fault": "apiserver-restart", "ended": ended,
            "recovery": _recovered(plane, runner, replica), "users": {"desched-a"}}


def etcd_pause(plane: controlplane.ControlPlane, runner: Runner) -> dict[str, Any]:
    """etcd SIGSTOPped for 15 s, longer than kube-apiserver's 10 s request timeout, resumed."""
    replica = runner.start("desched-a")
    _first_evictions(plane)
    plane.pause("etcd")
    time.sleep(15)
    plane.resume("etcd")
    ended = server_now(plane)
    return {"fault": "etcd-pause", "ended": ended,
            "recovery": _recovered(plane, runner, replica), "users": {"desched-a"}}


def descheduler_kill(plane: controlplane.ControlPlane, runner: Runner) -> dict[str, Any]:
    """The descheduler SIGKILLed mid-cycle and started again."""
    first = runner.start("desched-a")
    _first_evictions(plane)
    first.proc.kill()
    first.proc.wait()
    ended = server_now(plane)
    replica = runner.start("desched-a")
    return {"fault": "descheduler-kill", "ended": ended,
            "recovery": _recovered(plane, runner, replica), "users": {"desched-a"}}


def leader_pause(plane: controlplane.ControlPlane, runner: Runner) -> dict[str, Any]:
    """Two replicas with leader election (lease 4 s); the leader SIGSTOPped until the other has
    taken over and evicted, then resumed: it must not evict again (fencing)."""
    client = Client(config=KubeConfig.from_file(str(plane.kubeconfig)))
    lease_name = "descheduler" if runner.which == "go" else "desched"

    def holder() -> str | None:
        # Wherever the descheduler keeps it: the Go descheduler may not take the namespace flag.
        for lease in client.list(Lease, namespace="*"):
            if lease.metadata is not None and lease.metadata.name == lease_name:
                return lease.spec.holderIdentity if lease.spec is not None else None
        return None

    a = runner.start("desched-a", *LEASE)
    wait_until("replica a to lead and evict", lambda: any(
        e["user"]["username"] == "desched-a" for e in evictions(plane)), timeout=120)
    b = runner.start("desched-b", *LEASE)
    leader = holder()
    time.sleep(2)  # b is up and waiting for the lease
    a.proc.send_signal(signal.SIGSTOP)
    def taken_over() -> bool:
        if b.proc.poll() is not None:
            raise RuntimeError(f"replica b exited {b.proc.returncode}; see {b.log}")
        return holder() not in (None, leader)
    wait_until("replica b to take over", taken_over, timeout=60)
    wait_until("replica b to evict", lambda: any(
        e["user"]["username"] == "desched-b" for e in evictions(plane)), timeout=120)
    a.proc.send_signal(signal.SIGCONT)
    ended = server_now(plane)
    resumed = len(evictions(plane, ok=False))
    recovery = _recovered(plane, runner, b)
    late = [e for e in evictions(plane, ok=False)[resumed:]
            if e["user"]["username"] == "desched-a"]
    client.close()
    return {"fault": "leader-pause", "ended": ended, "recovery": recovery,
            "users": {"desched-a", "desched-b"}, "lateOldLeaderRequests": len(late)}


def apf_throttle(plane: controlplane.ControlPlane, runner: Runner) -> dict[str, Any]:
    """API Priority and Fairness on, the descheduler's user in a priority level of one seat that
    rejects what does not fit; for 15 s eight other clients of the same user keep that seat
    busy, so the descheduler's requests are answered 429 with Retry-After. Afterwards it must
    evict again and finish clean cycles."""
    admin = Client(config=KubeConfig.from_file(str(plane.kubeconfig)))
    for obj in APF_OBJECTS:
        admin.create(codecs.from_dict(obj))
    admin.close()
    time.sleep(2)  # the API server's APF configuration controller picks them up
    hog_config = plane.write_kubeconfig(runner.workdir / "hog.kubeconfig", "desched-a")
    stop = threading.Event()

    def hog() -> None:
        client = Client(config=KubeConfig.from_file(str(hog_config)))
        while not stop.is_set():
            try:
                list(client.list(Pod, namespace="*"))
            except Exception:  # the 429s it shares with the descheduler
                continue
        client.close()

    replica = runner.start("desched-a")
    _first_evictions(plane)
    hogs = [threading.Thread(target=hog, daemon=True) for _ in range(8)]
    for t in hogs:
        t.start()
    time.sleep(15)
    stop.set()
    for t in hogs:
        t.join(timeout=30)
    ended = server_now(plane)
    return {"fault": "apf-throttle", "ended": ended,
            "recovery": _recovered(plane, runner, replica), "users": {"desched-a"},
            "throttled": throttled(plane, "desched-a")}


# Watches served from etcd (no watch cache, which would keep its own history) and etcd
# compacted every 2 s: a watch resumed from a resourceVersion a few seconds old is answered 410.
WATCH_EXPIRED_ARGS = ["--watch-cache=false", "--etcd-compaction-interval=2s"]
PARTITION_SECONDS = 6.0  # three compaction intervals


def _touch_pods(client: Client, seconds: float) -> int:
    """The pods keep changing for `seconds`: each annotated anew, round after round. Returns
    the rounds done."""
    deadline, rounds = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        rounds += 1
        for pod in client.list(Pod, namespace=NS):
            assert pod.metadata is not None and pod.metadata.name is not None
            with suppress(ApiError):  # gone meanwhile
                client.patch(Pod, pod.metadata.name, namespace=NS,
                             obj={"metadata": {"annotations": {"faults/round": str(rounds)}}})
        time.sleep(0.3)
    return rounds


GONE = "is too old, listing again"  # what desched logs when a watch is answered 410


def relists(replica: Replica, which: str) -> int:
    """The descheduler's watches answered 410 Gone ("too old resource version") in its log."""
    if which == "go":  # client-go's reflector, at --v=4: "Watch closed" ... "... too old ..."
        return sum(1 for line in log_text(replica.log).splitlines() if "too old" in line)
    return sum(1 for e in log_lines(replica.log) if GONE in str(e.get("event", "")))


def cycles_before_relists(replica: Replica, after: datetime) -> int:
    """desched's cycles started after `after` but before the last of its watches was answered
    410: cycles on a cache that had missed changes (the stale-cache guard must hold them)."""
    def stamp(event: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00"))
    lines = [e for e in log_lines(replica.log) if "timestamp" in e and stamp(e) >= after]
    gone = [stamp(e) for e in lines if GONE in str(e.get("event", ""))]
    return sum(1 for e in lines if e.get("event") == "descheduling cycle started"
               and gone and stamp(e) < max(gone))


def watch_expired(plane: controlplane.ControlPlane, runner: Runner) -> dict[str, Any]:
    """kube-apiserver without a watch cache, etcd compacted every 2 s; the descheduler cut
    off from kube-apiserver for 6 s (a relay between them closes its connections and refuses
    new ones) while the pods keep changing. When the relay lets it through again, every watch it
    resumes starts from a resourceVersion etcd has compacted: 410 Gone, list again. The API
    server runs throughout."""
    admin = Client(config=KubeConfig.from_file(str(plane.kubeconfig)),
                   field_manager="desched-faults")
    with Relay(plane.api_port) as relay:
        runner.server = relay.server
        # The Go descheduler's reflector says "too old resource version" at --v=4.
        replica = runner.start("desched-a", *(["--v=4"] if runner.which == "go" else []))
        try:
            _first_evictions(plane)
            relay.cut()
            _touch_pods(admin, PARTITION_SECONDS)
            relay.heal()
            ended = server_now(plane)
            recovery = _recovered(plane, runner, replica)
            with suppress(TimeoutError):  # the row says 0 (a client that never came back)
                wait_until("the watches answered 410",
                           lambda: relists(replica, runner.which) > 0, timeout=60)
        finally:
            runner.stop_all()  # through the relay, while it is there
    admin.close()
    result = {"fault": "watch-expired", "ended": ended, "recovery": recovery,
              "users": {"desched-a"}, "relists": relists(replica, runner.which)}
    if runner.which == "desched":
        result["cyclesBeforeRelists"] = cycles_before_relists(replica, ended)
    return result


# The same churn with Koordinator's MigrationController (EvictDirectly): PodLifeTime's evictions
# become PodMigrationJobs that desched's own job controller carries out through the Eviction
# API. Up to 3 migrations of the Deployment at once, as the budget allows; no object limiter.
MIGRATION_POLICY = f"""\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: faults
  nodeSelector:
    matchLabels: {{fault: {NS}}}
  plugins:
    deschedule:
      enabled: [{{name: PodLifeTime}}]
  pluginConfig:
  - name: PodLifeTime
    args:
      maxPodLifeTimeSeconds: 6
      namespaces:
        include: [{NS}]
  - name: MigrationController
    args:
      defaultJobMode: EvictDirectly
      namespaces:
        include: [{NS}]
      maxMigratingPerWorkload: {MAX_UNAVAILABLE}
      maxUnavailablePerWorkload: {MAX_UNAVAILABLE}
      objectLimiters:
        workload: {{duration: 0s}}
"""
TERMINAL = ("Succeeded", "Failed")


def _phase(job: dict[str, Any]) -> str:
    return str((job.get("status") or {}).get("phase") or "Pending")


def _pod_uid(job: dict[str, Any]) -> str:
    return str(((job.get("spec") or {}).get("podRef") or {}).get("uid") or "")


class JobWatch(Sampler):
    """Every PodMigrationJob as last seen, and the pods seen with two active jobs at once."""

    def __init__(self, client: Client) -> None:
        super().__init__(client)
        self.jobs: dict[str, dict[str, Any]] = {}
        self.doubled: set[str] = set()  # pod UIDs

    def sample(self) -> None:
        active: dict[str, set[str]] = {}
        for job in self.client.list(PodMigrationJob):
            body = job.to_dict()
            name = str(body["metadata"]["name"])
            self.jobs[name] = body
            if _phase(body) not in TERMINAL:
                active.setdefault(_pod_uid(body) or name, set()).add(name)
        self.doubled |= {uid for uid, names in active.items() if len(names) > 1}

    def running(self) -> list[str]:
        return [name for name, job in self.jobs.items() if _phase(job) == "Running"]

    def twice(self) -> int:
        """Pods given a second job while one was active, or after one had evicted them."""
        succeeded = [_pod_uid(j) for j in self.jobs.values() if _phase(j) == "Succeeded"]
        per_pod: dict[str, int] = {}
        for job in self.jobs.values():
            per_pod[_pod_uid(job)] = per_pod.get(_pod_uid(job), 0) + 1
        return len(self.doubled | {uid for uid in succeeded if per_pod[uid] > 1})


def apiserver_restart_migration(plane: controlplane.ControlPlane,
                                runner: Runner) -> dict[str, Any]:
    """kube-apiserver SIGKILLed while PodMigrationJobs are Running (desched's MigrationController
    path, EvictDirectly), back 3 s later. Every job that was there by the end of the recovery
    must end Succeeded or Failed, none twice for a pod."""
    admin = Client(config=KubeConfig.from_file(str(plane.kubeconfig)))
    install_crds(admin)
    with JobWatch(admin) as jobs:
        replica = runner.start("desched-a", policy_text=MIGRATION_POLICY)
        _first_evictions(plane)
        wait_until("a PodMigrationJob Running", lambda: bool(jobs.running()), timeout=120)
        running = len(jobs.running())
        plane.restart_apiserver(down_for=3.0)
        ended = server_now(plane)
        recovery = _recovered(plane, runner, replica)
        names = set(jobs.jobs)
        with suppress(TimeoutError):  # what is still active then is stuck
            wait_until("the jobs to end", lambda: all(
                _phase(jobs.jobs[n]) in TERMINAL for n in names), timeout=90)
        stuck = sorted(n for n in names if _phase(jobs.jobs[n]) not in TERMINAL)
        phases = [_phase(jobs.jobs[n]) for n in names]
    admin.close()
    return {"fault": "apiserver-restart-migration", "ended": ended, "recovery": recovery,
            "users": {"desched-a"}, "jobsRunningAtRestart": running,
            "jobsSucceeded": phases.count("Succeeded"), "jobsFailed": phases.count("Failed"),
            "jobsStuck": stuck, "jobsTwice": jobs.twice()}


FAULTS: dict[str, Callable[[controlplane.ControlPlane, Runner], dict[str, Any]]] = {
    "apiserver-restart": apiserver_restart, "etcd-pause": etcd_pause,
    "leader-pause": leader_pause, "descheduler-kill": descheduler_kill,
    "apf-throttle": apf_throttle, "watch-expired": watch_expired,
    "apiserver-restart-migration": apiserver_restart_migration,
}
# kube-apiserver flags per fault, beside APISERVER_ARGS.
FAULT_APISERVER_ARGS: dict[str, list[str]] = {"apf-throttle": APF_ARGS,
                                              "watch-expired": WATCH_EXPIRED_ARGS}
# Faults of desched's own features, which the Go descheduler lacks (MigrationController is
# Koordinator's).
DESCHED_ONLY = {"apiserver-restart-migration"}


def apiserver_args(fault: str) -> list[str]:
    return APISERVER_ARGS + FAULT_APISERVER_ARGS.get(fault, [])


def run_fault(plane: controlplane.ControlPlane, name: str, which: str,
              workdir: Path) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    with churn(plane) as client, ReadyWatch(client) as ready:
        runner = Runner(plane, workdir, which)
        try:
            outcome = FAULTS[name](plane, runner)
        finally:
            runner.stop_all()
        exits = [r.proc.returncode for r in runner.replicas]
    users = outcome.pop("users")
    ended = outcome.pop("ended")
    result = {"descheduler": which, **outcome,
              **judge(plane, users, ready.lowest, ended), "exitCodes": exits}
    result["logs"] = [str(r.log) for r in runner.replicas]
    return result


def notes(result: dict[str, Any]) -> str:
    """What a fault's own checks found."""
    if "throttled" in result:
        return f"{result['throttled']} requests answered 429"
    if "relists" in result:
        early = result.get("cyclesBeforeRelists")
        return f"{result['relists']} watches answered 410" + (
            "" if early is None else f", {early} cycles before the last")
    if "jobsStuck" in result:
        return (f"{result['jobsRunningAtRestart']} jobs Running at the kill; "
                f"{result['jobsSucceeded']} Succeeded, {result['jobsFailed']} Failed, "
                f"{len(result['jobsStuck'])} stuck, {result['jobsTwice']} pods with two jobs")
    return ""


def table(results: list[dict[str, Any]]) -> str:
    rows = ["| fault | descheduler | evictions requested / succeeded | pods evicted twice | "
            "lowest ready (floor 9) | overlapping leaders | s to next eviction | "
            "s to recovery | notes |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        rows.append(f"| {r['fault']} | {r['descheduler']} | {r['evictionsRequested']} / "
                    f"{r['evictionsSucceeded']} | {r['podsEvictedTwice']} | {r['lowestReady']} | "
                    f"{r['overlappingLeaders']} | {r['secondsToNextEviction']} | "
                    f"{r['recovery']} | {notes(r)} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assets", default=os.environ.get(controlplane.ASSETS_ENV))
    parser.add_argument("--fault", action="append", choices=list(FAULTS))
    parser.add_argument("--descheduler", action="append", choices=["desched", "go"])
    parser.add_argument("--workdir", help="keep the planes, logs and audit logs here")
    parser.add_argument("--out")
    opts = parser.parse_args(argv)
    if not opts.assets:
        parser.error(f"need --assets or ${controlplane.ASSETS_ENV}")
    assets = Path(opts.assets).resolve()
    which = opts.descheduler or (["desched", "go"] if (assets / "descheduler").exists()
                                 else ["desched"])
    results = []
    with (tempfile.TemporaryDirectory(prefix="desched-faults-") if not opts.workdir
          else nullcontext(opts.workdir)) as tmp:
        for fault in opts.fault or list(FAULTS):
            for w in which:
                if w != "desched" and fault in DESCHED_ONLY:
                    continue
                # A fresh control plane per run: a fault leaves no trace on the next.
                with controlplane.running(assets, Path(tmp) / f"{fault}-{w}-plane",
                                          apiserver_args(fault)) as plane:
                    print(f"{fault} {w} ...", file=sys.stderr, flush=True)
                    try:
                        result = run_fault(plane, fault, w, Path(tmp) / f"{fault}-{w}")
                    except (TimeoutError, RuntimeError) as err:  # the row says so; go on
                        print(f"{fault} {w}: {err}", file=sys.stderr, flush=True)
                        continue
                    results.append(result)
                    print(table([result]), file=sys.stderr, flush=True)
    print(table(results))
    if opts.out:
        Path(opts.out).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

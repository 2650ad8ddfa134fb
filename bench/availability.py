"""Availability while a descheduler moves pods, on a real control plane: how many ready pods each
workload keeps, per mode of moving (docs/moves.md).

The cluster (kube-apiserver, kube-scheduler, the deployment, replicaset, statefulset and
disruption controllers; bench/kubelet.py stands in for the kubelets: a bound pod is Running at
once and Ready `--ready-after` seconds later, a deleted pod is gone after its grace period):

- `taints`: four 8-cpu workers. Deployments of 1, 3 and 10 replicas and a StatefulSet of 3
  (500m cpu each, default RollingUpdate strategy, grace period 2 s) land on w1 and w2 (w3 and w4
  are held back by a taint while they are placed); then w3 and w4 open and w1 and w2 are tainted
  NoSchedule. The policy: RemovePodsViolatingNodeTaints.
- `lnu`: the same workloads pile onto w1 and w2 (w3 and w4 join empty); the policy:
  LowNodeUtilization (cpu 20/50) and RemoveDuplicates; done when no node is above 50 % of its
  cpu in requests.

Each mode runs on a fresh copy of the cluster: `plain` (desched, upstream's eviction), `paced`
(`moves.maxUnavailablePerWorkload: 1`), `surge` (`moves.surgeFirst`), `zero-downtime` (both:
examples/zero-downtime/policy.yaml itself, as a user runs it, on the taints cluster of a control
plane the bench started; its moves block elsewhere), and `go` (the Go descheduler v0.36 with
the plain policy, when its binary is found). The descheduler runs every `--interval` until every
pod that must move has moved (taints: none left on a tainted node; lnu: no node above the
target) and every workload is full again, or `--timeout`. A sampler lists the pods every 100 ms.

Per workload: the lowest ready count over replicas, seconds below full, pods replaced (pods that
received a deletion while the descheduler ran), and the seconds until done.

    python bench/availability.py --assets DIR [--scenario taints|lnu ...] [--mode M ...] [--out F]
    python bench/availability.py --kubeconfig K ...   # a cluster you started (no other workers)

With `--assets` (a directory of binaries: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, and `descheduler` for the Go row; `../shared/realk8s/unpack.sh DIR` gives DIR/bin)
it starts its own control plane (tests/e2e/controlplane.py) and stops it at the end."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubelet import Kubelet
from lightkube import ApiError, Client, codecs
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Namespace, Node, Pod
from lightkube.types import PatchType

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import controlplane  # noqa: E402

LABEL = "desched-availability"
IMAGE = "registry.k8s.io/pause:3.10"
HOLD = {"key": "desched-bench/hold", "value": "true", "effect": "NoSchedule"}
TAINT = {"key": "dedicated", "value": "maintenance", "effect": "NoSchedule"}
WORKLOADS = [("Deployment", "web-1", 1), ("Deployment", "web-3", 3),
             ("Deployment", "web-10", 10), ("StatefulSet", "db-3", 3)]
TARGET = 50.0  # lnu: LowNodeUtilization's targetThresholds cpu
MODES = ["plain", "paced", "surge", "zero-downtime", "go"]
MOVES: dict[str, dict[str, Any]] = {
    "plain": {}, "go": {},
    "paced": {"maxUnavailablePerWorkload": 1},
    "surge": {"surgeFirst": True},
    "zero-downtime": {},  # read from examples/zero-downtime/policy.yaml
}


EXAMPLE = REPO / "examples" / "zero-downtime" / "policy.yaml"


def example_moves() -> dict[str, Any]:
    policy = yaml.safe_load(EXAMPLE.read_text())
    return dict(policy.get("moves") or {})


def policy(scenario: str, ns: str, moves: dict[str, Any]) -> dict[str, Any]:
    if scenario == "taints":
        plugins: dict[str, Any] = {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}}
        config: list[dict[str, Any]] = [
            {"name": "RemovePodsViolatingNodeTaints",
             "args": {"namespaces": {"include": [ns]}}}]
    else:
        plugins = {"balance": {"enabled": ["RemoveDuplicates", "LowNodeUtilization"]}}
        config = [
            {"name": "RemoveDuplicates", "args": {"namespaces": {"include": [ns]}}},
            {"name": "LowNodeUtilization", "args": {
                "thresholds": {"cpu": 20}, "targetThresholds": {"cpu": TARGET},
                "evictableNamespaces": {"exclude": ["kube-system"]}}}]
    doc: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "nodeSelector": f"{LABEL}={ns}",
        "profiles": [{"name": "availability",
                      "pluginConfig": [{"name": "DefaultEvictor"}, *config],
                      "plugins": plugins}]}
    if moves:
        doc["moves"] = moves
    return doc


# -- the cluster ----------------------------------------------------------------------------------

def own_taint(ns: str) -> dict[str, str]:
    """On every node of the run: other tests' pods (placement fidelity shares the cluster)
    stay off them, and the run's pods, which tolerate it, stay on them (nodeSelector)."""
    return {"key": LABEL, "value": ns, "effect": "NoSchedule"}


def workload_object(kind: str, name: str, replicas: int, ns: str) -> dict[str, Any]:
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": {
        "terminationGracePeriodSeconds": 2, "automountServiceAccountToken": False,
        "enableServiceLinks": False, "nodeSelector": {LABEL: ns},
        "tolerations": [{"key": LABEL, "operator": "Equal", "value": ns,
                         "effect": "NoSchedule"}],
        "containers": [{"name": "app", "image": IMAGE,
                        "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]}}
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": labels},
                            "template": template}
    if kind == "StatefulSet":
        spec |= {"serviceName": name, "podManagementPolicy": "Parallel"}
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def app_of(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get("app", ""))


@dataclass
class Sample:
    t: float
    ready: dict[str, int]
    on_tainted: int
    deleting: set[str]  # uids


@dataclass
class Cluster:
    client: Client
    scenario: str
    ns: str = field(default_factory=lambda: f"avail-{secrets.token_hex(3)}")
    nodes: list[str] = field(default_factory=list)

    def pods(self) -> list[dict[str, Any]]:
        return [p.to_dict() for p in self.client.list(Pod, namespace=self.ns)]

    def build(self, kubelet: Kubelet, timeout: float) -> None:
        self.client.create(codecs.from_dict({"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": self.ns,
                                                          "labels": {LABEL: "1"}}}))
        for i in range(1, 5):
            name = f"{self.ns}-w{i}"
            kubelet.add_node(name, cpu="8", labels={LABEL: self.ns},
                             taints=[own_taint(self.ns), *([HOLD] if i > 2 else [])])
            self.nodes.append(name)
        for kind, name, replicas in WORKLOADS:
            self.client.create(codecs.from_dict(workload_object(kind, name, replicas, self.ns)))
        self.wait_full(timeout)
        if self.scenario == "taints":
            for name in self.nodes[:2]:
                self._taints(name, [own_taint(self.ns), TAINT])
        for name in self.nodes[2:]:
            self._taints(name, [own_taint(self.ns)])

    def _taints(self, node: str, taints: list[dict[str, str]]) -> None:
        self.client.patch(Node, node, {"spec": {"taints": taints}}, patch_type=PatchType.MERGE)

    def full(self, pods: list[dict[str, Any]]) -> bool:
        counts = self.ready_counts(pods)
        return all(counts.get(name, 0) == replicas for _, name, replicas in WORKLOADS) \
            and not any(p["metadata"].get("deletionTimestamp") for p in pods)

    @staticmethod
    def ready_counts(pods: list[dict[str, Any]]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for p in pods:
            if ready(p):
                counts[app_of(p)] = counts.get(app_of(p), 0) + 1
        return counts

    def wait_full(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.full(self.pods()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.ns}: workloads not ready after {timeout:g} s")
            time.sleep(0.3)

    def on_tainted(self, pods: list[dict[str, Any]]) -> int:
        if self.scenario != "taints":
            return 0
        tainted = set(self.nodes[:2])
        return sum(1 for p in pods if p["spec"].get("nodeName") in tainted
                   and not p["metadata"].get("deletionTimestamp"))

    def cleanup(self) -> None:
        for action in [lambda: self.client.delete(Namespace, self.ns),
                       *[lambda n=n: self.client.delete(Node, n) for n in self.nodes]]:
            try:
                action()
            except ApiError as err:
                if err.status.code != 404:
                    raise
        for pod in self.client.list(Pod, namespace=self.ns):
            with suppress(ApiError):
                self.client.delete(Pod, pod.metadata.name, namespace=self.ns, grace_period=0)


class Sampler:
    """Lists the namespace's pods every `every` seconds, in its own thread."""

    def __init__(self, cluster: Cluster, every: float = 0.1) -> None:
        self.cluster, self.every = cluster, every
        self.samples: list[Sample] = []
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                pods = self.cluster.pods()
            except Exception:  # a slow answer is a gap in the samples, not the end
                continue
            self.samples.append(Sample(
                started - self.t0, self.cluster.ready_counts(pods),
                self.cluster.on_tainted(pods),
                {p["metadata"]["uid"] for p in pods if p["metadata"].get("deletionTimestamp")}))
            self._stop.wait(max(0.0, self.every - (time.monotonic() - started)))

    def latest(self) -> Sample | None:
        return self.samples[-1] if self.samples else None


# -- the descheduler ------------------------------------------------------------------------------

def descheduler_command(mode: str, policy_file: Path, kubeconfig: str, interval: float,
                        go_binary: Path | None) -> list[str]:
    if mode == "go":
        assert go_binary is not None
        return [str(go_binary), "--kubeconfig", kubeconfig, "--policy-config-file",
                str(policy_file), "--descheduling-interval", f"{interval:g}s", "--v=3"]
    return [sys.executable, "-m", "desched", "run", "--policy", str(policy_file),
            "--kubeconfig", kubeconfig, "--interval", f"{interval:g}s", "--log-format", "json"]


@contextmanager
def process(command: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def restarted(client: Client, ns: str) -> list[str]:
    """The Deployments restarted as `kubectl rollout restart` does (the template's annotation)."""
    names = []
    for d in client.list(Deployment, namespace=ns):
        template = d.spec.template if d.spec is not None else None
        annotations = (template.metadata.annotations if template is not None
                       and template.metadata is not None else None) or {}
        if RESTARTED_AT in annotations and d.metadata is not None:
            names.append(str(d.metadata.name))
    return sorted(names)


def run_mode(client: Client, kubeconfig: str, scenario: str, mode: str,
             opts: argparse.Namespace) -> dict[str, Any]:
    cluster = Cluster(client, scenario)
    work = Path(opts.workdir) / f"{scenario}-{mode}"
    work.mkdir(parents=True, exist_ok=True)
    moves = example_moves() if mode == "zero-downtime" else MOVES[mode]
    with Kubelet(client, [], ready_after=opts.ready_after, namespace=cluster.ns) as kubelet:
        try:
            cluster.build(kubelet, timeout=opts.timeout)
            before = {p["metadata"]["uid"]: p["spec"].get("nodeName") for p in cluster.pods()}
            policy_file = work / "policy.yaml"
            policy_file.write_text(yaml.safe_dump(policy(scenario, cluster.ns, moves),
                                                  sort_keys=False))
            if (mode == "zero-downtime" and scenario == "taints"
                    and getattr(opts, "own_plane", False)):
                # The cluster is the bench's alone: the example runs as a user runs it.
                policy_file = EXAMPLE
            command = descheduler_command(mode, policy_file, kubeconfig, opts.interval,
                                          opts.go_binary)
            log = work / "descheduler.log"
            with Sampler(cluster) as sampler, process(command, log) as proc:
                done_at = wait_done(cluster, sampler, proc, before, opts)
            result = measure(sampler, before, done_at)
            result["balanceAfter"] = balance(cluster)
            result |= {"mode": mode, "scenario": scenario, "namespace": cluster.ns,
                       "restarted": restarted(client, cluster.ns), "log": str(log)}
            result["restarts"] = len(result["restarted"])
            (work / "result.json").write_text(json.dumps(result, indent=1))
            return result
        finally:
            if not opts.keep:
                cluster.cleanup()


def moved(before: dict[str, str], sampler: Sampler) -> int:
    """Pods of the cluster as built that have received a deletion."""
    gone: set[str] = set()
    for s in sampler.samples:
        gone |= s.deleting
    return len(gone & set(before))


def wait_done(cluster: Cluster, sampler: Sampler, proc: subprocess.Popen[bytes],
              before: dict[str, str], opts: argparse.Namespace) -> float | None:
    """Seconds (sampler's clock) at which every pod that must move has moved and every workload
    is full again for a second; None on timeout."""
    deadline = time.monotonic() + opts.timeout
    full_since: float | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the descheduler exited {proc.returncode}")
        time.sleep(0.2)
        now = sampler.latest()
        if now is None:
            continue
        pods = cluster.pods()
        if cluster.scenario == "taints":
            moved_all = now.on_tainted == 0
        else:  # balanced: no node above the policy's targetThreshold (50 % cpu), one move made
            moved_all = (moved(before, sampler) >= 1
                         and max(balance(cluster, pods)["cpuPercentByNode"]) <= TARGET)
        if moved_all and cluster.full(pods):
            full_since = full_since or now.t
            if now.t - full_since >= 1.0:
                return full_since
        else:
            full_since = None
    return None


def measure(sampler: Sampler, before: dict[str, str], done_at: float | None) -> dict[str, Any]:
    samples = sampler.samples
    workloads: dict[str, Any] = {}
    for kind, name, replicas in WORKLOADS:
        lowest = min((s.ready.get(name, 0) for s in samples), default=0)
        below = sum(b.t - a.t for a, b in itertools.pairwise(samples)
                    if a.ready.get(name, 0) < replicas)
        workloads[name] = {"kind": kind, "replicas": replicas, "lowestReady": lowest,
                           "secondsBelowFull": round(below, 1)}
    return {"workloads": workloads, "podsReplaced": moved(before, sampler),
            "secondsToDone": None if done_at is None else round(done_at, 1),
            "samples": len(samples)}


def balance(cluster: Cluster, pods: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """cpu requests over allocatable (8 cpu) per node once done, from the lowest; and their
    population std: the balance each mode reaches, to set beside plain eviction's."""
    used = dict.fromkeys(cluster.nodes, 0.0)
    for p in cluster.pods() if pods is None else pods:
        node = p["spec"].get("nodeName")
        if node in used and not p["metadata"].get("deletionTimestamp"):
            used[node] += sum(_cpu(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
                              for c in p["spec"]["containers"])
    percents = sorted(round(100 * v / 8, 2) for v in used.values())
    mean = sum(percents) / len(percents)
    std = (sum((x - mean) ** 2 for x in percents) / len(percents)) ** 0.5
    return {"cpuPercentByNode": percents, "std": round(std, 2)}


def _cpu(text: str) -> float:
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def table(results: list[dict[str, Any]]) -> str:
    rows = ["| scenario | mode | workload | lowest ready | seconds below full |",
            "|---|---|---|---|---|"]
    for r in results:
        for name, w in r["workloads"].items():
            rows.append(f"| {r['scenario']} | {r['mode']} | {w['kind']} {name} | "
                        f"{w['lowestReady']}/{w['replicas']} | {w['secondsBelowFull']} |")
    rows += ["", "| scenario | mode | pods replaced | restarts | seconds to done | "
                 "cpu requests per node after (%) |", "|---|---|---|---|---|---|"]
    for r in results:
        done = r["secondsToDone"] if r["secondsToDone"] is not None else "timeout"
        after = r.get("balanceAfter", {}).get("cpuPercentByNode", "")
        rows.append(f"| {r['scenario']} | {r['mode']} | {r['podsReplaced']} | "
                    f"{r['restarts']} | {done} | {after} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--assets", default=os.environ.get(controlplane.ASSETS_ENV))
    parser.add_argument("--scenario", action="append", choices=["taints", "lnu"])
    parser.add_argument("--mode", action="append", choices=MODES)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--ready-after", type=float, default=3.0)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--workdir", default="/tmp/desched-availability")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--out")
    opts = parser.parse_args(argv)
    if not opts.kubeconfig and not opts.assets:
        parser.error("need --kubeconfig or --assets")
    assets = Path(opts.assets) if opts.assets else None
    found = assets / "descheduler" if assets else None
    opts.go_binary = found if found and found.exists() else None
    modes = opts.mode or [m for m in MODES if m != "go" or opts.go_binary]
    if "go" in modes and opts.go_binary is None:
        parser.error("mode go needs the Go descheduler binary in --assets")
    with (controlplane.running(assets.resolve()) if not opts.kubeconfig and assets
          else _given(opts.kubeconfig)) as plane:
        kubeconfig = opts.kubeconfig or str(plane.kubeconfig)
        opts.own_plane = plane is not None
        client = Client(config=KubeConfig.from_file(kubeconfig), field_manager="desched-bench")
        results = []
        for scenario in opts.scenario or ["taints"]:
            for mode in modes:
                print(f"{scenario} {mode} ...", file=sys.stderr, flush=True)
                result = run_mode(client, kubeconfig, scenario, mode, opts)
                results.append(result)
                print(table([result]), file=sys.stderr, flush=True)
    print(table(results))
    if opts.out:
        Path(opts.out).write_text(json.dumps(results, indent=1))
    return 0


@contextmanager
def _given(kubeconfig: str) -> Iterator[Any]:
    yield None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

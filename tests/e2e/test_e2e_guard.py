"""PingPongGuard against the real kube-scheduler: the guard refuses the eviction whose
replacement kube-scheduler would put back on the pod's own node, lets through the one it
would put elsewhere, and kube-scheduler agrees (without the guard the refused pod's replacement
does land on its own node).

The cluster (bench/placement_fidelity.py's building blocks; kube-scheduler places every pod,
pods are deleted at once, terminationGracePeriodSeconds 0):

- phase 1: node `busy` (8 cpu, 32Gi) alone; ReplicaSets `filler` (6 × 1 cpu) and `b` (1 × 1 cpu)
  all land on it (7 of 8 cpu);
- phase 2: node `roomy` (16 cpu, 64Gi) joins; ReplicaSet `a` (1 × 1 cpu) lands on it, the
  emptiest node.

PodLifeTime (maxPodLifeTimeSeconds 1, only `a` and `b`) wants both. A's replacement: `roomy`
once A is gone (0 of 16 cpu) beats `busy` (7 of 8): back on its own node. B's: `roomy` (1 of 16)
beats `busy` without B (6 of 8): another node.

Needs kube-scheduler and the ReplicaSet controller, like test_e2e_placement.py (see README.md,
"Placement fidelity"); takes turns with it and with the bench (their lock), and deletes every
Node and Namespace labelled `desched-fidelity` before and after."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import placement_fidelity as fidelity  # noqa: E402

# One worker takes these in turn (they share the cluster's nodes: a lock), the others go on.
pytestmark = [pytest.mark.needs("kube-scheduler", "kube-controller-manager"),
              pytest.mark.xdist_group("fidelity"), pytest.mark.timeout(600)]
SCENARIO = "guard"
MAX_AGE = 1  # PodLifeTime's maxPodLifeTimeSeconds
REASON = "replacement would land on {node} again (kube-default)"


def scenario() -> fidelity.Scenario:
    return fidelity.Scenario(
        SCENARIO, "PingPongGuard: A comes back to its node, B goes elsewhere", [
            fidelity.Phase(nodes=[fidelity.NodeSpec("busy", "8", "32Gi", "za")],
                           workloads=[fidelity.Workload("filler", 6, "1", "4Gi"),
                                      fidelity.Workload("b", 1, "1", "4Gi")]),
            fidelity.Phase(nodes=[fidelity.NodeSpec("roomy", "16", "64Gi", "za")],
                           workloads=[fidelity.Workload("a", 1, "1", "4Gi")]),
        ],
        lambda sc, ns: policy(ns, guarded=True), settle_timeout=120.0)


def policy(ns: str, guarded: bool) -> dict[str, Any]:
    """PodLifeTime on the pods of `a` and `b` (upstream v1alpha2), PingPongGuard (kube-default)
    as a preEvictionFilter when `guarded`."""
    config: list[dict[str, Any]] = [
        {"name": "DefaultEvictor"},
        {"name": "PodLifeTime", "args": {
            "maxPodLifeTimeSeconds": MAX_AGE,
            "namespaces": {"include": [ns]},
            "labelSelector": {"matchExpressions": [
                {"key": fidelity.NAME, "operator": "In", "values": ["a", "b"]}]}}}]
    plugins: dict[str, Any] = {"deschedule": {"enabled": ["PodLifeTime"]}}
    if guarded:
        config.append({"name": "PingPongGuard", "args": {"scheduler": "kube-default"}})
        plugins["preEvictionFilter"] = {"enabled": ["PingPongGuard"]}
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "nodeSelector": f"{fidelity.LABEL}={SCENARIO}",
            "profiles": [{"name": "guard", "pluginConfig": config, "plugins": plugins}]}


class Built:
    """The scenario's cluster, settled, with its pods A and B and their nodes."""

    def __init__(self, kube: fidelity.Kube, work: Path, guarded: bool) -> None:
        self.kube = kube
        opts = fidelity.Options(kube.kubeconfig, work, log=lambda text: None)
        self.ns, self.before = fidelity.build(kube, scenario(), opts)
        self.nodes = kube.node_objects()
        self.classes = fidelity.node_classes(self.nodes, self.before)
        by_owner: dict[str, list[dict[str, Any]]] = {}
        for pod in self.before:
            by_owner.setdefault(fidelity.owner_of(pod), []).append(pod)
        assert sorted(len(pods) for pods in by_owner.values()) == [1, 1, 6], by_owner.keys()
        self.a, self.b = by_owner["a"][0], by_owner["b"][0]
        self.a_node, self.b_node = self.a["spec"]["nodeName"], self.b["spec"]["nodeName"]
        busy, roomy = f"{SCENARIO}-busy", f"{SCENARIO}-roomy"
        # kube-scheduler built the cluster as the scenario says, or the test proves nothing.
        assert {fidelity.owner_of(p) for p in self.before
                if p["spec"]["nodeName"] == busy} == {"filler", "b"}, self.layout()
        assert self.a_node == roomy, self.layout()
        self.policy = work / ("policy-guard.yaml" if guarded else "policy.yaml")
        self.policy.write_text(yaml.safe_dump(policy(self.ns, guarded), sort_keys=False),
                               encoding="utf-8")
        self.guarded_policy = work / "policy-guard.yaml"
        if not guarded:
            self.guarded_policy.write_text(yaml.safe_dump(policy(self.ns, True), sort_keys=False),
                                           encoding="utf-8")
        # PodLifeTime counts from creationTimestamp: every pod of a and b older than MAX_AGE.
        time.sleep(MAX_AGE + 1.5)
        self.work = work

    def key(self, pod: dict[str, Any]) -> str:
        return f"{self.ns}/{pod['metadata']['name']}"

    def layout(self) -> str:
        return ", ".join(sorted(f"{p['metadata']['name']}@{p['spec'].get('nodeName')}"
                                for p in self.before))

    def simulate(self, policy: Path) -> dict[str, Any]:
        """`desched snapshot` of the cluster now, then `desched simulate --reschedule` of
        `policy` on it (JSON)."""
        snap = self.work / f"snap-{policy.stem}.json"
        self.kube.heartbeat(force=True)
        fidelity.desched("snapshot", "--kubeconfig", self.kube.kubeconfig, "--out", str(snap))
        sim = fidelity.desched("simulate", "--policy", str(policy), "--snapshot", str(snap),
                               "--reschedule", "--scheduler", "kube-default", "--output", "json")
        (self.work / f"simulate-{policy.stem}.json").write_text(sim.stdout, encoding="utf-8")
        self.snapshot = snap
        return dict(json.loads(sim.stdout))

    def explain(self, policy: Path, pod: dict[str, Any]) -> str:
        """`desched explain --pod` on the last snapshot: the verdicts on one pod, by name."""
        proc = fidelity.desched("explain", "--policy", str(policy), "--snapshot",
                                str(self.snapshot), "--pod", self.key(pod))
        return proc.stdout

    def run(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """`desched run --once` of the test's policy, then the cluster settled again (every
        replacement created, bound, reported Running): the JSON log lines and the pods."""
        self.kube.heartbeat(force=True)
        proc = fidelity.desched("run", "--once", "--policy", str(self.policy), "--kubeconfig",
                                self.kube.kubeconfig, "--log-format", "json")
        (self.work / f"run-{self.policy.stem}.log").write_text(proc.stderr, encoding="utf-8")
        log = []
        for line in proc.stderr.splitlines():
            if line.startswith("{"):
                try:
                    log.append(json.loads(line))
                except ValueError:
                    continue
        after = self.kube.settle(self.ns, 120.0)
        return log, after

    def replacement(self, after: list[dict[str, Any]], owner: str) -> dict[str, Any]:
        known = {p["metadata"]["name"] for p in self.before}
        new = [p for p in after if fidelity.owner_of(p) == owner
               and p["metadata"]["name"] not in known]
        assert len(new) == 1, (owner, [p["metadata"]["name"] for p in after])
        return new[0]


@pytest.fixture
def kube(kubeconfig: str) -> Iterator[fidelity.Kube]:
    """The cluster, on our turn (the bench's and test_e2e_placement.py's lock: each deletes
    every node and namespace labelled desched-fidelity); cleaned up afterwards."""
    with fidelity.cluster_turn():
        k = fidelity.Kube(kubeconfig)
        try:
            yield k
        finally:
            try:
                k.cleanup()
            finally:
                k.close()


def kept(simulated: dict[str, Any]) -> dict[str, int]:
    """reason -> how many pods a filter kept for it, from simulate's JSON (`skipped`)."""
    out: dict[str, int] = {}
    for entry in simulated.get("skipped", []):
        out[entry["reason"]] = out.get(entry["reason"], 0) + int(entry["pods"])
    return out


def evicted(simulated: dict[str, Any]) -> set[str]:
    return {f"{e['namespace']}/{e['pod']}" for e in simulated["evictions"]}


def guard_lines(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The live run's log lines that carry the guard's words (a plugin that evicted nothing
    notes what it kept and why; one that evicted something does not)."""
    return [e for e in log if "replacement would land" in json.dumps(e)]


def test_guard_refuses_the_pod_that_would_come_back(kube: fidelity.Kube, tmp_path: Path) -> None:
    """With the guard, `desched run --once` keeps A and evicts B, as `desched simulate` on a
    snapshot of the same cluster predicts, with the reason "replacement would land on <A's
    node> again (kube-default)" for A (`desched explain` names the pod); kube-scheduler puts
    B's replacement on another node."""
    c = Built(kube, tmp_path, guarded=True)
    b = c.key(c.b)
    reason = REASON.format(node=c.a_node)

    predicted = c.simulate(c.policy)
    assert evicted(predicted) == {b}, predicted
    assert kept(predicted) == {reason: 1}, predicted["skipped"]
    assert reason in c.explain(c.policy, c.a), c.explain(c.policy, c.a)
    assert "replacement would land" not in c.explain(c.policy, c.b)

    log, after = c.run()
    assert fidelity.evicted_in_log("\n".join(json.dumps(e) for e in log)) == [b], log
    # Whatever the log says of the guard is about A's node only.
    for line in guard_lines(log):
        assert reason in json.dumps(line) and c.b_node not in json.dumps(line), line
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in after}
    assert nodes.get(c.a["metadata"]["name"]) == c.a_node, nodes  # A stays where it was
    assert c.b["metadata"]["name"] not in nodes, nodes
    assert [p for p in after if fidelity.owner_of(p) == "a"] == \
        [p for p in after if p["metadata"]["name"] == c.a["metadata"]["name"]], nodes
    landed = c.replacement(after, "b")["spec"]["nodeName"]
    assert landed and c.classes[landed] != c.classes[c.b_node], (
        f"B's replacement landed on {landed}, like B's own node {c.b_node} "
        f"(classes {c.classes}): the guard should have refused it")


def test_without_guard_kube_scheduler_puts_a_back(kube: fidelity.Kube, tmp_path: Path) -> None:
    """Without the guard, `desched run --once` evicts A and B; kube-scheduler puts A's
    replacement back on A's node (or one identical to it) and B's on another node: what the
    guard predicts, on a snapshot of this same cluster, for either pod."""
    c = Built(kube, tmp_path, guarded=False)
    a, b = c.key(c.a), c.key(c.b)

    guarded = c.simulate(c.guarded_policy)  # the guard's verdicts on this very cluster
    assert evicted(guarded) == {b}, guarded
    assert kept(guarded) == {REASON.format(node=c.a_node): 1}, guarded["skipped"]
    plain = c.simulate(c.policy)
    assert evicted(plain) == {a, b}, plain
    predicted = {e["replaces"]: e["node"] for e in plain["rescheduled"]}

    log, after = c.run()
    assert sorted(fidelity.evicted_in_log("\n".join(json.dumps(e) for e in log))) == \
        sorted([a, b]), log
    assert not guard_lines(log), log
    names = {p["metadata"]["name"] for p in after}
    assert not names & {c.a["metadata"]["name"], c.b["metadata"]["name"]}, names
    landed_a = c.replacement(after, "a")["spec"]["nodeName"]
    landed_b = c.replacement(after, "b")["spec"]["nodeName"]
    assert landed_a and c.classes[landed_a] == c.classes[c.a_node], (
        f"A's replacement on {landed_a}, not on A's node {c.a_node} (classes {c.classes}): "
        f"the guard's refusal was wrong")
    assert landed_b and c.classes[landed_b] != c.classes[c.b_node], (
        f"B's replacement back on {landed_b} (B's node {c.b_node}): the guard's allowance "
        f"was wrong")
    # simulate --reschedule, without the guard, put them there too.
    assert predicted == {a: landed_a, b: landed_b}, predicted

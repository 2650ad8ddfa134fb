"""The verdicts `simulate` gives, each built from a case where an earlier report cried wolf
(issue 36): churn only where there is churn (each plugin judged by what its evictions exist
for), draining paced by a budget or a limit told as paced with the budget named, and a summary
that counts every pod once: evicted, refused (with the attempts beside), paced, kept."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from desched.framework.decisions import DecisionLog
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import load_policy
from desched.report.render import render
from desched.simulate import whatif
from desched.simulate.simulation import CycleSummary, Evicted, SimulationResult, run_simulation
from desched.snapshot.clock import SimulationClock

REPO = Path(__file__).resolve().parents[2]
PLUGIN_EXAMPLES = REPO / "examples" / "plugins"
sys.path.insert(0, str(REPO / "bench"))


def simulate(policy: Path, snapshot: Path, cycles: int = 1,
             reschedule: bool = False) -> SimulationResult:
    """As `desched simulate` runs it (frames for the balance figures), quietly."""
    return run_simulation(str(policy), [str(snapshot)], None, cycles, reschedule,
                          with_frames=True, warn=lambda _: None)


def example(name: str, cycles: int = 1, reschedule: bool = False) -> SimulationResult:
    return simulate(PLUGIN_EXAMPLES / name / "policy.yaml", PLUGIN_EXAMPLES / name / "cluster.yaml",
                    cycles, reschedule)


def report(result: SimulationResult) -> tuple[str, dict[str, Any]]:
    """The text and the JSON of one result."""
    out: dict[str, Any] = json.loads(render(result, "json"))
    return render(result, "text"), out


# Plugins that do not balance are judged by what they exist for ----------------------------


@pytest.mark.parametrize("reschedule", [False, True])
def test_failed_pods_removed_are_not_churn(reschedule: bool) -> None:
    """RemoveFailedPods removes two Failed pods, as it exists to: no balance figure had to move
    (a Failed pod requests nothing), and a fresh pod back on its node is what it wanted."""
    text, out = report(example("RemoveFailedPods", reschedule=reschedule))
    assert [e["plugin"] for e in out["evictions"]] == ["RemoveFailedPods"] * 2
    assert "churn" not in text[:text.index("cycle 1:")]
    assert out["churn"]["noBalanceChange"] == [] and out["churn"]["backOnSource"] == []
    assert out["churn"]["flaggedEvictions"] == 0


@pytest.mark.parametrize("name", ["RemovePodsViolatingNodeTaints",
                                  "RemovePodsViolatingInterPodAntiAffinity"])
def test_a_violation_removed_is_not_churn_for_leaving_the_balance_as_it_was(name: str) -> None:
    """A taint honoured, an anti-affinity restored: with --reschedule the figures can stay as
    they were (a pod moved between two equal nodes), which is no verdict on these plugins."""
    result = example(name, reschedule=True)
    text, out = report(result)
    assert len(out["evictions"]) == 2
    assert not whatif.churn(result)
    assert "churn:" not in text and out["churn"]["flaggedEvictions"] == 0


def _policy(tmp_path: Path, plugin: str, point: str, args: dict[str, Any]) -> Any:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "profiles": [{"name": "p", "pluginConfig": [{"name": plugin, "args": args}],
                      "plugins": {point: {"enabled": [plugin]}}}]}))
    return load_policy(str(path), PLUGINS)


@pytest.mark.parametrize(("plugin", "point", "args", "churn"), [
    ("RemovePodsViolatingNodeTaints", "deschedule", {}, True),  # the taint it left is back
    ("RemoveDuplicates", "balance", {}, True),  # the duplicate is back on the node
    ("PodLifeTime", "deschedule", {"maxPodLifeTimeSeconds": 60}, False),  # a fresh pod
    ("RemovePodsHavingTooManyRestarts", "deschedule", {"podRestartThreshold": 5}, False),
])
def test_back_on_its_node_is_churn_for_a_plugin_that_moves_pods_off_it(
        tmp_path: Path, plugin: str, point: str, args: dict[str, Any], churn: bool) -> None:
    """The replacement placed on the node its pod left undoes an eviction meant to take the
    pod off that node; it is the point of one meant to give the workload a fresh pod."""
    summary = CycleSummary(1, evicted={"shop/web-0": Evicted("worker-1", "Deployment shop/web",
                                                             plugin)},
                           placements=[("shop/web-0-r1", "worker-1")],
                           replaces={"shop/web-0-r1": "shop/web-0"})
    result = SimulationResult(_policy(tmp_path, plugin, point, args), [], 2, 1, 1, DecisionLog(),
                              [summary], SimulationClock(datetime(2026, 1, 1, tzinfo=UTC), ""))
    found = whatif.churn(result)
    assert [b.node for b in found.back_on_source] == (["worker-1"] if churn else [])
    assert found.flagged == ({"shop/web-0"} if churn else set())


# Real churn stays flagged ------------------------------------------------------------------


def test_a_replacement_evicted_again_is_churn_and_named() -> None:
    """HighNodeUtilization empties worker-3, kube-scheduler puts the pods right back, and the
    next cycle evicts the replacements: back on source, evicted again, and no figure moved."""
    text, out = report(example("HighNodeUtilization", cycles=3, reschedule=True))
    churn = text[text.index("  churn:"):text.index("cycle 1:")]
    assert "5 replacement(s) placed back on the node their pod was evicted from" in churn
    assert "2 workload(s) whose replacement was evicted again" in churn
    assert "4 eviction(s) by a balancing plugin changed no balance figure" in churn
    again = {r["workload"]: r["replacementsEvicted"] for r in out["churn"]["repeatedWorkloads"]}
    assert again == {"Job shop/nightly-report": ["shop/batch-0-r1", "shop/batch-0-r2"],
                     "ReplicaSet shop/api-7c4b2": ["shop/api-0-r1", "shop/api-0-r2"]}
    # Each flagged once though several verdicts name it: all but cycle 1's eviction from
    # worker-4, whose replacement went to worker-3.
    assert out["churn"]["flaggedEvictions"] == 5


# Draining paced by a budget or a limit -------------------------------------------------------


def _hot_cluster(pods: int, budget: int | None) -> dict[str, Any]:
    """A Deployment's `pods` pods at 15 % of a hot node's cpu each, two idle nodes, and, with
    `budget`, a PodDisruptionBudget allowing that many pods down."""
    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"kubernetes.io/hostname": name}},
         "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}
        for name in ("hot", "idle-1", "idle-2")]
    items += [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": "web", "namespace": "shop", "uid": "d-web"},
         "spec": {"replicas": pods, "selector": {"matchLabels": {"app": "web"}}},
         "status": {"replicas": pods, "readyReplicas": pods, "availableReplicas": pods}},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
            "name": "web-5d8f9", "namespace": "shop", "uid": "rs-web",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                 "uid": "d-web", "controller": True}]},
         "spec": {"replicas": pods, "selector": {"matchLabels": {"app": "web"}}},
         "status": {"replicas": pods, "readyReplicas": pods, "availableReplicas": pods}}]
    items += [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"web-5d8f9-{i}", "namespace": "shop", "uid": f"web-{i}",
            "labels": {"app": "web"}, "creationTimestamp": "2026-11-01T00:00:00Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": "web-5d8f9", "uid": "rs-web", "controller": True}]},
         "spec": {"nodeName": "hot", "containers": [{"name": "c", "image": "i", "resources": {
             "requests": {"cpu": "600m", "memory": "256Mi"}}}]},
         "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
        for i in range(pods)]
    if budget is not None:
        items.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {
            "name": "web-pdb", "namespace": "shop"},
            "spec": {"minAvailable": pods - budget, "selector": {"matchLabels": {"app": "web"}}}})
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _lnu(tmp_path: Path, cluster: dict[str, Any], limit: int | None = None) -> tuple[Path, Path]:
    """LowNodeUtilization on cpu: under 20 % receives, over 50 % sheds."""
    policy: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [{
            "name": "default", "pluginConfig": [{"name": "LowNodeUtilization", "args": {
                "thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}}}],
            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
    if limit is not None:
        policy["maxNoOfPodsToEvictPerNode"] = limit
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    (tmp_path / "cluster.json").write_text(json.dumps(cluster))
    return tmp_path / "policy.yaml", tmp_path / "cluster.json"


def test_a_drain_paced_by_a_budget_is_paced_not_ping_pong(tmp_path: Path) -> None:
    """Seven pods at 15 % each on a node over 50 %, a budget of one: each cycle evicts one and
    the budget refuses the others; the next cycle, the replacement Ready, evicts another. The
    workload is evicted in three cycles and no pod moves twice: paced, its budget named."""
    result = simulate(*_lnu(tmp_path, _hot_cluster(7, budget=1)), cycles=3, reschedule=True)
    text, out = report(result)
    assert [e["cycle"] for e in out["evictions"]] == [1, 2, 3]
    assert not whatif.churn(result) and "churn:" not in text
    assert out["churn"]["repeatedWorkloads"] == []
    paced = out["summary"]["paced"]
    assert paced == {"pods": 2, "workloads": [{
        "workload": "Deployment shop/web", "by": ["PodDisruptionBudget shop/web-pdb"],
        "cycles": [1, 2, 3], "pods": 2}]}
    assert ("  paced: 2 of the evicted pod(s), of 1 workload(s), evicted in a later cycle than "
            "one that held their workload back (Deployment shop/web by PodDisruptionBudget "
            "shop/web-pdb in cycles 1, 2, 3): not churn") in text


def test_a_pod_refused_in_three_cycles_is_one_refused_pod_and_three_attempts(
        tmp_path: Path) -> None:
    """The four pods the budget held back in every cycle are four refused pods, with twelve
    attempts beside; the two it held back and a later cycle evicted are paced, not refused."""
    result = simulate(*_lnu(tmp_path, _hot_cluster(7, budget=1)), cycles=3, reschedule=True)
    text, out = report(result)
    blocked = [r for r in out["refusals"] if r["outcome"] == "pdb-blocked"]
    assert len({r["pod"] for r in blocked}) == 6  # refused at least once
    assert out["summary"]["refused"] == {"pods": 4, "attempts": 12, "by": [
        {"outcome": "pdb-blocked", "pods": 4, "attempts": 12}]}
    assert out["summary"]["evicted"] == 3
    assert "  refused: 4 pod(s) never evicted, by a PodDisruptionBudget (12 attempt(s))" in text


def test_a_drain_paced_by_a_limit_names_the_limit(tmp_path: Path) -> None:
    """No budget, maxNoOfPodsToEvictPerNode 1: the limit holds the second pod back each cycle,
    the next cycle evicts it."""
    result = simulate(*_lnu(tmp_path, _hot_cluster(5, budget=None), limit=1), cycles=2,
                      reschedule=True)
    text, out = report(result)
    assert [e["cycle"] for e in out["evictions"]] == [1, 2]
    assert not whatif.churn(result)
    assert out["summary"]["paced"]["workloads"] == [{
        "workload": "Deployment shop/web", "by": ["maxNoOfPodsToEvictPerNode"],
        "cycles": [1, 2], "pods": 1}]
    assert "by maxNoOfPodsToEvictPerNode in cycles 1, 2" in text


def test_the_300_node_production_drain_is_paced_not_ping_pong(tmp_path: Path) -> None:
    """The issue's run: bench/generate_production.py's 300 nodes and 6,000 pods, the
    LowNodeUtilization example (local storage evictable, as most of these pods have it), three
    cycles with --reschedule. The budgets (maxUnavailable 1) pace the drain over the cycles; no
    replacement is evicted again."""
    import generate_production as gen

    gen.generate(300, 6000, str(tmp_path / "cluster.jsonl"), 7)
    policy = yaml.safe_load((PLUGIN_EXAMPLES / "LowNodeUtilization" / "policy.yaml").read_text())
    evictor = policy["profiles"][0]["pluginConfig"][0]
    assert evictor["name"] == "DefaultEvictor"
    evictor["args"]["evictLocalStoragePods"] = True
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    result = simulate(tmp_path / "policy.yaml", tmp_path / "cluster.jsonl", cycles=3,
                      reschedule=True)
    text, out = report(result)
    summary = text[text.index("summary:"):text.index("cycle 1:")]
    assert "more than one cycle" not in summary and out["churn"]["repeatedWorkloads"] == []
    story = whatif.story(result)
    assert story.evicted > 500 and story.paced and story.refused_pods > 1000
    assert all(by.startswith("PodDisruptionBudget ") for p in story.paced for by in p.by)
    # Every refusal is counted: the refused pods' attempts and the paced pods' earlier ones.
    assert story.refused_attempts <= len(out["refusals"])
    assert f"refused: {story.refused_pods:,} pod(s) never evicted" in summary
    assert f"paced: {story.paced_pods:,} of the evicted pod(s)" in summary

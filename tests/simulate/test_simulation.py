"""`simulate` end to end: cycles, rescheduling, the JSON contract, explain."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from builders import NOW
from desched.report.render import render
from desched.simulate.simulation import run_simulation

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write_cluster(tmp_path: Path, web_on_n1: int, nodes: int = 3) -> str:
    items = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
              "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}}}
             for i in range(1, nodes + 1)]
    for i in range(web_on_n1):
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"web-{i}", "namespace": "default", "uid": f"u{i}",
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "rs",
                                 "controller": True}]},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "c", "image": "web:1", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def write_policy(tmp_path: Path, body: str) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(body)
    return str(path)


DUPLICATES = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: p
  pluginConfig: [{name: RemoveDuplicates}]
  plugins: {balance: {enabled: [RemoveDuplicates]}}
"""


def test_evicted_pods_are_gone_in_later_cycles(tmp_path: Path) -> None:
    result = run_simulation(write_policy(tmp_path, DUPLICATES), [write_cluster(tmp_path, 6)],
                            NOW, 3, False)
    # 6 on n1 over 3 feasible nodes: ceil(6/3)=2 may stay, so 4 go in cycle 1. Nothing is
    # recreated, so cycle 2 sees 2 pods over 3 nodes: ceil(2/3)=1 may stay, one more goes.
    # Cycle 3 sees a single pod: no duplicates.
    assert [(e.cycle, e.pod) for e in result.evictions] == [
        (1, "web-2"), (1, "web-3"), (1, "web-4"), (1, "web-5"), (2, "web-1")]


def test_reschedule_places_replacements_and_converges(tmp_path: Path) -> None:
    result = run_simulation(write_policy(tmp_path, DUPLICATES), [write_cluster(tmp_path, 6)],
                            NOW, 3, True)
    cycle1 = result.summaries[0]
    assert len(cycle1.placements) == 4
    # Replacements spread to the emptier nodes, so the next cycles evict nothing.
    assert {node for _, node in cycle1.placements} == {"n2", "n3"}
    assert all(e.cycle == 1 for e in result.evictions)


def test_limits_apply_per_cycle(tmp_path: Path) -> None:
    policy = DUPLICATES.replace("profiles:", "maxNoOfPodsToEvictTotal: 1\nprofiles:")
    result = run_simulation(write_policy(tmp_path, policy), [write_cluster(tmp_path, 6)],
                            NOW, 3, False)
    assert [e.cycle for e in result.evictions] == [1, 2, 3]


def test_cycle_skipped_with_fewer_than_two_nodes(tmp_path: Path) -> None:
    result = run_simulation(write_policy(tmp_path, DUPLICATES),
                            [write_cluster(tmp_path, 6, nodes=1)], NOW, 1, False)
    assert not result.evictions
    assert result.summaries[0].skipped == "Skipping descheduling cycle: requires >=2 nodes"


def test_json_contract_on_the_shipped_example() -> None:
    result = run_simulation(str(EXAMPLES / "policy.yaml"), [str(EXAMPLES / "cluster.yaml")],
                            NOW, 1, False)
    data = json.loads(render(result, "json"))
    assert data["cycles"] == 1
    assert [(e["pod"], e["plugin"]) for e in data["evictions"]] == [
        ("report-28891", "PodLifeTime"), ("web-5d8f9-2", "RemoveDuplicates"),
        ("web-5d8f9-3", "RemoveDuplicates")]
    for e in data["evictions"]:
        assert set(e) == {"cycle", "namespace", "pod", "node", "profile", "plugin", "reason"}
    # The PDB (minAvailable 3 of 3 api pods) refuses the api duplicate.
    assert [(r["pod"], r["outcome"]) for r in data["refusals"]] == [
        ("api-7c4b2-b", "pdb-blocked")]
    assert "<table>" in render(result, "html")


def test_koordinator_example_gives_the_same_decisions_as_upstream() -> None:
    upstream = run_simulation(str(EXAMPLES / "policy.yaml"), [str(EXAMPLES / "cluster.yaml")],
                              NOW, 1, False)
    koord = run_simulation(str(EXAMPLES / "koordinator-policy.yaml"),
                           [str(EXAMPLES / "cluster.yaml")], NOW, 1, False)
    assert koord.policy.format == "koordinator"
    assert [(e.pod, e.plugin) for e in koord.evictions] == \
        [(e.pod, e.plugin) for e in upstream.evictions]


def test_budgets_recover_when_replacements_run(tmp_path: Path) -> None:
    """maxUnavailable 1 over 3 crowded pods: one goes per cycle; with --reschedule the
    replacement is running before the next cycle, so the budget allows the next one."""
    cluster = yaml.safe_load(Path(write_cluster(tmp_path, 3)).read_text())
    for item in cluster["items"]:
        if item["kind"] == "Pod":
            item["metadata"]["labels"] = {"app": "web"}
    cluster["items"] += [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet",
         "metadata": {"name": "web", "namespace": "default", "uid": "rs"},
         "spec": {"replicas": 3}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
         "metadata": {"name": "web", "namespace": "default"},
         "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}]
    path = tmp_path / "budget.yaml"
    path.write_text(yaml.safe_dump(cluster))
    policy = write_policy(tmp_path, DUPLICATES)
    rescheduled = run_simulation(policy, [str(path)], NOW, 3, True)
    assert [(e.cycle, e.pod) for e in rescheduled.evictions] == [(1, "web-1"), (2, "web-2")]
    stuck = run_simulation(policy, [str(path)], NOW, 3, False)
    assert [(e.cycle, e.pod) for e in stuck.evictions] == [(1, "web-1")]

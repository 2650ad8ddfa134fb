"""What `simulate` tells a user deciding whether to turn a policy on, through the real CLI (text
and JSON): usage that moves with the evicted pods, churn named with its remedy, the optimistic
"after" labelled as such, balance per node group."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
METRICS = EXAMPLES / "plugins" / "LowNodeUtilization-metrics"
PACKING = EXAMPLES / "plugins" / "HighNodeUtilization"
HOTSPOT = EXAMPLES / "lownodeload-hotspot"


def simulate(example: Path, *args: str, policy: str = "policy.yaml") -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--policy", str(example / policy),
         "--snapshot", str(example / "cluster.yaml"), *args],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def simulate_json(example: Path, *args: str, policy: str = "policy.yaml") -> dict[str, Any]:
    out: dict[str, Any] = json.loads(simulate(example, *args, "-o", "json", policy=policy))
    return out


def series(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [b for b in report["balance"] if b["series"] == name]


def test_measured_usage_after_evictions_moves_with_the_pods() -> None:
    """Two pods leave worker-2 (85 % cpu by metrics.k8s.io): the figures after take their
    PodMetrics off, as the plugin does; the plugin's own finding in cycle 2 (every node under
    its target) and the report agree."""
    text = simulate(METRICS, "--cycles", "2")
    assert "All nodes are under target utilization" in text
    line = next(x for x in text.splitlines() if x.strip().startswith("cpu usage:"))
    assert re.search(r"now std 34\.9 points, max 85\.0%, over 60%: 1 node\(s\); not replaced: "
                     r"std [\d.]+, max ([\d.]+)%, over 60%: 0$", line), line
    report = simulate_json(METRICS, "--cycles", "2")
    cpu = series(report, "cpu usage")
    assert [b["cycle"] for b in cpu] == [1, 2]
    assert cpu[0]["before"]["max"] == 85.0 and cpu[0]["after"]["max"] <= 60
    assert cpu[0]["before"]["over"] == 1 and cpu[0]["after"]["over"] == 0
    assert cpu[1]["before"] == cpu[1]["after"]  # cycle 2 evicted nothing
    assert cpu[0]["threshold"] == 60


def test_with_replacements_the_usage_lands_where_they_are_placed() -> None:
    """Placed elsewhere, the evicted pods' usage leaves worker-2 and arrives on their new nodes:
    the mean stays (the same pods, measured the same) while the maximum falls."""
    cpu = series(simulate_json(METRICS, "--cycles", "2", "--reschedule"), "cpu usage")
    assert cpu[0]["before"]["max"] == 85.0 and cpu[0]["after"]["max"] < 85.0
    assert abs(cpu[0]["after"]["mean"] - cpu[0]["before"]["mean"]) < 0.05


def test_churn_is_counted_and_flagged_with_the_remedy() -> None:
    """HighNodeUtilization packs onto worker-3 pods that kube-scheduler puts right back there
    cycle after cycle (the least allocated node wins): the report says so, and what to do."""
    text = simulate(PACKING, "--cycles", "3", "--reschedule")
    churn = text[text.index("  churn:"):text.index("cycle 1:")]
    assert "5 replacement(s) placed back on the node their pod was evicted from" in churn
    assert "2 workload(s) whose replacement was evicted again" in churn
    assert "4 eviction(s) by a balancing plugin changed no balance figure (cycle(s) 2, 3)" in churn
    assert churn.count("PingPongGuard") == 3
    report = simulate_json(PACKING, "--cycles", "3", "--reschedule")
    back = report["churn"]["backOnSource"]
    assert len(back) == 5 and {b["node"] for b in back} == {"worker-3"}
    evicted_from = {(e["cycle"], f"{e['namespace']}/{e['pod']}"): e["node"]
                    for e in report["evictions"]}
    assert all(evicted_from[(b["cycle"], b["replaces"])] == b["node"] for b in back)
    repeated = {r["workload"]: r["cycles"] for r in report["churn"]["repeatedWorkloads"]}
    assert repeated == {"Job shop/nightly-report": [1, 2, 3],
                        "ReplicaSet shop/api-7c4b2": [1, 2, 3]}
    assert report["churn"]["noBalanceChange"] == [{"cycle": 2, "evictions": 2},
                                                  {"cycle": 3, "evictions": 2}]


def test_a_replacement_back_where_the_reason_said_it_would_not_go_is_named() -> None:
    """LowNodeLoad's reason says where the pod fits now; kube-scheduler, scoring requests, puts
    the replacement back on the hot node. The report must not leave that unsaid, and the two
    lines must not read as a contradiction: one is a fit, the other the scheduler's choice."""
    report = simulate_json(HOTSPOT, "--cycles", "14", "--reschedule")
    hot = "cn-beijing.10.0.0.53"
    assert all(e["reason"].endswith("; fits now on cn-beijing.10.0.0.215")
               for e in report["evictions"])
    assert [(b["cycle"], b["node"]) for b in report["churn"]["backOnSource"]] == [(6, hot),
                                                                                  (12, hot)]
    text = simulate(HOTSPOT, "--cycles", "14", "--reschedule")
    assert "2 replacement(s) placed back on the node their pod was evicted from" in text
    assert (f"placed  default/stress-demo-588f9646cf-s7x2k-r6 on {hot}: the scheduler "
            f"(kube-default model) put it back on the node its pod was evicted from "
            f"(churn)") in text


def test_without_reschedule_the_summary_leads_with_now_and_names_the_optimism() -> None:
    text = simulate(HOTSPOT, "--cycles", "6")
    summary = text[:text.index("cycle 1:")]
    assert "evicted pods not replaced: optimistic" in summary
    line = next(x for x in summary.splitlines() if x.strip().startswith("cpu usage:"))
    assert line.strip().startswith("cpu usage: now std 21.4 points, max 68.5%, over 50%: 1")
    assert "not replaced: std 13.2, max 49.3%, over 50%: 0" in line
    assert "->" not in summary  # no before -> after pair that reads as a prediction
    report = simulate_json(HOTSPOT, "--cycles", "6")
    assert report["evictedPodsReplaced"] is False
    assert report["balance"] and all(b["evictedPodsReplaced"] is False
                                     for b in report["balance"])
    replaced = simulate_json(HOTSPOT, "--cycles", "6", "--reschedule")
    assert replaced["evictedPodsReplaced"] is True
    after = series(replaced, "cpu usage")[-1]["after"]
    assert round(after["max"], 1) == 68.5 and after["over"] == 1  # the replacement came back


def test_json_has_what_the_text_has() -> None:
    report = simulate_json(PACKING, "--cycles", "3", "--reschedule")
    # Every existing key keeps its place; "kept" is the text's word for "skipped".
    for key in ("cycles", "evictions", "refusals", "skipped", "notes", "rescheduled"):
        assert key in report
    assert report["kept"] == report["skipped"] and report["kept"]
    assert {r["replaces"] for r in report["rescheduled"]} == {
        f"{e['namespace']}/{e['pod']}" for e in report["evictions"]}
    names = {b["series"] for b in report["balance"]}
    assert names == {"cpu requests", "memory requests", "pods"}
    assert len(report["balance"]) == 3 * len(names)
    for b in report["balance"]:
        assert set(b["before"]) >= {"nodes", "mean", "std", "max"}


def test_balance_per_node_group(tmp_path: Path) -> None:
    """`--group-by node-pool`: a pool's before and after at a glance, in text and JSON."""
    nodes = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": f"{pool}-{i}", "labels": {"node-pool": pool}},
              "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}}}
             for pool in ("batch", "web") for i in (1, 2)]
    nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "loose"},
                  "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}}})
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"job-{i}", "namespace": "default", "uid": f"u{i}",
        "creationTimestamp": "2026-11-01T00:00:00Z",
        "ownerReferences": [{"kind": "ReplicaSet", "name": "job", "uid": "rs",
                             "controller": True}]},
        "spec": {"nodeName": "batch-1", "containers": [
            {"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m"}}}]},
        "status": {"phase": "Running"}} for i in range(6)]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump({"kind": "List",
                                                           "items": nodes + pods}))
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n"
        "  pluginConfig: [{name: RemoveDuplicates}]\n"
        "  plugins: {balance: {enabled: [RemoveDuplicates]}}\n")
    text = simulate(tmp_path, "--group-by", "node-pool", "--now", "2026-11-22T00:00:00Z")
    assert "  node-pool=batch (2 node(s)):" in text
    assert "  node-pool=(no label) (1 node(s)):" in text
    batch = text[text.index("node-pool=batch"):text.index("node-pool=web")]
    # 6 pods of 500m on batch-1 (75 %) and none on batch-2; 4 of them leave, not replaced.
    assert "cpu requests: now std 37.5 points, max 75.0%; not replaced: std 12.5, max 25.0%" \
        in batch
    report = simulate_json(tmp_path, "--group-by", "node-pool", "--now",
                           "2026-11-22T00:00:00Z")
    groups = {g["value"]: g for g in report["groups"]["groups"]}
    assert report["groups"]["label"] == "node-pool"
    assert {v: g["nodes"] for v, g in groups.items()} == {"batch": 2, "web": 2, "": 1}
    cpu = next(b for b in groups["batch"]["balance"] if b["series"] == "cpu requests")
    assert (cpu["before"]["max"], cpu["after"]["max"]) == (75.0, 25.0)


def test_a_group_label_no_node_has_is_said(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--policy", str(EXAMPLES / "policy.yaml"),
         "--snapshot", str(EXAMPLES / "cluster.yaml"), "--group-by", "node-pol"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "--group-by node-pol: no node in the snapshot has this label" in proc.stderr

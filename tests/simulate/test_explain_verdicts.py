"""Each plugin's verdict on an explained pod it considered and did not pick: through the real CLI
on the plugin examples, and in process (explain_run) for the cases the examples do not hold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import NOW
from desched.simulate.explain import explain_run

pytestmark = pytest.mark.process

PLUGINS = Path(__file__).resolve().parents[2] / "examples" / "plugins"


@pytest.mark.parametrize(("example", "pod", "line"), [
    ("RemoveFailedPods", "batch/web-84d7c-l9v2s",
     "default/RemoveFailedPods: considered, not picked: pod phase is Running, not Failed"),
    ("RemoveFailedPods", "batch/import-28892-b4n8d",
     "default/RemoveFailedPods: considered, not picked: age 0s is under minPodLifetimeSeconds "
     "3600"),
    ("RemovePodsHavingTooManyRestarts", "shop/checkout-7d4f8-m5t7r",
     "default/RemovePodsHavingTooManyRestarts: considered, not picked: 3 restart(s), under the "
     "podRestartThreshold 10"),
    ("RemovePodsHavingTooManyRestarts", "shop/api-5b6c7-h4j2k",
     "default/RemovePodsHavingTooManyRestarts: considered, not picked: 12 restart(s), but the "
     "pod is in none of the states CrashLoopBackOff"),
    ("RemovePodsViolatingNodeAffinity", "shop/web-7b9d5-0",
     "default/RemovePodsViolatingNodeAffinity: considered, not picked: its required node "
     "affinity still matches node worker-1; no preferred node affinity"),
    ("RemovePodsViolatingNodeAffinity", "shop/api-4e6a2-0",
     "default/RemovePodsViolatingNodeAffinity: considered, not picked: no required node "
     "affinity; node worker-1 scores 10 for its preferred node affinity, no node scores more"),
    ("RemovePodsViolatingNodeTaints", "ml/trainer-7c4b2-0",
     "default/RemovePodsViolatingNodeTaints: considered, not picked: pod tolerates every taint "
     "of node worker-1 the plugin considers: dedicated=gpu:NoSchedule"),
    ("RemovePodsViolatingNodeTaints", "batch/batch-3a4b5-0",
     "default/RemovePodsViolatingNodeTaints: considered, not picked: node worker-3 has no taint "
     "the plugin considers (team=ops:NoSchedule, legacy=true:NoExecute: excluded, not "
     "included, or of an effect it ignores)"),
    ("RemovePodsViolatingTopologySpreadConstraint", "shop/web-6c9f7-5",
     "default/RemovePodsViolatingTopologySpreadConstraint: considered, not picked: topologyKey "
     "topology.kubernetes.io/zone (maxSkew 1): pods per domain zone-a 5, zone-b 1, zone-c 0; "
     "skew 5 is over maxSkew, but its domain zone-b (1) is not above the ideal average 2.00: "
     "pods move out of the larger domains"),
    ("RemovePodsViolatingTopologySpreadConstraint", "shop/web-6c9f7-0",
     "default/RemovePodsViolatingTopologySpreadConstraint: considered, not picked: topologyKey "
     "topology.kubernetes.io/zone (maxSkew 1): pods per domain zone-a 5, zone-b 1, zone-c 0; "
     "skew 5 is over maxSkew and its domain zone-a (5) is above the ideal average 2.00, but the "
     "pods picked to move out of it were others"),
    ("RemovePodsViolatingInterPodAntiAffinity", "shop/cache-4b5a6-0",
     "default/RemovePodsViolatingInterPodAntiAffinity: considered, not picked: pod has no "
     "required pod anti-affinity (a pod that another pod's term selects is not evicted for "
     "it)"),
    ("RemovePodsViolatingInterPodAntiAffinity", "shop/web-5d8f9-0",
     "default/RemovePodsViolatingInterPodAntiAffinity: considered, not picked: no other pod in "
     "its topology domain (kubernetes.io/hostname) matches its required pod anti-affinity once "
     "the pods this run evicted are gone"),
    ("RemovePodsViolatingInterPodAntiAffinity-preferred", "shop/web-5d8f9-1",
     "default/RemovePodsViolatingInterPodAntiAffinity: considered, not picked: no other pod in "
     "its topology domain (kubernetes.io/hostname) matches its preferred pod anti-affinity once "
     "the pods this run evicted are gone"),
    ("RemovePodsViolatingInterPodAntiAffinity-preferred", "shop/cache-4b5a6-2",
     "default/RemovePodsViolatingInterPodAntiAffinity: kept: pod's preferred anti-affinity "
     "(weight 100, topologyKey kubernetes.io/hostname) selects pod shop/cache-4b5a6-3 on the "
     "same node, but its replacement would land on worker-2 (kube-default), where it still "
     "selects pod shop/cache-4b5a6-1 (includeSoftConstraints)"),
    ("LowNodeUtilization", "shop/web-3",
     "default/LowNodeUtilization: considered, not picked: node worker-1 is a source "
     "(overutilized: cpu 80% > 50%), but evicting from it stopped before this pod: after 3 "
     "eviction(s), the node is no longer above its target thresholds"),
    ("LowNodeUtilization", "shop/api-0",
     "default/LowNodeUtilization: considered, not picked: node worker-2 is a destination "
     "(underutilized: cpu 8.75% <= 20%, memory 3.43% <= 20%, pods 1.82% <= 20%), not a "
     "source"),
    ("LowNodeUtilization-metrics", "shop/batch-2",
     "default/LowNodeUtilization: considered, not picked: node worker-2 is a source "
     "(overutilized: cpu 85% > 60%), but evicting from it stopped before this pod: after 2 "
     "eviction(s), the node is no longer above its target thresholds"),
    ("HighNodeUtilization", "shop/web-0",
     "default/HighNodeUtilization: considered, not picked: node worker-1 is a destination "
     "(schedulable: cpu 65% > 20%, memory 31.56% > 20%), not a source"),
])
def test_each_example_plugin_says_why_it_did_not_pick_a_pod(example: str, pod: str,
                                                             line: str) -> None:
    where = PLUGINS / example
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "explain", "--policy", str(where / "policy.yaml"),
         "--snapshot", str(where / "cluster.yaml"), "--pod", pod],
        capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"    {line}\n" in proc.stdout
    assert "its criteria did not match" not in proc.stdout


# -- in process, on small clusters ----------------------------------------------------------------


def _node(name: str, ready: bool = True, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  **(labels or {})}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def _pod(name: str, node: str, cpu: str = "100m", created: str = "2026-11-21T00:00:00Z",
         owner: str | None = "rs", labels: dict[str, str] | None = None,
         spec: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"u-{name}",
                            "creationTimestamp": created, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "uid": f"u-{owner}",
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
                **(spec or {})},
            "status": {"phase": "Running"}}


def _explain(tmp_path: Path, policy: str, items: list[dict[str, Any]], pod: str) -> str:
    (tmp_path / "policy.yaml").write_text("apiVersion: descheduler/v1alpha2\n"
                                          "kind: DeschedulerPolicy\n" + policy)
    (tmp_path / "cluster.json").write_text(json.dumps({"kind": "List", "items": items}))
    return explain_run(str(tmp_path / "policy.yaml"), [str(tmp_path / "cluster.json")], NOW,
                       f"default/{pod}", None)


def _profile(plugin: str, args: str, point: str) -> str:
    return (f"profiles:\n- name: p\n  pluginConfig:\n  - name: {plugin}\n    args: {args}\n"
            f"  plugins:\n    {point}: {{enabled: [{plugin}]}}\n")


def test_podlifetime_names_the_criterion_the_pod_fails(tmp_path: Path) -> None:
    out = _explain(tmp_path, _profile("PodLifeTime", "{states: [CrashLoopBackOff]}",
                                      "deschedule"),
                   [_node("n1"), _node("n2"), _pod("a", "n1")], "a")
    assert ("p/PodLifeTime: considered, not picked: pod is in none of the states "
            "CrashLoopBackOff") in out


def test_a_pod_whose_turn_never_came_says_the_run_ended(tmp_path: Path) -> None:
    policy = "maxNoOfPodsToEvictTotal: 1\n" + _profile(
        "PodLifeTime", "{maxPodLifeTimeSeconds: 60}", "deschedule")
    items = [_node("n1"), _node("n2"), _pod("a", "n1", created="2026-11-01T00:00:00Z"),
             _pod("b", "n1", created="2026-11-02T00:00:00Z"),
             _pod("c", "n2", created="2026-11-03T00:00:00Z")]
    out = _explain(tmp_path, policy, items, "c")
    assert ("p/PodLifeTime: considered, not picked: it met the plugin's criteria, but the run "
            "ended before its turn (an eviction limit)") in out


def test_a_pod_on_a_node_the_profile_does_not_run_on(tmp_path: Path) -> None:
    items = [_node("n1"), _node("n2"), _node("n3", ready=False), _pod("a", "n3")]
    out = _explain(tmp_path, _profile("RemovePodsViolatingNodeTaints", "{}", "deschedule"),
                   items, "a")
    assert ("p/RemovePodsViolatingNodeTaints: considered, not picked: node n3 is not among the "
            "nodes this profile runs on (not Ready, or outside the nodeSelector)") in out


def test_removeduplicates_and_a_pod_without_owner(tmp_path: Path) -> None:
    items = [_node("n1"), _node("n2"), _pod("a", "n1", owner=None)]
    out = _explain(tmp_path, _profile("RemoveDuplicates", "{}", "balance"), items, "a")
    assert ("p/RemoveDuplicates: considered, not picked: pod has no owner: not a duplicate of "
            "anything") in out


def test_a_pod_evicted_by_an_earlier_plugin(tmp_path: Path) -> None:
    policy = ("profiles:\n- name: p\n  pluginConfig:\n  - name: PodLifeTime\n"
              "    args: {maxPodLifeTimeSeconds: 60}\n  - name: RemoveDuplicates\n"
              "    args: {}\n  plugins:\n"
              "    deschedule: {enabled: [PodLifeTime]}\n"
              "    balance: {enabled: [RemoveDuplicates]}\n")
    out = _explain(tmp_path, policy, [_node("n1"), _node("n2"), _pod("a", "n1")], "a")
    assert "p/PodLifeTime: EVICTED: " in out
    assert ("p/RemoveDuplicates: considered, not picked: already evicted by p/PodLifeTime "
            "earlier in this cycle") in out


def test_lownodeutilization_a_node_neither_source_nor_destination(tmp_path: Path) -> None:
    items = [_node("n1"), _node("n2"), _node("n3"), _pod("hot", "n1", cpu="3"),
             _pod("mid", "n2", cpu="1200m"), _pod("idle", "n3", cpu="100m")]
    out = _explain(tmp_path, _profile(
        "LowNodeUtilization", "{thresholds: {cpu: 20}, targetThresholds: {cpu: 50}}",
        "balance"), items, "mid")
    assert ("p/LowNodeUtilization: considered, not picked: node n2 is neither overutilized nor "
            "underutilized (cpu 30% (low 20%, high 50%))") in out


def test_topology_spread_within_max_skew(tmp_path: Path) -> None:
    spread = {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}}}]}
    items = [_node("n1", labels={"zone": "a"}), _node("n2", labels={"zone": "b"}),
             *(_pod(f"w{i}", node, labels={"app": "web"}, spec=spread)
               for i, node in enumerate(("n1", "n1", "n2")))]
    out = _explain(tmp_path, _profile("RemovePodsViolatingTopologySpreadConstraint", "{}",
                                      "balance"), items, "w0")
    assert ("p/RemovePodsViolatingTopologySpreadConstraint: considered, not picked: topologyKey "
            "zone (maxSkew 1): pods per domain a 2, b 1; skew 1 is within maxSkew") in out

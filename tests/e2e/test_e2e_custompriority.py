"""Koordinator's CustomPriority with autoCordon on a real API server (docs/custompriority.md):
`desched run --once` cordons the on-demand node (the strategic merge patch of
spec.unschedulable, as `kubectl cordon`) and evicts its pods through the Eviction API, because
both fit on the committed node; when a PodDisruptionBudget refuses one eviction, the drain stops
there and the node is uncordoned again."""

from __future__ import annotations

from typing import Any

from e2e_cluster import Cluster, json_log
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

GONE = ("terminating", "gone")  # no kubelet finishes a graceful deletion on a fake node


def policy(cluster: Cluster) -> str:
    tier = f"desched-e2e/billing-{cluster.suffix}"  # only this test's nodes are in a tier
    return cluster.write("custompriority.yaml", f"""\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  plugins:
    balance: {{enabled: [{{name: CustomPriority}}]}}
    evict: {{disabled: [{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}}
    filter: {{disabled: [{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}}
  pluginConfig:
  - name: CustomPriority
    args:
      mode: DrainNode
      autoCordon: true
      evictableNamespaces: {{include: [{cluster.ns}]}}
      evictionOrder:
      - {{name: on-demand, nodeSelector: {{matchLabels: {{{tier}: on-demand}}}}}}
      - {{name: committed, nodeSelector: {{matchLabels: {{{tier}: committed}}}}}}
""")


def tiered_nodes(cluster: Cluster) -> tuple[str, str]:
    tier = f"desched-e2e/billing-{cluster.suffix}"
    names = []
    for index, billing in enumerate(("on-demand", "committed")):
        name = cluster.add_node(index)
        cluster.client.patch(Node, name, {"metadata": {"labels": {tier: billing}}},
                             patch_type=PatchType.MERGE)
        names.append(name)
    return names[0], names[1]


def web_pods(cluster: Cluster, node: str) -> list[str]:
    labels = {"app": "web"}
    uid = cluster.add_replicaset("web", 2, labels)
    pods = ["web-0", "web-1"]
    for name in pods:
        cluster.add_pod(name, node, ("web", uid), labels)
    return pods


def run(cluster: Cluster) -> list[dict[str, Any]]:
    cluster.heartbeat()
    proc = cluster.desched("run", "--once", "--policy", policy(cluster),
                           "--kubeconfig", cluster.kubeconfig, "--log-format", "json")
    return json_log(proc.stderr)


def unschedulable(cluster: Cluster, node: str) -> bool:
    spec = cluster.client.get(Node, node).spec
    return bool(spec is not None and spec.unschedulable)


def test_the_on_demand_node_is_cordoned_and_drained(cluster: Cluster) -> None:
    on_demand, committed = tiered_nodes(cluster)
    pods = web_pods(cluster, on_demand)
    log = run(cluster)
    assert unschedulable(cluster, on_demand)
    assert not unschedulable(cluster, committed)
    assert all(cluster.pod_state(pod) in GONE for pod in pods)
    cordoned = [e for e in log if e.get("event") == f"cordoned node {on_demand}: autoCordon: "
                                                    f"draining its 2 pod(s) to cheaper tiers"]
    assert cordoned and cordoned[0].get("node") == on_demand, log[-20:]


def test_a_refused_eviction_stops_the_drain_and_uncordons(cluster: Cluster) -> None:
    on_demand, _ = tiered_nodes(cluster)
    pods = web_pods(cluster, on_demand)
    cluster.add_pdb("web", {"app": "web"}, min_available=2)
    cluster.wait_pdb("web", healthy=2, allowed=0)
    log = run(cluster)
    assert not unschedulable(cluster, on_demand)
    assert all(cluster.pod_state(pod) == "running" for pod in pods)
    texts = [str(e.get("event")) for e in log if e.get("node") == on_demand]
    assert f"cordoned node {on_demand}: autoCordon: draining its 2 pod(s) to cheaper tiers" \
        in texts, log[-20:]
    assert any(t.startswith(f"uncordoned node {on_demand}: autoCordon: eviction of "
                            f"{cluster.ns}/web-0 failed") for t in texts), log[-20:]

"""simulate models evictions in background (upstream's EvictionsInBackground): a pod the snapshot
shows with an eviction in progress counts against the limits in every cycle and is not evicted
again, as in a live run with the gate on."""

from __future__ import annotations

from pathlib import Path

import yaml

from builders import NOW
from desched.framework.background import EVICTION_IN_PROGRESS, REQUEST_EVICT_ONLY
from desched.framework.runner import BACKGROUND_NOTE
from desched.simulate.simulation import run_simulation

POLICY = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNode: 2
profiles:
- name: p
  pluginConfig: [{name: PodLifeTime, args: {maxPodLifeTimeSeconds: 60}}]
  plugins: {deschedule: {enabled: [PodLifeTime]}}
"""


def _pod(name: str, annotations: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "default", "uid": f"u-{name}", "annotations": annotations,
        "creationTimestamp": "2026-11-01T00:00:00Z",
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "rs",
                             "controller": True}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "web:1"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def test_a_pod_in_progress_counts_in_every_cycle_and_is_not_evicted(tmp_path: Path) -> None:
    items: list[dict[str, object]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
         "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}}}
        for i in (1, 2)]
    items.append(_pod("vm-a", {REQUEST_EVICT_ONLY: "", EVICTION_IN_PROGRESS: ""}))
    items += [_pod(f"web-{i}", {}) for i in range(3)]
    cluster, policy = tmp_path / "cluster.yaml", tmp_path / "policy.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    policy.write_text(POLICY)
    result = run_simulation(str(policy), [str(cluster)], NOW, 2, False)
    # Two per node, one of them vm-a's eviction in progress: one other pod per cycle.
    assert [(e.cycle, e.pod) for e in result.evictions] == [(1, "web-0"), (2, "web-1")]
    kept = [(d.cycle, d.outcome) for d in result.log.decisions if d.pod == "vm-a"]
    assert kept == [(1, "skipped"), (2, "skipped")]
    assert [(n.cycle, n.plugin) for n in result.log.notes if n.plugin == BACKGROUND_NOTE] == [
        (1, BACKGROUND_NOTE), (2, BACKGROUND_NOTE)]

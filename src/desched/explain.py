"""`desched explain`: one simulated cycle with full decision records for one pod or node."""

from __future__ import annotations

from datetime import datetime

from desched.framework.decisions import DecisionLog
from desched.simulation import run_simulation


def explain_run(policy_path: str, snapshot_paths: list[str], now: datetime | None,
                pod_ref: str | None, node_name: str | None) -> str:
    log = DecisionLog(explain_pods=frozenset({pod_ref}) if pod_ref else frozenset(),
                      explain_nodes=frozenset({node_name}) if node_name else frozenset())
    result = run_simulation(policy_path, snapshot_paths, now, 1, False, log)
    lines: list[str] = [f"clock: {result.clock.describe()}"]
    target = f"pod {pod_ref}" if pod_ref else f"node {node_name}"
    relevant = [d for d in log.decisions
                if (pod_ref and f"{d.namespace}/{d.pod}" == pod_ref)
                or (node_name and d.node == node_name)]
    skipped = next((s.skipped for s in result.summaries if s.skipped), None)
    if skipped:
        lines.append(f"{target}: nothing was evaluated: {skipped}")
    elif not relevant:
        lines.append(f"{target}: no plugin selected it for eviction "
                     f"(no strategy's criteria matched)")
    if node_name:
        for n in log.notes:
            if n.node == node_name:
                lines.append(f"node {n.node}: {n.profile}/{n.plugin}: {n.text}")
    for d in relevant:
        verb = {"evicted": "EVICTED", "filtered": "kept", "limited": "not evicted (limit)",
                "pdb-blocked": "not evicted (PDB)", "failed": "eviction failed",
                "skipped": "kept", "dry-run": "would be evicted (dryRun)"}[d.outcome]
        lines.append(f"{d.namespace}/{d.pod} on {d.node}: {verb} by "
                     f"{d.profile}/{d.plugin}: {d.reason}")
    return "\n".join(lines)

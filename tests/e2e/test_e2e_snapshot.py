"""`desched snapshot` against a real cluster: `simulate` on the captured file decides exactly
what a `desched run --dry-run` decides on the live cluster, and the dry run changes nothing."""

from __future__ import annotations

import json

from e2e_cluster import Cluster, build_scenario, evicted_in_log, json_log


def test_snapshot_simulation_matches_the_dry_run(cluster: Cluster) -> None:
    s = build_scenario(cluster)
    cluster.heartbeat()
    snapshot = str(cluster.workdir / "snapshot.jsonl")
    cluster.desched("snapshot", "--kubeconfig", cluster.kubeconfig, "--out", snapshot)

    dry = cluster.desched("run", "--once", "--dry-run", "--policy", s.policy,
                          "--kubeconfig", cluster.kubeconfig, "--log-format", "json")
    simulated = cluster.desched("simulate", "--policy", s.policy, "--snapshot", snapshot,
                                "--output", "json")

    report = json.loads(simulated.stdout)
    from_snapshot = {(f"{e['namespace']}/{e['pod']}", e["plugin"]) for e in report["evictions"]}
    from_dry_run = evicted_in_log(json_log(dry.stderr))
    assert from_snapshot == from_dry_run

    # The decisions themselves: both old pods, 2 of the 4 duplicates, never the protected pod.
    plugins = sorted(plugin for _, plugin in from_dry_run)
    assert plugins == ["PodLifeTime"] * 2 + ["RemoveDuplicates"] * 2
    assert {(s.key(p), "PodLifeTime") for p in s.old} <= from_dry_run
    assert s.key(s.protected) not in {pod for pod, _ in from_dry_run}

    # A dry run evicts nothing and records no Descheduled event.
    for pod in [*s.old, s.protected, *s.duplicates]:
        assert cluster.pod_state(pod) == "running", pod
    assert not [e for e in cluster.events() if e.get("action") == "Descheduled"]

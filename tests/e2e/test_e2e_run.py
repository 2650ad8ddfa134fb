"""`desched run --once` against a real cluster: evictions through the Eviction API, a
PodDisruptionBudget refusing one, and the events recorded for the evicted pods."""

from __future__ import annotations

import time

from e2e_cluster import Cluster, build_scenario, evicted_in_log, json_log

GONE = ("terminating", "gone")  # no kubelet finishes a graceful deletion on a fake node


def test_run_once_evicts_and_records_events(cluster: Cluster) -> None:
    s = build_scenario(cluster)
    cluster.heartbeat()
    proc = cluster.desched("run", "--once", "--policy", s.policy,
                           "--kubeconfig", cluster.kubeconfig, "--log-format", "json")
    log = json_log(proc.stderr)

    # PodLifeTime: both old pods evicted; the budget keeps the protected one.
    for pod in s.old:
        assert cluster.pod_state(pod) in GONE, pod
    assert cluster.pod_state(s.protected) == "running"
    refused = [e for e in log if e.get("pod") == s.key(s.protected)]
    assert refused and not any(str(e.get("event")).startswith("Evicted") for e in refused), \
        refused

    # RemoveDuplicates: 4 copies on one of two feasible nodes, the ceiling of the average is 2.
    states = {pod: cluster.pod_state(pod) for pod in s.duplicates}
    evicted_dups = sorted(p for p, state in states.items() if state in GONE)
    assert len(evicted_dups) == 2, states

    expected = {(s.key(p), "PodLifeTime") for p in s.old} | \
        {(s.key(p), "RemoveDuplicates") for p in evicted_dups}
    assert evicted_in_log(log) == expected

    # One Normal event per eviction: reason = the plugin, action Descheduled (events.k8s.io/v1).
    want = {(pod.split("/", 1)[1], plugin) for pod, plugin in expected}
    deadline = time.monotonic() + 15
    while True:
        events = [e for e in cluster.events() if e.get("action") == "Descheduled"]
        seen = {(e["regarding"]["name"], e["reason"]) for e in events}
        if want <= seen or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert want <= seen, (want, seen)
    assert all(e.get("type") == "Normal" for e in events)
    assert all(e["regarding"].get("kind") == "Pod" for e in events)
    assert s.protected not in {e["regarding"]["name"] for e in events if e.get("type") == "Normal"}

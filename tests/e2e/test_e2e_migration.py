"""`desched run --once` with Koordinator's MigrationController (EvictDirectly) against a real
cluster: PodLifeTime's evictions become PodMigrationJobs, which desched arbitrates and carries
out through the Eviction API until each job is Succeeded.

The PodMigrationJob CRD is installed from deploy/crds when the cluster lacks it (and left in
place: a cluster that runs Koordinator already has it). The jobs the test causes are deleted at
the end."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_cluster import MAX_AGE, Cluster, PodMigrationJob, install_crds, json_log, wait_until
from lightkube import ApiError

POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: e2e
  nodeSelector:
    matchLabels: {{desched-e2e: "{suffix}"}}
  plugins:
    deschedule:
      enabled: [{{name: PodLifeTime}}]
  pluginConfig:
  - name: PodLifeTime
    args:
      maxPodLifeTimeSeconds: {max_age}
      labelSelector:
        matchLabels: {{e2e-role: lifetime}}
      namespaces:
        include: [{ns}]
  - name: MigrationController
    args:
      defaultJobMode: EvictDirectly
      namespaces:
        include: [{ns}]
      # No kubelet finishes a graceful deletion on a fake node: delete at once, so the job
      # sees its pod gone and completes.
      defaultDeleteOptions: {{gracePeriodSeconds: 0}}
      objectLimiters:
        workload: {{duration: 0s}}
"""


def _jobs(cluster: Cluster) -> list[dict[str, Any]]:
    found = []
    for job in cluster.client.list(PodMigrationJob):
        body = job.to_dict() if hasattr(job, "to_dict") else dict(job)
        if ((body.get("spec") or {}).get("podRef") or {}).get("namespace") == cluster.ns:
            found.append(body)
    return found


@pytest.fixture
def migrating(cluster: Cluster) -> Iterator[Cluster]:
    install_crds(cluster.client)
    yield cluster
    for job in _jobs(cluster):
        with contextlib.suppress(ApiError):
            cluster.client.delete(PodMigrationJob, job["metadata"]["name"])


def test_run_once_migrates_through_pod_migration_jobs(migrating: Cluster) -> None:
    cluster = migrating
    n0, n1 = cluster.add_node(0), cluster.add_node(1)
    labels = {"app": "web"}
    rs = ("web", cluster.add_replicaset("web", 6, labels))
    old = ["web-0", "web-1"]
    for index, name in enumerate(old):
        cluster.add_pod(name, (n0, n1)[index], rs, {**labels, "e2e-role": "lifetime"})
    for index in range(2, 6):
        cluster.add_pod(f"web-{index}", (n0, n1)[index % 2], rs, labels)
    time.sleep(MAX_AGE + 1.5)  # PodLifeTime counts from the server's creationTimestamp
    policy = cluster.write("policy.yaml", POLICY.format(suffix=cluster.suffix, ns=cluster.ns,
                                                        max_age=MAX_AGE))
    cluster.heartbeat()
    proc = cluster.desched("run", "--once", "--policy", policy, "--kubeconfig",
                           cluster.kubeconfig, "--log-format", "json")
    log = json_log(proc.stderr)

    jobs = _jobs(cluster)
    by_pod = {job["spec"]["podRef"]["name"]: job for job in jobs}
    assert sorted(by_pod) == old, [j["spec"]["podRef"] for j in jobs]
    for name, job in by_pod.items():
        annotations = job["metadata"]["annotations"]
        assert annotations["koordinator.sh/evict-trigger"] == "PodLifeTime"
        assert annotations["koordinator.sh/job-created-by"] == "desched/e2e"
        assert annotations["descheduler.koordinator.sh/passed-arbitration"] == "true"
        assert job["status"]["phase"] == "Succeeded", job["status"]
        assert job["status"]["message"] == f'Pod "{cluster.ns}/{name}" has been evicted'
        assert cluster.pod_state(name) == "gone"
    for index in range(2, 6):
        assert cluster.pod_state(f"web-{index}") == "running"
    created = [e for e in log if e.get("event") == "Created PodMigrationJob"]
    assert sorted(e["pod"] for e in created) == [f"{cluster.ns}/{p}" for p in old]

    # Koordinator's pod event for a migration: Normal, reason Descheduled, action Migrating.
    def migrated_events() -> set[str]:
        return {e["regarding"]["name"] for e in cluster.events()
                if e.get("reason") == "Descheduled" and e.get("action") == "Migrating"}

    wait_until("the pods' Descheduled events", lambda: set(old) <= migrated_events(),
               timeout=15)

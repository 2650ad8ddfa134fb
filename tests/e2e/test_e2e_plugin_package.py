"""A plugin from another package in `desched run --once` against a real cluster: the example
package (examples/out-of-tree-plugin, docs/writing-plugins.md) installed beside desched, its
RemovePodsPastDeadline enabled by name in the policy, reading an annotation of the pods it lists
from the API server (as protobuf), evicting through the Eviction API, with events."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from e2e_cluster import Cluster, evicted_in_log, json_log, stamp
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from plugin_packages import EXAMPLE, install

GONE = ("terminating", "gone")  # no kubelet finishes a graceful deletion on a fake node
ANNOTATION = "deadline.example.com/evict-after"
PLUGIN = "RemovePodsPastDeadline"

POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
nodeSelector: desched-e2e={suffix}
profiles:
- name: e2e
  pluginConfig:
  - name: DefaultEvictor
  - name: RemovePodsPastDeadline
    args:
      leadTime: 1h
      namespaces:
        include: [{ns}]
  plugins:
    deschedule:
      enabled: [RemovePodsPastDeadline]
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(EXAMPLE, tmp_path_factory.mktemp("site"))


def test_run_once_runs_an_installed_plugin(cluster: Cluster, site: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # `desched run` as a process with the package on its path, as pip would install it.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(site), os.environ.get("PYTHONPATH", "")])))
    n0, n1 = cluster.add_node(0), cluster.add_node(1)
    labels = {"app": "api"}
    owner = ("api", cluster.add_replicaset("api", 4, labels))
    deadlines = {"api-past": stamp(timedelta(hours=2)),  # two hours ago
                 "api-soon": stamp(-timedelta(minutes=30)),  # within leadTime 1h
                 "api-later": stamp(-timedelta(days=1))}
    for index, (name, deadline) in enumerate(deadlines.items()):
        cluster.add_pod(name, (n0, n1)[index % 2], owner, labels)
        cluster.client.patch(Pod, name, {"metadata": {"annotations": {ANNOTATION: deadline}}},
                             namespace=cluster.ns, patch_type=PatchType.MERGE)
    cluster.add_pod("api-none", n1, owner, labels)  # no deadline at all
    policy = cluster.write("policy.yaml", POLICY.format(suffix=cluster.suffix, ns=cluster.ns))

    cluster.heartbeat()
    proc = cluster.desched("run", "--once", "--policy", policy,
                           "--kubeconfig", cluster.kubeconfig, "--log-format", "json")
    log = json_log(proc.stderr)

    evicted = {f"{cluster.ns}/{name}" for name in ("api-past", "api-soon")}
    assert evicted_in_log(log) == {(pod, PLUGIN) for pod in evicted}
    states = {name: cluster.pod_state(name)
              for name in ("api-past", "api-soon", "api-later", "api-none")}
    assert states["api-past"] in GONE and states["api-soon"] in GONE, states
    assert states["api-later"] == "running" and states["api-none"] == "running", states

    # One Normal event per eviction, its reason the plugin's name (events.k8s.io/v1).
    want = {("api-past", PLUGIN), ("api-soon", PLUGIN)}
    deadline = time.monotonic() + 15
    while True:
        seen = {(e["regarding"]["name"], e["reason"]) for e in cluster.events()
                if e.get("action") == "Descheduled"}
        if want <= seen or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert want <= seen, (want, seen)

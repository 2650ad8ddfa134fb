"""Koordinator's process settings and upstream's Prometheus secret on a real control plane
(issue 37 items 8 and 6):

- a Koordinator configuration file run as two replicas, with no leader-election flag, has one
  active instance (koord-descheduler's leaderElection is on by default): the Lease the file names
  is held by one, only it runs cycles, and when it stops the other takes over;
- the Prometheus bearer token of `authToken.secretReference` is the Secret's
  `prometheusAuthToken`, and after the Secret is updated the next query carries the new one."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import Cluster, json_log, stop_process, wait_until
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Secret

from desched.live.client import ApiClient
from desched.live.metrics import Metrics
from desched.live.prometheus import PrometheusQueries
from desched.live.prometheus_secret import SecretTokens

pytestmark = pytest.mark.timeout(300)
BOUND = 120.0  # seconds: a loaded 2-core machine
Lease = create_namespaced_resource("coordination.k8s.io", "v1", "Lease", "leases")

KOORD = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 2s
leaderElection: {{resourceName: koord-e2e, resourceNamespace: {namespace},
                 leaseDuration: 6s, renewDeadline: 4s, retryPeriod: 1s}}
profiles:
- name: koord
  plugins:
    deschedule: {{enabled: [{{name: PodLifeTime}}]}}
    evict: {{disabled: [{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}}
    filter: {{disabled: [{{name: "*"}}], enabled: [{{name: DefaultEvictor}}]}}
  pluginConfig:
  - name: PodLifeTime
    args: {{maxPodLifeTimeSeconds: 86400, namespaces: {{include: [{namespace}]}}}}
"""


class Replica:
    def __init__(self, cluster: Cluster, policy: str, log: Path) -> None:
        env = dict(os.environ)
        env.pop("KUBECONFIG", None)
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "desched", "run", "--config", policy, "--kubeconfig",
             cluster.kubeconfig, "--log-format", "json"],
            stdout=subprocess.DEVNULL, stderr=self._out, env=env)

    def lines(self) -> list[dict[str, Any]]:
        return json_log(self.log.read_text(errors="replace"))

    def cycles(self) -> int:
        return sum(1 for e in self.lines() if e.get("event") == "descheduling cycle finished")

    def identity(self) -> str | None:
        for e in self.lines():
            event = str(e.get("event", ""))
            if " acquired by " in event:
                return event.rsplit(" acquired by ", 1)[1]
        return None

    def stop(self) -> int:
        code = stop_process(self.proc)
        self._out.close()
        return code


@pytest.fixture
def replicas(cluster: Cluster, tmp_path: Path) -> Iterator[list[Replica]]:
    policy = tmp_path / "koord.yaml"
    policy.write_text(KOORD.format(namespace=cluster.ns))
    with ExitStack() as stack:
        started = []
        for i in range(2):
            replica = Replica(cluster, str(policy), tmp_path / f"replica-{i}.log")
            stack.callback(replica.stop)
            started.append(replica)
        yield started


def test_a_koordinator_file_runs_one_active_replica(cluster: Cluster,
                                                    replicas: list[Replica]) -> None:
    def alive() -> None:
        for r in replicas:
            assert r.proc.poll() is None, r.log.read_text()[-3000:]

    def leader() -> Replica | None:
        alive()
        holders = [r for r in replicas if r.identity() is not None]
        return holders[0] if len(holders) == 1 and holders[0].cycles() >= 3 else None

    wait_until("one replica leading and running cycles", lambda: leader() is not None, BOUND)
    first = leader()
    assert first is not None
    standby = next(r for r in replicas if r is not first)
    lease = cluster.client.get(Lease, "koord-e2e", namespace=cluster.ns)
    assert lease.to_dict()["spec"]["holderIdentity"] == first.identity()
    assert standby.cycles() == 0 and standby.identity() is None
    notes = [str(e.get("event")) for e in standby.lines()]
    assert any("leader election is on, as koord-descheduler's leaderElection" in n
               for n in notes), notes
    # The leader stops (its Lease handed over): the standby takes over and runs cycles.
    assert first.stop() == 0
    wait_until("the standby taking over",
               lambda: standby.identity() is not None and standby.cycles() >= 1, BOUND)
    lease = cluster.client.get(Lease, "koord-e2e", namespace=cluster.ns)
    assert lease.to_dict()["spec"]["holderIdentity"] == standby.identity()


def test_the_prometheus_token_follows_the_secret(cluster: Cluster, tmp_path: Path) -> None:
    from usage.fake_prometheus import serve

    def secret(token: str) -> Secret:
        return Secret.from_dict({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "prometheus-token", "namespace": cluster.ns},
            "data": {"prometheusAuthToken": base64.b64encode(token.encode()).decode()}})

    cluster.client.create(secret("first"))
    fake, server, thread = serve()
    form = {"query": "up", "time": "1795348800"}

    async def queries() -> None:
        async with ApiClient.from_config(cluster.kubeconfig) as client:
            clock = [0.0]
            q = PrometheusQueries(asyncio.get_running_loop(), Metrics(), env={},
                                  service_account_dir=str(tmp_path / "no-account"),
                                  secrets=SecretTokens(lambda: client, ttl=5.0,
                                                       clock=lambda: clock[0]))
            try:
                await q.query(fake.url, (cluster.ns, "prometheus-token"), form)
                cluster.client.replace(secret("second"))
                clock[0] = 5.0  # the next query after the read interval
                await q.query(fake.url, (cluster.ns, "prometheus-token"), form)
            finally:
                await q.close()

    try:
        asyncio.run(queries())
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert [r.headers.get("Authorization") for r in fake.requests] == [
        "Bearer first", "Bearer second"]

"""Cycles beside the schedule on a real control plane (issue 37 item 10): `desched run
--interval 1h --trigger-on node-added` runs a cycle soon after a node joins, its cause in the
log ("node added: NAME") and in /cycles.json, though the schedule's next cycle is an hour
away; and `POST /cycles/run` on the secure port runs one for a ServiceAccount that
kube-apiserver's SubjectAccessReview allows to post the path, and for no one else.

The control plane is shared with other tests that add nodes too: a node of theirs may start
cycles here as well, so nothing assumes how many cycles ran; each test waits for the cycle
that names its own node or its own request."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import Cluster, json_log, stop_process, wait_until
from test_e2e_serving import POLICY, Access, free_port

pytestmark = pytest.mark.timeout(300)
BOUND = 120.0  # seconds: a loaded 2-core machine


class Desched:
    """`desched run ...` as a process, its JSON log read as it grows."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log

    def lines(self) -> list[dict[str, Any]]:
        return json_log(self.log.read_text(errors="replace"))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.lines() if e.get("event") == name]

    def wait(self, what: str, check: Callable[[], bool], timeout: float = BOUND) -> None:
        def alive_and(check_: Callable[[], bool]) -> bool:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            return check_()

        wait_until(what, lambda: alive_and(check), timeout)

    def finished(self, cycle: int) -> bool:
        return any(e.get("cycle") == cycle for e in self.events("descheduling cycle finished"))


@contextmanager
def desched(cluster: Cluster, tmp_path: Path, *args: str) -> Iterator[Desched]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(namespace=cluster.ns))
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    log = tmp_path / "desched.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "desched", "run", "--policy", str(policy), "--kubeconfig",
             cluster.kubeconfig, "--interval", "1h", "--dry-run", "--log-format", "json", *args],
            stdout=subprocess.DEVNULL, stderr=out, env=env)
        run = Desched(proc, log)
        try:
            run.wait("the schedule's first cycle", lambda: run.finished(1))
            yield run
        finally:
            stop_process(proc)
    assert proc.returncode == 0, log.read_text()[-3000:]


def test_a_node_added_starts_a_cycle_with_its_cause_in_the_log(cluster: Cluster,
                                                               tmp_path: Path) -> None:
    cluster.add_node(1)
    cluster.add_node(2)
    with desched(cluster, tmp_path, "--trigger-on", "node-added",
                 "--trigger-debounce", "1s") as run:
        joined = cluster.add_node(3)

        def started() -> list[dict[str, Any]]:
            return [e for e in run.events("descheduling cycle started")
                    if joined in str(e.get("cause", "")).split(": ", 1)[-1].split(", ")]

        run.wait(f"a cycle caused by {joined} joining", lambda: bool(started()))
        line = started()[0]
        assert str(line["cause"]).startswith("node added: ")
        assert line["cycle"] > 1
        run.wait(f"cycle {line['cycle']} to finish", lambda: run.finished(line["cycle"]))
        # The cycle's snapshot holds the node that started it; the hour's schedule was not due.
        assert line["nodes"] >= 3
        assert not [e for e in run.events("descheduling cycle started")
                    if e.get("cause") == "schedule" and e["cycle"] > 1]


def _post(port: int, token: str | None) -> tuple[int, dict[str, Any]]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # desched's self-signed certificate
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"https://127.0.0.1:{port}/cycles/run", method="POST",
                                     headers=headers, data=b"")
    try:
        with urllib.request.urlopen(request, context=context, timeout=BOUND) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_post_runs_a_cycle_for_whom_the_api_server_allows(
        cluster: Cluster, tmp_path: Path, access: Access) -> None:
    cluster.add_node(1)
    cluster.add_node(2)
    runner_role = {"rules": [{"nonResourceURLs": ["/cycles/run"], "verbs": ["post"]}]}
    reader_role = {"rules": [{"nonResourceURLs": ["/cycles", "/cycles.json"],
                              "verbs": ["get"]}]}
    operator = access.account("rebalancer", runner_role)
    reader = access.account("reader", reader_role)
    port = free_port()
    with desched(cluster, tmp_path, f"--secure-port={port}", "--bind-address=127.0.0.1",
                 "--delegate-auth") as run:
        assert _post(port, None)[0] == 401
        status, body = _post(port, reader)
        assert status == 403, body
        user = f"system:serviceaccount:{access.namespace}"
        assert body["message"].startswith(
            f'forbidden: User "{user}:reader" cannot post path "/cycles/run"')
        deadline = time.monotonic() + BOUND
        while True:  # a cycle a node of another test started may be running: 409, ask again
            status, body = _post(port, operator)
            if status != 409 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert status == 200, body
        assert body["cause"] == f"request by {user}:rebalancer"
        assert body["result"] == "completed" and body["dryRun"] is True
        assert body["page"] == f"https://127.0.0.1:{port}/cycles#cycle-{body['cycle']}"
        logged = [e for e in run.events("descheduling cycle started")
                  if e["cycle"] == body["cycle"]]
        assert [e["cause"] for e in logged] == [body["cause"]]


@pytest.fixture
def access(kube: Any) -> Iterator[Access]:
    with Access(kube) as a:
        yield a

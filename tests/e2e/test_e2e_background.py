"""Evictions in background against a real API server (`--feature-gates EvictionsInBackground=true`).

KubeVirt answers the eviction of a VM's pod with a live migration: its admission webhook on
pods/eviction denies the request with 429 "Eviction triggered evacuation", and its controller
annotates the pod descheduler.alpha.kubernetes.io/eviction-in-progress until the pod leaves. Here
the test is KubeVirt: an HTTPS admission webhook on 127.0.0.1 (a self-signed certificate in the
webhook configuration's caBundle), scoped to the test's namespace, answers as KubeVirt's does for
the pod annotated request-evict-only and allows every other eviction; the test writes the
annotation, then deletes the pod as the migration's end would.

`desched run --interval 2s` with PodLifeTime and maxNoOfPodsToEvictPerNode 1: the VM's pod,
the oldest, is asked to leave once; while it migrates it uses up its node's limit (its
neighbour is refused by the limit in every cycle, and it is never asked again) and the pod on
the other node is evicted; once it has gone, its neighbour is evicted."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import Cluster, json_log, wait_until
from lightkube import ApiError, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

REQUEST_EVICT_ONLY = "descheduler.alpha.kubernetes.io/request-evict-only"
IN_PROGRESS = "descheduler.alpha.kubernetes.io/eviction-in-progress"
NODE_LIMIT = "maximum number of evicted pods per node reached"


class Evacuations:
    """KubeVirt's eviction webhook, for the pods whose names start with "vm-": every
    AdmissionReview it was sent, as (pod, dry run)."""

    def __init__(self, workdir: Path) -> None:
        self.reviews: list[tuple[str, bool]] = []
        cert, key = workdir / "webhook.crt", workdir / "webhook.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        self.ca_bundle = base64.b64encode(cert.read_bytes()).decode()
        reviews = self.reviews

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = review["request"]
                name = request.get("name", "")
                reviews.append((name, bool(request.get("dryRun"))))
                response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
                if name.startswith("vm-"):
                    response = {"uid": request["uid"], "allowed": False, "status": {
                        "code": 429, "message": f"Eviction triggered evacuation of VMI "
                                                f"{request.get('namespace')}/{name}"}}
                body = json.dumps({"apiVersion": "admission.k8s.io/v1",
                                   "kind": "AdmissionReview", "response": response}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def asked(self, pod: str) -> int:
        """Eviction requests for the pod that were not dry runs."""
        return sum(1 for name, dry in self.reviews if name == pod and not dry)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def evacuations(cluster: Cluster) -> Iterator[Evacuations]:
    hook = Evacuations(cluster.workdir)
    name = f"{cluster.ns}-evacuation"
    cluster.client.create(codecs.from_dict({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "evacuation.desched-e2e.example.com",
            "clientConfig": {"url": f"https://127.0.0.1:{hook.port}/evict",
                             "caBundle": hook.ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods/eviction"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": cluster.ns}},
            "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 5}]}))
    try:
        yield hook
    finally:
        cluster.client.delete(ValidatingWebhookConfiguration, name)
        hook.close()


def _reviewed(cluster: Cluster, hook: Evacuations, pod: str) -> bool:
    """Whether the API server sends the webhook its reviews yet (asked by a dry-run eviction,
    which the webhook refuses once it is in force)."""
    with contextlib.suppress(ApiError):
        cluster.client.create(Pod.Eviction(metadata=ObjectMeta(name=pod, namespace=cluster.ns)),
                              name=pod, namespace=cluster.ns, dry_run=True)
    return bool(hook.reviews)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return str(response.read().decode())


def test_a_pod_migrating_counts_against_the_limit_until_it_leaves(
        cluster: Cluster, evacuations: Evacuations) -> None:
    n1, n2 = cluster.add_node(1), cluster.add_node(2)
    owner = ("web", cluster.add_replicaset("web", 3, {"app": "web"}))
    cluster.add_pod("vm-a", n1, owner, {"app": "web"})
    cluster.client.patch(Pod, "vm-a", {"metadata": {"annotations": {REQUEST_EVICT_ONLY: ""}}},
                         namespace=cluster.ns, patch_type=PatchType.MERGE)
    time.sleep(1.2)  # PodLifeTime takes the oldest first: the VM's pod, by a second
    cluster.add_pod("web-0", n1, owner, {"app": "web"})
    cluster.add_pod("web-1", n2, owner, {"app": "web"})
    # The webhook is in force once the API server has sent it a (dry-run) review.
    wait_until("the webhook to be called", lambda: _reviewed(cluster, evacuations, "vm-a"), 60)
    assert evacuations.asked("vm-a") == 0

    policy = cluster.write("policy.yaml", f"""
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNode: 1
profiles:
- name: background
  pluginConfig:
  - name: DefaultEvictor
  - name: PodLifeTime
    args: {{maxPodLifeTimeSeconds: 1, namespaces: {{include: [{cluster.ns}]}}}}
  plugins:
    filter: {{enabled: [DefaultEvictor]}}
    deschedule: {{enabled: [PodLifeTime]}}
""")
    log_path = cluster.workdir / "desched.log"
    port = free_port()
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    cluster.heartbeat()
    with log_path.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "desched", "run", "--policy", policy, "--kubeconfig",
             cluster.kubeconfig, "--interval", "2s", "--log-format", "json",
             "--feature-gates", "EvictionsInBackground=true",
             "--metrics-address", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        def log() -> list[dict[str, Any]]:
            return json_log(log_path.read_text())

        def finished() -> list[dict[str, Any]]:
            return [e for e in log() if e.get("event") == "descheduling cycle finished"]

        wait_until("the VM's eviction request", lambda: evacuations.asked("vm-a") == 1, 90)

        def told_on_the_page() -> bool:  # /cycles.json: among the cycle's decisions
            page = json.loads(_get(port, "/cycles.json"))
            return any(c["live"]["evictionRequests"]["outcomes"].get("background") == 1
                       for c in page["cycles"])

        wait_until("/cycles.json to tell the eviction in background", told_on_the_page, 30)
        # KubeVirt's controller marks the migration.
        cluster.client.patch(Pod, "vm-a", {"metadata": {"annotations": {IN_PROGRESS: ""}}},
                             namespace=cluster.ns, patch_type=PatchType.MERGE)
        seen = len(finished())
        wait_until("three cycles while it migrates", lambda: len(finished()) >= seen + 3, 90)
        assert evacuations.asked("vm-a") == 1  # never asked again
        assert cluster.pod_state("web-0") == "running"  # its node's limit is the VM's
        assert cluster.pod_state("web-1") in ("terminating", "gone")
        assert cluster.pod_state("vm-a") == "running"
        # The migration ends: the pod goes.
        cluster.client.delete(Pod, "vm-a", namespace=cluster.ns, grace_period=0)
        wait_until("web-0 evicted once the VM's pod has left",
                   lambda: cluster.pod_state("web-0") in ("terminating", "gone"), 90)
        # /metrics counts it with upstream's result labels. The API server shows web-0
        # terminating before desched has its answer and counts it: read until it has.
        def evicted(result: str, node: str) -> float:
            labels = (f'result="{result}"', 'strategy="PodLifeTime"', 'profile="background"',
                      f'namespace="{cluster.ns}"', f'node="{node}"')
            return sum(float(line.rsplit(" ", 1)[1]) for line in _get(port, "/metrics")
                       .splitlines() if line.startswith("descheduler_pods_evicted_total{")
                       and all(label in line for label in labels))

        # web-0 evicted; the VM's eviction ended
        wait_until("web-0's eviction counted", lambda: evicted("success", n1) >= 2, 30)
        assert evicted("background", n1) == 1
        assert evicted("success", n1) == 2
        assert evicted("success", n2) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    lines = log()
    vm, web0 = f"{cluster.ns}/vm-a", f"{cluster.ns}/web-0"
    assert [e["pod"] for e in lines if e.get("event") == "Eviction in background assumed"] == [vm]
    ended = [e for e in lines if e.get("event") == "Eviction in background ended"]
    assert [(e["pod"], e["result"]) for e in ended] == [(vm, "success")], ended
    refused = [e for e in lines if e.get("event") == "Eviction refused by a limit"]
    assert refused and {(e["pod"], e["error"]) for e in refused} == {(web0, NODE_LIMIT)}
    evicted = sorted(e["pod"] for e in lines if e.get("event") == "Evicted pod")
    assert evicted == [web0, f"{cluster.ns}/web-1"]
    assert any(e.get("evictionRequests") == 1 for e in finished())
    assert proc.returncode == 0

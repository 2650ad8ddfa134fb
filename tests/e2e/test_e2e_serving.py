"""Who may read desched's pages, decided by a real API server: `desched run --secure-port
--delegate-auth` serves /metrics, /cycles and /cycles.json over HTTPS and asks kube-apiserver,
with a TokenReview and a SubjectAccessReview, about each bearer token. No token: 401. The
viewer user of the control plane (no RBAC at all) and a ServiceAccount with no binding: 403. A
ServiceAccount bound to the chart's metrics-reader ClusterRole (its token from the TokenRequest
API): 200. desched sends the reviews as a ServiceAccount bound to the chart's auth-delegation
ClusterRole only, so the chart's rules are shown to be enough."""

from __future__ import annotations

import json
import os
import secrets
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import WORKDIR_ENV
from e2e_cluster import stop_process
from lightkube import Client, codecs
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "deploy" / "helm" / "desched" / "templates" / "secure-serving-rbac.yaml"
POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: default
  pluginConfig:
  - name: PodLifeTime
    args: {{maxPodLifeTimeSeconds: 3600, namespaces: {{include: [{namespace}]}}}}
  plugins:
    deschedule: {{enabled: [PodLifeTime]}}
"""

pytestmark = pytest.mark.timeout(300)


def chart_roles() -> dict[str, dict[str, Any]]:
    """The chart's two secure-serving ClusterRoles, from the template (its rules are plain
    YAML): 'auth-delegation' and 'metrics-reader'."""
    roles = {}
    for part in TEMPLATE.read_text().split("\n---\n"):
        doc = yaml.safe_load("\n".join(line for line in part.splitlines() if "{{" not in line))
        if isinstance(doc, dict) and doc.get("kind") == "ClusterRole":
            urls = any("nonResourceURLs" in rule for rule in doc["rules"])
            roles["metrics-reader" if urls else "auth-delegation"] = doc
    assert set(roles) == {"auth-delegation", "metrics-reader"}
    return roles


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # desched's self-signed certificate
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


class Access:
    """A namespace, ServiceAccounts and cluster-scoped RBAC objects named for one test, deleted
    afterwards."""

    def __init__(self, kube: Client) -> None:
        self.kube = kube
        self.suffix = secrets.token_hex(4)
        self.namespace = f"desched-e2e-serving-{self.suffix}"
        self.cluster_objects: list[tuple[type[Any], str]] = []

    def __enter__(self) -> Access:
        self.kube.create(codecs.from_dict({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": self.namespace, "labels": {"desched-e2e": self.suffix}}}))
        return self

    def __exit__(self, *exc: object) -> None:
        for kind, name in reversed(self.cluster_objects):
            self.kube.delete(kind, name)
        self.kube.delete(Namespace, self.namespace)

    def account(self, name: str, role: dict[str, Any] | None = None) -> str:
        """A ServiceAccount (bound to a copy of `role` when given) and a token for it."""
        self.kube.create(codecs.from_dict({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": self.namespace}}))
        if role is not None:
            bound = f"{name}-{self.suffix}"
            self.kube.create(codecs.from_dict({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": bound}, "rules": role["rules"]}))
            self.cluster_objects.append((ClusterRole, bound))
            self.kube.create(codecs.from_dict({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": bound},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": bound},
                "subjects": [{"kind": "ServiceAccount", "name": name,
                              "namespace": self.namespace}]}))
            self.cluster_objects.append((ClusterRoleBinding, bound))
        request = ServiceAccount.Token(metadata=ObjectMeta(name=name),
                                       spec=TokenRequestSpec(audiences=[],
                                                             expirationSeconds=3600))
        answer = self.kube.create(request, name, namespace=self.namespace)
        token = answer.status.token
        assert token
        return str(token)


def kubeconfig_for(admin: str, token: str, path: Path) -> str:
    """`admin`'s cluster (server and CA) with another user's token."""
    config = yaml.safe_load(Path(admin).read_text())
    config["users"] = [{"name": "reviewer", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "reviewer"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return str(path)


def viewer_token(kubeconfig: str) -> str | None:
    """The token of the control plane's viewer user (no RBAC), when the control plane is ours."""
    workdir = Path(os.environ.get(WORKDIR_ENV) or Path(kubeconfig).parent)
    path = workdir / "viewer.kubeconfig"
    if not path.is_file():
        return None
    return str(yaml.safe_load(path.read_text())["users"][0]["user"]["token"])


@pytest.fixture
def access(kube: Client) -> Iterator[Access]:
    with Access(kube) as a:
        yield a


def test_no_token_401_no_rule_403_the_charts_reader_role_200(
        access: Access, kubeconfig: str, tmp_path: Path) -> None:
    roles = chart_roles()
    reviewer = access.account("desched-reviewer", roles["auth-delegation"])
    reader = access.account("prometheus", roles["metrics-reader"])
    stranger = access.account("stranger")  # authenticated, bound to nothing
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(namespace=access.namespace))
    reviews = kubeconfig_for(kubeconfig, reviewer, tmp_path / "reviewer.kubeconfig")
    port = free_port()
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    log = (tmp_path / "desched.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "desched", "run", "--policy", str(policy),
         "--kubeconfig", kubeconfig, "--interval", "1h", "--dry-run", "--log-format", "json",
         f"--secure-port={port}", "--bind-address=127.0.0.1", "--delegate-auth",
         "--authentication-kubeconfig", reviews, "--authorization-kubeconfig", reviews],
        stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:  # /readyz is always allowed: ready once the informers have synced
            assert proc.poll() is None, (tmp_path / "desched.log").read_text()[-3000:]
            try:
                if get(port, "/readyz") == (200, "ok"):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "desched not ready in 120 s"
            time.sleep(0.2)
        assert get(port, "/healthz") == (200, "ok")
        for path in ("/metrics", "/cycles", "/cycles.json"):
            status, body = get(port, path)
            assert status == 401, (path, body)
            assert json.loads(body)["reason"] == "Unauthorized"
            assert get(port, path, "not-a-token")[0] == 401
            status, body = get(port, path, stranger)
            assert status == 403, (path, body)
            user = f"system:serviceaccount:{access.namespace}:stranger"
            assert json.loads(body)["message"].startswith(
                f'forbidden: User "{user}" cannot get path "{path}"')
        viewer = viewer_token(kubeconfig)
        if viewer is not None:
            status, body = get(port, "/metrics", viewer)
            assert status == 403, body
            assert json.loads(body)["message"].startswith(
                'forbidden: User "viewer" cannot get path "/metrics"')
        status, body = get(port, "/metrics", reader)
        assert status == 200, body
        assert "descheduler_build_info" in body
        status, body = get(port, "/cycles", reader)
        assert status == 200 and "<html" in body.lower(), body[:300]
        status, body = get(port, "/cycles.json", reader)
        assert status == 200, body
        json.loads(body)
        # The reader's role names three paths, nothing else.
        assert get(port, "/nowhere", reader)[0] == 403
    finally:
        stop_process(proc)
        log.close()
    assert proc.returncode == 0, (tmp_path / "desched.log").read_text()[-3000:]

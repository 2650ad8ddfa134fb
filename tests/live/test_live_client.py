"""The API client: configuration (kubeconfig, contexts, KUBECONFIG merging, in-cluster, exec and
OIDC credentials) and one-line errors, against kmock over real HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import kmock
import pytest
import yaml
from fake_apiserver import Emulator

from desched.errors import InputError
from desched.live.client import (
    AccessDenied,
    ApiClient,
    ApiError,
    Unreachable,
    load_config,
)
from desched.model.kinds import KIND_GROUPS, TYPES
from desched.model.resources import BY_KIND, RESOURCES, resources_for


def write_config(path: Path, contexts: dict[str, tuple[str, str | None]],
                 clusters: dict[str, dict[str, Any]], users: dict[str, dict[str, Any]],
                 current: str | None = None) -> str:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        **({"current-context": current} if current else {}),
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": {"cluster": c, **({"user": u} if u else {})}}
                     for n, (c, u) in contexts.items()],
    }))
    return str(path)


NO_ENV: dict[str, str] = {}


# -- configuration -------------------------------------------------------------------------------

def test_current_context_and_context_flag(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    path = write_config(
        tmp_path / "config",
        {"prod": ("prod", "admin"), "dev": ("dev", None)},
        {"prod": {"server": "https://prod:6443", "certificate-authority": "certs/ca.crt"},
         "dev": {"server": "http://dev:8080"}},
        {"admin": {"token": "abc"}}, current="prod")
    prod = load_config(path, env=NO_ENV)
    assert prod.context_name == "prod"
    assert prod.cluster.server == "https://prod:6443"
    # Relative file names are resolved against the kubeconfig's folder, as kubectl does.
    assert prod.cluster.certificate_auth == str(tmp_path / "certs" / "ca.crt")
    assert prod.user is not None and prod.user.token == "abc"
    dev = load_config(path, "dev", env=NO_ENV)
    assert dev.cluster.server == "http://dev:8080"
    assert dev.user is not None and dev.user.token is None  # no user: no authentication


@pytest.mark.parametrize(("setup", "needle"), [
    ("missing", "cannot read kubeconfig: No such file or directory"),
    ("yaml", "invalid kubeconfig YAML: line 3: expected ',' or ']'"),
    ("context", "context 'nope' not found (contexts: prod)"),
    ("cluster", "context 'prod' names cluster 'gone', which is not defined"),
    ("current", "no current-context is set: pass --context NAME"),
    ("provider", "auth-provider 'gcp' is not supported: use an exec credential plugin"),
])
def test_bad_kubeconfig_is_one_line(tmp_path: Path, setup: str, needle: str) -> None:
    path = tmp_path / "config"
    context = None
    if setup == "yaml":
        path.write_text("clusters:\n  - name: [unclosed\n")
    elif setup == "context":
        write_config(path, {"prod": ("prod", None)}, {"prod": {"server": "http://x"}}, {},
                     current="prod")
        context = "nope"
    elif setup == "cluster":
        write_config(path, {"prod": ("gone", None)}, {"prod": {"server": "http://x"}}, {},
                     current="prod")
    elif setup == "current":
        write_config(path, {"prod": ("prod", None)}, {"prod": {"server": "http://x"}}, {})
    elif setup == "provider":
        write_config(path, {"prod": ("prod", "u")}, {"prod": {"server": "http://x"}},
                     {"u": {"auth-provider": {"name": "gcp", "config": {}}}}, current="prod")
    with pytest.raises(InputError) as caught:
        load_config(str(path), context, env=NO_ENV)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert needle in message
    assert "\n" not in message


def test_oidc_auth_provider_uses_its_id_token(tmp_path: Path) -> None:
    path = write_config(tmp_path / "config", {"c": ("c", "u")}, {"c": {"server": "http://x"}},
                        {"u": {"auth-provider": {"name": "oidc", "config": {
                            "id-token": "eyJ.token", "idp-issuer-url": "https://idp"}}}},
                        current="c")
    user = load_config(path, env=NO_ENV).user
    assert user is not None and user.token == "eyJ.token" and user.auth_provider is None


def test_kubeconfig_env_files_are_merged(tmp_path: Path) -> None:
    first = write_config(tmp_path / "a", {"a": ("a", None)}, {"a": {"server": "http://a"}}, {},
                         current="a")
    second = write_config(tmp_path / "b", {"b": ("b", None), "a": ("b", None)},
                          {"b": {"server": "http://b"}}, {}, current="b")
    env = {"KUBECONFIG": os.pathsep.join([first, str(tmp_path / "absent"), second])}
    assert load_config(env=env).cluster.server == "http://a"  # the first current-context wins
    assert load_config(context="b", env=env).cluster.server == "http://b"
    with pytest.raises(InputError, match=r"^KUBECONFIG: no such file"):
        load_config(env={"KUBECONFIG": str(tmp_path / "absent")})


def test_explicit_kubeconfig_wins_over_the_environment(tmp_path: Path) -> None:
    path = write_config(tmp_path / "a", {"a": ("a", None)}, {"a": {"server": "http://a"}}, {},
                        current="a")
    env = {"KUBECONFIG": str(tmp_path / "absent"), "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    assert load_config(path, env=env).cluster.server == "http://a"


def test_in_cluster_service_account(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "namespace").write_text("kube-system")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = load_config(service_account_dir=str(tmp_path), env=env)
    assert config.cluster.server == "https://[fd00::1]:443"
    assert config.user is not None and config.user.token_file == str(tmp_path / "token")
    with pytest.raises(InputError, match=r"^--context: needs a kubeconfig file"):
        load_config(context="x", service_account_dir=str(tmp_path), env=env)
    with pytest.raises(InputError, match="no service account token"):
        load_config(service_account_dir=str(tmp_path / "none"), env=env)


def test_no_configuration_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(InputError, match="no Kubernetes configuration: pass --kubeconfig FILE"):
        load_config(env=NO_ENV)


def test_resources_cover_every_snapshot_kind() -> None:
    # Every kind but the SnapshotInfo desched writes itself.
    assert set(BY_KIND) == set(KIND_GROUPS) - {"SnapshotInfo"} == set(TYPES) - {"SnapshotInfo"}
    for resource in RESOURCES:
        assert resource.group in KIND_GROUPS[resource.kind]
    assert BY_KIND["Pod"].path == "/api/v1/pods"
    assert BY_KIND["NodeMetric"].path == "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
    assert BY_KIND["NodeMetrics"].label == "nodes.metrics.k8s.io/v1beta1"
    assert [r.kind for r in resources_for(["Pod", "Node"])] == ["Node", "Pod"]


# -- requests ------------------------------------------------------------------------------------

def server_url(emulator: Emulator) -> str:
    return str(emulator.url).rstrip("/")


@pytest.mark.asyncio
async def test_unauthorized_names_the_credentials(emulator: Emulator) -> None:
    emulator[kmock.action.LIST, kmock.resource("", "v1", "nodes")] << kmock.Response(
        status=401, payload={"kind": "Status", "code": 401, "reason": "Unauthorized",
                             "message": "Unauthorized"})
    async with ApiClient.for_server(server_url(emulator), token="bad", trust_env=False) as c:
        with pytest.raises(AccessDenied) as caught:
            await c.get("/api/v1/nodes", what="list nodes")
    assert str(caught.value) == (f"{server_url(emulator)}: unauthorized (401) to list nodes: "
                                 "the credentials in default were refused: Unauthorized")


@pytest.mark.asyncio
async def test_error_without_a_status_body(emulator: Emulator) -> None:
    emulator[kmock.action.LIST, kmock.resource("", "v1", "nodes")] << kmock.Response(
        status=502, payload=b"<html>\n<body>Bad gateway</body>\n</html>")
    async with ApiClient.for_server(server_url(emulator), trust_env=False) as c:
        with pytest.raises(ApiError) as caught:
            await c.get("/api/v1/nodes", what="list nodes")
    assert caught.value.code == 502 and caught.value.transient
    assert str(caught.value) == ("cannot list nodes: 502 Bad Gateway: <html> <body>Bad gateway"
                                 "</body> </html>")


@pytest.mark.asyncio
async def test_tls_to_a_plain_http_server_is_unreachable(emulator: Emulator) -> None:
    url = server_url(emulator).replace("http://", "https://")
    async with ApiClient.for_server(url, trust_env=False) as c:
        with pytest.raises(Unreachable) as caught:
            await c.get("/api/v1/nodes", what="list nodes")
    message = str(caught.value)
    assert message.startswith(f"{url}: cannot connect to the API server to list nodes: ")
    assert "\n" not in message


@pytest.mark.asyncio
async def test_stream_reassembles_lines_across_chunks(emulator: Emulator) -> None:
    async def chunks() -> Any:
        for part in (b'{"a":', b'1}\n{"b"', b":2}\n\n", b'{"c":3}\n{"cut'):
            yield part
            await asyncio.sleep(0.01)

    emulator[kmock.action.WATCH, kmock.resource("", "v1", "pods")] << (lambda: chunks())
    async with ApiClient.for_server(server_url(emulator), trust_env=False) as c, \
            c.stream("/api/v1/pods", {"watch": "true"}, what="watch pods") as lines:
        received = [json.loads(line) async for line in lines]
    # The trailing fragment without a line end was cut off mid-event: it is dropped.
    assert received == [{"a": 1}, {"b": 2}, {"c": 3}]


@pytest.mark.asyncio
async def test_exec_credential_plugin(emulator: Emulator, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({{"
                      "'apiVersion': 'client.authentication.k8s.io/v1beta1', "
                      "'kind': 'ExecCredential', 'status': {'token': 'from-exec'}}))\n")
    plugin.chmod(0o755)
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                          "command": str(plugin)}}
    broken = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                       "command": str(tmp_path / "missing-plugin")}}
    path = write_config(tmp_path / "config", {"ok": ("c", "ok"), "broken": ("c", "broken")},
                        {"c": {"server": server_url(emulator)}},
                        {"ok": exec_user, "broken": broken}, current="ok")
    emulator[kmock.action.LIST, kmock.resource("", "v1", "nodes")] << kmock.Response(
        status=200, payload={"items": []})
    async with ApiClient(load_config(path, env=NO_ENV), trust_env=False) as c:
        assert json.loads(await c.get("/api/v1/nodes", what="list nodes")) == {"items": []}
    assert [r.headers.get("Authorization") for r in emulator] == ["Bearer from-exec"]
    async with ApiClient(load_config(path, "broken", env=NO_ENV), trust_env=False) as c:
        with pytest.raises(InputError) as caught:
            await c.get("/api/v1/nodes", what="list nodes")
    message = str(caught.value)
    assert message.startswith(f"{path}: cannot get credentials to list nodes: ")
    assert "\n" not in message


def test_bad_certificate_data_is_an_input_error(tmp_path: Path) -> None:
    cluster = {"server": "https://x", "certificate-authority-data": "bm90IGEgY2E="}  # "not a ca"
    path = write_config(tmp_path / "config", {"c": ("c", None)}, {"c": cluster}, {},
                        current="c")
    with pytest.raises(InputError, match="cannot set up the connection to https://x"):
        ApiClient(load_config(path, env=NO_ENV))

"""`kubectl desched` (desched/commands/kubectl_plugin.py): the installed `kubectl-desched`
script run as kubectl runs a plugin, against kmock for the commands that read a cluster: the
current context by default, `--context` and `-n` as kubectl users type them,
`simulate`/`explain` capturing the cluster when no `--snapshot` is given, and through kubectl
itself where it is installed."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fake_apiserver import Emulator, FakeApiServer
from test_run import cluster, command_env, kubeconfig, policy_file

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
NOW = "2026-11-22T12:00:00Z"
BIN = Path(sys.executable).parent
PLUGIN = BIN / "kubectl-desched"
KUBECTL = shutil.which("kubectl")


def plugin_env(tmp_path: Path, kube: str | None = None) -> dict[str, str]:
    """kubectl's environment as a plugin sees it: KUBECONFIG and PATH; no ~/.kube here."""
    env = command_env()
    env.update(HOME=str(tmp_path), TMPDIR=str(tmp_path / "tmp"),
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    (tmp_path / "tmp").mkdir(exist_ok=True)
    if kube is not None:
        env["KUBECONFIG"] = kube
    return env


async def plugin(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    assert PLUGIN.exists(), (f"{PLUGIN} is missing: `pip install -e .` installs the "
                             "kubectl-desched entry point (scripts/test does)")
    proc = await asyncio.create_subprocess_exec(
        str(PLUGIN), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.asyncio
async def test_the_script_is_desched_with_the_plugin_s_help(tmp_path: Path) -> None:
    env = plugin_env(tmp_path)
    code, out, _ = await plugin(env, "-h")
    assert code == 0
    assert out.startswith("Usage: kubectl desched [OPTIONS] COMMAND [ARGS]...")
    assert "desched as a kubectl plugin" in out
    for command in ("simulate", "explain", "snapshot", "run", "validate"):
        assert f"  {command} " in out, command
    code, out, _ = await plugin(env, "simulate", "-h")
    assert code == 0 and out.startswith("Usage: kubectl desched simulate [OPTIONS]")
    assert await plugin(env, "validate", "--policy", str(EXAMPLES / "policy.yaml")) == (
        0, "ok\n", "")
    # Offline, exactly desched.
    args = ("simulate", "--policy", str(EXAMPLES / "policy.yaml"), "--snapshot",
            str(EXAMPLES / "cluster.yaml"), "--now", NOW, "-o", "json")
    code, out, _ = await plugin(env, *args)
    direct = subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                            text=True, timeout=60, check=False)
    assert code == 0 and json.loads(out) == json.loads(direct.stdout)


@pytest.mark.asyncio
async def test_the_current_context_then_another(tmp_path: Path, emulator: Emulator,
                                                api: FakeApiServer) -> None:
    cluster(api)
    kube = kubeconfig(tmp_path, str(emulator.url).rstrip("/"))
    # A second context, current, that reaches nothing: --context picks the one that works.
    config = yaml.safe_load(Path(kube).read_text())
    config["clusters"].append({"name": "away", "cluster": {"server": "http://127.0.0.1:9"}})
    config["contexts"].append({"name": "away", "context": {"cluster": "away", "user": "u"}})
    config["contexts"][0]["context"]["namespace"] = "default"
    config["current-context"] = "away"
    Path(kube).write_text(yaml.safe_dump(config))
    env = plugin_env(tmp_path, kube)

    code, _, err = await plugin(env, "snapshot", "--out", str(tmp_path / "away.jsonl"))
    assert code == 2 and "127.0.0.1:9" in err  # the current context, unreachable
    out_file = tmp_path / "cluster.jsonl"
    code, _, err = await plugin(env, "snapshot", "--context", "fake", "--out", str(out_file))
    assert code == 0, err
    assert "old-1" in out_file.read_text()

    # simulate without --snapshot: the context's cluster, captured first into a named file.
    policy = policy_file(tmp_path)
    code, out, err = await plugin(env, "simulate", "--policy", policy, "--context", "fake",
                                  "-o", "json")
    assert code == 0, err
    assert sorted(e["pod"] for e in json.loads(out)["evictions"]) == ["old-1", "old-2"]
    [note] = [line for line in err.splitlines() if line.startswith("note: captured")]
    kept = Path(note.split(" into ")[1].split(" (give it")[0])
    assert kept.parent == tmp_path / "tmp" / "desched-snapshots" and kept.exists()
    assert "context 'fake'" in note

    # explain --pod NAME: the namespace from the context (as kubectl get pod NAME), or -n.
    for extra in (("--context", "fake"), ("-n", "default")):
        code, out, err = await plugin(env, "explain", "--policy", policy, "--snapshot",
                                      str(kept), "--pod", "old-1", *extra)
        assert code == 0, err
        assert "pod default/old-1 on n" in out and "PodLifeTime: EVICTED" in out
    code, _, err = await plugin(env, "simulate", "--policy", policy, "--snapshot", str(kept),
                                "--context", "fake")
    assert code == 2 and "--kubeconfig and --context are for a run without --snapshot" in err
    code, _, err = await plugin(env, "explain", "--policy", policy, "--pod", "old-1",
                                "-n", "kube-system", "--context", "fake")
    assert code == 2 and "kube-system/old-1" in err  # explain's own "not in the snapshot"
    code, _, err = await plugin(env, "simulate", "--policy", policy, "-n", "default")
    assert code == 2 and err.startswith("error: ") and "whole cluster" in err


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_finds_the_plugin(tmp_path: Path) -> None:
    assert PLUGIN.exists(), "`pip install -e .` installs kubectl-desched"
    env = plugin_env(tmp_path)
    proc = subprocess.run([str(KUBECTL), "desched", "-h"], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: kubectl desched [OPTIONS] COMMAND [ARGS]...")
    proc = subprocess.run([str(KUBECTL), "desched", "validate", "--policy",
                           str(EXAMPLES / "policy.yaml")], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (0, "ok\n"), proc.stderr


@pytest.mark.asyncio
async def test_the_kubeconfig_is_found_as_kubectl_finds_it(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    """~/.kube/config before the pod's service account (a kubectl in a toolbox pod), where
    desched itself, made to run in a pod, takes the service account first."""
    cluster(api)
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(
        Path(kubeconfig(tmp_path, str(emulator.url).rstrip("/"))).read_text())
    env = plugin_env(home)
    env["KUBERNETES_SERVICE_HOST"] = "10.0.0.1"  # in a pod
    out_file = tmp_path / "cluster.jsonl"
    code, _, err = await plugin(env, "snapshot", "--out", str(out_file))
    assert code == 0, err
    assert "old-1" in out_file.read_text()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "desched", "snapshot", "--out", str(tmp_path / "sa.jsonl"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    _, direct = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2 and b"serviceaccount" in direct  # desched: the pod's account


def _option_help(text: str, flag: str) -> str:
    """The help of one option: its lines up to the next option's."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {flag}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("  -")),
               len(lines))
    return " ".join(" ".join(lines[start:end]).split())


@pytest.mark.parametrize("command", ["simulate", "explain"])
def test_the_help_says_what_the_plugin_does_without_snapshot(tmp_path: Path,
                                                              command: str) -> None:
    # The plugin captures the cluster without --snapshot (issue 36): its help does not call
    # the flag required, and names the flags it takes for the capture.
    proc = subprocess.run([str(PLUGIN), command, "--help"], capture_output=True, text=True,
                          env=plugin_env(tmp_path), timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    snapshot = _option_help(proc.stdout, "--snapshot ")
    assert "[required]" not in snapshot
    assert snapshot.endswith("Default: the current context's cluster, captured.")
    assert "[required]" in _option_help(proc.stdout, "--policy,")
    said = " ".join(proc.stdout.split())
    assert ("Without --snapshot: the cluster of the current kubectl context, captured into a "
            "file first (named on stderr). --context NAME and --kubeconfig FILE pick another "
            "cluster for that capture.") in said
    assert ("-n/--namespace NAMESPACE" in said) == (command == "explain")
    # desched itself reads no cluster in simulate and explain: there the flag is required.
    direct = subprocess.run([sys.executable, "-m", "desched", command, "--help"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert _option_help(direct, "--snapshot ").endswith("[required]")

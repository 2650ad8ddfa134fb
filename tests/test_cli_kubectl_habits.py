"""kubectl habits (issue 22 item 6), through the real command line: `--snapshot DIR` reads every
snapshot file in a directory, `validate --strict` refuses warnings and idle policies, `convert`
prints the v1alpha2 policy desched runs, and no help text cites documents users do not have."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
POLICY = str(EXAMPLES / "policy.yaml")
CLUSTER = str(EXAMPLES / "cluster.yaml")
NOW = "2026-11-22T12:00:00Z"


def desched(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                          text=True, timeout=120, input=stdin, check=False)


def input_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, no traceback, nothing on stdout; the last stderr line is the error, holding
    every needle."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in last, (needle, last)
    return last


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def simulate_json(policy: str, *snapshots: str) -> dict[str, object]:
    args = [arg for snap in snapshots for arg in ("--snapshot", snap)]
    proc = desched("simulate", "--policy", policy, *args, "--now", NOW, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# -- --snapshot DIR ------------------------------------------------------------------------------

def split_cluster(directory: Path) -> Path:
    """examples/cluster.yaml's objects spread over a YAML list, a JSON list and JSON lines,
    beside a file and a subdirectory that are not snapshot files."""
    items = yaml.safe_load(Path(CLUSTER).read_text(encoding="utf-8"))["items"]
    nodes = [o for o in items if o["kind"] == "Node"]
    pods = [o for o in items if o["kind"] == "Pod"]
    rest = [o for o in items if o["kind"] not in ("Node", "Pod")]
    assert nodes and pods and rest
    directory.mkdir()
    (directory / "nodes.yml").write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}), encoding="utf-8")
    (directory / "pods.JSON").write_text(
        json.dumps({"apiVersion": "v1", "kind": "PodList", "items": pods}, indent=1),
        encoding="utf-8")
    (directory / "rest.jsonl").write_text("".join(json.dumps(o) + "\n" for o in rest),
                                          encoding="utf-8")
    (directory / "README.md").write_text("captured by hand\n", encoding="utf-8")
    (directory / "old").mkdir()
    (directory / "old" / "stale.yaml").write_text("{not: [yaml", encoding="utf-8")
    return directory


def test_snapshot_directory_reads_every_snapshot_file_in_it(tmp_path: Path) -> None:
    directory = split_cluster(tmp_path / "cluster")
    whole = simulate_json(POLICY, CLUSTER)
    proc = desched("simulate", "--policy", POLICY, "--snapshot", str(directory), "--now", NOW,
                   "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert whole["evictions"], "the example evicts: the comparison means something"
    assert json.loads(proc.stdout) == whole
    # What it left out, in one line: the subdirectory's broken file was never read.
    assert proc.stderr.splitlines() == [
        f"warning: {directory}: not read: README.md, old/ (a directory is read for its .json, "
        f".jsonl, .yaml, .yml files, not its subdirectories)"]


def test_snapshot_directory_with_explain_and_beside_files(tmp_path: Path) -> None:
    directory = split_cluster(tmp_path / "cluster")
    (directory / "README.md").unlink()
    (directory / "old" / "stale.yaml").unlink()
    (directory / "old").rmdir()
    evicted = simulate_json(POLICY, CLUSTER)["evictions"][0]
    assert isinstance(evicted, dict)
    pod = f"{evicted['namespace']}/{evicted['pod']}"
    file_proc = desched("explain", "--policy", POLICY, "--snapshot", CLUSTER, "--pod", pod,
                        "--now", NOW)
    dir_proc = desched("explain", "--policy", POLICY, "--snapshot", str(directory), "--pod",
                       pod, "--now", NOW)
    assert dir_proc.returncode == 0, dir_proc.stderr
    assert dir_proc.stderr == ""
    assert dir_proc.stdout == file_proc.stdout
    # A directory and a file together: the objects of both.
    extra = write(tmp_path / "ns.yaml", """\
        apiVersion: v1
        kind: Namespace
        metadata: {name: extra}
        """)
    proc = desched("simulate", "--policy", POLICY, "--snapshot", str(directory), "--snapshot",
                   extra, "--now", NOW, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["evictions"] == simulate_json(POLICY, CLUSTER)["evictions"]


@pytest.mark.parametrize("command", ["simulate", "explain"])
def test_snapshot_directory_without_snapshot_files_is_an_input_error(
        tmp_path: Path, command: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("nothing here\n", encoding="utf-8")
    extra = ["--pod", "shop/x"] if command == "explain" else []
    proc = desched(command, "--policy", POLICY, "--snapshot", str(empty), *extra)
    line = input_error(proc, str(empty), "no snapshot file in this directory", ".jsonl")
    assert proc.stderr.splitlines() == [line]


# -- validate --strict ---------------------------------------------------------------------------

HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
IDLE_AND_MISSPELT = HEAD + "profile:\n- name: default\n"
MISSPELT_ARG = HEAD + textwrap.dedent("""\
    profiles:
    - name: default
      pluginConfig:
      - {name: PodLifeTime, args: {maxPodLifeTimeSeconds: 60,
                                   labelSelector: {matchLabel: {app: web}}}}
      plugins: {deschedule: {enabled: [PodLifeTime]}}
    """)
IDLE_ONLY = HEAD + textwrap.dedent("""\
    profiles:
    - name: default
      pluginConfig: [{name: DefaultEvictor}]
      plugins: {filter: {enabled: [DefaultEvictor]}}
    """)


@pytest.mark.parametrize(("text", "warnings", "why"), [
    (IDLE_AND_MISSPELT, 2, "the policy enables no deschedule or balance plugin and 1 other "
                           "warning(s) above"),
    (MISSPELT_ARG, 1, "1 warning(s) above"),
    (IDLE_ONLY, 1, "the policy enables no deschedule or balance plugin;"),
])
def test_validate_strict_refuses_warnings_and_idle_policies(
        tmp_path: Path, text: str, warnings: int, why: str) -> None:
    policy = write(tmp_path / "policy.yaml", text)
    lenient = desched("validate", "--policy", policy)
    assert lenient.returncode == 0, lenient.stderr
    assert lenient.stdout == "ok\n"
    assert len(lenient.stderr.splitlines()) == warnings
    strict = desched("validate", "--strict", "--policy", policy)
    line = input_error(strict, policy, "--strict", why)
    # Every warning still printed, then the one error line.
    assert strict.stderr.splitlines() == [*lenient.stderr.splitlines(), line]


def test_validate_strict_passes_a_clean_policy() -> None:
    for policy in (POLICY, str(EXAMPLES / "koordinator-policy.yaml")):
        proc = desched("validate", "--strict", "--policy", policy)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok\n", "")

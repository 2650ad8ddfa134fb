"""The policy's warnings through the real commands: `validate` and `simulate` print each as
`warning: ...` on stderr and otherwise behave as before (exit code, stdout byte for byte); `run`
logs them at warning level. Invalid input still gives exactly one error line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from desched.live.run import RunConfig, prepare

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
CLUSTER = str(REPO / "examples" / "cluster.yaml")
NOW = "2026-11-22T12:00:00Z"

CLEAN = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNode: 5
profiles:
- name: default
  pluginConfig:
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 60}
  plugins:
    deschedule:
      enabled: [PodLifeTime]
"""
# The same policy with ignored keys: it loads to the same thing.
TYPOS = CLEAN + """\
  plugin:
    balance:
      enabled: [RemoveDuplicates]
maxNoOfPodsToEvictPerNod: 5
"""


def desched(*args: str) -> subprocess.CompletedProcess[str]:
    # sys.executable: the venv the tests run in, which has this checkout installed.
    return subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def typo_warnings(path: str) -> list[str]:
    return [f'warning: {path}: unknown field "profiles[0].plugin" (did you mean "plugins"?); '
            f"it is ignored",
            f'warning: {path}: unknown field "maxNoOfPodsToEvictPerNod" (did you mean '
            f'"maxNoOfPodsToEvictPerNode"?); it is ignored']


def test_validate_warns_and_still_says_ok(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(TYPOS, encoding="utf-8")
    proc = desched("validate", "--policy", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"
    assert proc.stderr.splitlines() == typo_warnings(str(path))


def test_validate_the_issue_typos(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(CLEAN.replace("profiles:", "profile:"), encoding="utf-8")
    proc = desched("validate", "--policy", str(path))
    assert (proc.returncode, proc.stdout) == (0, "ok\n")
    assert proc.stderr.splitlines() == [
        f'warning: {path}: unknown field "profile" (did you mean "profiles"?); it is ignored',
        f"warning: {path}: no deschedule or balance plugin is enabled; the policy evicts nothing"]
    path.write_text(CLEAN.replace("enabled:", "enable:"), encoding="utf-8")
    proc = desched("validate", "--policy", str(path))
    assert (proc.returncode, proc.stdout) == (0, "ok\n")
    assert proc.stderr.splitlines() == [
        f'warning: {path}: unknown field "profiles[0].plugins.deschedule.enable" (did you mean '
        f'"enabled"?); it is ignored',
        f"warning: {path}: no deschedule or balance plugin is enabled; the policy evicts nothing"]


def test_validate_a_clean_policy_is_quiet(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(CLEAN, encoding="utf-8")
    proc = desched("validate", "--policy", str(path))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok\n", "")


def test_an_invalid_policy_still_gives_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(TYPOS.replace("[PodLifeTime]", "[Nope]"), encoding="utf-8")
    proc = desched("validate", "--policy", str(path))
    assert proc.returncode == 2
    assert proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"error: {path}: ") and "non-existing plugins: [Nope]" in line


# A second profile named as the first (issue 36): upstream v0.36 loads it without a word.
SAME_NAME = CLEAN + """\
- name: default
  pluginConfig:
  - name: RemoveFailedPods
  plugins:
    deschedule:
      enabled: [RemoveFailedPods]
"""


def test_two_profiles_of_one_name_are_a_warning_and_refused_by_strict(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(SAME_NAME, encoding="utf-8")
    proc = desched("validate", "--policy", str(path))
    assert (proc.returncode, proc.stdout) == (0, "ok\n")
    assert proc.stderr == (f'warning: {path}: profiles[1].name: "default" is also the name of '
                           f"profiles[0]: upstream accepts it, but their evictions, events and "
                           f"metrics cannot be told apart (Koordinator's format refuses it); "
                           f"give each profile its own name\n")
    # --strict refuses it in one line naming the file and the name, as Koordinator's format
    # does (`Duplicate value`).
    strict = desched("validate", "--strict", "--policy", str(path))
    assert (strict.returncode, strict.stdout) == (2, "")
    assert strict.stderr == (f'error: {path}: profiles[1].name: Duplicate value: "default" '
                             f"(profiles[0] has it too); with --strict each profile needs its "
                             f"own name\n")
    # Named apart, both profiles pass --strict.
    path.write_text(SAME_NAME.replace("- name: default\n  pluginConfig:\n  - name: Remove",
                                      "- name: failed\n  pluginConfig:\n  - name: Remove"),
                    encoding="utf-8")
    assert desched("validate", "--strict", "--policy", str(path)).stderr == ""


@pytest.mark.parametrize("output", ["text", "json"])
def test_simulate_warns_on_stderr_only(tmp_path: Path, output: str) -> None:
    path = tmp_path / "policy.yaml"
    args = ("simulate", "--policy", str(path), "--snapshot", CLUSTER, "--now", NOW,
            "--output", output)
    path.write_text(CLEAN, encoding="utf-8")
    clean = desched(*args)
    assert (clean.returncode, clean.stderr) == (0, "")
    assert clean.stdout
    path.write_text(TYPOS, encoding="utf-8")
    typos = desched(*args)
    assert typos.returncode == 0
    assert typos.stdout == clean.stdout  # byte for byte
    assert typos.stderr.splitlines() == typo_warnings(str(path))


def test_run_logs_the_warnings(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(TYPOS, encoding="utf-8")
    with structlog.testing.capture_logs() as logs:
        prepare(RunConfig(str(path), once=True))
    warned = [e["event"] for e in logs if e["log_level"] == "warning"]
    assert warned == [w.removeprefix("warning: ") for w in typo_warnings(str(path))]
    path.write_text(CLEAN, encoding="utf-8")
    with structlog.testing.capture_logs() as logs:
        prepare(RunConfig(str(path), once=True))
    assert [e for e in logs if e["log_level"] == "warning"] == []

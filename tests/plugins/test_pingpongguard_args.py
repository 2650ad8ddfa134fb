"""PingPongGuard's schedulerConfig arg: a KubeSchedulerConfiguration file whose profiles the
guard's scheduler model runs. Validated like the other args (one line naming the arg and the
problem); its warnings join the policy's; the model places with it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from desched.plugins.catalog import PLUGINS
from desched.plugins.pingpongguard import PingPongGuardArgs, scheduler_config, validate
from desched.policy_files.loader import load_policy
from desched.scheduler.profile import DEFAULT_CONFIG

pytestmark = pytest.mark.process

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "lownodeload-hotspot"
HOT, OTHER = "cn-beijing.10.0.0.53", "cn-beijing.10.0.0.100"
HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
MOST_ALLOCATED = HEAD + textwrap.dedent("""\
    profiles:
    - pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy: {type: MostAllocated}
    """)


def guard_policy(tmp_path: Path, scheduler_config_path: str) -> Path:
    policy = tmp_path / "policy.yaml"
    policy.write_text((SCENARIO / "policy-guard-kube-default.yaml").read_text().replace(
        "      scheduler: kube-default\n",
        f"      scheduler: kube-default\n      schedulerConfig: {scheduler_config_path}\n"))
    return policy


def desched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                          text=True, check=False, timeout=120)


def test_without_a_scheduler_config_the_guard_runs_the_default_profile() -> None:
    args = PingPongGuardArgs()
    assert (args.scheduler_config, validate(args)) == ("", [])
    assert scheduler_config(args) is DEFAULT_CONFIG


def test_a_scheduler_config_that_loads_is_valid_and_read(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(MOST_ALLOCATED)
    args = PingPongGuardArgs(scheduler_config=str(path))
    assert validate(args) == []
    profile = scheduler_config(args).profiles["default-scheduler"]
    assert profile.fit.type == "MostAllocated"


def test_the_file_is_read_again_once_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(HEAD + "percentageOfNodesToScore: 10\n")
    args = PingPongGuardArgs(scheduler_config=str(path))
    assert scheduler_config(args).percentage_of_nodes_to_score == 10
    path.write_text(HEAD + "percentageOfNodesToScore: 100\n")  # another size, whatever the mtime
    assert scheduler_config(args).percentage_of_nodes_to_score == 100


@pytest.mark.parametrize(("text", "error"), [
    (None, "schedulerConfig: {path}: failed to read the scheduler configuration: No such file "
           "or directory"),
    (HEAD + "percentageOfNodesToScore: 120\n",
     "schedulerConfig: {path}: percentageOfNodesToScore: Invalid value: 120: not in valid range "
     "[0-100]"),
    ("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n",
     'schedulerConfig: {path}: no kind "DeschedulerPolicy" is registered for version '
     '"descheduler/v1alpha2"; expected kubescheduler.config.k8s.io/v1 (or v1beta3, v1beta2) '
     "KubeSchedulerConfiguration, or a ConfigMap holding one"),
])
def test_a_scheduler_config_that_does_not_load_is_one_error_naming_the_arg(
        tmp_path: Path, text: str | None, error: str) -> None:
    path = tmp_path / "sched.yaml"
    if text is not None:
        path.write_text(text)
    assert validate(PingPongGuardArgs(scheduler_config=str(path))) == [error.format(path=path)]


def test_standard_input_is_no_scheduler_config() -> None:
    assert validate(PingPongGuardArgs(scheduler_config="-")) == [
        "schedulerConfig: must name a file (standard input holds the policy or nothing)"]


def test_both_args_wrong_are_two_errors(tmp_path: Path) -> None:
    missing = tmp_path / "none.yaml"
    assert validate(PingPongGuardArgs(scheduler="kube", scheduler_config=str(missing))) == [
        'scheduler: Unsupported value: "kube": supported values: "kube-default", '
        '"koord-load-aware"',
        f"schedulerConfig: {missing}: failed to read the scheduler configuration: No such file "
        f"or directory"]


def test_the_scheduler_config_warnings_join_the_policys(tmp_path: Path) -> None:
    sched = tmp_path / "sched.yaml"
    sched.write_text(HEAD + "profiles:\n- plugins:\n    score:\n"
                            "      enabled: [{name: ImageLocalty}]\n")
    policy = guard_policy(tmp_path, str(sched))
    assert load_policy(str(policy), PLUGINS).warnings == [
        f'{policy}: profile koord-descheduler: PingPongGuard: schedulerConfig: {sched}: '
        f'profiles[0].plugins.score.enabled[0]: unknown plugin "ImageLocalty" (did you mean '
        f'ImageLocality?)']
    proc = desched("validate", "--policy", str(policy))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [f"warning: {load_policy(str(policy), PLUGINS).warnings[0]}"]


def test_validate_refuses_a_missing_scheduler_config_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "none.yaml"
    proc = desched("validate", "--policy", str(guard_policy(tmp_path, str(missing))))
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1
    assert (f"PingPongGuard: schedulerConfig: {missing}: failed to read the scheduler "
            f"configuration: No such file or directory") in proc.stderr


def test_the_guard_places_with_its_scheduler_config(tmp_path: Path) -> None:
    """With the default profile the guard refuses stress-demo because its replacement would
    land back on the hot node (a web pod, spread away from it, moves instead); bin-packing
    (MostAllocated) sends replacements to the other busy node, which LowNodeLoad would then
    find over its high thresholds: the refusal names that node, and nothing moves."""
    sched = tmp_path / "sched.yaml"
    sched.write_text(MOST_ALLOCATED)
    runs = {}
    for name, policy in (("default", SCENARIO / "policy-guard-kube-default.yaml"),
                         ("most", guard_policy(tmp_path, str(sched)))):
        proc = desched("simulate", "--policy", str(policy), "--snapshot",
                       str(SCENARIO / "cluster.yaml"), "--cycles", "14", "--reschedule",
                       "--output", "json")
        assert proc.returncode == 0, proc.stderr
        runs[name] = json.loads(proc.stdout)
    assert [e["pod"] for e in runs["default"]["evictions"]] == ["web-7d9f8c6b5-abcde"]
    assert runs["most"]["evictions"] == []
    default = {s["reason"] for s in runs["default"]["skipped"]}
    most = {s["reason"] for s in runs["most"]["skipped"]}
    assert f"replacement would land on {HOT} again (kube-default)" in default
    assert not any(r.startswith(f"replacement would land on {HOT}") for r in most)
    assert any(r.startswith(f"replacement would land on {OTHER} (kube-default), where "
                            f"LowNodeLoad would find it over its high thresholds") for r in most)

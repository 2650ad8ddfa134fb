"""Issue 22, item 3: a snapshot without nodes is invalid input; a kind the run needs and the
snapshot lacks is a warning, once per kind, naming who needs it and how to get it; the README's
recipe lists every kind desched reads; the shipped hotspot example is complete. Through the real
CLI (`simulate` leaves with os._exit, so click's CliRunner cannot run it in-process)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from desched.model.kinds import KIND_GROUPS
from desched.model.resources import RESOURCES

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
HOTSPOT = EXAMPLES / "lownodeload-hotspot"
METRICS = EXAMPLES / "plugins" / "LowNodeUtilization-metrics"
POLICY = str(EXAMPLES / "policy.yaml")
CLUSTER = str(EXAMPLES / "cluster.yaml")


def desched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def ok(*args: str) -> subprocess.CompletedProcess[str]:
    proc = desched(*args)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def warnings(proc: subprocess.CompletedProcess[str], only: bool = True) -> list[str]:
    """The `warning: ` lines on stderr; `only`: and nothing else there."""
    lines = proc.stderr.splitlines()
    assert not only or all(line.startswith("warning: ") for line in lines), proc.stderr
    return [line.removeprefix("warning: ") for line in lines if line.startswith("warning: ")]


def one_error(proc: subprocess.CompletedProcess[str]) -> str:
    """Exit 2, exactly one line on stderr, nothing on stdout."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def without(example: Path, kinds: tuple[str, ...], out: Path) -> str:
    """The example's snapshot with every object of these kinds left out."""
    doc = yaml.safe_load(example.read_text(encoding="utf-8"))
    doc["items"] = [item for item in doc["items"] if item["kind"] not in kinds]
    out.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(out)


def policy(tmp_path: Path, text: str) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


# MigrationController as evict and filter plugin, its jobs evicting directly (no Reservation,
# so the pods' scheduler does not matter): the workload limits decide.
MIGRATING = (HOTSPOT / "policy.yaml").read_text(encoding="utf-8").replace(
    "enabled: [{name: DefaultEvictor}]", "enabled: [{name: MigrationController}]") + """\
  - name: MigrationController
    args:
      apiVersion: descheduler/v1alpha2
      kind: MigrationControllerArgs
      defaultJobMode: EvictDirectly
"""


# -- no nodes ------------------------------------------------------------------------------------


def test_a_policy_given_as_snapshot_is_one_line_exit_2() -> None:
    line = one_error(desched("simulate", "--policy", POLICY, "--snapshot", POLICY))
    assert line.startswith(f"error: snapshot {POLICY} holds no Node (found: DeschedulerPolicy)")
    assert "`desched snapshot`" in line


def test_a_pods_only_snapshot_is_one_line_exit_2_in_simulate_and_explain(tmp_path: Path) -> None:
    pods = without(EXAMPLES / "cluster.yaml", ("Node",), tmp_path / "pods.yaml")
    line = one_error(desched("simulate", "--policy", POLICY, "--snapshot", pods))
    assert re.search(r"holds no Node \(found: 13 Pod, Namespace, PodDisruptionBudget, "
                     r"2 ReplicaSet, 2 Service\)", line), line
    line = one_error(desched("explain", "--policy", POLICY, "--snapshot", pods,
                             "--pod", "shop/web-5d8f9-0"))
    assert f"snapshot {pods} holds no Node" in line


def test_standard_input_is_named_as_such() -> None:
    proc = subprocess.run([sys.executable, "-m", "desched", "simulate", "--policy", POLICY,
                           "--snapshot", "-"], input=Path(POLICY).read_text(encoding="utf-8"),
                          capture_output=True, text=True, timeout=120, check=False)
    assert "snapshot <stdin> holds no Node (found: DeschedulerPolicy)" in one_error(proc)


def test_every_file_is_named_and_an_empty_one_found_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("", encoding="utf-8")
    line = one_error(desched("simulate", "--policy", POLICY, "--snapshot", str(empty),
                             "--snapshot", POLICY))
    assert f"snapshot {empty}, {POLICY} holds no Node (found: DeschedulerPolicy)" in line
    line = one_error(desched("simulate", "--policy", POLICY, "--snapshot", str(empty)))
    assert "holds no Node (found: nothing)" in line


def test_refused_input_is_the_error_line_alone(tmp_path: Path) -> None:
    """A warning about the input (a file the directory holds and the loader does not read)
    must not come before the error that then refuses it."""
    directory = tmp_path / "snapshot"
    directory.mkdir()
    (directory / "README.txt").write_text("captured on Monday\n", encoding="utf-8")
    text = Path(CLUSTER).read_text(encoding="utf-8").replace(
        'conditions: [{type: Ready, status: "True"}]', "conditions: null", 1)
    (directory / "cluster.yaml").write_text(text, encoding="utf-8")
    for command in (("simulate",), ("explain", "--pod", "shop/web-5d8f9-0")):
        line = one_error(desched(*command, "--policy", POLICY, "--snapshot", str(directory)))
        bad = directory / "cluster.yaml"
        assert line.startswith(f"error: {bad}: document 1 item 0 (Node"), line
    # Accepted, the same directory's warning is said.
    (directory / "cluster.yaml").write_text(Path(CLUSTER).read_text(encoding="utf-8"),
                                            encoding="utf-8")
    assert warnings(ok("simulate", "--policy", POLICY, "--snapshot", str(directory))) == [
        f"{directory}: not read: README.txt (a directory is read for its .json, .jsonl, .yaml, "
        f".yml files, not its subdirectories)"]


# -- kinds the run needs -------------------------------------------------------------------------


def test_migration_without_the_workloads_warns_once_per_kind(tmp_path: Path) -> None:
    """Today MigrationController keeps every pod ("workload cannot be resolved") and nothing
    says the snapshot is short; the warning names the kind, who needs it and the command."""
    snapshot = without(HOTSPOT / "cluster.yaml", ("ReplicaSet", "Deployment"),
                       tmp_path / "cluster.yaml")
    migrating = policy(tmp_path, MIGRATING)
    proc = ok("simulate", "--policy", migrating, "--snapshot", snapshot, "--cycles", "6")
    said = warnings(proc)
    assert len(said) == 1, said
    assert said[0].startswith("the snapshot lacks 4 ReplicaSet(s) that pods name as their "
                              'controller ("default/api-6c8d7f9b4", ')
    assert "MigrationController (a pod's workload" in said[0]
    assert "add `kubectl get replicasets -A -o json` to the snapshot, or use `desched snapshot`" \
        in said[0]
    assert f"  warning: {said[0]}" in proc.stdout.splitlines()[1]  # the text report says it too
    # Cycles and outcomes do not repeat it: one line per kind, every use named in it.
    again = warnings(ok("simulate", "--policy", migrating, "--snapshot", snapshot, "--cycles",
                        "6", "--reschedule", "--outcomes", "2"))
    assert len(again) == 1, again
    assert ("MigrationController (a pod's workload: its replicas, maxMigrating, maxUnavailable) "
            "and by the scheduler model of --reschedule (default topology spreading)") in again[0]
    # explain says it as well.
    explained = ok("explain", "--policy", migrating, "--snapshot", snapshot, "--pod",
                   "default/web-7d9f8c6b5-abcde", "--cycles", "6")
    assert warnings(explained) == said


def test_a_deployment_missing_behind_its_replica_sets_is_named(tmp_path: Path) -> None:
    snapshot = without(HOTSPOT / "cluster.yaml", ("Deployment",), tmp_path / "cluster.yaml")
    said = warnings(ok("simulate", "--policy", policy(tmp_path, MIGRATING), "--snapshot",
                       snapshot))
    assert len(said) == 1, said
    assert said[0].startswith("the snapshot lacks 4 Deployment(s) that ReplicaSets name as their "
                              'controller ("default/api", "default/report", "default/stress-demo"'
                              ", ...)")
    assert "`kubectl get deployments -A -o json`" in said[0]


def test_the_hotspot_example_is_complete_and_migration_resolves_its_workloads(
        tmp_path: Path) -> None:
    proc = ok("simulate", "--policy", policy(tmp_path, MIGRATING), "--snapshot",
              str(HOTSPOT / "cluster.yaml"), "--cycles", "6", "--reschedule", "-o", "json")
    assert proc.stderr == ""
    report = json.loads(proc.stdout)
    assert report["warnings"] == []
    reasons = [k["reason"] for k in report["kept"]]
    assert not any("cannot be resolved" in r for r in reasons), reasons
    assert "Deployment default/stress-demo has 1 replica: a single-replica workload is never " \
           "migrated (skipCheckExpectedReplicas)" in reasons
    assert [(e["cycle"], e["pod"]) for e in report["evictions"]] == [(6, "web-7d9f8c6b5-abcde")]
    for example in HOTSPOT.glob("policy*.yaml"):
        assert ok("simulate", "--policy", str(example), "--snapshot",
                  str(HOTSPOT / "cluster.yaml"), "--reschedule").stderr == ""


def test_lownodeload_without_node_metrics(tmp_path: Path) -> None:
    snapshot = without(HOTSPOT / "cluster.yaml", ("NodeMetric",), tmp_path / "cluster.yaml")
    proc = ok("simulate", "--policy", str(HOTSPOT / "policy.yaml"), "--snapshot", snapshot,
              "--now", "2026-11-22T12:00:00Z")
    assert warnings(proc) == [
        "the snapshot holds no NodeMetric (slo.koordinator.sh/v1alpha1), needed by LowNodeLoad "
        "(node and pod usage); add `kubectl get nodemetrics.slo.koordinator.sh -o json` to the "
        "snapshot, or use `desched snapshot`"]
    # The warning names the cause once; the notes do not repeat it per node.
    notes = proc.stdout.split("\nnotes:\n", 1)[1].splitlines()
    names = [i["metadata"]["name"] for i in yaml.safe_load(Path(snapshot).read_text(
        encoding="utf-8"))["items"] if i["kind"] == "Node"]
    assert len(names) == 3
    assert [line for line in notes if "has no NodeMetric" in line] == [
        f"  cycle 1 3 nodes ({', '.join(names)}) [koord-descheduler/LowNodeLoad]: the node has "
        f"no NodeMetric: it is neither a source nor a target"]


def test_metrics_based_low_node_utilization_without_metrics(tmp_path: Path) -> None:
    snapshot = without(METRICS / "cluster.yaml", ("NodeMetrics", "PodMetrics"),
                       tmp_path / "cluster.yaml")
    proc = ok("simulate", "--policy", str(METRICS / "policy.yaml"), "--snapshot", snapshot)
    uses = "needed by LowNodeUtilization (metricsUtilization source KubernetesMetrics)"
    # (the plugin's own error line, as upstream logs it, follows)
    assert warnings(proc, only=False) == [
        f"the snapshot holds no NodeMetrics (metrics.k8s.io/v1beta1), {uses}; add `kubectl get "
        f"nodes.metrics.k8s.io -o json` to the snapshot, or use `desched snapshot`",
        f"the snapshot holds no PodMetrics (metrics.k8s.io/v1beta1), {uses}; add `kubectl get "
        f"pods.metrics.k8s.io -A -o json` to the snapshot, or use `desched snapshot`"]
    # The same policy on requests needs none of them.
    on_requests = (METRICS / "policy.yaml").read_text(encoding="utf-8").replace(
        "      metricsUtilization:\n        source: KubernetesMetrics\n", "")
    assert ok("simulate", "--policy", policy(tmp_path, on_requests), "--snapshot",
              snapshot).stderr == ""


def test_services_are_needed_by_the_scheduler_model_only(tmp_path: Path) -> None:
    """examples/cluster.yaml without its Services: only --reschedule reads them."""
    cluster = without(EXAMPLES / "cluster.yaml", ("Service",), tmp_path / "cluster.yaml")
    assert ok("simulate", "--policy", POLICY, "--snapshot", cluster).stderr == ""
    said = warnings(ok("simulate", "--policy", POLICY, "--snapshot", cluster, "--reschedule"))
    assert said == [
        "the snapshot holds no Service (v1), needed by the scheduler model of --reschedule "
        "(default topology spreading); add `kubectl get services -A -o json` to the snapshot, "
        "or use `desched snapshot`"]


def test_a_warning_is_said_once_where_stdout_and_stderr_meet(tmp_path: Path) -> None:
    """The report carries the run's warnings; on stderr too when it is elsewhere, but not a
    second time on a terminal or with `2>&1`."""
    cluster = without(EXAMPLES / "cluster.yaml", ("Service",), tmp_path / "cluster.yaml")
    args = ["simulate", "--policy", POLICY, "--snapshot", cluster, "--reschedule"]
    apart = ok(*args)
    [said] = warnings(apart)
    assert apart.stdout.count(said) == 1
    together = subprocess.run([sys.executable, "-m", "desched", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120, check=True)
    assert together.stdout.count(said) == 1
    assert together.stdout.startswith("policy ")  # the report's own line, not the warning's


@pytest.mark.parametrize("policy_file", sorted(
    str(p.relative_to(EXAMPLES)) for p in EXAMPLES.glob("**/*policy*.yaml")
    # The plugin package's example needs the package (tests/test_plugin_packages.py).
    if "out-of-tree-plugin" not in p.parts))
def test_every_example_ships_what_its_policy_needs(policy_file: str) -> None:
    """No example warns that its snapshot lacks something, --reschedule included (the
    scheduler model reads Services and the pods' controllers)."""
    path = EXAMPLES / policy_file
    cluster = path.parent / "cluster.yaml"
    if not cluster.exists():
        cluster = EXAMPLES / "cluster.yaml"
    scheduler = path.parent / "scheduler-config.yaml"
    extra = ["--scheduler-config", str(scheduler)] if scheduler.exists() else []
    proc = ok("simulate", "--policy", str(path), "--snapshot", str(cluster), "--reschedule",
              "--now", "2026-11-22T12:00:00Z", *extra)
    assert proc.stderr == ""


def test_budget_arithmetic_that_counts_expected_replicas(tmp_path: Path) -> None:
    """A maxUnavailable budget without a status counts the replicas the pods' controllers
    expect: without the ReplicaSet it counts the pods instead, and says so."""
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / "cluster.yaml").read_text("utf-8"))
    for item in doc["items"]:
        if item["kind"] == "PodDisruptionBudget":
            item["spec"] = {"maxUnavailable": 1, "selector": item["spec"]["selector"]}
    doc["items"] = [i for i in doc["items"] if i["kind"] != "ReplicaSet"]
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump(doc), encoding="utf-8")
    said = warnings(ok("simulate", "--policy", POLICY, "--snapshot", str(snapshot)))
    assert len(said) == 1, said
    assert said[0].startswith('the snapshot lacks 2 ReplicaSet(s) that pods name as their '
                              'controller ("shop/api-7c4b2", "shop/web-5d8f9"), needed by '
                              'PodDisruptionBudgets (maxUnavailable or a percentage '
                              'minAvailable')


# -- the README's recipe -------------------------------------------------------------------------


def test_the_readme_recipe_lists_every_kind_desched_reads() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Snapshots"):]
    section = section[:section.index("\n## ", 1)]
    assert "`desched snapshot`" in section
    named: set[str] = set()
    for names in re.findall(r"kubectl get ([a-z0-9.,-]+)", section):
        for name in names.split(","):
            plural, _, group = name.partition(".")
            found = [r.kind for r in RESOURCES if r.plural == plural
                     and (r.group == group or (not group and r.group in ("", "apps", "batch",
                                                                          "policy",
                                                                          "scheduling.k8s.io")))]
            assert len(found) == 1, name
            named.add(found[0])
    assert named == set(KIND_GROUPS) - {"SnapshotInfo"}

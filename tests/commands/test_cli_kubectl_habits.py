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

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
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


# -- convert -------------------------------------------------------------------------------------

# examples/policy.yaml as upstream's historic v1alpha1 format wrote it.
V1ALPHA1 = """\
    apiVersion: descheduler/v1alpha1
    kind: DeschedulerPolicy
    maxNoOfPodsToEvictPerNode: 5
    evictLocalStoragePods: false
    strategies:
      RemoveDuplicates: {enabled: true}
      PodLifeTime:
        enabled: true
        params: {podLifeTime: {maxPodLifeTimeSeconds: 604800}, namespaces: {exclude: [kube-system]}}
      LowNodeUtilization: {enabled: false}
    """


def convert(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = desched("convert", *args, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_convert_prints_a_v1alpha1_policy_as_the_v1alpha2_policy_that_runs(
        tmp_path: Path) -> None:
    v1alpha1 = write(tmp_path / "v1alpha1.yaml", V1ALPHA1)
    proc = convert("--policy", v1alpha1)
    assert proc.stderr == ""
    assert proc.stdout.startswith(f"# {v1alpha1} (descheduler/v1alpha1 DeschedulerPolicy) as "
                                  f"the descheduler/v1alpha2 DeschedulerPolicy desched runs\n")
    doc = yaml.safe_load(proc.stdout)
    assert (doc["apiVersion"], doc["kind"]) == ("descheduler/v1alpha2", "DeschedulerPolicy")
    assert doc["maxNoOfPodsToEvictPerNode"] == 5
    # Upstream's conversion: a profile per enabled strategy, DefaultEvictor from the top-level
    # booleans filtering in each.
    assert [p["name"] for p in doc["profiles"]] == ["strategy-RemoveDuplicates-profile",
                                                    "strategy-PodLifeTime-profile"]
    plt = doc["profiles"][1]
    assert plt["plugins"] == {"deschedule": {"enabled": ["PodLifeTime"]},
                              "filter": {"enabled": ["DefaultEvictor"]},
                              "preevictionfilter": {"enabled": ["DefaultEvictor"]}}
    assert plt["pluginConfig"][0]["name"] == "DefaultEvictor"
    assert plt["pluginConfig"][0]["args"]["evictLocalStoragePods"] is False
    assert plt["pluginConfig"][1] == {"name": "PodLifeTime", "args": {
        "namespaces": {"exclude": ["kube-system"]}, "maxPodLifeTimeSeconds": 604800}}

    converted = tmp_path / "converted.yaml"
    converted.write_text(proc.stdout, encoding="utf-8")
    check = desched("validate", "--strict", "--policy", str(converted))
    assert (check.returncode, check.stdout, check.stderr) == (0, "ok\n", "")
    before = simulate_json(v1alpha1, CLUSTER)
    assert before["evictions"], "the policy evicts: the comparison means something"
    assert simulate_json(str(converted), CLUSTER)["evictions"] == before["evictions"]
    # The same from standard input, as JSON.
    piped = convert("--policy", "-", "-o", "json", stdin=Path(v1alpha1).read_text())
    assert json.loads(piped.stdout) == doc


@pytest.mark.parametrize(("policy", "cluster", "extra"), [
    ("koordinator-policy.yaml", "cluster.yaml", ()),
    ("lownodeload-hotspot/policy.yaml", "lownodeload-hotspot/cluster.yaml",
     ("--cycles", "8", "--reschedule")),
])
def test_convert_koordinator_configuration_simulates_identically(
        tmp_path: Path, policy: str, cluster: str, extra: tuple[str, ...]) -> None:
    source = str(EXAMPLES / policy)
    proc = convert("--policy", source)
    comments = [line for line in proc.stdout.splitlines() if line.startswith("#")]
    assert comments[0] == (f"# {source} (Koordinator DeschedulerConfiguration) as the "
                           f"descheduler/v1alpha2 DeschedulerPolicy desched runs")
    # deschedulingInterval is the process's, not the policy's: named with the flag for it.
    interval = yaml.safe_load(Path(source).read_text())["deschedulingInterval"]
    assert any(f"run `desched run --interval {interval}`" in c for c in comments), comments
    doc = yaml.safe_load(proc.stdout)
    assert (doc["apiVersion"], doc["kind"]) == ("descheduler/v1alpha2", "DeschedulerPolicy")
    assert "deschedulingInterval" not in doc
    converted = tmp_path / "converted.yaml"
    converted.write_text(proc.stdout, encoding="utf-8")

    def evictions(path: str) -> object:
        run = desched("simulate", "--policy", path, "--snapshot", str(EXAMPLES / cluster),
                      "-o", "json", *extra)
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)["evictions"]

    before = evictions(source)
    assert before
    assert evictions(str(converted)) == before
    # JSON has no comments: the notes go to stderr.
    as_json = convert("--policy", source, "-o", "json")
    assert json.loads(as_json.stdout) == doc
    assert [f"# note: {line[len('note: '):]}" for line in as_json.stderr.splitlines()] \
        == comments[1:]


def test_convert_koordinator_defaults_selector_and_process_settings(tmp_path: Path) -> None:
    """Koordinator validates args after defaulting them and upstream before: the converted
    policy carries the defaulted args (MigrationController's would not load empty); the
    nodeSelector becomes upstream's selector string; process settings become notes."""
    source = write(tmp_path / "koord.yaml", """\
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerConfiguration
        leaderElection: {leaderElect: true, resourceNamespace: koordinator-system}
        enableProfiling: true
        nodeSelector:
          matchLabels: {pool: general}
          matchExpressions:
          - {key: zone, operator: In, values: [a, b]}
          - {key: spot, operator: DoesNotExist}
        maxNoOfPodsToEvictTotal: 4
        profiles:
        - name: p
          plugins:
            evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
            filter: {enabled: [{name: DefaultEvictor}]}
            deschedule: {enabled: [{name: RemoveFailedPods}]}
        """)
    proc = convert("--policy", source)
    doc = yaml.safe_load(proc.stdout)
    assert doc["nodeSelector"] == "pool=general,zone in (a,b),!spot"
    assert doc["maxNoOfPodsToEvictTotal"] == 4
    profile = doc["profiles"][0]
    assert profile["plugins"]["filter"] == {"enabled": ["MigrationController", "DefaultEvictor"]}
    args = {c["name"]: c.get("args") for c in profile["pluginConfig"]}
    assert args["MigrationController"]["defaultJobMode"] == "ReservationFirst"
    assert args["RemoveFailedPods"]["minPodLifetimeSeconds"] == 3600
    assert "# note: leaderElection.leaderElect: true is not a policy key in v1alpha2: run " \
           "`desched run --leader-elect`" in proc.stdout
    assert "--leader-elect-resource-namespace koordinator-system`" in proc.stdout
    assert "# note: enableProfiling: true is a setting of koord-descheduler's process that " \
           "desched has no equivalent for; not carried over" in proc.stdout
    check = desched("validate", "--policy", "-", stdin=proc.stdout)
    assert (check.returncode, check.stdout) == (0, "ok\n"), check.stderr


KOORD_HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
DEFAULT_EVICT = ('    evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}\n'
                 "    filter: {enabled: [{name: DefaultEvictor}]}\n")


@pytest.mark.parametrize(("text", "needles"), [
    # Koordinator's default evict plugin: PodMigrationJobs, which v1alpha2 cannot say.
    (KOORD_HEAD + "profiles:\n- name: k\n  plugins:\n"
                  "    balance: {enabled: [{name: RemoveDuplicates}]}\n",
     ('profile "k": evict plugin MigrationController has no v1alpha2 equivalent',
      "evict with DefaultEvictor")),
    (KOORD_HEAD + "dryRun: true\nprofiles:\n- name: k\n  plugins:\n" + DEFAULT_EVICT,
     ("dryRun: true", "desched run --dry-run")),
    (KOORD_HEAD + "profiles:\n- name: k\n  nodeSelector: {matchLabels: {a: b}}\n"
                  "  plugins:\n" + DEFAULT_EVICT,
     ('profile "k": a nodeSelector per profile has no v1alpha2 equivalent',)),
    (KOORD_HEAD + "profiles:\n- name: k\n  plugins:\n"
                  '    evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}\n',
     ('profile "k": its filters leave DefaultEvictor out',)),
    # An invalid policy: the error validate gives.
    (HEAD + "profiles:\n- name: p\n  plugins: {deschedule: {enabled: [PodLifeTime]}}\n",
     ('unable to find "PodLifeTime" plugin config',)),
])
def test_convert_refuses_in_one_line(tmp_path: Path, text: str,
                                     needles: tuple[str, ...]) -> None:
    policy = write(tmp_path / "policy.yaml", text)
    proc = desched("convert", "--policy", policy)
    line = input_error(proc, policy, *needles)
    assert proc.stderr.splitlines() == [line]


def test_convert_makes_what_v1alpha2_injects_explicit_and_drops_ignored_keys(
        tmp_path: Path) -> None:
    source = write(tmp_path / "policy.yaml", Path(POLICY).read_text() + "nodeSelectr: a=b\n")
    proc = convert("--policy", source)
    assert proc.stderr == (f'warning: {source}: unknown field "nodeSelectr" (did you mean '
                           f'"nodeSelector"?); it is ignored\n')
    doc = yaml.safe_load(proc.stdout)
    assert "nodeSelectr" not in doc
    assert doc["profiles"][0]["plugins"]["filter"] == {"enabled": ["DefaultEvictor"]}
    assert doc["profiles"][0]["plugins"]["preevictionfilter"] == {"enabled": ["DefaultEvictor"]}
    converted = tmp_path / "converted.yaml"
    converted.write_text(proc.stdout, encoding="utf-8")
    assert simulate_json(str(converted), CLUSTER) == simulate_json(POLICY, CLUSTER)


# -- help texts ----------------------------------------------------------------------------------

def test_no_help_text_cites_documents_users_do_not_have() -> None:
    commands = ["simulate", "explain", "validate", "convert", "run", "snapshot"]
    for command in [None, *commands]:
        proc = desched(*([command] if command else []), "--help")
        assert proc.returncode == 0, proc.stderr
        for cited in ("DESIGN", "reference/", "§", "seeds/"):
            assert cited not in proc.stdout, (command, cited)
    assert "convert" in desched("--help").stdout

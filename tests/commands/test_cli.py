"""The `desched` command line, run as a real process.

Invalid input (policy, snapshot, flags) must exit 2 with exactly one line on stderr that names
the file (or flag) and the problem, and never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
import yaml

from desched.commands.cli import main

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
POLICY = str(REPO / "examples" / "policy.yaml")
CLUSTER = str(REPO / "examples" / "cluster.yaml")
NOW = "2026-11-22T12:00:00Z"


def desched(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, check=False)


def assert_input_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, one line on stderr containing every needle, no traceback, nothing on stdout."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert proc.stdout == ""
    return lines[0]


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


POLICY_HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"


def plt_policy(args: str) -> str:
    return POLICY_HEAD + textwrap.dedent(f"""\
        profiles:
        - name: p
          pluginConfig:
          - name: PodLifeTime
            args: {args}
          plugins:
            deschedule:
              enabled: [PodLifeTime]
        """)


# Each bad policy, with what its one error line must mention besides the file name.
BAD_POLICIES = {
    "malformed-yaml": (POLICY_HEAD + "profiles: [\n  - name: p\n", ["invalid YAML"]),
    "unknown-kind": ("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicies\n",
                     ['no kind "DeschedulerPolicies"']),
    "wrong-api-version": ("apiVersion: descheduler/v1beta1\nkind: DeschedulerPolicy\n",
                          ['version "descheduler/v1beta1"']),
    "missing-kind": ("profiles: []\n", ["'Kind' is missing"]),
    "not-a-mapping": ("- just\n- a list\n", ["expected a policy object"]),
    "unknown-plugin-config": (
        POLICY_HEAD + "profiles:\n- name: p\n  pluginConfig: [{name: NoSuchPlugin}]\n",
        ["plugin NoSuchPlugin in pluginConfig not registered"]),
    "unknown-plugin-enabled": (
        POLICY_HEAD + "profiles:\n- name: p\n  plugins: {balance: {enabled: [NoSuchPlugin]}}\n",
        ["non-existing plugins: [NoSuchPlugin]"]),
    "bad-arg-type": (plt_policy('{maxPodLifeTimeSeconds: "abc"}'), ["maxPodLifeTimeSeconds"]),
    "unknown-arg-field": (plt_policy("{maxPodLifeTimeSeconds: 5, x: 1}"),
                          ['strict decoding error: unknown field "x"']),
    "invalid-args": (plt_policy("{states: [Sleeping]}"), ["in profile p: states must be one of"]),
    "missing-plugin-config": (
        POLICY_HEAD + "profiles:\n- name: p\n  plugins: {deschedule: {enabled: [PodLifeTime]}}\n",
        ['unable to find "PodLifeTime" plugin config']),
    "v1alpha1-unknown-strategy": (
        "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\n"
        "strategies: {Foo: {enabled: true}}\n", ["unknown strategy name: Foo"]),
    "v1alpha1-wrong-type": (
        "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\n"
        "strategies: {RemoveDuplicates: {enabled: maybe}}\n", ["enabled"]),
    "koordinator-unknown-field": (
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\nbogus: 1\n",
        ['strict decoding error: unknown field "bogus"']),
    "koordinator-unknown-plugin": (
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\nprofiles:\n"
        "- name: k\n  plugins: {balance: {enabled: [{name: NoSuchPlugin}]}}\n",
        ["NoSuchPlugin"]),
    "evictor-node-selector": (
        POLICY_HEAD + "profiles:\n- name: p\n  pluginConfig:\n"
        "  - {name: DefaultEvictor, args: {nodeSelector: 'zone in ('}}\n",
        ["DefaultEvictor nodeSelector"]),
    "evictor-priority-too-high": (
        POLICY_HEAD + "profiles:\n- name: p\n  pluginConfig:\n"
        "  - {name: DefaultEvictor, args: {priorityThreshold: {value: 2000000001}}}\n",
        ["priority threshold can't be greater than 2000000000"]),
    "configmap-without-data": ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
                               ["ConfigMap has no data key"]),
}


@pytest.fixture(params=["validate", "simulate"])
def command(request: pytest.FixtureRequest) -> list[str]:
    if request.param == "validate":
        return ["validate"]
    return ["simulate", "--snapshot", CLUSTER, "--now", NOW]


@pytest.mark.parametrize("case", sorted(BAD_POLICIES))
def test_bad_policy(case: str, command: list[str], tmp_path: Path) -> None:
    text, needles = BAD_POLICIES[case]
    path = write(tmp_path / f"{case}.yaml", text)
    line = assert_input_error(desched(*command, "--policy", path), *needles)
    assert f"{case}.yaml" in line


def test_missing_policy_file(command: list[str], tmp_path: Path) -> None:
    path = str(tmp_path / "absent.yaml")
    assert_input_error(desched(*command, "--policy", path), path, "failed to read policy")


def test_policy_is_a_directory(tmp_path: Path) -> None:
    assert_input_error(desched("validate", "--policy", str(tmp_path)), "--policy", "directory")


@pytest.mark.parametrize(("plugin", "point", "hint"), [
    ("RemoveDuplicates", "balance", 'add "- name: RemoveDuplicates" to the pluginConfig of '
                                    'profile "default" (its args may be left out)'),
    ("RemovePodsViolatingNodeAffinity", "deschedule",
     'add "- name: RemovePodsViolatingNodeAffinity" with its args to the pluginConfig of '
     'profile "default" (without args: nodeAffinityType needs to be set)'),
])
def test_an_enabled_plugin_without_plugin_config_says_how_to_add_one(
        tmp_path: Path, plugin: str, point: str, hint: str) -> None:
    # Upstream's message as it is, then how to fix it (issue 36).
    path = write(tmp_path / "policy.yaml", POLICY_HEAD + f"profiles:\n- name: default\n  "
                                                         f"plugins: {{{point}: {{enabled: "
                                                         f"[{plugin}]}}}}\n")
    line = assert_input_error(desched("validate", "--policy", path))
    assert line == (f'error: {path}: unable to create "default" profile: unable to build '
                    f'{plugin} plugin: unable to find "{plugin}" plugin config; {hint}')


CONFIGMAP_HEAD = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: descheduler}\n"
EXPECTED_KEY = "policy.yaml (the key upstream's Helm chart and kustomize use)"


@pytest.mark.parametrize(("data", "says"), [
    ("data:\n  descheduler: just some text\n",
     'ConfigMap holds no policy: its data key "descheduler" holds a string, "just some '
     'text"; expected a DeschedulerPolicy or DeschedulerConfiguration, as YAML, under '
     f"{EXPECTED_KEY} or the ConfigMap's only data key"),
    ('data:\n  policy.yaml: ""\n',
     'ConfigMap holds no policy: its data key "policy.yaml" holds an empty string; expected a '
     "DeschedulerPolicy or DeschedulerConfiguration, as YAML, under "
     f"{EXPECTED_KEY} or the ConfigMap's only data key"),
    ("data:\n  a: x\n  b: y\n",
     f"ConfigMap has several data keys (a, b); expected one holding the policy, named "
     f"{EXPECTED_KEY}"),
])
def test_a_configmap_without_a_policy_says_what_it_holds(tmp_path: Path, data: str,
                                                         says: str) -> None:
    path = write(tmp_path / "cm.yaml", CONFIGMAP_HEAD + data)
    assert assert_input_error(desched("validate", "--policy", path)) == f"error: {path}: {says}"


# ---------------------------------------------------------------------------------------------
# Bad snapshots
# ---------------------------------------------------------------------------------------------


BAD_SNAPSHOTS = {
    "malformed.yaml": ("apiVersion: v1\nkind: List\nitems: [\n", ["invalid YAML"]),
    "malformed.json": ('{"apiVersion": "v1", "kind": "List", "items": [', ["invalid JSON"]),
    "wrong-type.yaml": ("apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: [a, b]}\n",
                        ["metadata.labels"]),
    "wrong-type-pod.json": (json.dumps({"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": "p", "namespace": "default"},
                                        "spec": {"containers": "nginx"}}),
                            ["spec.containers"]),
}


@pytest.mark.parametrize("name", sorted(BAD_SNAPSHOTS))
@pytest.mark.parametrize("subcommand", ["simulate", "explain"])
def test_bad_snapshot(name: str, subcommand: str, tmp_path: Path) -> None:
    text, needles = BAD_SNAPSHOTS[name]
    path = write(tmp_path / name, text)
    extra = ["--node", "worker-1"] if subcommand == "explain" else []
    assert_input_error(desched(subcommand, "--policy", POLICY, "--snapshot", path, "--now", NOW,
                               *extra), name, *needles)


def test_missing_snapshot_file(tmp_path: Path) -> None:
    path = str(tmp_path / "absent.yaml")
    assert_input_error(desched("simulate", "--policy", POLICY, "--snapshot", path), path)


def test_bad_snapshot_among_good_ones(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.yaml", "kind: [\n")
    assert_input_error(desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER,
                               "--snapshot", bad, "--now", NOW), "bad.yaml")


# ---------------------------------------------------------------------------------------------
# Bad flags
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("now", ["yesterday", "2026-13-01T00:00:00Z", "12:00"])
def test_bad_now(now: str) -> None:
    assert_input_error(desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER,
                               "--now", now), "--now", now)


def test_bad_now_in_explain() -> None:
    assert_input_error(desched("explain", "--policy", POLICY, "--snapshot", CLUSTER,
                               "--node", "worker-1", "--now", "soon"), "--now")


@pytest.mark.parametrize("which", [[], ["--pod", "shop/web-5d8f9-0", "--node", "worker-1"]])
def test_explain_needs_exactly_one_of_pod_and_node(which: list[str]) -> None:
    assert_input_error(desched("explain", "--policy", POLICY, "--snapshot", CLUSTER, *which),
                       "--pod", "--node")


def test_explain_pod_is_namespace_slash_name_or_a_name() -> None:
    assert_input_error(desched("explain", "--policy", POLICY, "--snapshot", CLUSTER,
                               "--pod", "shop/web/x"), "--pod", "NAMESPACE/NAME or NAME")
    # A name alone names a pod the snapshot does not hold (tests/simulate/test_explain.py has
    # the rest).
    assert_input_error(desched("explain", "--policy", POLICY, "--snapshot", CLUSTER,
                               "--pod", "web"), "--pod", 'no pod named "web"')


@pytest.mark.parametrize(("args", "needle"), [
    (["simulate", "--snapshot", CLUSTER], "--policy"),
    (["simulate", "--policy", POLICY], "--snapshot"),
    (["simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--cycles", "0"], "--cycles"),
    (["simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--output", "xml"], "--output"),
    (["validate", "--policy", POLICY, "--bogus"], "--bogus"),
    (["frobnicate"], "frobnicate"),
])
def test_usage_errors_are_one_line(args: list[str], needle: str) -> None:
    assert_input_error(desched(*args), needle)


def test_unwritable_out(tmp_path: Path) -> None:
    out = str(tmp_path / "no" / "such" / "dir" / "result.json")
    assert_input_error(desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER,
                               "--now", NOW, "--output", "json", "--out", out), out)


# ---------------------------------------------------------------------------------------------
# Success
# ---------------------------------------------------------------------------------------------


def test_validate_ok() -> None:
    proc = desched("validate", "--policy", POLICY)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"
    assert proc.stderr == ""


@pytest.mark.parametrize("flag", ["--policy-config-file", "--config"])
def test_policy_flag_aliases(flag: str) -> None:
    proc = desched("validate", flag, POLICY)
    assert (proc.returncode, proc.stdout) == (0, "ok\n")


def test_validate_koordinator_and_configmap(tmp_path: Path) -> None:
    koord = """\
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerConfiguration
        profiles:
        - name: k
          plugins:
            evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
            filter: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
            balance: {enabled: [{name: RemoveDuplicates}]}
        """
    path = write(tmp_path / "koord.yaml", koord)
    assert desched("validate", "--policy", path).stdout == "ok\n"
    inner = textwrap.indent(textwrap.dedent(koord), "    ")
    cm = write(tmp_path / "cm.yaml",
               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
               "  config.yaml: |\n" + inner)
    proc = desched("validate", "--policy", cm)
    assert (proc.returncode, proc.stdout) == (0, "ok\n"), proc.stderr


EVICTION_KEYS = {"cycle", "namespace", "pod", "node", "profile", "plugin", "reason"}


def _simulate_json(*extra: str) -> dict:
    proc = desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW,
                   "--output", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)  # exactly one JSON object, nothing else on stdout


def _assert_eviction_order(evictions: list[dict]) -> None:
    """Eviction order within a run: cycles ascending; within a cycle every deschedule plugin
    (PodLifeTime) runs before any balance plugin (RemoveDuplicates)."""
    cycles = [e["cycle"] for e in evictions]
    assert cycles == sorted(cycles)
    for cycle in set(cycles):
        plugins = [e["plugin"] for e in evictions if e["cycle"] == cycle]
        assert plugins == sorted(plugins, key=lambda p: p != "PodLifeTime"), plugins


def test_simulate_json_contract() -> None:
    result = _simulate_json()
    assert isinstance(result, dict)
    assert {"cycles", "evictions"} <= set(result)
    assert result["cycles"] == 1
    evictions = result["evictions"]
    assert evictions, "the example cluster has evictable pods"
    for eviction in evictions:
        assert set(eviction) == EVICTION_KEYS
        assert eviction["cycle"] == 1
        assert eviction["profile"] == "default"
        assert eviction["plugin"] in {"PodLifeTime", "RemoveDuplicates"}
        assert isinstance(eviction["reason"], str) and eviction["reason"]
        for key in ("namespace", "pod", "node"):
            assert isinstance(eviction[key], str) and eviction[key]
    _assert_eviction_order(evictions)
    # The batch pod was created three weeks before --now: older than the policy's week.
    by_pod = {(e["namespace"], e["pod"]): e for e in evictions}
    assert by_pod[("shop", "report-28891")]["plugin"] == "PodLifeTime"
    assert by_pod[("shop", "report-28891")]["node"] == "worker-2"
    web = [e for e in evictions if e["plugin"] == "RemoveDuplicates"]
    assert web and all(e["pod"].startswith("web-5d8f9-") for e in web)
    # Never the same pod twice.
    assert len(by_pod) == len(evictions)


def test_simulate_json_several_cycles() -> None:
    result = _simulate_json("--cycles", "2")
    assert result["cycles"] == 2
    _assert_eviction_order(result["evictions"])
    assert {e["cycle"] for e in result["evictions"]} <= {1, 2}


def test_simulate_is_reproducible_with_now() -> None:
    assert _simulate_json() == _simulate_json()


def test_simulate_json_order_matches_text_output() -> None:
    result = _simulate_json()
    proc = desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW)
    assert proc.returncode == 0, proc.stderr
    text_order = [line.split()[1] for line in proc.stdout.splitlines()
                  if line.strip().startswith("evict ")]
    assert text_order == [f"{e['namespace']}/{e['pod']}" for e in result["evictions"]]


def test_simulate_out_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW,
                   "--output", "json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert json.loads(out.read_text(encoding="utf-8")) == _simulate_json()


def test_unknown_kinds_in_a_snapshot_warn_but_succeed(tmp_path: Path) -> None:
    extra = write(tmp_path / "extra.yaml", """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: settings, namespace: shop}
        data: {a: b}
        ---
        apiVersion: example.com/v1
        kind: Widget
        metadata: {name: w}
        """)
    proc = desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--snapshot", extra,
                   "--now", NOW, "--output", "json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    warnings = proc.stderr.splitlines()
    assert warnings and all("extra.yaml" in w for w in warnings)
    assert any("ConfigMap" in w for w in warnings)
    assert any("Widget" in w for w in warnings)
    # The unknown objects change nothing.
    assert json.loads(proc.stdout)["evictions"] == _simulate_json()["evictions"]


def test_explain_pod_and_node_succeed() -> None:
    for which in (["--pod", "shop/report-28891"], ["--node", "worker-1"]):
        proc = desched("explain", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW,
                       *which)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip()
        assert "Traceback" not in proc.stderr


def test_no_arguments_shows_usage() -> None:
    proc = desched()
    assert proc.returncode == 2
    assert "Usage:" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_and_version_exit_zero() -> None:
    assert desched("--help").returncode == 0
    assert desched("simulate", "--help").returncode == 0
    proc = desched("--version")
    assert proc.returncode == 0 and "0." in proc.stdout
    # upstream's `descheduler version` subcommand: the same line
    subcommand = desched("version")
    assert subcommand.returncode == 0 and subcommand.stdout == proc.stdout


@pytest.mark.parametrize("command", [[], ["simulate"], ["explain"], ["run"], ["validate"],
                                     ["snapshot"]])
def test_short_help_and_every_option_says_what_it_does(command: list[str]) -> None:
    proc = desched(*command, "-h")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == desched(*command, "--help").stdout
    name = command[0] if command else None
    cmd = main if name is None else main.commands[name]
    missing = [p.opts[0] for p in cmd.params
               if isinstance(p, click.Option) and not p.hidden and not p.help]
    assert missing == [], f"options without a help text: {missing}"
    for flag in {"simulate": ["--cycles", "--output", "--snapshot"],
                 "explain": ["--snapshot"]}.get(name or "", []):
        assert f"  {flag} " in proc.stdout or f", {flag} " in proc.stdout


def test_python_dash_m_desched() -> None:
    proc = subprocess.run([sys.executable, "-m", "desched", "simulate", "--policy", POLICY,
                           "--snapshot", CLUSTER, "--now", NOW], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER,
                                  "--now", NOW).stdout
    usage = subprocess.run([sys.executable, "-m", "desched", "-h"], capture_output=True,
                           text=True, timeout=120, check=False)
    assert usage.stdout.startswith("Usage: desched ")


def piped(stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desched", *args], input=stdin,
                          capture_output=True, text=True, timeout=120, check=False)


def test_snapshot_and_policy_from_standard_input() -> None:
    expected = _simulate_json()
    # `kubectl get ... -o json | desched simulate --snapshot -`: the YAML example as JSON too.
    as_json = json.dumps(yaml.safe_load(Path(CLUSTER).read_text()))
    for text in (Path(CLUSTER).read_text(), as_json):
        proc = piped(text, "simulate", "--policy", POLICY, "--snapshot", "-", "--now", NOW,
                     "--output", "json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["evictions"] == expected["evictions"]
    proc = piped(Path(POLICY).read_text(), "simulate", "--policy", "-", "--snapshot", CLUSTER,
                 "--now", NOW, "--output", "json")
    assert json.loads(proc.stdout)["evictions"] == expected["evictions"]
    assert piped(Path(POLICY).read_text(), "validate", "--policy", "-").stdout == "ok\n"
    proc = piped(Path(CLUSTER).read_text(), "explain", "--policy", POLICY, "--snapshot", "-",
                 "--pod", "shop/report-28891", "--now", NOW)
    assert proc.returncode == 0 and "report-28891" in proc.stdout, proc.stderr


def test_standard_input_errors_are_one_line() -> None:
    assert_input_error(piped("x", "simulate", "--policy", "-", "--snapshot", "-"),
                       "only one of --policy and --snapshot can be -")
    assert_input_error(piped("{bad", "simulate", "--policy", POLICY, "--snapshot", "-"),
                       "<stdin>: invalid JSON")
    assert_input_error(piped("kind: Nope\n", "validate", "--policy", "-"), "<stdin>")


def test_ages_read_in_days_and_hours_beside_seconds() -> None:
    proc = desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW)
    assert "pod age 1850400s (21d10h) exceeds maxPodLifeTimeSeconds 604800 (7d)" in proc.stdout


LOWNODELOAD_INVERTED = """\
    apiVersion: descheduler/v1alpha2
    kind: DeschedulerConfiguration
    profiles:
    - name: koord
      plugins:
        balance:
          enabled: [{name: LowNodeLoad}]
      pluginConfig:
      - name: LowNodeLoad
        args:
          lowThresholds: {cpu: 70}
          highThresholds: {cpu: 50}
    """


@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_errors_raised_when_plugins_are_built_name_the_policy(tmp_path: Path,
                                                              command: str) -> None:
    """LowNodeLoad checks its pools when it is built (as Koordinator does): validate and
    simulate build every plugin before anything else, and name the file."""
    path = write(tmp_path / "lnl.yaml", LOWNODELOAD_INVERTED)
    extra = ["--snapshot", str(tmp_path / "missing.yaml")] if command == "simulate" else []
    proc = desched(command, "--policy", path, *extra)
    assert_input_error(proc, f"{path}: initializing plugin \"LowNodeLoad\"")
    assert "low percentage must be less than or equal to highThresholds" in proc.stderr


def test_a_priority_class_threshold_is_looked_up_in_the_snapshot_not_at_validation(
        tmp_path: Path) -> None:
    policy = write(tmp_path / "p.yaml", """\
        apiVersion: descheduler/v1alpha2
        kind: DeschedulerPolicy
        profiles:
        - name: p
          pluginConfig:
          - name: DefaultEvictor
            args:
              priorityThreshold: {name: high-priority}
          - name: PodLifeTime
            args: {maxPodLifeTimeSeconds: 60}
          plugins:
            deschedule: {enabled: [PodLifeTime]}
        """)
    assert desched("validate", "--policy", policy).stdout == "ok\n"
    proc = desched("simulate", "--policy", policy, "--snapshot", CLUSTER, "--now", NOW)
    assert_input_error(proc, 'priorityclasses.scheduling.k8s.io "high-priority" not found')


# -- --scheduler-config ------------------------------------------------------------------------

HOTSPOT = REPO / "examples" / "lownodeload-hotspot"
HOT, OTHER = "cn-beijing.10.0.0.53", "cn-beijing.10.0.0.100"
SCHED_HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
BIN_PACKING = SCHED_HEAD + """\
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy: {type: MostAllocated}
"""


def hotspot(*extra: str) -> subprocess.CompletedProcess[str]:
    return desched("simulate", "--policy", str(HOTSPOT / "policy.yaml"), "--snapshot",
                   str(HOTSPOT / "cluster.yaml"), "--cycles", "7", "--reschedule", "--output",
                   "json", *extra)


def test_scheduler_config_places_the_replacements(tmp_path: Path) -> None:
    """kube-scheduler's default profile puts the evicted pod's replacement back on the hot node;
    a bin-packing profile (MostAllocated) puts it on the other busy node."""
    default = hotspot()
    assert default.returncode == 0, default.stderr
    assert [r["node"] for r in json.loads(default.stdout)["rescheduled"]] == [HOT]
    sched = write(tmp_path / "sched.yaml", BIN_PACKING)
    packed = hotspot("--scheduler-config", sched)
    assert packed.returncode == 0, packed.stderr
    assert packed.stderr == ""
    assert [r["node"] for r in json.loads(packed.stdout)["rescheduled"]] == [OTHER]


def test_explain_follows_the_replacement_placed_by_the_scheduler_config(tmp_path: Path) -> None:
    sched = write(tmp_path / "sched.yaml", BIN_PACKING)
    proc = desched("explain", "--policy", str(HOTSPOT / "policy.yaml"), "--snapshot",
                   str(HOTSPOT / "cluster.yaml"), "--cycles", "7", "--reschedule", "--node",
                   HOT, "--scheduler-config", sched)
    assert proc.returncode == 0, proc.stderr
    assert f"replaced by default/stress-demo-588f9646cf-s7x2k-r6, placed on {OTHER}" \
        in proc.stdout


def test_scheduler_config_warnings_go_to_stderr_one_line_each(tmp_path: Path) -> None:
    sched = write(tmp_path / "sched.yaml", SCHED_HEAD + textwrap.dedent("""\
        profile: []
        profiles:
        - plugins:
            score:
              enabled: [{name: ImageLocalty}]
        """))
    proc = hotspot("--scheduler-config", sched)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f'warning: {sched}: unknown field "profile" (did you mean "profiles"?); it is ignored',
        f'warning: {sched}: profiles[0].plugins.score.enabled[0]: unknown plugin "ImageLocalty" '
        f"(did you mean ImageLocality?)"]
    assert json.loads(proc.stdout)["rescheduled"]


def test_scheduler_config_without_reschedule_says_it_changes_nothing(tmp_path: Path) -> None:
    sched = write(tmp_path / "sched.yaml", BIN_PACKING)
    proc = desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW,
                   "--scheduler-config", sched)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f"warning: --scheduler-config {sched}: only --reschedule places pods; without it the "
        f"configuration is checked and changes nothing"]


@pytest.mark.parametrize("command", ["simulate", "explain"])
def test_a_scheduler_config_that_does_not_load_is_one_line_exit_2(tmp_path: Path,
                                                                   command: str) -> None:
    extra = ["--pod", "default/x"] if command == "explain" else []
    missing = str(tmp_path / "missing.yaml")
    proc = desched(command, "--policy", POLICY, "--snapshot", CLUSTER, "--reschedule",
                   "--scheduler-config", missing, *extra)
    assert_input_error(proc, f"error: {missing}: failed to read the scheduler configuration: "
                             f"No such file or directory")
    bad = write(tmp_path / "bad.yaml", SCHED_HEAD + "percentageOfNodesToScore: 101\n")
    proc = desched(command, "--policy", POLICY, "--snapshot", CLUSTER, "--reschedule",
                   "--scheduler-config", bad, *extra)
    assert_input_error(proc, f"error: {bad}: percentageOfNodesToScore: Invalid value: 101: not "
                             f"in valid range [0-100]")


def test_scheduler_config_from_standard_input() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "desched", "simulate", "--policy", str(HOTSPOT / "policy.yaml"),
         "--snapshot", str(HOTSPOT / "cluster.yaml"), "--cycles", "7", "--reschedule",
         "--output", "json", "--scheduler-config", "-"],
        input=BIN_PACKING, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert [r["node"] for r in json.loads(proc.stdout)["rescheduled"]] == [OTHER]
    both = desched("simulate", "--policy", "-", "--snapshot", CLUSTER, "--scheduler-config", "-")
    assert_input_error(both, "only one of --policy, --snapshot and --scheduler-config can be - "
                             "(standard input)")

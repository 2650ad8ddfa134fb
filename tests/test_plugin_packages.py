"""Plugins from other packages (docs/writing-plugins.md): the example package
examples/out-of-tree-plugin installed as pip would leave it (tests/plugin_packages.py), its own
tests run with it installed, the commands finding it (`plugins`, `validate`, `simulate`,
`explain`), a plugin package that fails to load said in one line with exit code 2, and
docs/writing-plugins.md checked against all of it. (tests/plugins/test_catalog.py checks the
catalog in process; tests/e2e/test_e2e_plugin_package.py runs the package with `desched run`.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from desched import plugin_api
from desched.framework.registry import PluginSpec
from desched.plugins.catalog import BUILT_IN, ENTRY_POINT_GROUP
from desched.policy_files.loader import load_policy
from plugin_packages import EXAMPLE, REPO, desched_command, env_with, install, write_package

pytestmark = pytest.mark.process

DOC = REPO / "docs" / "writing-plugins.md"
POLICY = EXAMPLE / "example" / "policy.yaml"
CLUSTER = EXAMPLE / "example" / "cluster.yaml"
NOW = "2026-03-01T06:00:00Z"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example package, installed into a folder of its own."""
    return install(EXAMPLE, tmp_path_factory.mktemp("site"))


def desched(*args: str | Path, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*desched_command(), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env_with(*path), check=False)


def test_the_package_passes_its_own_tests_installed(site: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--rootdir", str(EXAMPLE), "-c", str(EXAMPLE / "pyproject.toml"), str(EXAMPLE / "tests")],
        capture_output=True, text=True, timeout=300, env=env_with(site), cwd=EXAMPLE,
        check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"\b13 passed\b", proc.stdout), proc.stdout[-500:]


def test_plugins_lists_the_built_ins_and_the_package(site: Path) -> None:
    proc = desched("plugins", "-o", "json", path=(site,))
    assert proc.returncode == 0, proc.stderr
    listed = {p["name"]: p for p in json.loads(proc.stdout)}
    assert list(listed) == [*BUILT_IN, "RemovePodsPastDeadline"]
    assert all(listed[name]["source"] == "built-in" for name in BUILT_IN)
    assert listed["RemovePodsPastDeadline"] == {
        "name": "RemovePodsPastDeadline", "extensionPoints": ["deschedule"],
        "source": "desched-deadline 0.1.0", "distribution": "desched-deadline",
        "version": "0.1.0", "entryPoint": "RemovePodsPastDeadline = desched_deadline:SPEC"}


def test_the_example_warns_of_nothing(site: Path) -> None:
    """As every shipped example (tests/policy_files/test_policy_warnings.py,
    tests/simulate/test_snapshot_completeness.py): no warning from the policy, and none from
    simulate, --reschedule included."""
    proc = desched("validate", "--strict", "--policy", POLICY, path=(site,))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok\n", "")
    proc = desched("simulate", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW,
                   "--reschedule", path=(site,))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_without_the_package_its_plugin_is_unknown() -> None:
    proc = desched("validate", "--policy", POLICY)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "plugin RemovePodsPastDeadline in pluginConfig not registered" in proc.stderr


def test_simulate_runs_the_package_and_warns_of_what_it_reads(tmp_path: Path,
                                                              site: Path) -> None:
    """The spec's scope, not desched, says what it reads: a package's plugin reading NodeMetric
    is warned of like LowNodeLoad, its node selector matching nothing like DefaultEvictor's."""
    reader = write_package(tmp_path / "reader", "node-metric-reader", "node_metric_reader", '''
import msgspec
from desched.plugin_api import NodeScope, PluginSpec, Reads, Scope, parse_selector_string

class Plugin:
    def __init__(self, args, handle):
        pass

    def balance(self, nodes):
        pass

class Args(msgspec.Struct):
    pass

SPEC = PluginSpec(
    name="NodeMetricReader", extension_points=frozenset({"balance"}), args_type=Args,
    factory=Plugin, purpose="balance",
    scope=lambda args: Scope(
        reads=(Reads(("NodeMetric",), "NodeMetricReader (node usage)"),),
        nodes=(NodeScope("nodeSelector", "pool=gpu", parse_selector_string("pool=gpu")),)))
''', {"NodeMetricReader": "node_metric_reader:SPEC"})
    reader_site = install(reader, tmp_path / "reader-site")
    policy = tmp_path / "policy.yaml"
    enabled = "      enabled: [RemovePodsPastDeadline]\n"
    configured = "  - name: DefaultEvictor\n"
    policy.write_text(POLICY.read_text().replace(
        enabled, f"{enabled}    balance:\n      enabled: [NodeMetricReader]\n").replace(
        configured, f"{configured}  - name: NodeMetricReader\n"))
    proc = desched("simulate", "--policy", policy, "--snapshot", CLUSTER, "--now", NOW, "-o",
                   "json", path=(site, reader_site))
    assert proc.returncode == 0, proc.stderr
    evictions = json.loads(proc.stdout)["evictions"]
    assert [(e["pod"], e["plugin"]) for e in evictions] == [
        ("api-7c9f4-k2x8p", "RemovePodsPastDeadline"),
        ("api-7c9f4-m4q7z", "RemovePodsPastDeadline")]
    assert proc.stderr.splitlines() == [
        "warning: the snapshot holds no NodeMetric (slo.koordinator.sh/v1alpha1), needed by "
        "NodeMetricReader (node usage); add `kubectl get nodemetrics.slo.koordinator.sh -o json` "
        "to the snapshot, or use `desched snapshot`",
        'warning: NodeMetricReader nodeSelector "pool=gpu" matches 0 of 2 nodes']


def test_explain_runs_the_package(site: Path) -> None:
    proc = desched("explain", "--policy", POLICY, "--snapshot", CLUSTER, "--now", NOW,
                   "--node", "worker-2", path=(site,))
    assert proc.returncode == 0, proc.stderr
    assert ("default/RemovePodsPastDeadline: EVICTED: deadline 2026-03-01T06:30:00Z "
            "(deadline.example.com/evict-after) is 30m away, within leadTime 1h") in proc.stdout
    assert ("default/RemovePodsPastDeadline: considered, not picked: namespace kube-system is "
            "outside the plugin's namespaces") in proc.stdout


@pytest.mark.parametrize(("source", "says"), [
    ("import nowhere_to_be_found\n",
     "failed to load: ModuleNotFoundError: No module named 'nowhere_to_be_found'"),
    ("from desched.plugins.podlifetime import SPEC\n", None),
])
@pytest.mark.parametrize("command", [["plugins"], ["validate", "--policy", str(POLICY)],
                                     ["simulate", "--policy", str(POLICY), "--snapshot",
                                      str(CLUSTER)]])
def test_a_package_that_does_not_load_is_one_line_and_exit_2(
        tmp_path: Path, site: Path, source: str, says: str | None, command: list[str]) -> None:
    name = "PodLifeTime" if says is None else "Broken"
    bad = install(write_package(tmp_path / "bad", "bad-plugin", "bad_plugin", source,
                                {name: "bad_plugin:SPEC"}, version="2.3"), tmp_path / "bad-site")
    proc = desched(*command, path=(site, bad))
    assert proc.returncode == 2
    assert proc.stdout == ""
    if says is None:
        assert proc.stderr == (
            'error: plugin package bad-plugin 2.3 declares plugin "PodLifeTime" (entry point '
            '"PodLifeTime = bad_plugin:SPEC" in desched.plugins), a built-in plugin\'s name: '
            "rename the package's plugin, or uninstall it\n")
    else:
        assert proc.stderr == (f'error: plugin package bad-plugin 2.3 (entry point "Broken = '
                               f'bad_plugin:SPEC" in desched.plugins) {says}\n')


# -- docs/writing-plugins.md ---------------------------------------------------------------------

def _blocks(marker: str) -> list[tuple[str, str]]:
    """(what the `<!-- marker: WHAT -->` comment names, the fenced block right after it)."""
    text = DOC.read_text(encoding="utf-8")
    return re.findall(rf"<!-- {marker}: (.+?) -->\n```[a-z]*\n(.*?)```", text, re.S)


def _table(after: str) -> list[list[str]]:
    """The rows (cells) of the first table after the line `after`, header left out."""
    lines = DOC.read_text(encoding="utf-8").split(f"\n{after}\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_doc_excerpts_are_the_example_files() -> None:
    excerpts = _blocks("excerpt")
    assert len(excerpts) == 2
    for path, block in excerpts:
        assert block in (REPO / path).read_text(encoding="utf-8"), path


def test_doc_shows_what_desched_plugins_prints(site: Path) -> None:
    (shown,) = [block for what, block in _blocks("output") if what == "desched plugins"]
    proc = desched("plugins", path=(site,))
    assert proc.returncode == 0, proc.stderr
    assert shown == proc.stdout


def test_doc_names_the_entry_point_group_and_the_whole_public_api() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert f'[project.entry-points."{ENTRY_POINT_GROUP}"]' in text
    api = [name for row in _table("### `desched.plugin_api`") for name in _names(row[0])]
    assert sorted(api) == sorted(plugin_api.__all__)
    spec = [_names(row[0])[0] for row in _table("## The spec")]
    assert spec == [f.name for f in fields(PluginSpec)]


def test_doc_names_an_example_of_every_built_in() -> None:
    rows = _table("<!-- examples of the built-ins -->")
    assert [row[0] for row in rows] == list(BUILT_IN)
    for plugin, cell in rows:
        for path in _names(cell):
            where = REPO / path
            policies = sorted(where.glob("policy*.yaml")) if where.is_dir() else [where]
            assert policies, path
            for policy in policies:
                assert (policy.parent / "cluster.yaml").is_file(), policy
                loaded = load_policy(str(policy), BUILT_IN)
                enabled = {n for p in loaded.profiles for names in p.enabled.values()
                           for n in names}
                assert plugin in enabled, f"{policy} does not enable {plugin}"

"""The catalog: the built-in plugins and those installed packages declare in the `desched.plugins`
entry-point group, each checked as it loads, with one line naming the package for what is wrong.
(tests/test_plugin_packages.py runs the commands with packages installed.)"""

from __future__ import annotations

import itertools
from importlib import metadata
from pathlib import Path

import pytest

from desched.errors import InputError
from desched.plugins.catalog import BUILT_IN, ENTRY_POINT_GROUP, PLUGINS, Catalog
from plugin_packages import install, write_package

_names = itertools.count()

GOOD = '''
import msgspec
from desched.plugin_api import PluginSpec

class Args(msgspec.Struct):
    pass

class Plugin:
    def __init__(self, args, handle):
        pass

    def deschedule(self, nodes):
        pass

SPEC = PluginSpec(name="{name}", extension_points=frozenset({{"deschedule"}}),
                  args_type=Args, factory=Plugin)
'''


def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str,
              entry_points: dict[str, str], distribution: str = "") -> list[metadata.EntryPoint]:
    """A package installed into a folder of its own on sys.path; its entry points (which carry
    their distribution, as installed ones do)."""
    module = f"catalog_test_plugin_{next(_names)}"
    distribution = distribution or module.replace("_", "-")
    project = write_package(tmp_path / module, distribution, module, source,
                            {k: v.format(module=module) for k, v in entry_points.items()})
    target = install(project, tmp_path / f"{module}-site")
    monkeypatch.syspath_prepend(str(target))
    (dist,) = metadata.distributions(path=[str(target)])
    return list(dist.entry_points.select(group=ENTRY_POINT_GROUP))


def test_the_built_ins_are_listed_as_such() -> None:
    assert len(BUILT_IN) == 15
    assert all(PLUGINS.source(name).built_in for name in BUILT_IN)
    assert str(PLUGINS.source("PodLifeTime")) == "built-in"


def test_an_installed_plugin_joins_the_built_ins(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    points = installed(tmp_path, monkeypatch, GOOD.format(name="Mine"),
                       {"Mine": "{module}:SPEC"}, distribution="my-plugins")
    catalog = Catalog(points)
    assert list(catalog) == [*BUILT_IN, "Mine"]
    assert catalog["Mine"].extension_points == {"deschedule"}
    source = catalog.source("Mine")
    assert (str(source), source.distribution, source.version) == ("my-plugins 1.0",
                                                                  "my-plugins", "1.0")
    assert source.entry_point.startswith("Mine = catalog_test_plugin_")


@pytest.mark.parametrize(("source", "entry_point", "says"), [
    ("import nowhere_to_be_found\n", "Broken", "failed to load: ModuleNotFoundError: No module "
                                               "named 'nowhere_to_be_found'"),
    ("raise RuntimeError('half-configured')\n", "Broken",
     "failed to load: RuntimeError: half-configured"),
    ("SPEC = {'name': 'Broken'}\n", "Broken",
     "names a dict, not a PluginSpec (desched.plugin_api.PluginSpec)"),
    (GOOD.format(name="Other"), "Mine",
     'the entry point is named "Mine" and its PluginSpec "Other": name both the same'),
    (GOOD.format(name="Mine").replace('{"deschedule"}', '{"rebalance"}'), "Mine",
     "extension_points ['rebalance']: each must be one of deschedule, balance, filter, "
     "preevictionfilter, evict"),
    (GOOD.format(name="Mine").replace("factory=Plugin", "factory=Plugin, "
                                      "evicts_through_migration_jobs=True"), "Mine",
     "evicts_through_migration_jobs needs args of type MigrationControllerArgs"),
    (GOOD.format(name="Mine").replace("    pass\n\nclass Plugin", "    limit: int\n\nclass Plugin"),
     "Mine", "args_type Args does not decode the empty args of a policy that gives none "
             "(ValidationError: Object missing required field `limit`): make it a "
             "msgspec.Struct whose fields all have defaults"),
])
def test_a_package_that_does_not_load_is_named_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, entry_point: str,
        says: str) -> None:
    points = installed(tmp_path, monkeypatch, source, {entry_point: "{module}:SPEC"},
                       distribution="broken-plugin")
    with pytest.raises(InputError) as err:
        list(Catalog(points))
    module = points[0].value.partition(":")[0]
    assert str(err.value).startswith(
        f'plugin package broken-plugin 1.0 (entry point "{entry_point} = {module}:SPEC" in '
        f"desched.plugins)")
    assert says in str(err.value)
    assert "\n" not in str(err.value)


def test_a_built_in_name_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    points = installed(tmp_path, monkeypatch, GOOD.format(name="PodLifeTime"),
                       {"PodLifeTime": "{module}:SPEC"}, distribution="shadow")
    with pytest.raises(InputError) as err:
        Catalog(points)["PodLifeTime"]
    assert str(err.value) == (
        f'plugin package shadow 1.0 declares plugin "PodLifeTime" (entry point '
        f'"PodLifeTime = {points[0].value}" in desched.plugins), a built-in plugin\'s name: '
        f"rename the package's plugin, or uninstall it")


def test_two_packages_with_one_name_are_refused(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    first = installed(tmp_path, monkeypatch, GOOD.format(name="Mine"), {"Mine": "{module}:SPEC"},
                      distribution="first")
    second = installed(tmp_path, monkeypatch, GOOD.format(name="Mine"),
                       {"Mine": "{module}:SPEC"}, distribution="second")
    with pytest.raises(InputError) as err:
        len(Catalog(first + second))
    assert str(err.value) == ('plugin "Mine" is declared by two installed packages, first 1.0 '
                              "and second 1.0: uninstall one")

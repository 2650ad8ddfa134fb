"""Errors that say how to fix, through `desched validate` (issue 22 item 5): upstream's message
kept, the fix appended on the same line; exit code 2 and one line on stderr, never a traceback.

- Koordinator's plugin lists hold `{name: X}` objects, DeschedulerPolicy's hold names: each
  format's error says how the other's habit is written here.
- Plugin-name and strict-arg typos get "did you mean", in every format.
- A plugin enabled at an extension point it does not implement says where it belongs.
- A type error names its real place (`thresholds.cpu`, not `thresholds[...]`) and, where the
  value shows what was meant (`"20%"`, `"3"`, `"true"`), how to write it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from policy_cli import DECODE, LNL, LNL_ARGS, LNU_ARGS, PLT, koord, refused, upstream

# -- plugin lists: objects or names ---------------------------------------------------------------


@pytest.mark.parametrize("lists", ["enabled", "disabled"])
def test_seed_style_koordinator_plugin_list_says_write_name(tmp_path: Path, lists: str) -> None:
    doc = koord({}, LNL)
    doc["profiles"][0]["plugins"] = {"balance": {lists: ["LowNodeLoad"]}}
    assert refused(tmp_path, doc) == (
        f'error: {DECODE} "{tmp_path}/policy.yaml": Expected `object`, got `str` - at '
        f"`$.profiles[0].plugins.balance.{lists}[0]`; write \"- name: LowNodeLoad\" (each entry "
        f"is an object with a name)")


def test_koordinator_style_entry_in_a_deschedulerpolicy_says_write_the_name(
        tmp_path: Path) -> None:
    doc = upstream({}, {"name": "LowNodeUtilization", "args": LNU_ARGS})
    doc["profiles"][0]["plugins"] = {"balance": {"enabled": [{"name": "LowNodeUtilization"}]}}
    line = refused(tmp_path, doc)
    assert line.endswith("Expected `str`, got `object` - at "
                         "`$.profiles[0].plugins.balance.enabled[0]`; write \"- "
                         "LowNodeUtilization\" (each entry is a plugin name)")


# -- plugin-name typos ----------------------------------------------------------------------------


def test_upstream_plugin_config_typo(tmp_path: Path) -> None:
    doc = upstream({"deschedule": ["PodLifetime"]}, {**PLT, "name": "PodLifetime"})
    assert refused(tmp_path, doc).endswith(
        'policy.yaml: in profile p: plugin PodLifetime in pluginConfig not registered (did you '
        'mean "PodLifeTime"?)')


def test_upstream_enabled_typo_keeps_the_message_and_names_the_plugin(tmp_path: Path) -> None:
    doc = upstream({"balance": ["LowNodeUtilizations"]},
                   {"name": "LowNodeUtilization", "args": LNU_ARGS})
    assert refused(tmp_path, doc).endswith(
        'unable to create "p" profile: profile "p" configures balance extension point of '
        "non-existing plugins: [LowNodeUtilizations]; LowNodeUtilizations is not a registered "
        'plugin (did you mean "LowNodeUtilization"?)')


def test_upstream_name_nothing_resembles_gets_no_guess(tmp_path: Path) -> None:
    doc = upstream({"deschedule": ["Zzzzzz"]}, PLT)
    assert refused(tmp_path, doc).endswith("non-existing plugins: [Zzzzzz]")


@pytest.mark.parametrize(("ep", "name", "near"), [
    ("balance", "LowNodeLoads", "LowNodeLoad"),
    ("deschedule", "PodLifetime", "PodLifeTime"),
    ("evict", "MigrationControler", "MigrationController"),
])
def test_koordinator_enabled_typo(tmp_path: Path, ep: str, name: str, near: str) -> None:
    doc = koord({ep: [{"name": name}]})
    assert refused(tmp_path, doc).endswith(
        f'profile "p": {ep} plugin "{name}" is not registered (did you mean "{near}"?)')


def test_koordinator_plugin_config_typo(tmp_path: Path) -> None:
    doc = koord({}, {**LNL, "name": "LowNodeLoads"})
    assert refused(tmp_path, doc).endswith(
        'profile "p": plugin LowNodeLoads in pluginConfig not registered (did you mean '
        '"LowNodeLoad"?)')


def test_v1alpha1_strategy_typo(tmp_path: Path) -> None:
    doc = {"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
           "strategies": {"PodLifetime": {"enabled": True}}}
    assert refused(tmp_path, doc).endswith(
        'unknown strategy name: PodLifetime (did you mean "PodLifeTime"?)')


# -- strict args: "did you mean" ------------------------------------------------------------------


@pytest.mark.parametrize(("doc", "field", "near"), [
    (upstream({"deschedule": ["PodLifeTime"]},
              {"name": "PodLifeTime", "args": {"maxPodLifetimeSeconds": 60}}),
     "maxPodLifetimeSeconds", "maxPodLifeTimeSeconds"),
    (upstream({"balance": ["LowNodeUtilization"]},
              {"name": "LowNodeUtilization", "args": {**LNU_ARGS, "targetThreshold": {}}}),
     "targetThreshold", "targetThresholds"),
    (upstream({"deschedule": ["PodLifeTime"]}, PLT,
              {"name": "DefaultEvictor", "args": {"podProtections": {"extraEnable": []}}}),
     "podProtections.extraEnable", "extraEnabled"),
    (koord({"balance": [{"name": "LowNodeLoad"}]},
           {"name": "LowNodeLoad", "args": {**LNL_ARGS, "detectorCacheTimeOut": "5m"}}),
     "detectorCacheTimeOut", "detectorCacheTimeout"),
    (koord({}, {"name": "MigrationController", "args": {"maxMigratingPerNodes": 1}}),
     "maxMigratingPerNodes", "maxMigratingPerNode"),
    (koord({"balance": [{"name": "LowNodeLoad"}]},
           {"name": "LowNodeLoad", "args": {**LNL_ARGS, "nodePools": [{"name": "a",
                                                                        "highThreshold": {}}]}}),
     "nodePools[0].highThreshold", "highThresholds"),
], ids=["upstream-PodLifeTime", "upstream-LNU", "upstream-DefaultEvictor-nested",
        "koord-LowNodeLoad", "koord-MigrationController", "koord-LowNodeLoad-pool"])
def test_strict_arg_typo_gets_did_you_mean(tmp_path: Path, doc: dict[str, Any], field: str,
                                           near: str) -> None:
    assert refused(tmp_path, doc).endswith(
        f'strict decoding error: unknown field "{field}" (did you mean "{near}"?)')


def test_koordinator_top_level_typo_gets_did_you_mean(tmp_path: Path) -> None:
    doc = koord({}, deschedulingIntervall="1m")
    assert refused(tmp_path, doc).endswith(
        'strict decoding error: unknown field "deschedulingIntervall" (did you mean '
        '"deschedulingInterval"?)')


# -- a plugin at the wrong extension point --------------------------------------------------------


@pytest.mark.parametrize(("ep", "name", "config", "where"), [
    ("balance", "RemovePodsViolatingNodeTaints", {"name": "RemovePodsViolatingNodeTaints"},
     "RemovePodsViolatingNodeTaints is a deschedule plugin: enable it under plugins.deschedule"),
    ("deschedule", "LowNodeUtilization", {"name": "LowNodeUtilization", "args": LNU_ARGS},
     "LowNodeUtilization is a balance plugin: enable it under plugins.balance"),
    ("balance", "DefaultEvictor", {"name": "DefaultEvictor"},
     "DefaultEvictor is a filter and preevictionfilter plugin: enable it under plugins.filter "
     "or plugins.preevictionfilter"),
    ("filter", "PodLifeTime", PLT,
     "PodLifeTime is a deschedule plugin: enable it under plugins.deschedule"),
])
def test_upstream_wrong_extension_point(tmp_path: Path, ep: str, name: str,
                                        config: dict[str, Any], where: str) -> None:
    key = "preEvictionFilter" if ep == "preevictionfilter" else ep
    assert refused(tmp_path, upstream({ep: [name]}, config)).endswith(
        f'unable to create "p" profile: profile "p" configures {key} extension point of '
        f"non-existing plugins: [{name}]; {where}")


@pytest.mark.parametrize(("ep", "name", "where"), [
    ("deschedule", "LowNodeLoad", "LowNodeLoad is a balance plugin: enable it under "
                                  "plugins.balance"),
    ("balance", "RemovePodsViolatingNodeTaints",
     "RemovePodsViolatingNodeTaints is a deschedule plugin: enable it under plugins.deschedule"),
    ("balance", "MigrationController", "MigrationController is an evict and filter plugin: "
                                       "enable it under plugins.evict or plugins.filter"),
    ("evict", "LowNodeLoad", "LowNodeLoad is a balance plugin: enable it under plugins.balance"),
])
def test_koordinator_wrong_extension_point(tmp_path: Path, ep: str, name: str,
                                           where: str) -> None:
    doc = koord({ep: [{"name": name}]}, LNL)
    if ep == "evict":
        doc["profiles"][0]["plugins"]["evict"]["disabled"] = [{"name": "*"}]
    assert refused(tmp_path, doc).endswith(
        f'profile "p": plugin "{name}" does not extend {ep}; {where}')


# -- type errors name the place -------------------------------------------------------------------


@pytest.mark.parametrize(("doc", "place", "kind"), [
    (upstream({"balance": ["LowNodeUtilization"]},
              {"name": "DefaultEvictor"},
              {"name": "LowNodeUtilization", "args": {"thresholds": {"memory": 10, "cpu": "20%"},
                                                      "targetThresholds": {"cpu": 50}}}),
     "profiles[0].pluginConfig[1].args.thresholds.cpu", "LowNodeUtilizationArgs"),
    (upstream({"balance": ["HighNodeUtilization"]},
              {"name": "HighNodeUtilization", "args": {"thresholds": {"cpu": "20%"}}}),
     "profiles[0].pluginConfig[0].args.thresholds.cpu", "HighNodeUtilizationArgs"),
    (koord({"balance": [{"name": "LowNodeLoad"}]},
           {"name": "LowNodeLoad", "args": {"highThresholds": {"cpu": "20%"}}}),
     "profiles[0].pluginConfig[0].args.highThresholds.cpu", "LowNodeLoadArgs"),
    (koord({"balance": [{"name": "LowNodeLoad"}]},
           {"name": "LowNodeLoad", "args": {"nodePools": [
               {"name": "a", "lowThresholds": {"cpu": "20%"}}]}}),
     "profiles[0].pluginConfig[0].args.nodePools[0].lowThresholds.cpu", "LowNodeLoadArgs"),
    ({"apiVersion": "descheduler/v1alpha1", "kind": "DeschedulerPolicy",
      "strategies": {"LowNodeUtilization": {"enabled": True, "params": {
          "nodeResourceUtilizationThresholds": {"thresholds": {"cpu": "20%"},
                                                "targetThresholds": {"cpu": 50}}}}}},
     "strategies.LowNodeUtilization.params.nodeResourceUtilizationThresholds.thresholds.cpu",
     ""),
], ids=["LowNodeUtilization", "HighNodeUtilization", "LowNodeLoad", "LowNodeLoad-pool",
        "v1alpha1"])
def test_percentage_written_as_text(tmp_path: Path, doc: dict[str, Any], place: str,
                                    kind: str) -> None:
    body = f"{kind}: Expected `float`, got `str`" if kind else "Expected `float`, got `str`"
    assert refused(tmp_path, doc).endswith(
        f'{body} - at `$.{place}`; a percentage is a number (20, not "20%")')


@pytest.mark.parametrize(("doc", "tail"), [
    (upstream({"deschedule": ["PodLifeTime"]},
              {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": "60"}}),
     '- at `$.profiles[0].pluginConfig[0].args.maxPodLifeTimeSeconds`; write the number '
     'without quotes (60, not "60")'),
    (upstream({"deschedule": ["PodLifeTime"]}, PLT, maxNoOfPodsToEvictPerNode="3"),
     '- at `$.maxNoOfPodsToEvictPerNode`; write the number without quotes (3, not "3")'),
    (upstream({"deschedule": ["PodLifeTime"]}, PLT,
              {"name": "DefaultEvictor", "args": {"nodeFit": "true"}}),
     "- at `$.profiles[0].pluginConfig[1].args.nodeFit`; write true without quotes"),
    (koord({}, {"name": "MigrationController", "args": {
        "objectLimiters": {"workload": {"duration": "5m", "burst": "2"}}}}),
     "- at `$.profiles[0].pluginConfig[0].args.objectLimiters.workload.burst`; write the number "
     'without quotes (2, not "2")'),
], ids=["args-int", "top-level-int", "args-bool", "map-value-struct"])
def test_quoted_values_say_how_to_write_them(tmp_path: Path, doc: dict[str, Any],
                                            tail: str) -> None:
    assert refused(tmp_path, doc).endswith(tail)

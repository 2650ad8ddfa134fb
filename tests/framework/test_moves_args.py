"""The `moves` block (framework/moves/args.py) as `desched validate` reads it, in both formats
that accept it: one-line errors naming the key (exit 2), warnings for settings that do
nothing, and `desched convert` keeping the block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from desched.commands.cli import main
from desched.framework.moves.args import MovesArgs, validate, warnings
from desched.plugins.catalog import PLUGINS
from desched.policy_files.convert import convert_policy
from desched.policy_files.loader import load_policy

UPSTREAM: dict[str, Any] = {
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
    "profiles": [{"name": "p", "pluginConfig": [{"name": "RemovePodsViolatingNodeTaints"}],
                  "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}}}]}
KOORD: dict[str, Any] = {
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration",
    "profiles": [{"name": "p", "plugins": {
        "deschedule": {"enabled": [{"name": "RemovePodsViolatingNodeTaints"}]},
        "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
        "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}}}]}


def validate_cli(tmp_path: Path, doc: dict[str, Any]) -> tuple[int, str, str]:
    """`desched validate` in process: (exit code, stdout, stderr with the path as policy.yaml)."""
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(main, ["validate", "--policy", str(path)])
    return result.exit_code, result.stdout, result.stderr.replace(str(path), "policy.yaml")


@pytest.mark.parametrize("base", [UPSTREAM, KOORD], ids=["upstream", "koordinator"])
@pytest.mark.parametrize(("moves", "error"), [
    ({"maxUnavailablePerWorkload": -1},
     "policy.yaml: moves.maxUnavailablePerWorkload: Invalid value: -1: must be at least 1 "
     "(leave it out for no pacing)"),
    ({"maxUnavailablePerWorkload": 0},
     "policy.yaml: moves.maxUnavailablePerWorkload: Invalid value: 0: must be at least 1 "
     "(leave it out for no pacing)"),
    ({"minDelayBetweenMoves": "-10s"},
     'policy.yaml: moves.minDelayBetweenMoves: Invalid value: "-10s": must not be negative'),
    ({"maxUnavailablePerWorkload": 1, "replacementTimeout": "-1m"},
     'policy.yaml: moves.replacementTimeout: Invalid value: "-1m": must not be negative'),
    ({"minDelayBetweenMoves": "10 seconds"},
     'time: unknown unit " seconds" in duration "10 seconds" - at '
     '`$.moves.minDelayBetweenMoves`'),
    ({"replacementTimeout": 600},
     "Expected `str | null`, got `int` - at `$.moves.replacementTimeout`"),
    ({"surgeFrist": True},
     'strict decoding error: unknown field "moves.surgeFrist" (did you mean "surgeFirst"?)'),
    ({"surgeFirst": "yes"}, "Expected `bool`, got `str` - at `$.moves.surgeFirst`"),
    ({"maxUnavailablePerWorkload": "1"},
     'Expected `int | null`, got `str` - at `$.moves.maxUnavailablePerWorkload`; write the '
     'number without quotes (1, not "1")'),
])
def test_invalid_moves_are_one_line_exit_2(tmp_path: Path, base: dict[str, Any],
                                           moves: dict[str, Any], error: str) -> None:
    code, out, err = validate_cli(tmp_path, {**base, "moves": moves})
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and err.rstrip().endswith(error)


def test_both_errors_of_one_block_are_told_together() -> None:
    assert validate(MovesArgs(max_unavailable_per_workload=0, min_delay_between_moves="-1s")) \
        == ["moves.maxUnavailablePerWorkload: Invalid value: 0: must be at least 1 (leave it "
            "out for no pacing)",
            'moves.minDelayBetweenMoves: Invalid value: "-1s": must not be negative']


@pytest.mark.parametrize(("moves", "said"), [
    ({}, ["moves: neither surgeFirst, maxUnavailablePerWorkload nor minDelayBetweenMoves is "
          "set, so every move stays a plain eviction"]),
    ({"surgeFirst": True, "replacementTimeout": "5m"},
     ["moves.replacementTimeout: nothing waits for a replacement without "
      "maxUnavailablePerWorkload; it has no effect"]),
    ({"surgeFirst": True, "maxUnavailablePerWorkload": 1, "replacementTimeout": "5m"}, []),
    ({"minDelayBetweenMoves": "0s"}, ["moves: neither surgeFirst, maxUnavailablePerWorkload "
                                      "nor minDelayBetweenMoves is set, so every move stays a "
                                      "plain eviction"]),
])
def test_settings_that_do_nothing_are_warned(moves: dict[str, Any], said: list[str]) -> None:
    import msgspec

    assert warnings(msgspec.convert(moves, MovesArgs)) == said


def test_a_valid_block_loads_in_both_formats(tmp_path: Path) -> None:
    moves = {"surgeFirst": True, "maxUnavailablePerWorkload": 1, "minDelayBetweenMoves": "10s",
             "replacementTimeout": "10m"}
    for base in (UPSTREAM, KOORD):
        path = tmp_path / "policy.yaml"
        path.write_text(yaml.safe_dump({**base, "moves": moves}))
        policy = load_policy(str(path), PLUGINS)
        assert policy.warnings == [] and policy.plans_moves
        assert policy.moves is not None
        assert (policy.moves.min_delay, policy.moves.timeout) == (10.0, 600.0)
        assert policy.moves.describe() == ("surge-first restarts, at most 1 unavailable pod(s) "
                                           "per workload, 10s between a workload's moves, "
                                           "replacements waited for 10m0s at most")


def test_no_block_means_no_moves(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(UPSTREAM))
    policy = load_policy(str(path), PLUGINS)
    assert policy.moves is None and not policy.plans_moves


@pytest.mark.parametrize("base", [UPSTREAM, KOORD], ids=["upstream", "koordinator"])
def test_convert_keeps_the_block(tmp_path: Path, base: dict[str, Any]) -> None:
    moves = {"surgeFirst": True, "maxUnavailablePerWorkload": 1}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({**base, "moves": moves}))
    converted = convert_policy(str(path), PLUGINS)
    assert converted.document["moves"] == moves
    again = tmp_path / "converted.yaml"
    again.write_text(yaml.safe_dump(converted.document))
    assert load_policy(str(again), PLUGINS).moves == load_policy(str(path), PLUGINS).moves


def test_migration_controller_profiles_pace_themselves(tmp_path: Path) -> None:
    doc = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration",
           "moves": {"maxUnavailablePerWorkload": 1},
           "profiles": [{"name": "koord", "plugins": {
               "deschedule": {"enabled": [{"name": "RemovePodsViolatingNodeTaints"}]}}}]}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert load_policy(str(path), PLUGINS).warnings == [
        f"{path}: moves: profile(s) koord evict through MigrationController, whose own limits "
        f"(maxMigratingPerWorkload, maxUnavailablePerWorkload) pace its PodMigrationJobs; "
        f"moves applies to the profiles that evict with DefaultEvictor"]

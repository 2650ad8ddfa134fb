"""Policies through the real CLI: `desched validate` on a policy document, for the tests of what
it refuses (one error line, exit 2) and accepts (ok, warnings on stderr)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from desched.commands.cli import main

UPSTREAM = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy"}
KOORD = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration"}
DECODE = "failed decoding descheduler's policy config"


def run_validate(tmp_path: Path, doc: dict[str, Any]) -> tuple[int, list[str], str]:
    """(exit code, stderr lines, stdout) of `desched validate` on `doc` written as YAML."""
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", "--policy", str(path)])
    return result.exit_code, result.stderr.splitlines(), result.stdout


def refused(tmp_path: Path, doc: dict[str, Any]) -> str:
    """The one stderr line of a policy `validate` refuses (exit 2, no traceback)."""
    code, lines, out = run_validate(tmp_path, doc)
    assert code == 2, (code, lines, out)
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0] and out == ""
    assert lines[0].startswith("error: ")
    return lines[0]


def accepted(tmp_path: Path, doc: dict[str, Any]) -> list[str]:
    """The warnings of a policy `validate` accepts."""
    code, lines, out = run_validate(tmp_path, doc)
    assert (code, out) == (0, "ok\n"), (code, lines)
    return lines


def upstream(plugins: dict[str, list[str]], *configs: dict[str, Any],
             **top: Any) -> dict[str, Any]:
    return {**UPSTREAM, **top, "profiles": [
        {"name": "p", "pluginConfig": list(configs),
         "plugins": {ep: {"enabled": names} for ep, names in plugins.items()}}]}


def koord(plugins: dict[str, list[Any]], *configs: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**KOORD, **top, "profiles": [
        {"name": "p", "pluginConfig": list(configs),
         "plugins": {ep: {"enabled": names} for ep, names in plugins.items()}}]}


PLT = {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}}
LNL_ARGS = {"highThresholds": {"cpu": 70}, "lowThresholds": {"cpu": 20}}
LNL = {"name": "LowNodeLoad", "args": LNL_ARGS}
LNU_ARGS = {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}}

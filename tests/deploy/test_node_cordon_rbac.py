"""`nodes patch` for CustomPriority's autoCordon (docs/custompriority.md): an optional piece of
the plain RBAC, and a ClusterRole the Helm chart renders only when the policy it renders enables
CustomPriority with mode DrainNode and autoCordon (also in a ConfigMap) or `rbac.nodeCordon`
asks for it; never without `rbac.create`."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from optional_rbac import check_granted, check_plain_piece, cluster_roles
from test_manifests import by_kind, helm_notes, rendered, template_rules

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "plugins" / "CustomPriority" / "policy.yaml"
CORDON_RULES = {("", "nodes"): {"patch"}}
ROLE = "desched-node-cordon"
POLICY: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())


def _with(change: dict[str, Any] | None = None, enabled: bool = True) -> str:
    policy = copy.deepcopy(POLICY)
    profile = policy["profiles"][0]
    profile["pluginConfig"][0]["args"].update(change or {})
    if not enabled:
        profile["plugins"]["balance"] = {"enabled": [{"name": "LowNodeLoad"}]}
    return yaml.safe_dump(policy)


def test_the_plain_piece_is_optional_and_grants_patch_only() -> None:
    check_plain_piece("node-cordon", ROLE, CORDON_RULES)


def test_the_chart_template_has_the_plain_rules() -> None:
    assert template_rules("node-cordon-rbac.yaml") == CORDON_RULES


@pytest.mark.parametrize(("policy", "granted"), [
    pytest.param(EXAMPLE.read_text(), True, id="example"),
    pytest.param(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "p"},
                                 "data": {"policy.yaml": _with()}}), True, id="configmap"),
    pytest.param(_with({"autoCordon": False}), False, id="no-auto-cordon"),
    pytest.param(_with({"mode": "BestEffort"}), False, id="best-effort"),
    pytest.param(_with(enabled=False), False, id="not-enabled"),
    pytest.param(None, False, id="chart-default"),
])
def test_helm_grants_nodes_patch_only_when_the_policy_cordons(
        tmp_path: Path, policy: str | None, granted: bool) -> None:
    check_granted(tmp_path, policy, granted, ROLE, CORDON_RULES,
                  f"ClusterRole {ROLE}: nodes patch")


def test_the_values_flag_grants_it_for_any_policy_and_rbac_create_false_for_none(
        tmp_path: Path) -> None:
    assert ROLE in cluster_roles(tmp_path, {"rbac": {"nodeCordon": True}})
    values = {"policyFile": EXAMPLE.read_text(), "rbac": {"create": False}}
    assert not by_kind(rendered(tmp_path, values), "ClusterRole")
    assert "grant nodes patch yourself" in helm_notes(values).replace("\n", " ")

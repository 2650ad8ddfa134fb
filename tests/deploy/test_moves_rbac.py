"""`deployments patch` for surge-first moves (docs/moves.md): an optional piece of the plain
RBAC, and a ClusterRole the Helm chart renders only when the policy it renders restarts
Deployments (`moves.surgeFirst: true`, in either format, also in a ConfigMap) or
`rbac.deploymentRestart` asks for it; never without `rbac.create`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from test_manifests import (
    RBAC,
    by_kind,
    check_bound,
    helm_notes,
    rbac_objects,
    rendered,
    rules_of,
    template_rules,
)

REPO = Path(__file__).resolve().parents[2]
RESTART_RULES = {("apps", "deployments"): {"patch"}}
UPSTREAM = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": "default",
                          "pluginConfig": [{"name": "RemovePodsViolatingNodeTaints"}],
                          "plugins": {"deschedule": {
                              "enabled": ["RemovePodsViolatingNodeTaints"]}}}]}
KOORD = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration",
         "profiles": [{"name": "p", "plugins": {
             "deschedule": {"enabled": [{"name": "RemovePodsViolatingNodeTaints"}]},
             "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
             "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}}}]}


def test_the_plain_piece_is_optional_and_grants_patch_only() -> None:
    role = check_bound(rbac_objects("deployment-restart"), "ClusterRole", "ClusterRoleBinding")
    assert role["metadata"]["name"] == "desched-deployment-restart"
    assert rules_of(role) == RESTART_RULES
    base = yaml.safe_load((RBAC / "kustomization.yaml").read_text())
    assert not any("deployment-restart" in r for r in base["resources"])


def test_the_chart_template_has_the_plain_rules() -> None:
    assert template_rules("deployment-restart-rbac.yaml") == RESTART_RULES


def _roles(tmp_path: Path, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in by_kind(rendered(tmp_path, values), "ClusterRole")}


def _policy(base: dict[str, Any], moves: dict[str, Any] | None) -> str:
    return yaml.safe_dump({**base, **({"moves": moves} if moves is not None else {})})


@pytest.mark.parametrize(("policy", "granted"), [
    pytest.param(_policy(UPSTREAM, {"surgeFirst": True}), True, id="upstream-surge-first"),
    pytest.param(_policy(KOORD, {"surgeFirst": True, "maxUnavailablePerWorkload": 1}), True,
                 id="koordinator-surge-first"),
    pytest.param(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "p"},
                                 "data": {"policy.yaml": _policy(UPSTREAM,
                                                                 {"surgeFirst": True})}}),
                 True, id="configmap"),
    pytest.param((REPO / "examples" / "zero-downtime" / "policy.yaml").read_text(), True,
                 id="example"),
    pytest.param(_policy(UPSTREAM, {"maxUnavailablePerWorkload": 1}), False, id="paced-only"),
    pytest.param(_policy(UPSTREAM, {"surgeFirst": False}), False, id="surge-first-off"),
    pytest.param(_policy(UPSTREAM, None), False, id="no-moves"),
    pytest.param(None, False, id="chart-default"),
])
def test_helm_grants_deployments_patch_only_when_the_policy_restarts(
        tmp_path: Path, policy: str | None, granted: bool) -> None:
    values: dict[str, Any] = {"kind": "Deployment"}
    if policy is not None:
        values["policyFile"] = policy
    roles = _roles(tmp_path, values)
    assert ("desched-deployment-restart" in roles) is granted
    if granted:
        assert rules_of(roles["desched-deployment-restart"]) == RESTART_RULES
        assert "ClusterRole desched-deployment-restart: deployments patch" in \
            helm_notes(values).replace("\n", " ")
    assert not any(rules_of(r).get(("apps", "deployments"), set()) - {"get", "list", "watch"}
                   for name, r in roles.items() if name != "desched-deployment-restart")


def test_the_values_flag_grants_it_for_any_policy_and_rbac_create_false_for_none(
        tmp_path: Path) -> None:
    assert "desched-deployment-restart" in _roles(tmp_path, {"rbac": {"deploymentRestart": True}})
    surge = _policy(UPSTREAM, {"surgeFirst": True})
    docs = rendered(tmp_path, {"policyFile": surge, "rbac": {"create": False}})
    assert not by_kind(docs, "ClusterRole")
    assert "grant deployments patch yourself" in helm_notes(
        {"policyFile": surge, "rbac": {"create": False}}).replace("\n", " ")

"""`deployments patch` for surge-first moves (docs/moves.md): an optional piece of the plain
RBAC, and a ClusterRole the Helm chart renders only when the policy it renders restarts
Deployments (`moves.surgeFirst: true`, in either format, also in a ConfigMap) or
`rbac.deploymentRestart` asks for it; never without `rbac.create`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from optional_rbac import check_granted, check_plain_piece, cluster_roles
from test_manifests import by_kind, helm_notes, rendered, template_rules

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
    check_plain_piece("deployment-restart", "desched-deployment-restart", RESTART_RULES)


def test_the_chart_template_has_the_plain_rules() -> None:
    assert template_rules("deployment-restart-rbac.yaml") == RESTART_RULES


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
    check_granted(tmp_path, policy, granted, "desched-deployment-restart", RESTART_RULES,
                  "ClusterRole desched-deployment-restart: deployments patch")


def test_the_values_flag_grants_it_for_any_policy_and_rbac_create_false_for_none(
        tmp_path: Path) -> None:
    assert "desched-deployment-restart" in cluster_roles(
        tmp_path, {"rbac": {"deploymentRestart": True}})
    surge = _policy(UPSTREAM, {"surgeFirst": True})
    docs = rendered(tmp_path, {"policyFile": surge, "rbac": {"create": False}})
    assert not by_kind(docs, "ClusterRole")
    assert "grant deployments patch yourself" in helm_notes(
        {"policyFile": surge, "rbac": {"create": False}}).replace("\n", " ")

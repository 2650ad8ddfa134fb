"""The checks an optional patch grant gets (tests/deploy/test_moves_rbac.py's deployments patch,
test_node_cordon_rbac.py's nodes patch): a piece of the plain RBAC left out of its
kustomization, and a ClusterRole the Helm chart renders only when asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from test_manifests import (
    RBAC,
    by_kind,
    check_bound,
    helm_notes,
    rbac_objects,
    rendered,
    rules_of,
)

Rules = dict[tuple[str, str], set[str]]
READ = frozenset(("get", "list", "watch"))


def check_plain_piece(piece: str, role: str, rules: Rules) -> None:
    """deploy/rbac/<piece>: a bound ClusterRole `role` granting `rules`, not in the base."""
    cluster_role = check_bound(rbac_objects(piece), "ClusterRole", "ClusterRoleBinding")
    assert cluster_role["metadata"]["name"] == role
    assert rules_of(cluster_role) == rules
    base = yaml.safe_load((RBAC / "kustomization.yaml").read_text())
    assert not any(piece in r for r in base["resources"])


def cluster_roles(tmp_path: Path, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The chart's ClusterRoles rendered with `values`, by name."""
    return {r["metadata"]["name"]: r for r in by_kind(rendered(tmp_path, values), "ClusterRole")}


def check_granted(tmp_path: Path, policy: str | None, granted: bool, role: str,
                  rules: Rules, note: str) -> None:
    """The chart (kind Deployment, `policy` as its policyFile) renders `role` with `rules` and
    says `note` in NOTES exactly when `granted`; no other ClusterRole writes what `rules`
    name."""
    values: dict[str, Any] = {"kind": "Deployment"}
    if policy is not None:
        values["policyFile"] = policy
    roles = cluster_roles(tmp_path, values)
    assert (role in roles) is granted
    if granted:
        assert rules_of(roles[role]) == rules
        assert note in helm_notes(values).replace("\n", " ")
    for resource in rules:
        assert not any(rules_of(r).get(resource, set()) - READ
                       for name, r in roles.items() if name != role)

"""CustomPriorityArgs: decoding, Koordinator's defaults and the checks made when the plugin is
built (Koordinator's Test_validateCustomPriorityArgs and Test_filterPods' invalid selector,
then its config API's validator), and the warnings."""

from __future__ import annotations

from typing import Any

import pytest

from builders import args
from desched.plugins.custompriority.args import (
    BEST_EFFORT,
    CustomPriorityArgs,
    build_tiers,
    check,
    default,
    warnings,
)
from desched.policy_files.decoding import DecodingError


def tier(name: str, key: str = "tier", value: str | None = None, **kw: Any) -> dict[str, Any]:
    return {"name": name, "nodeSelector": {"matchLabels": {key: value or name}}, **kw}


TWO = [tier("gold"), tier("silver")]


def decoded(raw: dict[str, Any]) -> CustomPriorityArgs:
    out: CustomPriorityArgs = args(CustomPriorityArgs, raw)
    default(out)
    return out


def test_defaults() -> None:
    """SetDefaults_CustomPriorityArgs: nodeFit true, mode BestEffort; the rest stays unset."""
    out = decoded({"evictionOrder": TWO})
    assert out.node_fit is True
    assert out.mode == BEST_EFFORT
    assert out.paused is None and out.dry_run is None and out.auto_cordon is None
    kept = decoded({"evictionOrder": TWO, "nodeFit": False, "mode": "DrainNode"})
    assert kept.node_fit is False and kept.mode == "DrainNode"


def test_every_field_decodes() -> None:
    out = decoded({
        "paused": True, "dryRun": True, "evictableNamespaces": {"exclude": ["kube-system"]},
        "nodeSelector": {"matchLabels": {"pool": "a"}},
        "podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}],
        "nodeFit": False, "mode": "DrainNode", "autoCordon": True,
        "evictionOrder": [tier("gold", keepThreshold={"cpu": 50}),
                          tier("silver", rejectThreshold={"cpu": 80, "memory": 75.5})]})
    assert out.paused and out.dry_run and out.auto_cordon
    gold, silver = build_tiers(out)
    assert gold.keep == {"cpu": 50} and gold.reject == {}
    assert silver.reject == {"cpu": 80, "memory": 75.5}
    assert silver.selector_text == "tier=silver"


def test_unknown_field_is_refused() -> None:
    """Strict decoding, as Koordinator's codec."""
    with pytest.raises(DecodingError, match="keepThresholds"):
        args(CustomPriorityArgs, {"evictionOrder": [tier("gold", keepThresholds={})]})


# Koordinator's Test_validateCustomPriorityArgs, then the cases desched adds.
@pytest.mark.parametrize(("raw", "error"), [
    ({"evictionOrder": None}, "CustomPriority requires at least 2 resource priority levels"),
    ({"evictionOrder": [tier("p1", "a", "1"), tier("p1", "b", "2")]},
     "duplicate priority name: p1"),
    ({"evictionOrder": [tier("p1", "a", "1"), {"name": "p2"}]},
     "priority p2 must have a nodeSelector"),
    ({"evictionOrder": [tier("p1", "a", "1"), tier("p2", "b", "2")]}, None),
    # desched's
    ({"evictionOrder": [tier("gold")]},
     "CustomPriority requires at least 2 resource priority levels"),
    ({"evictionOrder": [tier("gold"), {"nodeSelector": {}}]}, "priority name cannot be empty"),
    ({"evictionOrder": TWO, "mode": "Drain"},
     "invalid mode: Drain, supported: BestEffort, DrainNode"),
    ({"evictionOrder": [tier("gold"), tier("silver", rejectThreshold={"cpu": 150})]},
     "priority[1].rejectThreshold is invalid: resource threshold for cpu must be between 0 "
     "and 100, got 150.000000"),
    ({"evictionOrder": [tier("gold", keepThreshold={"memory": -1}), tier("silver")]},
     "priority[0].keepThreshold is invalid: resource threshold for memory must be between 0 "
     "and 100, got -1.000000"),
    ({"evictionOrder": TWO, "podSelectors": [
        {"name": "bad", "selector": {"matchExpressions": [
            {"key": "app", "operator": "Invalid"}]}}]},
     "error initializing pod selector filter: invalid labelSelector bad, "),
    ({"evictionOrder": TWO, "podSelectors": [{"name": "none"}]}, None),
    ({"evictionOrder": TWO, "nodeSelector": {"matchExpressions": [
        {"key": "pool", "operator": "Invalid"}]}},
     'invalid nodeSelector: "Invalid" is not a valid label selector operator'),
    ({"evictionOrder": [tier("gold"), {"name": "any", "nodeSelector": {}}]}, None),
])
def test_check(raw: dict[str, Any], error: str | None) -> None:
    found = check(decoded(raw))
    if error is None:
        assert found is None
    else:
        assert found is not None and found.startswith(error), found


def test_a_tier_selector_that_does_not_compile_is_a_warning_not_an_error() -> None:
    """Koordinator skips such a tier at run time (Test_classifyNodesByPriority's "bad" tier);
    desched runs the same and says so."""
    raw = {"evictionOrder": [tier("gold"), tier("silver"), {"name": "bad", "nodeSelector": {
        "matchExpressions": [{"key": "tier", "operator": "Invalid"}]}}]}
    out = decoded(raw)
    assert check(out) is None
    bad = build_tiers(out)[2]
    assert bad.matcher is None and bad.problem
    [warning] = warnings(out)
    assert warning.startswith('evictionOrder tier "bad" has a nodeSelector that selects no node')


def test_auto_cordon_outside_drain_node_is_a_warning() -> None:
    assert warnings(decoded({"evictionOrder": TWO, "autoCordon": True})) == [
        "autoCordon applies to mode DrainNode only; mode BestEffort cordons nothing"]
    assert warnings(decoded({"evictionOrder": TWO, "autoCordon": True,
                             "mode": "DrainNode"})) == []

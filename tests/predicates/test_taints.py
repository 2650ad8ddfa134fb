from __future__ import annotations

from typing import Any

import pytest

from desched.model.node import Taint
from desched.model.pod import Toleration
from desched.predicates.taints import (
    SCHEDULING_EFFECTS,
    first_untolerated,
    tolerates,
    tolerates_taint,
)

NS = {"key": "k", "value": "v", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        # Equal (explicit and the empty default) compares key, value and effect.
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, NS, True),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, NS, True),
        ({"key": "k", "operator": "Equal", "value": "w", "effect": "NoSchedule"}, NS, False),
        ({"key": "k", "operator": "Equal", "value": "v"},
         {"key": "k", "value": "", "effect": "NoSchedule"}, False),
        ({"key": "k", "operator": "Equal"}, {"key": "k", "effect": "NoSchedule"}, True),
        ({"key": "other", "operator": "Equal", "value": "v"}, NS, False),
        # Exists ignores the value.
        ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, NS, True),
        ({"key": "k", "operator": "Exists"}, {"key": "k", "value": "x", "effect": "NoExecute"},
         True),
        ({"key": "other", "operator": "Exists"}, NS, False),
        # The effect must match unless the toleration leaves it empty.
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, NS, False),
        ({"key": "k", "operator": "Exists", "effect": "PreferNoSchedule"},
         {"key": "k", "effect": "PreferNoSchedule"}, True),
        # Empty key with Exists tolerates everything (of the effect, if one is given).
        ({"operator": "Exists"}, NS, True),
        ({"operator": "Exists"}, {"key": "a", "value": "b", "effect": "NoExecute"}, True),
        ({"operator": "Exists", "effect": "NoExecute"}, NS, False),
        ({"operator": "Exists", "effect": "NoSchedule"}, NS, True),
        # Upstream code: an empty key is a wildcard even with Equal, and the values decide.
        ({"operator": "Equal", "value": "v"}, {"key": "any", "value": "v", "effect": "NoSchedule"},
         True),
        ({"operator": "Equal", "value": "v"}, {"key": "any", "value": "w", "effect": "NoSchedule"},
         False),
    ],
)
def test_tolerates(make: Any, toleration: dict[str, str], taint: dict[str, str],
                   expected: bool) -> None:
    assert tolerates(make(toleration, Toleration), make(taint, Taint)) is expected


def test_tolerates_taint_any(make: Any) -> None:
    taint = make(NS, Taint)
    wrong = make({"key": "k", "operator": "Equal", "value": "w"}, Toleration)
    right = make({"key": "k", "operator": "Exists"}, Toleration)
    assert tolerates_taint((), taint) is False
    assert tolerates_taint((wrong,), taint) is False
    assert tolerates_taint((wrong, right), taint) is True


def test_scheduling_effects() -> None:
    assert frozenset({"NoSchedule", "NoExecute"}) == SCHEDULING_EFFECTS


@pytest.mark.parametrize(
    ("effects", "tolerations", "expected_key"),
    [
        (SCHEDULING_EFFECTS, [], "ns"),
        (None, [], "pref"),
        (SCHEDULING_EFFECTS, [{"key": "ns", "operator": "Exists"}], "ne"),
        (None, [{"key": "pref", "operator": "Exists"}], "ns"),
        (SCHEDULING_EFFECTS, [{"key": "ns", "operator": "Exists"},
                              {"key": "ne", "value": "1", "effect": "NoExecute"}], None),
        (frozenset({"NoSchedule"}), [{"key": "ns", "operator": "Exists"}], None),
        (None, [{"operator": "Exists"}], None),
    ],
)
def test_first_untolerated(make: Any, effects: frozenset[str] | None,
                           tolerations: list[dict[str, Any]], expected_key: str | None) -> None:
    taints = tuple(make(t, Taint) for t in [
        {"key": "pref", "effect": "PreferNoSchedule"},
        {"key": "ns", "value": "x", "effect": "NoSchedule"},
        {"key": "ne", "value": "1", "effect": "NoExecute"},
    ])
    tols = tuple(make(t, Toleration) for t in tolerations)
    found = first_untolerated(taints, tols, effects)
    assert (found.key if found is not None else None) == expected_key


def test_first_untolerated_no_taints() -> None:
    assert first_untolerated((), (), None) is None

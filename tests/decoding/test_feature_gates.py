"""--feature-gates parsed as upstream v0.36.0 parses it (component-base's MapStringBool and
feature gate): the gates it knows, the global toggles, and its error lines."""

from __future__ import annotations

import pytest

from desched.decoding.feature_gates import (
    DISABLE_PVC_RESERVATION,
    EVICTIONS_IN_BACKGROUND,
    FeatureGates,
    known_features,
    parse_feature_gates,
)
from desched.errors import InputError


def test_upstreams_gates_with_their_defaults_and_maturity() -> None:
    assert known_features() == ["AllAlpha=true|false (ALPHA - default=false)",
                                "AllBeta=true|false (BETA - default=false)",
                                "DisablePVCReservation=true|false (BETA - default=false)",
                                "EvictionsInBackground=true|false (ALPHA - default=false)"]
    assert not parse_feature_gates([]).enabled(EVICTIONS_IN_BACKGROUND)
    assert parse_feature_gates([]) == FeatureGates()


@pytest.mark.parametrize(("values", "on"), [
    (["EvictionsInBackground=true"], True),
    (["EvictionsInBackground=T"], True),
    (["EvictionsInBackground=1,EvictionsInBackground=0"], False),  # a later pair wins
    (["EvictionsInBackground=true", "EvictionsInBackground=false"], False),  # repeated flag
    ([" EvictionsInBackground = true ,"], True),  # spaces trimmed, empty items skipped
    (["AllAlpha=true"], True),
    (["AllAlpha=true,EvictionsInBackground=false"], False),  # a named gate beats its toggle
    (["EvictionsInBackground=false,AllAlpha=true"], False),
    (["AllAlpha=false,EvictionsInBackground=true"], True),
    (["AllBeta=true,DisablePVCReservation=false"], False),  # EvictionsInBackground is alpha
    ([""], False),
])
def test_values(values: list[str], on: bool) -> None:
    gates = parse_feature_gates(values)
    assert gates.enabled(EVICTIONS_IN_BACKGROUND) is on
    assert gates.on == (frozenset({EVICTIONS_IN_BACKGROUND}) if on else frozenset())


@pytest.mark.parametrize(("values", "on"), [
    ([], False),
    (["DisablePVCReservation=true"], True),
    (["AllBeta=true"], True),  # Koordinator's gate is beta
    (["AllAlpha=true"], False),
    (["AllBeta=true,DisablePVCReservation=false"], False),
])
def test_koordinators_disable_pvc_reservation(values: list[str], on: bool) -> None:
    assert parse_feature_gates(values).enabled(DISABLE_PVC_RESERVATION) is on


@pytest.mark.parametrize(("value", "message"), [
    ("Foo=true", "--feature-gates: unrecognized feature gate: Foo"),
    ("EvictionsInBackground=true,evictionsinbackground=true",
     "--feature-gates: unrecognized feature gate: evictionsinbackground"),
    ("EvictionsInBackground", '--feature-gates: invalid argument "EvictionsInBackground" for '
                              '"--feature-gates" flag: malformed pair, expect string=bool'),
    ("EvictionsInBackground=yes",
     '--feature-gates: invalid argument "EvictionsInBackground=yes" for "--feature-gates" '
     'flag: invalid value of EvictionsInBackground: yes, err: strconv.ParseBool: parsing '
     '"yes": invalid syntax'),
])
def test_upstreams_errors(value: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_feature_gates([value])
    assert str(caught.value) == message


def test_asking_for_an_undefined_gate_is_a_bug() -> None:
    with pytest.raises(KeyError):
        FeatureGates().enabled("NoSuchGate")

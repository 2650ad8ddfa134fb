"""`--feature-gates`: upstream descheduler v0.36.0's gates, parsed as it parses them.

Upstream reads the flag with component-base's MapStringBool (comma-separated `Name=bool`
pairs; a repeated flag adds to the pairs before it) and applies the pairs to its own feature
gate, which knows `EvictionsInBackground` and component-base's two global toggles, `AllAlpha`
and `AllBeta` (they switch every alpha, resp. beta, gate that is not named itself). The error
lines are upstream's. What a gate changes is the business of the code that asks `enabled`.
Koordinator's koord-descheduler parses its flag the same way; its one descheduler gate,
`DisablePVCReservation`, is known too, so its Deployment's flags run unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from desched.errors import InputError

FLAG = "--feature-gates"
Maturity = Literal["ALPHA", "BETA", "GA", "DEPRECATED"]


@dataclass(frozen=True)
class Gate:
    default: bool
    maturity: Maturity


EVICTIONS_IN_BACKGROUND = "EvictionsInBackground"
DISABLE_PVC_RESERVATION = "DisablePVCReservation"
# Upstream v0.36.0's pkg/features, Koordinator v1.8.0's descheduler gate (pkg/features,
# defaultDeschedulerFeatureGates), plus component-base's toggles.
GATES: dict[str, Gate] = {
    "AllAlpha": Gate(False, "ALPHA"),
    "AllBeta": Gate(False, "BETA"),
    EVICTIONS_IN_BACKGROUND: Gate(False, "ALPHA"),
    DISABLE_PVC_RESERVATION: Gate(False, "BETA"),
}
_TOGGLES = {"AllAlpha": "ALPHA", "AllBeta": "BETA"}
# strconv.ParseBool's spellings.
_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_FALSE = frozenset(("0", "f", "F", "FALSE", "false", "False"))


def known_features() -> list[str]:
    """The lines upstream's --help lists the gates with."""
    return sorted(f"{name}=true|false ({gate.maturity} - default={str(gate.default).lower()})"
                  for name, gate in GATES.items())


def _pairs(value: str) -> dict[str, bool]:
    """One flag value's pairs (MapStringBool.Set); its errors as pflag reports them."""
    out: dict[str, bool] = {}
    for item in value.split(","):
        if not item:
            continue
        key, eq, raw = item.partition("=")
        if not eq:
            problem = "malformed pair, expect string=bool"
        else:
            key, raw = key.strip(), raw.strip()
            if raw in _TRUE or raw in _FALSE:
                out[key] = raw in _TRUE
                continue
            problem = (f"invalid value of {key}: {raw}, err: strconv.ParseBool: parsing "
                       f'"{raw}": invalid syntax')
        raise InputError(FLAG, f'invalid argument "{value}" for "{FLAG}" flag: {problem}')
    return out


@dataclass(frozen=True)
class FeatureGates:
    """The gates a run has on; `enabled(name)` for a gate this module knows."""

    on: frozenset[str] = frozenset()

    def enabled(self, name: str) -> bool:
        if name not in GATES:
            raise KeyError(f"feature gate {name!r} is not defined")
        return name in self.on


def parse_feature_gates(values: Iterable[str]) -> FeatureGates:
    """The gates after every --feature-gates value, in order (a later pair wins). An unknown
    gate or a value that is not a Go bool is an InputError naming the flag."""
    given: dict[str, bool] = {}
    for value in values:
        given.update(_pairs(value))
    for name in given:
        if name not in GATES:
            raise InputError(FLAG, f"unrecognized feature gate: {name}")
    state = {name: gate.default for name, gate in GATES.items() if name not in _TOGGLES}
    for toggle, maturity in _TOGGLES.items():
        if toggle in given:  # a toggle switches the gates of its maturity not named themselves
            for name in state:
                if GATES[name].maturity == maturity and name not in given:
                    state[name] = given[toggle]
    state.update({name: on for name, on in given.items() if name not in _TOGGLES})
    return FeatureGates(frozenset(name for name, on in state.items() if on))

"""Kubernetes resource quantities, parsed exactly as apimachinery's resource.Quantity does.

A quantity is `<sign><number><suffix>` where the suffix is a binary SI suffix (Ki..Ei), a decimal SI
suffix (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2). Values finer than nano are
rounded up to 1n on parse; `Value()` and `MilliValue()` round away from zero, like apimachinery.
Parsed values are cached: a cluster repeats the same few hundred strings millions of times.
"""

from __future__ import annotations

import re
from fractions import Fraction

from desched.util.memo import remember

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# <sign><digits>[.<digits>] or <sign>.<digits>, then the suffix.
_QUANTITY = re.compile(
    r"^([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)"
    r"(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_NANO = Fraction(1, 10**9)


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""


def _round_away(value: Fraction) -> int:
    """Round to an integer away from zero, as apimachinery's AsScale does."""
    if value.denominator == 1:
        return value.numerator
    if value > 0:
        return -(-value.numerator // value.denominator)
    return -_round_away(-value)


def _parse(text: str) -> Fraction:
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"quantities must match the regular expression "
                            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}")
    sign, number, suffix = match.groups()
    suffix = suffix or ""
    value = Fraction(number)
    if suffix in _BINARY:
        value *= _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > 1000:
            raise QuantityError(f"quantity exponent out of range: {text!r}")
        value *= Fraction(10) ** exponent
    # apimachinery keeps at most nano precision and rounds a finer remainder up.
    if (value / _NANO).denominator != 1:
        value = Fraction(_round_away(value / _NANO), 10**9)
    return -value if sign == "-" else value


# Bounded below memo's default: usage figures are new at every scrape (a 150k-pod cluster brings
# ~300k), while the quantities that repeat (requests, capacities) are a few hundred, quickly
# parsed again after the tables are emptied.
CACHE_LIMIT = 50_000
_cache: dict[str, Fraction] = {}
_milli_cache: dict[str, int] = {}
_value_cache: dict[str, int] = {}


def parse_quantity(text: str | int | float) -> Fraction:
    """The exact value of a quantity (a JSON number is accepted as its decimal string)."""
    if not isinstance(text, str):
        text = repr(text) if isinstance(text, float) else str(text)
    cached = _cache.get(text)
    if cached is None:
        cached = remember(_cache, text, _parse(text), CACHE_LIMIT)
    return cached


def milli_value(text: str | int | float) -> int:
    """Like Quantity.MilliValue(): thousandths, rounded away from zero (CPU in millicores)."""
    key = text if isinstance(text, str) else str(text)
    cached = _milli_cache.get(key)
    if cached is None:
        cached = remember(_milli_cache, key, _round_away(parse_quantity(text) * 1000), CACHE_LIMIT)
    return cached


def value(text: str | int | float) -> int:
    """Like Quantity.Value(): the integer value, rounded away from zero (bytes, counts)."""
    key = text if isinstance(text, str) else str(text)
    cached = _value_cache.get(key)
    if cached is None:
        cached = remember(_value_cache, key, _round_away(parse_quantity(text)), CACHE_LIMIT)
    return cached


def resource_amount(resource: str, text: str | int | float) -> int:
    """The integer desched keeps for a resource: millicores for cpu, Value() for everything else."""
    return milli_value(text) if resource == "cpu" else value(text)


def format_amount(resource: str, amount: int) -> str:
    """A short human form of an amount kept by resource_amount (for explanations)."""
    if resource == "cpu":
        return f"{amount}m"
    if resource in ("memory", "ephemeral-storage") and amount >= 2**20 and amount % 2**20 == 0:
        return f"{amount // 2**20}Mi"
    return str(amount)

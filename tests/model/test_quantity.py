"""Quantity parsing against the Kubernetes rules (apimachinery resource.Quantity)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from desched.model.quantity import (
    QuantityError,
    milli_value,
    parse_quantity,
    resource_amount,
    value,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("0", Fraction(0)),
    ("1", Fraction(1)),
    ("100m", Fraction(1, 10)),
    ("1.5", Fraction(3, 2)),
    ("1.5Gi", Fraction(3 * 2**29)),
    ("1Ki", Fraction(1024)),
    ("1Mi", Fraction(2**20)),
    ("1Ei", Fraction(2**60)),
    ("1k", Fraction(1000)),
    ("1M", Fraction(10**6)),
    ("1G", Fraction(10**9)),
    ("1T", Fraction(10**12)),
    ("1P", Fraction(10**15)),
    ("1E", Fraction(10**18)),        # "E" alone is exa, not an exponent
    ("2e3", Fraction(2000)),
    ("2E3", Fraction(2000)),
    ("1e-3", Fraction(1, 1000)),
    ("1.5e+2", Fraction(150)),
    ("5n", Fraction(5, 10**9)),
    ("5u", Fraction(5, 10**6)),
    (".5", Fraction(1, 2)),           # leading dot
    ("5.", Fraction(5)),              # trailing dot
    ("+1", Fraction(1)),
    ("-1", Fraction(-1)),
    ("-100m", Fraction(-1, 10)),
    ("0.0000000001", Fraction(1, 10**9)),   # finer than nano rounds up to 1n
    ("1.0000000001", Fraction(1_000_000_001, 10**9)),
])
def test_parse(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "1.5.5", "abc", "1 Gi", "1Gb", "1i", "e3", "1e", "--1",
                                  "1KI", "Mi", "0x10", " 1"])
def test_invalid(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(("text", "milli", "val"), [
    ("100m", 100, 1),          # Value() rounds 0.1 up to 1
    ("1", 1000, 1),
    ("1.5", 1500, 2),
    ("0.1m", 1, 1),            # MilliValue() rounds 0.1m up to 1m
    ("250m", 250, 1),
    ("2", 2000, 2),
    ("128Mi", 128 * 2**20 * 1000, 128 * 2**20),
    ("-1.5", -1500, -2),       # away from zero for negatives
    ("-0.1m", -1, -1),
    ("0", 0, 0),
])
def test_milli_and_value_round_away_from_zero(text: str, milli: int, val: int) -> None:
    assert milli_value(text) == milli
    assert value(text) == val


def test_resource_amount_units() -> None:
    assert resource_amount("cpu", "1.5") == 1500
    assert resource_amount("memory", "1Gi") == 2**30
    assert resource_amount("pods", "110") == 110
    assert resource_amount("nvidia.com/gpu", "2") == 2
    assert resource_amount("cpu", 2) == 2000  # a YAML number
    assert resource_amount("memory", 0.5) == 1


@given(st.integers(min_value=0, max_value=10**12))
def test_integers_roundtrip(n: int) -> None:
    assert value(str(n)) == n
    assert milli_value(f"{n}m") == n


@given(st.integers(min_value=0, max_value=2**20), st.sampled_from(["Ki", "Mi", "Gi"]))
def test_binary_suffixes(n: int, suffix: str) -> None:
    factor = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}[suffix]
    assert value(f"{n}{suffix}") == n * factor


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=-6, max_value=6))
def test_exponent_matches_decimal(n: int, exp: int) -> None:
    assert parse_quantity(f"{n}e{exp}") == Fraction(n) * Fraction(10) ** exp

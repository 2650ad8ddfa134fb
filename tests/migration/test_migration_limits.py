"""maxMigrating / maxUnavailable rounding (docs/migration.md)."""

from __future__ import annotations

import pytest

from desched.migration.limits import (
    IntOrPercent,
    IntOrStringError,
    get_max_migrating,
    get_max_unavailable,
    int_or_percent_error,
    scaled_value,
)

# ---------------------------------------------------------------------------------------------
# Rounding
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("replicas", "value", "expected"), [
    # util_test.go's vectors.
    (6, "80%", 4),
    (6, "150%", 6),
    (6, 5, 5),
    (6, 7, 6),
    (6, None, 2),
    (50, "0%", 1),
    (6, 0, 1),  # an empty IntOrString is the int 0
    # The ladder when unset: 10% above 10 replicas (rounded down), 2 from 4 to 10, else 1.
    (0, None, 0),
    (1, None, 1),
    (3, None, 1),
    (4, None, 2),
    (10, None, 2),
    (11, None, 1),
    (19, None, 1),
    (20, None, 2),
    (105, None, 10),
    # A configured value rounds down, and a result of 0 becomes 1.
    (5, "1%", 1),
    (100, "10%", 10),
    (19, "10%", 1),
    (3, "50%", 1),
    (4, "50%", 2),
    (2, "100%", 2),
    (0, 3, 0),  # never more than the replicas
])
def test_get_max_unavailable(replicas: int, value: IntOrPercent | None, expected: int) -> None:
    assert get_max_unavailable(replicas, value) == expected
    assert get_max_migrating(replicas, value) == expected


@pytest.mark.parametrize(("value", "total", "up", "expected"), [
    (5, 10, False, 5),
    ("25%", 10, False, 2),
    ("25%", 10, True, 3),
    ("100%", 7, False, 7),
    ("-10%", 10, False, -1),
    ("+10%", 10, False, 1),
])
def test_scaled_value(value: IntOrPercent, total: int, up: bool, expected: int) -> None:
    assert scaled_value(value, total, up) == expected


@pytest.mark.parametrize(("value", "error"), [
    ("5", "invalid value for IntOrString: invalid type: string is not a percentage"),
    ("abc", "invalid value for IntOrString: invalid type: string is not a percentage"),
    ("a%", 'invalid value for IntOrString: invalid value "a%": strconv.Atoi: parsing "a": '
           "invalid syntax"),
    ("%", 'invalid value for IntOrString: invalid value "%": strconv.Atoi: parsing "": '
          "invalid syntax"),
    ("1.5%", 'invalid value for IntOrString: invalid value "1.5%": strconv.Atoi: parsing '
             '"1.5": invalid syntax'),
    ("10%", None),
    (3, None),
    (-3, None),
])
def test_int_or_percent_error(value: IntOrPercent, error: str | None) -> None:
    assert int_or_percent_error(value) == error


def test_an_invalid_value_raises() -> None:
    with pytest.raises(IntOrStringError):
        get_max_unavailable(6, "x")

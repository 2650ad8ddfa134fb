"""Per-workload migration limits (docs/migration.md): the maxMigrating /
maxUnavailable rounding of IntOrString values. The workloads they count against are resolved by
snapshot/workloads.py."""

from __future__ import annotations

import re

IntOrPercent = int | str

_GO_INT = re.compile(r"[+-]?[0-9]+")


class IntOrStringError(ValueError):
    """An IntOrString that intstr.GetScaledValueFromIntOrPercent refuses (Go's message)."""


def _parse(value: IntOrPercent) -> tuple[int, bool]:
    """(number, is_percent), as intstr's getIntOrPercentValueSafely reads it."""
    if isinstance(value, int):
        return value, False
    if not value.endswith("%"):
        raise IntOrStringError("invalid type: string is not a percentage")
    digits = value[:-1]
    if _GO_INT.fullmatch(digits) is None:
        raise IntOrStringError(
            f'invalid value "{value}": strconv.Atoi: parsing "{digits}": invalid syntax')
    return int(digits), True


def scaled_value(value: IntOrPercent, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int as is, "p%" as p% of total rounded down
    (or up)."""
    number, percent = _parse(value)
    if not percent:
        return number
    product = number * total
    return -(-product // 100) if round_up else product // 100


def int_or_percent_error(value: IntOrPercent) -> str | None:
    """Why the value does not parse (the validator's check: scaled against 100), or None."""
    try:
        _parse(value)
    except IntOrStringError as err:
        return f"invalid value for IntOrString: {err}"
    return None


def get_max_unavailable(replicas: int, value: IntOrPercent | None) -> int:
    """util.GetMaxUnavailable. A configured value is scaled rounding down, and a result of
    0 becomes 1 (so an explicit 0 or "0%" means 1, not "off"). Unset, the ladder applies: 10% of
    the replicas above 10, 2 from 4 to 10, else 1. Never more than the replicas."""
    limit = 0
    if value is not None:
        limit = scaled_value(value, replicas, round_up=False)
        if limit == 0:
            limit = 1
    if limit == 0:
        if replicas > 10:
            limit = replicas * 10 // 100
        elif 4 <= replicas <= 10:
            limit = 2
        else:
            limit = 1
    return min(limit, replicas)


# Koordinator's GetMaxMigrating is the same function.
get_max_migrating = get_max_unavailable

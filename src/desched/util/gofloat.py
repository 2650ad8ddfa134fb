"""Go's %v of a float64, for validation messages that quote a value as Go prints it."""

from __future__ import annotations

import decimal


def go_float(value: float) -> str:
    """A float64 as Go's %v prints it (shortest digits; exponent form below 1e-4 or from 1e6)."""
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[repr(value)]
    if value == 0:
        return "0"
    d = decimal.Decimal(repr(value))
    sign, digits, exponent = d.normalize().as_tuple()
    assert isinstance(exponent, int)
    point = len(digits) + exponent  # position of the decimal point from the first digit
    text = "".join(map(str, digits))
    minus = "-" if sign else ""
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{minus}{text}{'0' * (point - len(text))}"
    return f"{minus}{text[:point]}.{text[point:]}"

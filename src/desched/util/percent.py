"""Percentages as desched's messages and reports print them."""

from __future__ import annotations


def fmt_pct(value: float) -> str:
    """A percentage with at most two decimals and no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text

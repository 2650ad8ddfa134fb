"""Go time.Duration text ("1h30m", "300ms", "5m0s", "1.5h"), as metav1.Duration accepts it: one
parser, time.ParseDuration's grammar and messages exactly, for every duration a policy holds."""

from __future__ import annotations

from typing import Annotated

import msgspec

# Nanoseconds per unit; both spellings of micro (U+00B5 and U+03BC), as Go's unitMap.
_UNITS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000,
          "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}
_MAX_NS = 2**63 - 1
MAX_SECONDS = _MAX_NS / 1e9
_DIGITS = "0123456789"  # ASCII only: Go compares bytes, so other scripts' digits are no digits


class DurationError(ValueError):
    pass


# A policy field holding Go duration text (metav1.Duration). The policy decoder parses every
# field so marked when it decodes the file, so no later reader meets an invalid one.
DURATION = {"go": "metav1.Duration"}
Duration = Annotated[str, msgspec.Meta(extra=DURATION)]


def go_quote(text: str) -> str:
    """The time package's quote: double quotes, `"` and `\\` escaped, every byte of a non-ASCII
    or control character as \\xNN."""
    out = ['"']
    for char in text:
        if ord(char) >= 0x80 or char < " ":
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        elif char in '"\\':
            out.append("\\" + char)
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _leading_digits(s: str) -> int:
    i = 0
    while i < len(s) and s[i] in _DIGITS:
        i += 1
    return i


def parse_duration_ns(text: str) -> int:
    """time.ParseDuration: [-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+ in nanoseconds, "0" alone needing no
    unit; DurationError with Go's message."""
    invalid = DurationError(f"time: invalid duration {go_quote(text)}")
    s, neg = text, False
    if s and s[0] in "+-":
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    total = 0
    while s:
        if s[0] != "." and s[0] not in _DIGITS:
            raise invalid
        n = _leading_digits(s)
        whole_text, s = s[:n], s[n:]
        if int(whole_text or "0") > 2**63:  # leadingInt's overflow
            raise invalid
        frac_text = ""
        if s.startswith("."):
            s = s[1:]
            n = _leading_digits(s)
            frac_text, s = s[:n], s[n:]
        if not whole_text and not frac_text:  # ".s", "-.s"
            raise invalid
        n = 0
        while n < len(s) and s[n] != "." and s[n] not in _DIGITS:
            n += 1
        if n == 0:
            raise DurationError(f"time: missing unit in duration {go_quote(text)}")
        unit_text, s = s[:n], s[n:]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise DurationError(f"time: unknown unit {go_quote(unit_text)} in duration "
                                f"{go_quote(text)}")
        value = int(whole_text or "0")
        if value > 2**63 // unit:
            raise invalid
        value *= unit
        fraction, scale = _fraction(frac_text)
        if fraction > 0:
            # Go adds the fraction through a float64, truncating: kept for equal results.
            value += int(float(fraction) * (float(unit) / scale))
            if value > 2**63:
                raise invalid
        total += value
        if total > 2**63:
            raise invalid
    if neg:
        return -total
    if total > _MAX_NS:
        raise invalid
    return total


def _fraction(digits: str) -> tuple[int, float]:
    """leadingFraction: the digits as an integer and its scale, ignoring digits that would
    overflow (they cannot change a nanosecond result)."""
    value, scale = 0, 1.0
    for char in digits:
        if value > (2**63 - 1) // 10:
            break
        nxt = value * 10 + int(char)
        if nxt > 2**63:
            break
        value, scale = nxt, scale * 10
    return value, scale


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string; raises DurationError with Go's message."""
    return parse_duration_ns(text) / 1e9


def format_duration(seconds: float) -> str:
    """A Go-style rendering (72h0m0s, 1m30s, 500ms)."""
    if seconds == 0:
        return "0s"
    if abs(seconds) < 1:
        return f"{seconds * 1000:g}ms"
    sign = "-" if seconds < 0 else ""
    rest = abs(seconds)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{sign}{int(hours)}h{int(minutes)}m{secs:g}s"
    if minutes:
        return f"{sign}{int(minutes)}m{secs:g}s"
    return f"{sign}{secs:g}s"


def human_duration(seconds: float) -> str:
    """A reading aid beside raw seconds: the two largest units, e.g. 21d10h, 2h5m, 4m12s."""
    rest = int(abs(seconds))
    sign = "-" if seconds < 0 else ""
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        value, rest = divmod(rest, size)
        if value or parts:
            parts.append(f"{value}{unit}")
        if len(parts) == 2:
            break
    while len(parts) > 1 and parts[-1].startswith("0"):
        parts.pop()  # 7d rather than 7d0h
    return sign + ("".join(parts) or "0s")

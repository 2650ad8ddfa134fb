"""Go time.Duration text ("1h30m", "300ms", "5m0s", "1.5h"), as metav1.Duration accepts it."""

from __future__ import annotations

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
          "h": 3600.0}
MAX_SECONDS = (2**63 - 1) / 1e9
_PART = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string; raises DurationError with Go's message."""
    s = text.strip()
    if s in ("0", "+0", "-0"):
        return 0.0
    sign = -1.0 if s.startswith("-") else 1.0
    body = s.lstrip("+-")
    if not body:
        raise DurationError(f'time: invalid duration "{text}"')
    total, pos = 0.0, 0
    while pos < len(body):
        match = _PART.match(body, pos)
        if match is None:
            if re.match(r"[0-9]+\.?[0-9]*$", body[pos:]):
                raise DurationError(f'time: missing unit in duration "{text}"')
            raise DurationError(f'time: invalid duration "{text}"')
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if total > MAX_SECONDS:  # Go's Duration is an int64 of nanoseconds
        raise DurationError(f'time: invalid duration "{text}"')
    return sign * total


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

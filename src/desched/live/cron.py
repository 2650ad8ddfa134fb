"""`--cron`'s fire times in a time zone: `CRON_TZ=Europe/Berlin 0 3 * * *` (robfig/cron's
prefix, also `TZ=`) or `--cron-timezone Europe/Berlin`; UTC without either, as before.

The expression is read in the zone's wall time; where daylight saving time moves the clocks:
- a time the clocks skip (02:30 when Berlin goes from 02:00 CET to 03:00 CEST) fires as much
  later as the clocks jumped (03:30 CEST), as Go's time.Date and Python's fold=0 read it, so a
  daily schedule does not lose its day (robfig/cron, and so a CronJob, skip it);
- a time the clocks repeat (02:30 when Berlin goes back from 03:00 CEST to 02:00 CET) fires
  once, at its first occurrence, for a fixed time of day; a schedule with `*` in its minute or
  hour field (every 10 minutes, hourly) fires in both occurrences, keeping its pace, as ISC
  cron tells its "wildcard" jobs apart.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from desched.errors import InputError

PREFIXES = ("CRON_TZ=", "TZ=")
# Wider than any daylight saving shift: how far a wall time's instant can sit from its place.
_SLACK = timedelta(hours=3)
_MACRO_HOURS = {"@hourly": "*"}  # the other macros (@daily, @weekly, ...) fire at hour 0


def split_zone(text: str) -> tuple[str | None, str]:
    """(the zone a `CRON_TZ=` or `TZ=` prefix names, or None; the expression after it)."""
    stripped = text.strip()
    for prefix in PREFIXES:
        if stripped.startswith(prefix):
            zone, _, expr = stripped[len(prefix):].partition(" ")
            return zone, expr
    return None, stripped


def zone_named(name: str, flag: str) -> tzinfo:
    """The IANA zone `name` (UTC for "UTC"); one line naming `flag` otherwise."""
    if name in ("UTC", "Etc/UTC"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(flag, f"unknown time zone {name!r}: give an IANA name such as "
                               f"Europe/Berlin or America/New_York") from None


def zone_name(zone: tzinfo) -> str:
    return "UTC" if zone is UTC else str(zone)


def _wildcard(expr: str) -> bool:
    """ISC cron's "wildcard" job: `*` (or `*/N`) in the minute or the hour field."""
    fields = expr.split()
    if len(fields) == 1:
        return _MACRO_HOURS.get(fields[0].lower()) == "*"
    return fields[0].startswith("*") or fields[1].startswith("*")


def _instants(wall: datetime, zone: tzinfo, both: bool) -> list[datetime]:
    """The instants (UTC) a fire at wall time `wall` stands for in `zone`."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if first == second:
        return [first]
    if first.astimezone(zone).replace(tzinfo=None) == wall:  # repeated: both exist
        return [first, second] if both else [first]
    return [max(first, second)]  # skipped: with the offset before the jump, as much later


def next_fire(expr: str, zone: tzinfo, after: datetime) -> datetime:
    """The first fire time of `expr` in `zone` strictly after the instant `after`, in UTC."""
    if zone is UTC:
        fire: datetime = croniter(expr, after.astimezone(UTC)).get_next(datetime)
        return fire
    both = _wildcard(expr)
    wall = after.astimezone(zone).replace(tzinfo=None)
    # Wall times a little before `after`'s may stand for later instants (a skipped time).
    walls = croniter(expr, wall - _SLACK)
    best: datetime | None = None
    best_wall = wall
    while True:
        candidate: datetime = walls.get_next(datetime)
        if best is not None and candidate > best_wall + _SLACK:
            return best
        for instant in _instants(candidate, zone, both):
            if instant > after and (best is None or instant < best):
                best, best_wall = instant, candidate

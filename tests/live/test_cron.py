"""`--cron` in a time zone (live/cron.py): the `CRON_TZ=` prefix and --cron-timezone, and the
fire times across Europe/Berlin's and America/New_York's daylight saving transitions of 2026
(Berlin: 29 March 02:00 CET -> 03:00 CEST, 25 October 03:00 CEST -> 02:00 CET, both at
01:00 UTC; New York: 8 March 02:00 EST -> 03:00 EDT, 1 November 02:00 EDT -> 01:00 EST)."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta

import pytest

from desched.errors import InputError
from desched.live.config import RunConfig, Schedule, resolve_schedule
from desched.live.cron import next_fire, split_zone, zone_named
from desched.plugins.catalog import PLUGINS
from desched.policy_files.loader import parse_policy

POLICY = b"apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n"
BERLIN = zone_named("Europe/Berlin", "--cron-timezone")
NEW_YORK = zone_named("America/New_York", "--cron-timezone")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fires(schedule: Schedule, start: str, count: int) -> list[str]:
    """The next `count` fire times after `start` (UTC), as the loop asks for them."""
    out: list[str] = []
    previous: datetime | None = None
    now = utc(start)
    for _ in range(count):
        when = schedule.next_run(previous, now)
        assert when is not None and when.tzinfo is not None
        out.append(when.astimezone(UTC).strftime("%m-%d %H:%M"))
        previous = now = when
    return out


def cron(text: str, timezone: str | None = None) -> Schedule:
    policy = parse_policy("p", POLICY, PLUGINS)
    return resolve_schedule(RunConfig("p", cron=text, cron_timezone=timezone), policy)


def test_the_prefix_and_the_flag_name_the_zone() -> None:
    assert split_zone("CRON_TZ=Europe/Berlin 0 3 * * *") == ("Europe/Berlin", "0 3 * * *")
    assert split_zone("  TZ=Asia/Tokyo   @daily") == ("Asia/Tokyo", "  @daily")
    assert split_zone("0 3 * * *") == (None, "0 3 * * *")
    prefixed = cron("CRON_TZ=Europe/Berlin 0 3 * * *")
    flagged = cron("0 3 * * *", "Europe/Berlin")
    assert str(prefixed) == str(flagged) == "cron '0 3 * * *' (Europe/Berlin)"
    assert str(cron("CRON_TZ=Europe/Berlin 0 3 * * *", "Europe/Berlin")) == str(prefixed)
    assert str(cron("*/2 * * * *")) == "cron '*/2 * * * *' (UTC)"  # as before
    assert str(cron("CRON_TZ=UTC */2 * * * *")) == "cron '*/2 * * * *' (UTC)"
    # 03:00 in Berlin is 02:00 UTC in winter, 01:00 UTC in summer.
    assert fires(prefixed, "2026-01-10T12:00", 2) == ["01-11 02:00", "01-12 02:00"]
    assert fires(flagged, "2026-07-10T12:00", 2) == ["07-11 01:00", "07-12 01:00"]


@pytest.mark.parametrize(("text", "timezone", "flag", "message"), [
    ("CRON_TZ=Mars/Olympus 0 3 * * *", None, "--cron", "unknown time zone 'Mars/Olympus'"),
    ("0 3 * * *", "Europe/Berlinn", "--cron-timezone", "unknown time zone 'Europe/Berlinn'"),
    ("0 3 * * *", "../../etc/passwd", "--cron-timezone", "unknown time zone"),
    ("CRON_TZ=Europe/Berlin 0 3 * * *", "Europe/Paris", "--cron-timezone",
     "'Europe/Paris' differs from the zone --cron names ('Europe/Berlin')"),
    ("CRON_TZ=Europe/Berlin 0 3 * *", None, "--cron", "expected 5 fields"),
])
def test_bad_zones_are_one_line(text: str, timezone: str | None, flag: str,
                                message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        cron(text, timezone)
    assert caught.value.source == flag


def test_a_timezone_without_cron_is_refused() -> None:
    policy = parse_policy("p", POLICY, PLUGINS)
    with pytest.raises(InputError, match="applies to --cron"):
        resolve_schedule(RunConfig("p", interval="5m", cron_timezone="Europe/Berlin"), policy)


def test_a_daily_time_across_both_berlin_transitions() -> None:
    """03:00 exists on both days: one fire a day, an hour apart in UTC before and after."""
    daily = cron("CRON_TZ=Europe/Berlin 0 3 * * *")
    assert fires(daily, "2026-03-27T12:00", 3) == ["03-28 02:00", "03-29 01:00", "03-30 01:00"]
    assert fires(daily, "2026-10-23T12:00", 3) == ["10-24 01:00", "10-25 02:00", "10-26 02:00"]


def test_a_skipped_time_fires_as_much_later_as_the_clocks_jumped() -> None:
    """02:30 does not exist in Berlin on 29 March: it fires at 03:30 CEST (01:30 UTC), once."""
    daily = cron("30 2 * * *", "Europe/Berlin")
    assert fires(daily, "2026-03-27T12:00", 3) == ["03-28 01:30", "03-29 01:30", "03-30 00:30"]
    # Several fires in the skipped hour collapse into their places an hour later.
    quarter = cron("CRON_TZ=Europe/Berlin */15 2 * * *")
    assert fires(quarter, "2026-03-28T23:00", 5) == [
        "03-29 01:00", "03-29 01:15", "03-29 01:30", "03-29 01:45", "03-30 00:00"]


def test_a_repeated_time_fires_once_at_its_first_occurrence() -> None:
    """02:30 happens twice in Berlin on 25 October (CEST, then CET): a fixed time runs once."""
    daily = cron("30 2 * * *", "Europe/Berlin")
    assert fires(daily, "2026-10-23T12:00", 3) == ["10-24 00:30", "10-25 00:30", "10-26 01:30"]
    # Asked from within the repeated hour's second pass: the next day's, not the same again.
    assert daily.next_run(None, utc("2026-10-25T01:10")) == utc("2026-10-26T01:30")


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York"])
@pytest.mark.parametrize(("expr", "step"), [("0 * * * *", 60), ("*/20 * * * *", 20),
                                            ("@hourly", 60)])
def test_a_wildcard_schedule_keeps_its_pace_through_both_transitions(
        zone: str, expr: str, step: int) -> None:
    """Hourly and every 20 minutes: evenly spaced in UTC through the skipped and the repeated
    hour (neither lost nor doubled)."""
    schedule = cron(expr, zone)
    for start in ("2026-03-07T22:00", "2026-03-28T22:00", "2026-10-24T22:00",
                  "2026-10-31T22:00"):
        times = [utc(f"2026-{t[:5]}T{t[6:]}") for t in fires(schedule, start, 12 * 60 // step)]
        gaps = {(b - a) for a, b in itertools.pairwise(times)}
        assert gaps == {timedelta(minutes=step)}, (zone, expr, start, times)


def test_new_york_daily_times_across_its_transitions() -> None:
    early = cron("CRON_TZ=America/New_York 30 1 * * *")  # 01:30 repeats on 1 November
    assert fires(early, "2026-10-30T12:00", 3) == ["10-31 05:30", "11-01 05:30", "11-02 06:30"]
    skipped = cron("CRON_TZ=America/New_York 15 2 * * *")  # 02:15 is skipped on 8 March
    assert fires(skipped, "2026-03-06T12:00", 3) == ["03-07 07:15", "03-08 07:15", "03-09 06:15"]


def test_next_fire_is_strictly_after_and_in_utc() -> None:
    fire = next_fire("0 3 * * *", BERLIN, utc("2026-01-11T02:00"))
    assert fire == utc("2026-01-12T02:00") and fire.tzinfo is UTC
    assert next_fire("0 3 * * *", NEW_YORK, utc("2026-01-11T07:59")) == utc("2026-01-11T08:00")

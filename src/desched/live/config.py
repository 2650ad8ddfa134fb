"""`desched run`'s settings: the flags (RunConfig), the schedule they and the policy give
(once, an interval or a cron expression), and the kinds to watch."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Literal

from croniter import croniter

from desched.decoding.feature_gates import FeatureGates
from desched.errors import InputError
from desched.framework.policy import Policy
from desched.live.cron import next_fire, split_zone, zone_name, zone_named
from desched.live.serving import SecureServing
from desched.live.tracing import TracingConfig
from desched.model.resources import RESOURCES
from desched.usage.base import MetricsSettings
from desched.util.duration import DurationError, parse_duration

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


# -- configuration -------------------------------------------------------------------------------

@dataclass
class RunConfig:
    policy_path: str
    kubeconfig: str | None = None
    context: str | None = None
    once: bool = False
    interval: str | None = None  # Go duration text
    cron: str | None = None
    cron_timezone: str | None = None  # IANA name; a CRON_TZ= prefix of --cron says the same
    # Cycles beside the schedule (live/triggers.py): on these node events, debounced, and
    # together with those on request (POST /cycles/run) at most so many a minute.
    trigger_on: tuple[str, ...] = ()
    trigger_debounce: float = 10.0
    trigger_max_per_minute: int = 4
    dry_run: bool = False
    leader_elect: bool = False
    lease_name: str = "desched"
    lease_namespace: str | None = None
    lease_duration: str = "137s"
    renew_deadline: str = "107s"
    retry_period: str = "26s"
    metrics_address: str | None = None
    health_address: str | None = None
    kinds: tuple[str, ...] | None = None  # None: every kind the policy can need
    sync_timeout: float = 300.0
    eviction_timeout: float = 10.0
    eviction_attempts: int = 4
    eviction_backoff: tuple[float, float] = (0.5, 5.0)
    connect_backoff: tuple[float, float] = (1.0, 30.0)
    signals: bool = True
    # Seconds a due cycle waits for a cache that is not current before it is skipped; None:
    # one interval.
    stale_cache_timeout: float | None = None
    policy_poll: float = 5.0  # seconds between checks of the policy file (a loop reloads it)
    cycles_page: bool = True  # /cycles and /cycles.json on the metrics address
    # The HTTPS listener (--secure-port): /metrics, /cycles and health, maybe guarded by
    # delegated authentication and authorization (live/serving.py).
    secure: SecureServing | None = None
    # --feature-gates: the gates switched on (decoding/feature_gates.py).
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    # --client-connection-qps / --client-connection-burst (live/rate_limit.py); None: not given.
    client_qps: float | None = None
    client_burst: int | None = None
    protobuf: bool = True  # whether the API client may ask for protobuf
    # Leader election on by Koordinator's default alone (its file says nothing, no flag):
    # a Lease this run may not use (403, or its namespace missing) turns it off with a warning.
    leader_elect_by_default: bool = False
    # The click parameters given on the command line, which a Koordinator file's process
    # settings do not override (live/process_settings.py).
    given: frozenset[str] = frozenset()
    # --otel-collector-endpoint and the other --otel-* flags; None: no tracing (live/tracing.py).
    tracing: TracingConfig | None = None


def duration(text: str, flag: str) -> float:
    try:
        value = parse_duration(text)
    except DurationError as err:
        raise InputError(flag, str(err)) from None
    if value < 0:
        raise InputError(flag, f"must not be negative, got {text!r}")
    return value


class Schedule:
    """When cycles run: once, every `interval` seconds measured from one cycle's start to the
    next (upstream's NonSlidingUntil; a late cycle starts at once), or at the fire times of a
    5-field crontab expression in `zone`'s wall time, UTC by default (live/cron.py; a fire time
    missed while a cycle ran is skipped)."""

    def __init__(self, kind: Literal["once", "interval", "cron"], interval: float = 0.0,
                 cron: str = "", zone: tzinfo = UTC) -> None:
        self.kind = kind
        self.interval = interval
        self.cron = cron
        self.zone = zone

    def __str__(self) -> str:
        if self.kind == "interval":
            return f"every {self.interval:g}s"
        return f"cron {self.cron!r} ({zone_name(self.zone)})" if self.kind == "cron" else "once"

    @property
    def looping(self) -> bool:
        return self.kind != "once"

    def next_run(self, previous: datetime | None, now: datetime) -> datetime | None:
        """The next start after a cycle that started (or was due) at `previous`."""
        if self.kind == "once":
            return now if previous is None else None
        if self.kind == "interval":
            return now if previous is None else max(previous + timedelta(seconds=self.interval),
                                                    now)
        base = now if previous is None else max(previous, now)
        return next_fire(self.cron, self.zone, base)


def parse_cron(expr: str) -> str:
    text = " ".join(expr.split())
    macro = text.startswith("@") and len(text.split()) == 1
    if not macro and len(text.split()) != 5:
        raise InputError("--cron", f"expected 5 fields (minute hour day-of-month month "
                                   f"day-of-week) or a macro such as @hourly, got {expr!r}")
    if not croniter.is_valid(text):
        raise InputError("--cron", f"not a valid crontab expression: {expr!r}")
    return text


def cron_schedule(text: str, timezone: str | None) -> Schedule:
    """--cron, its zone from a `CRON_TZ=` prefix or --cron-timezone (the same one if both)."""
    prefixed, expr = split_zone(text)
    if prefixed is not None and timezone is not None and prefixed != timezone:
        raise InputError("--cron-timezone", f"{timezone!r} differs from the zone --cron names "
                                            f"({prefixed!r}): give the time zone once")
    name = prefixed if prefixed is not None else timezone
    flag = "--cron" if prefixed is not None else "--cron-timezone"
    zone = UTC if name is None else zone_named(name, flag)
    return Schedule("cron", cron=parse_cron(expr), zone=zone)


def resolve_schedule(config: RunConfig, policy: Policy) -> Schedule:
    """--once, --interval or --cron; without any, Koordinator's deschedulingInterval from the
    policy, else one cycle (upstream's --descheduling-interval defaults to 0: one cycle)."""
    given = [name for name, on in (("--once", config.once),
                                   ("--interval", config.interval is not None),
                                   ("--cron", config.cron is not None)) if on]
    if len(given) > 1:
        raise InputError("", f"give at most one of --once, --interval and --cron "
                             f"(got {' and '.join(given)})")
    if config.cron is not None:
        return cron_schedule(config.cron, config.cron_timezone)
    if config.cron_timezone is not None:
        raise InputError("--cron-timezone", "applies to --cron: give --cron EXPR too")
    if config.interval is not None:
        seconds = duration(config.interval, "--interval")
        return Schedule("interval", seconds) if seconds > 0 else Schedule("once")
    if not config.once and policy.descheduling_interval > 0:
        return Schedule("interval", policy.descheduling_interval)
    return Schedule("once")


def informer_kinds(policy: Policy) -> tuple[str, ...]:
    """Every kind desched reads; metrics.k8s.io only when the policy uses it (it is polled, not
    watched, so it costs a full list a minute)."""
    settings = MetricsSettings.from_policy(policy)
    metrics = settings.collector_enabled or settings.kubernetes_metrics_provider
    return tuple(r.kind for r in RESOURCES if metrics or r.group != "metrics.k8s.io")


def default_lease_namespace() -> str:
    namespace = os.environ.get("POD_NAMESPACE", "")
    if not namespace:
        with contextlib.suppress(OSError):
            namespace = Path(SERVICE_ACCOUNT_NAMESPACE).read_text(encoding="utf-8").strip()
    return namespace or "kube-system"

"""The loaded, defaulted, validated policy, whatever format it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from desched.framework.evictor import Limits
from desched.framework.moves.args import MovesArgs
from desched.framework.registry import Plugins
from desched.model.labels import Matcher

PolicyFormat = Literal["v1alpha2", "v1alpha1", "koordinator"]


@dataclass
class ProfileConfig:
    name: str
    # plugin name -> decoded args (first pluginConfig entry of a name wins, as upstream).
    args: dict[str, Any] = field(default_factory=dict)
    # extension point -> enabled plugin names, in order.
    enabled: dict[str, list[str]] = field(default_factory=dict)
    node_selector: Matcher | None = None  # Koordinator's per-profile nodeSelector


@dataclass
class MetricsProvider:
    source: str
    prometheus_url: str = ""
    auth_token_secret: tuple[str, str] | None = None  # (namespace, name)


@dataclass
class ProcessSettings:
    """Koordinator's settings of the descheduler process in its configuration file, as written
    (None: the key is absent); live/process_settings.py applies them to a run."""

    leader_elect: bool | None = None
    lease_duration: str | None = None
    renew_deadline: str | None = None
    retry_period: str | None = None
    resource_lock: str | None = None
    resource_name: str | None = None
    resource_namespace: str | None = None
    kubeconfig: str | None = None
    qps: float | None = None
    burst: int | None = None
    content_type: str | None = None
    accept_content_types: str | None = None
    healthz_bind_address: str | None = None
    metrics_bind_address: str | None = None
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None


@dataclass
class Policy:
    path: str
    format: PolicyFormat
    profiles: list[ProfileConfig]
    # The plugins its args were decoded against, which its profiles are built from.
    plugins: Plugins = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    node_selector: Matcher | None = None
    node_selector_text: str = ""
    eviction_failure_event_notification: bool = False
    grace_period_seconds: int | None = None
    metrics_collector_enabled: bool = False
    metrics_providers: list[MetricsProvider] = field(default_factory=list)
    dry_run: bool = False  # Koordinator's top-level dryRun
    descheduling_interval: float = 0.0  # seconds; Koordinator's deschedulingInterval
    # Koordinator's process settings (leaderElection, clientConnection, bind addresses,
    # profiling); None for upstream's formats.
    process: ProcessSettings | None = None
    # desched's `moves` block (framework/moves): None when absent.
    moves: MovesArgs | None = None
    # Things that load but do less than the file says (ignored keys, nothing enabled), one
    # sentence each naming the file; the commands print or log them, nothing else reads them.
    warnings: list[str] = field(default_factory=list)

    @property
    def plans_moves(self) -> bool:
        """Whether evictions are planned and carried out as moves (restarts, pacing)."""
        return self.moves is not None and self.moves.active

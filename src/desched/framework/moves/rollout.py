"""What a Deployment's rollout allows: whether a restart can surge (start the new pod before the
old one stops), and whether a rollout is in progress, read from its spec and status as the
Deployment controller reads them.

maxSurge and maxUnavailable resolve as the controller resolves them (deploymentutil.
ResolveFenceposts): a percentage of spec.replicas, maxSurge rounded up and maxUnavailable
rounded down, both 25% when not given, and maxUnavailable 1 when both come to 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# The DefaultEvictor-style annotation a user puts on a Deployment to keep desched from moving
# its pods by a restart (its pods may still be evicted where the evictor allows it).
PREFER_NO_EVICTION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
DEFAULT_SURGE = "25%"
DEFAULT_UNAVAILABLE = "25%"


class RolloutError(ValueError):
    """A maxSurge or maxUnavailable the API server would have refused."""


def scaled(value: int | str, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int as it is, a percentage of `total`."""
    if isinstance(value, int):
        return value
    text = value.strip()
    if text.endswith("%") and text[:-1].isdigit():
        share = int(text[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    if text.isdigit():
        return int(text)
    raise RolloutError(f"invalid value for IntOrString: invalid type: string is not a "
                       f"percentage: {value!r}")


@dataclass(frozen=True)
class Rollout:
    """A Deployment's rolling-update budget: how many pods above and below spec.replicas a
    rollout may go."""

    replicas: int
    max_surge: int
    max_unavailable: int

    def describe(self) -> str:
        """"1 replica, maxSurge 1" (and maxUnavailable when it lets pods stop first)."""
        noun = "replica" if self.replicas == 1 else "replicas"
        text = f"{self.replicas} {noun}, maxSurge {self.max_surge}"
        return text + (f", maxUnavailable {self.max_unavailable}" if self.max_unavailable
                       else "")

    def promise(self) -> str:
        """What the rollout guarantees about availability while it replaces every pod."""
        if not self.max_unavailable:
            return "no pod stops before its replacement is Ready"
        floor = max(0, self.replicas - self.max_unavailable)
        return f"at least {floor} of {self.replicas} pods stay Ready"


def replicas_of(deployment: Any) -> int:
    replicas = deployment.spec.replicas
    return 1 if replicas is None else int(replicas)  # the API server's default


def rollout(deployment: Any) -> Rollout:
    """The resolved budget of a RollingUpdate Deployment. RolloutError for values the API
    server refuses (a string that is not a percentage)."""
    replicas = replicas_of(deployment)
    strategy = deployment.spec.strategy
    rolling = strategy.rolling_update if strategy is not None else None
    surge_value = rolling.max_surge if rolling is not None else None
    unavailable_value = rolling.max_unavailable if rolling is not None else None
    surge = scaled(DEFAULT_SURGE if surge_value is None else surge_value, replicas, True)
    unavailable = scaled(DEFAULT_UNAVAILABLE if unavailable_value is None
                         else unavailable_value, replicas, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # the controller's fencepost: a rollout must be able to progress
    return Rollout(replicas, surge, unavailable)


def in_progress(deployment: Any) -> str | None:
    """Why the Deployment is mid-rollout, or None when its controller has observed its spec and
    every replica is updated, ready and available (a status field left out counts as 0, as the
    API server leaves zeros out)."""
    meta, status = deployment.metadata, deployment.status
    generation, observed = meta.generation, status.observed_generation
    if generation is not None and observed != generation:
        return (f"its controller has not observed its spec yet (generation {generation}, "
                f"observed {observed if observed is not None else 'none'})")
    replicas = replicas_of(deployment)
    for label, value in (("updated", status.updated_replicas), ("ready", status.ready_replicas),
                         ("available", status.available_replicas)):
        if (value or 0) != replicas:
            return f"{value or 0} of {replicas} replicas {label}"
    if status.replicas is not None and status.replicas != replicas:
        return f"{status.replicas} pods for {replicas} replicas"
    return None


def cannot_surge(deployment: Any) -> str | None:
    """Why a restart of the Deployment would not start each new pod before an old one stops,
    or would disturb what the user or a rollout is doing; None when it can surge."""
    meta, spec = deployment.metadata, deployment.spec
    if PREFER_NO_EVICTION in meta.annotations:
        return f"it is annotated {PREFER_NO_EVICTION}"
    strategy = spec.strategy
    kind = (strategy.type if strategy is not None else "") or "RollingUpdate"
    if kind != "RollingUpdate":
        return f"its strategy is {kind}: every old pod stops before a new one starts"
    if spec.paused:
        return "it is paused: a restart would not roll out until it is resumed"
    try:
        budget = rollout(deployment)
    except RolloutError as err:
        return f"its rollingUpdate is invalid: {err}"
    if budget.max_surge < 1:
        return (f"its maxSurge resolves to 0 for {budget.replicas} replica(s): a new pod "
                f"starts only after an old one stops")
    progress = in_progress(deployment)
    if progress is not None:
        return f"a rollout is in progress ({progress})"
    return None

"""A scheduler model by its name (`--scheduler`, PingPongGuard's `scheduler`), and the kinds it
reads."""

from __future__ import annotations

import random

from desched.framework.registry import Reads
from desched.scheduler.kube_default import KubeDefault
from desched.scheduler.load_aware import LoadAware
from desched.scheduler.model import KUBE_DEFAULT, LOAD_AWARE, MODELS, SchedulerModel
from desched.scheduler.profile import DEFAULT_CONFIG, Profile, SchedulerConfig

# The kinds kube-scheduler's default spreading reads a pod's selector from (default_spread.py).
SPREAD_KINDS = ("Service", "ReplicaSet", "StatefulSet", "ReplicationController")


def scheduler_model(name: str, config: SchedulerConfig = DEFAULT_CONFIG,
                    rng: random.Random | None = None) -> SchedulerModel:
    """The model `name`, scheduling as `config` (a KubeSchedulerConfiguration's profiles; the
    default profile unless the user gave one) says. `rng`: kube-default breaks ties at random
    with it, as kube-scheduler does (else by node name, reproducibly)."""
    if name == LOAD_AWARE:
        return LoadAware(config)
    if name == KUBE_DEFAULT:
        return KubeDefault(config, rng)
    raise ValueError(f"unknown scheduler model {name!r}: expected one of {', '.join(MODELS)}")


def model_reads(name: str, config: SchedulerConfig, who: str) -> tuple[Reads, ...]:
    """The kinds the model `name` running `config` reads beyond nodes and pods, `who` running
    it ("--reschedule", "PingPongGuard"): default topology spreading's selectors, and
    koord-load-aware's node usage."""
    found = []
    if any(_spreads(profile) for profile in config.profiles.values()):
        found.append(Reads(SPREAD_KINDS, f"{who} (default topology spreading)"))
    if name == LOAD_AWARE:
        found.append(Reads(("NodeMetric",), f"{who} (koord-load-aware: node usage)"))
    return tuple(found)


def _spreads(profile: Profile) -> bool:
    """Whether a scheduler profile gives pods without constraints of their own default ones."""
    enabled = "PodTopologySpread" in profile.filters or profile.weight("PodTopologySpread")
    return bool(enabled and profile.spread.effective)

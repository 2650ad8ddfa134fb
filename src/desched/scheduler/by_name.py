"""A scheduler model by its name (`--scheduler`, PingPongGuard's `scheduler`)."""

from __future__ import annotations

import random

from desched.scheduler.kube_default import KubeDefault
from desched.scheduler.load_aware import LoadAware
from desched.scheduler.model import KUBE_DEFAULT, LOAD_AWARE, MODELS, SchedulerModel
from desched.scheduler.profile import DEFAULT_CONFIG, SchedulerConfig


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

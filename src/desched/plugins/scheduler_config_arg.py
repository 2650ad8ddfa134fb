"""A plugin arg naming a KubeSchedulerConfiguration file whose profiles the plugin's scheduler
model runs (PingPongGuard's and RemovePodsViolatingInterPodAntiAffinity's `schedulerConfig`):
absolute, or relative to the working directory; empty, kube-scheduler's default profile. The
file is read once per version (validation, the policy's warnings and the plugin each ask)."""

from __future__ import annotations

import os
from functools import lru_cache

from desched.errors import InputError
from desched.scheduler.config import load_scheduler_config
from desched.scheduler.profile import DEFAULT_CONFIG, SchedulerConfig


@lru_cache(maxsize=8)
def _load_version(path: str, _mtime_ns: int, _size: int) -> tuple[SchedulerConfig, list[str]]:
    return load_scheduler_config(path)


def load(path: str) -> tuple[SchedulerConfig, list[str]]:
    """The configuration in `path` and its warnings. InputError when it does not load."""
    try:
        st = os.stat(path)
    except OSError:
        return load_scheduler_config(path)  # raises, naming the problem
    return _load_version(path, st.st_mtime_ns, st.st_size)


def config_of(path: str | None) -> SchedulerConfig:
    return load(path)[0] if path else DEFAULT_CONFIG


def problems(path: str | None) -> list[str]:
    """Why the arg is invalid, in one line each (`schedulerConfig: ...`)."""
    if path == "-":
        return ["schedulerConfig: must name a file (standard input holds the policy or "
                "nothing)"]
    if path:
        try:
            load(path)
        except InputError as err:
            return [f"schedulerConfig: {err}"]
    return []


def warnings_of(path: str | None) -> list[str]:
    """The configuration's warnings (unknown fields and plugins, plugins the models leave
    out), for the policy's."""
    if not path or path == "-":
        return []
    try:
        return [f"schedulerConfig: {w}" for w in load(path)[1]]
    except InputError:
        return []  # validation reports it

"""Writing KubeSchedulerConfigurations in tests of scheduler/config/: a body under a version's
header, read from "sched.yaml"; the profile it gives, or its one-line error."""

from __future__ import annotations

import textwrap

import pytest

from desched.errors import InputError
from desched.scheduler.config import parse_scheduler_config
from desched.scheduler.profile import Profile, SchedulerConfig

V1 = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
V1BETA3 = "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n"
V1BETA2 = "apiVersion: kubescheduler.config.k8s.io/v1beta2\nkind: KubeSchedulerConfiguration\n"


def read(body: str, head: str = V1) -> tuple[SchedulerConfig, list[str]]:
    return parse_scheduler_config("sched.yaml", head + textwrap.dedent(body))


def profile(body: str, head: str = V1, name: str = "default-scheduler") -> Profile:
    config, warnings = read(body, head)
    assert warnings == []
    return config.profiles[name]


def error(body: str, head: str = V1) -> str:
    with pytest.raises(InputError) as err:
        read(body, head)
    text = str(err.value)
    assert "\n" not in text
    return text


def plugins(section: str) -> str:
    return "profiles:\n- plugins:\n" + textwrap.indent(textwrap.dedent(section), "    ")


def args(name: str, body: str) -> str:
    return (f"profiles:\n- pluginConfig:\n  - name: {name}\n    args:\n"
            + textwrap.indent(textwrap.dedent(body), "      "))

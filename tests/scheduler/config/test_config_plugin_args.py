"""The plugin args desched reads, as registered (scheduler/config/plugin_args.py): each belongs
to a plugin the scheduler knows, and args left empty validate clean and default to kube-
scheduler's default profile (koord-scheduler's defaults for LoadAwareScheduling)."""

from __future__ import annotations

import msgspec
import pytest

from desched.scheduler.config.known_plugins import FILTER, KNOWN, SCORE
from desched.scheduler.config.plugin_args import PLUGIN_ARGS
from desched.scheduler.profile import DEFAULT, LoadAwareArgs

_DEFAULTS: dict[str, object] = {
    "NodeResourcesFit": DEFAULT.fit,
    "NodeResourcesBalancedAllocation": DEFAULT.balanced_resources,
    "PodTopologySpread": DEFAULT.spread,
    "InterPodAffinity": (DEFAULT.hard_pod_affinity_weight,
                         DEFAULT.ignore_preferred_terms_of_existing_pods),
    "NodeAffinity": DEFAULT.added_affinity,
    "LoadAwareScheduling": LoadAwareArgs(),
}


def test_every_plugin_with_args_filters_or_scores() -> None:
    assert set(PLUGIN_ARGS) == set(_DEFAULTS)
    for name in PLUGIN_ARGS:
        assert KNOWN[name] & {FILTER, SCORE}, name


@pytest.mark.parametrize("name", sorted(_DEFAULTS))
def test_empty_args_are_valid_and_default_to_the_default_profile(name: str) -> None:
    plugin = PLUGIN_ARGS[name]
    args = msgspec.convert({}, plugin.type)
    assert plugin.validate("a", args) == []
    assert plugin.warnings("a", args) == []
    assert plugin.default(args) == _DEFAULTS[name]

"""Carried state (live/carried_state.py): what a plugin declares it carries goes from one
cycle's instance to the next instance of the same (profile, plugin); nothing else does; a
policy reload keeps it where the plugin's configuration is unchanged, and state a service owns
is kept whatever the reload."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from desched.framework.policy import Policy, ProfileConfig
from desched.live.carried_state import CarriedState, plugins_of


@dataclass
class Carrier:
    """A plugin that carries state (framework.types.CarriesState)."""

    state: object = None

    def carried_state(self) -> object:
        return self.state

    def adopt_state(self, state: object) -> None:
        self.state = state


class Plain:
    """A plugin that carries nothing."""


def cycle(**profiles: dict[str, object]) -> Any:
    """A stand-in for a cycle's Descheduler: its profiles' plugin instances."""
    return SimpleNamespace(profiles=[SimpleNamespace(name=name, plugins=plugins)
                                     for name, plugins in profiles.items()])


def policy(**args: dict[str, Any]) -> Policy:
    return Policy("policy.yaml", "v1alpha2",
                  [ProfileConfig(name, dict(plugin_args)) for name, plugin_args in args.items()])


def test_plugins_of_lists_every_instance() -> None:
    a, b = Carrier(), Plain()
    assert plugins_of(cycle(p={"A": a, "B": b}, q={"A": a})) == [
        ("p", "A", a), ("p", "B", b), ("q", "A", a)]


def test_state_goes_to_the_next_instance_of_the_same_profile_and_plugin() -> None:
    carried = CarriedState()
    first = cycle(p={"Detector": Carrier({"n1": 3}), "Other": Plain()},
                  q={"Detector": Carrier("q's")})
    carried.save(first)
    assert ("p", "Detector") in carried and ("p", "Other") not in carried
    nxt, other_profile, fresh = Carrier(), Carrier(), Carrier()
    carried.restore(cycle(p={"Detector": nxt}, q={"Detector": other_profile},
                          r={"Detector": fresh}))
    assert nxt.state == {"n1": 3} and other_profile.state == "q's"
    assert fresh.state is None  # nothing carried for that profile: left as built


def test_a_plugin_that_stopped_carrying_is_not_handed_state() -> None:
    carried = CarriedState()
    carried.save(cycle(p={"X": Carrier("kept")}))
    plain = Plain()
    carried.restore(cycle(p={"X": plain}))
    assert not hasattr(plain, "state")


def test_a_service_hands_state_and_takes_it_back() -> None:
    carried = CarriedState()
    limiters = object()
    carried.hand(("koord", "MigrationController"), limiters)
    plugin = Carrier()
    carried.restore(cycle(koord={"MigrationController": plugin}))
    assert plugin.state is limiters
    carried.drop(("koord", "MigrationController"))
    carried.drop(("koord", "MigrationController"))  # dropping twice is harmless
    assert list(carried) == []


def test_a_reload_keeps_state_where_the_configuration_is_unchanged() -> None:
    carried = CarriedState()
    carried.save(cycle(p={"Same": Carrier(1), "Changed": Carrier(2), "Gone": Carrier(3)},
                       koord={"Service": Carrier(4)}))
    old = policy(p={"Same": {"a": 1}, "Changed": {"a": 1}, "Gone": {}},
                 koord={"Service": {"x": 1}})
    new = policy(p={"Same": {"a": 1}, "Changed": {"a": 2}}, koord={"Service": {"x": 2}})
    carried.forget_changed(old, new, keep=lambda key: key[1] == "Service")
    assert sorted(carried) == [("koord", "Service"), ("p", "Same")]
    assert carried[("p", "Same")] == 1

"""Plugin state carried between the cycles of `desched run`.

Plugins capture the snapshot when they are built, so every cycle builds a fresh Descheduler.
What a plugin declares it carries (framework.types.CarriesState: LowNodeLoad's anomaly
detectors, MigrationController's object limiters) is handed from one cycle's instance to the
next instance of the same (profile, plugin); everything else a plugin holds is derived from the
cycle's snapshot and is rebuilt with it. Holding the plugin instead would hold its whole
snapshot."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from desched.framework.policy import Policy
from desched.framework.runner import Descheduler
from desched.framework.types import CarriesState

Key = tuple[str, str]  # (profile, plugin)


def plugins_of(descheduler: Descheduler) -> list[tuple[str, str, object]]:
    """Every plugin instance of a Descheduler as (profile, plugin name, instance)."""
    return [(profile.name, name, plugin) for profile in descheduler.profiles
            for name, plugin in profile.plugins.items()]


class CarriedState:
    """What each (profile, plugin) carries to its next instance."""

    def __init__(self) -> None:
        self._states: dict[Key, object] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._states

    def __getitem__(self, key: Key) -> object:
        return self._states[key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self._states)

    def hand(self, key: Key, state: object) -> None:
        """Give the next instances of `key` this state (a service that shares it with them)."""
        self._states[key] = state

    def drop(self, key: Key) -> None:
        self._states.pop(key, None)

    def restore(self, descheduler: Descheduler) -> None:
        """Hand the carried state to this cycle's instances."""
        for profile, name, plugin in plugins_of(descheduler):
            state = self._states.get((profile, name))
            if state is not None and isinstance(plugin, CarriesState):
                plugin.adopt_state(state)

    def save(self, descheduler: Descheduler) -> None:
        """Take the state of this cycle's instances, for the next cycle's."""
        for profile, name, plugin in plugins_of(descheduler):
            if isinstance(plugin, CarriesState):
                self._states[(profile, name)] = plugin.carried_state()

    def forget_changed(self, old: Policy, new: Policy,
                       keep: Callable[[Key], bool] = lambda key: False) -> None:
        """A policy reload: state survives where the plugin's configuration is unchanged (and
        wherever `keep` says, state a service owns)."""
        old_args = {(p.name, n): a for p in old.profiles for n, a in p.args.items()}
        new_args = {(p.name, n): a for p in new.profiles for n, a in p.args.items()}
        for key in [k for k in self._states if not keep(k)]:
            if key not in new_args or old_args.get(key) != new_args[key]:
                del self._states[key]

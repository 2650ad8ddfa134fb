"""mergePluginSet, as koord-descheduler's profiles and kube-scheduler's configuration merge a
user's plugin set into the defaults."""

from __future__ import annotations

from typing import NamedTuple

from desched.decoding.plugin_set import merge_plugin_set


def merge(defaults: list[str], enabled: list[str] | None = None,
          disabled: list[str] | None = None) -> list[str]:
    return merge_plugin_set(defaults, enabled or [], set(disabled or []), str)


def test_an_empty_set_keeps_the_defaults() -> None:
    assert merge(["A", "B"]) == ["A", "B"]


def test_star_drops_every_default() -> None:
    assert merge(["A", "B"], ["C"], ["*"]) == ["C"]
    assert merge(["A", "B"], disabled=["*"]) == []


def test_a_default_is_disabled_by_name() -> None:
    assert merge(["A", "B"], ["C"], ["A"]) == ["B", "C"]


def test_an_enabled_plugin_takes_its_default_s_place() -> None:
    assert merge(["A", "B"], ["C", "A"]) == ["A", "B", "C"]


def test_the_other_enabled_plugins_follow_in_order() -> None:
    assert merge([], ["C", "A", "B"]) == ["C", "A", "B"]


def test_a_disabled_default_enabled_again_is_appended() -> None:
    assert merge(["A", "B"], ["A"], ["A"]) == ["B", "A"]


def test_repeated_names_are_kept_for_the_caller_to_refuse() -> None:
    assert merge([], ["C", "C"]) == ["C", "C"]
    assert merge(["A"], ["A", "A"]) == ["A", "A"]


class Weighted(NamedTuple):
    name: str
    weight: int


def test_the_enabled_entry_replaces_the_default_with_what_it_carries() -> None:
    """kube-scheduler's score plugins: a user's entry keeps the default's place, with its own
    weight (the last of a repeated name)."""
    defaults = [Weighted("A", 1), Weighted("B", 1)]
    enabled = [Weighted("B", 5), Weighted("C", 2), Weighted("B", 7)]
    merged = merge_plugin_set(defaults, enabled, set(), lambda p: p.name)
    assert merged == [Weighted("A", 1), Weighted("B", 7), Weighted("B", 5), Weighted("C", 2)]

"""A Deployment's rollout as its controller reads it (framework/moves/rollout.py): maxSurge
rounds up, maxUnavailable down, both 25% by default, and 0/0 becomes 0/1; what stops a
surge-first restart; what counts as a rollout in progress."""

from __future__ import annotations

from typing import Any

import pytest

from desched.framework.moves.rollout import Rollout, cannot_surge, in_progress, rollout, scaled
from moves_builders import deployment


def made(replicas: int, **kwargs: Any) -> Any:
    return deployment("web", replicas, **kwargs)[0]


@pytest.mark.parametrize(("replicas", "surge", "unavailable", "expected"), [
    (1, None, None, (1, 0)),  # 25% of 1: surge ceil 1, unavailable floor 0
    (3, None, None, (1, 0)),
    (4, None, None, (1, 1)),
    (10, None, None, (3, 2)),
    (10, "30%", "10%", (3, 1)),
    (10, "1%", "99%", (1, 9)),
    (1, 0, 0, (0, 1)),  # the fencepost: a rollout must be able to progress
    (5, "0%", "0%", (0, 1)),
    (3, 2, 1, (2, 1)),
    (3, "2", "1", (2, 1)),
    (0, None, None, (0, 1)),
])
def test_max_surge_rounds_up_and_max_unavailable_down(
        replicas: int, surge: int | str | None, unavailable: int | str | None,
        expected: tuple[int, int]) -> None:
    rolling = {k: v for k, v in (("maxSurge", surge), ("maxUnavailable", unavailable))
               if v is not None}
    found = rollout(made(replicas, strategy={"rollingUpdate": rolling}))
    assert (found.max_surge, found.max_unavailable) == expected


def test_no_strategy_is_a_rolling_update_at_25_percent() -> None:
    assert rollout(made(8)) == Rollout(8, 2, 2)
    assert cannot_surge(made(8)) is None


def test_scaled_refuses_what_the_api_server_refuses() -> None:
    with pytest.raises(ValueError, match="string is not a percentage"):
        scaled("abc", 4, True)
    assert "rollingUpdate is invalid" in str(cannot_surge(
        made(2, strategy={"rollingUpdate": {"maxSurge": "x%"}})))


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"strategy": {"type": "Recreate"}}, "its strategy is Recreate"),
    ({"strategy": {"rollingUpdate": {"maxSurge": 0}}}, "its maxSurge resolves to 0"),
    ({"paused": True}, "it is paused"),
    ({"generation": 3, "observed": 2}, "a rollout is in progress (its controller has not "
                                       "observed its spec yet (generation 3, observed 2))"),
    ({"observed": None}, "observed none"),
    ({"updated": 1}, "a rollout is in progress (1 of 2 replicas updated)"),
    ({"ready": 1}, "a rollout is in progress (1 of 2 replicas ready)"),
    ({"annotations": {"descheduler.alpha.kubernetes.io/prefer-no-eviction": "true"}},
     "it is annotated"),
])
def test_what_stops_a_restart(kwargs: dict[str, Any], why: str) -> None:
    found = cannot_surge(made(2, **kwargs))
    assert found is not None and why in found


def test_a_surge_of_pods_is_a_rollout_in_progress() -> None:
    dep = made(2)
    surging = type(dep.status)(observed_generation=1, replicas=3, updated_replicas=2,
                               ready_replicas=2, available_replicas=2)
    import msgspec

    assert in_progress(msgspec.structs.replace(dep, status=surging)) == "3 pods for 2 replicas"


def test_what_a_rollout_promises() -> None:
    assert Rollout(1, 1, 0).describe() == "1 replica, maxSurge 1"
    assert Rollout(1, 1, 0).promise() == "no pod stops before its replacement is Ready"
    assert Rollout(10, 3, 2).describe() == "10 replicas, maxSurge 3, maxUnavailable 2"
    assert Rollout(10, 3, 2).promise() == "at least 8 of 10 pods stay Ready"

"""Suite-wide test settings: the kinds of slow test imply the `slow` marker, so that
`scripts/test -m "not slow"` leaves all of them out of the quick loop; property tests draw the
same examples on every run, so that CI's verdict is the one seen before committing."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Derandomized: a property test's examples follow from the test itself, not from the run (a
# random draw once failed CI on a case no local run had met). DESCHED_HYPOTHESIS=explore draws
# at random, to look for new failures: add what it finds to the test as an @example. No
# deadline: Hypothesis's 200 ms per example is a wall-clock bound a loaded machine can miss,
# and no property here is about speed.
settings.register_profile("suite", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", derandomize=False, database=None, deadline=None)
settings.load_profile(os.environ.get("DESCHED_HYPOTHESIS", "suite"))

SLOW_KINDS = ("soak", "fuzz", "browser", "image", "process")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(kind) for kind in SLOW_KINDS):
            item.add_marker(pytest.mark.slow)

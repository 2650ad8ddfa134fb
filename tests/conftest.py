"""Suite-wide test settings: the kinds of slow test imply the `slow` marker, so that
`scripts/test -m "not slow"` leaves all of them out of the quick loop."""

from __future__ import annotations

import pytest

SLOW_KINDS = ("soak", "fuzz", "browser", "image", "process")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(kind) for kind in SLOW_KINDS):
            item.add_marker(pytest.mark.slow)

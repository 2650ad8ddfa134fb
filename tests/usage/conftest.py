"""Fixtures for the usage tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_prometheus import FakePrometheus, serve


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    """A fake Prometheus on 127.0.0.1, stopped after the test."""
    fake, server, thread = serve()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

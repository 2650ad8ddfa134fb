"""Fixtures for the live-layer tests: kmock's KubernetesEmulator over real HTTP on 127.0.0.1,
extended by FakeApiServer where the emulator lacks API-server behaviour."""

from __future__ import annotations

from collections.abc import AsyncIterator

import kmock
import pytest_asyncio
from fake_apiserver import Emulator, FakeApiServer

from desched.live.client import ApiClient
from usage.fake_prometheus import prometheus


@pytest_asyncio.fixture
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator() as handler, kmock.Server(handler):
        yield handler


@pytest_asyncio.fixture
async def api(emulator: Emulator) -> FakeApiServer:
    return FakeApiServer(emulator)


@pytest_asyncio.fixture
async def client(emulator: Emulator) -> AsyncIterator[ApiClient]:
    # trust_env=False: no proxy from the environment between the test and 127.0.0.1.
    async with ApiClient.for_server(str(emulator.url).rstrip("/"), token="t0ken",
                                    trust_env=False, timeout=5.0) as c:
        yield c

__all__ = ["prometheus"]  # the fake Prometheus, tests/usage/fake_prometheus.py

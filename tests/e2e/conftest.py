"""The e2e suite runs only against a real cluster: set DESCHED_E2E_KUBECONFIG to its kubeconfig
(see README.md). Without it every test here is skipped, with that reason."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_cluster import E2E_ENV, Cluster
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig

HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: needs a real cluster (DESCHED_E2E_KUBECONFIG)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kubeconfig = os.environ.get(E2E_ENV)
    skip = None
    if not kubeconfig:
        skip = pytest.mark.skip(reason=f"e2e: set {E2E_ENV} to a test cluster's kubeconfig")
    elif not Path(kubeconfig).is_file():
        skip = pytest.mark.skip(reason=f"e2e: {E2E_ENV}={kubeconfig} is not a file")
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.e2e)
            if skip is not None:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    path = os.environ.get(E2E_ENV)
    if not path:
        pytest.skip(f"e2e: set {E2E_ENV} to a test cluster's kubeconfig")
    return str(Path(path).resolve())


@pytest.fixture(scope="session")
def kube(kubeconfig: str) -> Iterator[Client]:
    client = Client(config=KubeConfig.from_file(kubeconfig), field_manager="desched-e2e")
    yield client
    client.close()


@pytest.fixture
def cluster(kube: Client, kubeconfig: str, tmp_path: Path) -> Iterator[Cluster]:
    """A fresh namespace (random suffix) for one test; it, its pods and the test's fake nodes
    are deleted afterwards, whatever the outcome."""
    c = Cluster(kube, kubeconfig, tmp_path)
    try:
        c.setup()
        yield c
    finally:
        c.teardown()

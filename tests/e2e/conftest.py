"""The e2e suite runs against a real API server, found in this order:

1. `DESCHED_E2E_KUBECONFIG` names a kubeconfig (any cluster: kind, or the control plane that
   `scripts/test` starts from `KUBEBUILDER_ASSETS` and shares among the test workers);
2. `KUBEBUILDER_ASSETS` names a directory of binaries (envtest's convention): this process
   starts its own control plane from them (tests/e2e/controlplane.py) for the session.

Without either, every test here is skipped with one line that says how to run them. A test that
needs a component the control plane lacks (kube-controller-manager, kube-scheduler, the Go
descheduler) is skipped with that component named: `@pytest.mark.needs("kube-scheduler")`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ASSETS_ENV, COMPONENTS_ENV, ControlPlane, missing_components, running
from e2e_cluster import E2E_ENV, Cluster
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig

HERE = Path(__file__).parent
HOW = (f"e2e: set {ASSETS_ENV} to a directory of control-plane binaries (etcd, kube-apiserver; "
       f"../shared/realk8s/unpack.sh DIR gives DIR/bin) or {E2E_ENV} to a test cluster's "
       f"kubeconfig")
# Every Cluster-based test needs namespaces deleted, default ServiceAccounts and budgets computed.
CONTROLLER_MANAGER = "kube-controller-manager"


class XdistGroups:
    """`--dist loadgroup` sends the tests whose node ids end in `@<group>` to one worker.
    pytest-xdist (3.8) appends the group of `xdist_group` to `item._nodeid`, which pytest 9.2 no
    longer reads (a node's id is `item._id`), so without this the fidelity tests went to every
    worker and queued on their lock. Where xdist's suffix took, this leaves it."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        if not getattr(config.option, "loadgroup", False):
            return
        from _pytest.nodeid import NodeId

        for item in items:
            groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                             for m in item.iter_markers("xdist_group")})
            if groups and "@" not in item.nodeid.rpartition("]")[2]:
                item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(XdistGroups(), "desched-e2e-xdist-groups")
    config.addinivalue_line("markers", "e2e: needs a real API server (see tests/e2e/README.md)")
    config.addinivalue_line("markers", "needs(*components): control-plane components or "
                                       "binaries the test needs (skipped, named, without them)")


def _skip_reason() -> str | None:
    kubeconfig = os.environ.get(E2E_ENV)
    if kubeconfig:
        return None if Path(kubeconfig).is_file() else f"e2e: {E2E_ENV}={kubeconfig} is not a file"
    assets = os.environ.get(ASSETS_ENV)
    if not assets:
        return HOW
    missing = missing_components(Path(assets))
    return f"e2e: {ASSETS_ENV}={assets} lacks {', '.join(missing)}" if missing else None


def available() -> set[str] | None:
    """The components running (None: an outside cluster, assumed complete) and the binaries
    beside them (the Go descheduler)."""
    listed = os.environ.get(COMPONENTS_ENV)
    assets = os.environ.get(ASSETS_ENV)
    folder = Path(assets) if assets else None
    binaries = {p.name for p in folder.iterdir()} if folder and folder.is_dir() else set()
    if listed is not None:
        return set(listed.split(",")) | binaries
    if os.environ.get(E2E_ENV):
        return None
    return binaries  # this process starts the plane: whatever binaries there are


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _skip_reason()
    have = available() if reason is None else None
    for item in items:
        if HERE not in Path(item.path).parents:
            continue
        item.add_marker(pytest.mark.e2e)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
            continue
        needs = [c for mark in item.iter_markers("needs") for c in mark.args]
        if "cluster" in getattr(item, "fixturenames", ()):
            needs.append(CONTROLLER_MANAGER)
        lacking = [c for c in needs if have is not None and c not in have]
        if lacking:
            item.add_marker(pytest.mark.skip(
                reason=f"e2e: the control plane has no {', '.join(sorted(set(lacking)))}"))


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane | None]:
    """The control plane this process started, or None when the suite runs against one that
    DESCHED_E2E_KUBECONFIG names."""
    if os.environ.get(E2E_ENV):
        yield None
        return
    assets = os.environ.get(ASSETS_ENV)
    if not assets:
        pytest.skip(HOW)
    with running(Path(assets).resolve(), tmp_path_factory.mktemp("control-plane")) as plane:
        yield plane


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane | None) -> str:
    if control_plane is not None:
        return str(control_plane.kubeconfig)
    return str(Path(os.environ[E2E_ENV]).resolve())


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

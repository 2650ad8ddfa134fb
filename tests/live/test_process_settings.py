"""Koordinator's process settings (leaderElection, clientConnection, the bind addresses,
profiling) applied to `desched run`: the file over desched's defaults, the command line over
the file; what cannot be applied said in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import desched.live.run
from desched.commands.cli import main
from desched.errors import InputError
from desched.live.config import RunConfig
from desched.live.rate_limit import RateLimit, resolve_rate_limit
from desched.live.run import prepare
from desched.live.serving import SecureServing

HEAD = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  plugins:
    deschedule: {enabled: [{name: PodLifeTime}]}
    evict: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
    filter: {disabled: [{name: "*"}], enabled: [{name: DefaultEvictor}]}
  pluginConfig:
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 3600}
"""


def koord(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "koord.yaml"
    path.write_text(HEAD + extra)
    return str(path)


def test_leader_election_is_on_by_koordinators_default(tmp_path: Path) -> None:
    config = RunConfig(koord(tmp_path), interval="5m")
    prepare(config)
    assert config.leader_elect
    # koord-descheduler's Lease and timings where the file says nothing
    assert (config.lease_name, config.lease_namespace) == ("koord-descheduler",
                                                           "koordinator-system")
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (
        "15s", "10s", "2s")


def test_the_files_lease_keys_apply_and_flags_win(tmp_path: Path) -> None:
    path = koord(tmp_path, "leaderElection: {leaseDuration: 30s, resourceName: mine, "
                           "resourceNamespace: ops}\n")
    config = RunConfig(path, interval="5m", lease_name="flagged",
                       given=frozenset({"leader_elect_resource_name"}))
    prepare(config)
    assert config.leader_elect
    assert (config.lease_name, config.lease_namespace, config.lease_duration) == (
        "flagged", "ops", "30s")


def test_switched_on_by_the_flag_unset_keys_keep_desched_defaults(tmp_path: Path) -> None:
    """desched's manifests give --leader-elect; their RBAC names desched's Lease."""
    config = RunConfig(koord(tmp_path), interval="5m", leader_elect=True,
                       given=frozenset({"leader_elect"}))
    prepare(config)
    assert (config.lease_name, config.lease_namespace, config.lease_duration) == (
        "desched", None, "137s")


@pytest.mark.parametrize(("extra", "kwargs", "on"), [
    ("leaderElection: {leaderElect: false}\n", {"interval": "5m"}, False),
    ("", {"interval": "5m", "leader_elect": False, "given": frozenset({"leader_elect"})},
     False),  # --leader-elect=false
    ("", {"once": True}, False),  # one cycle takes no Lease
    ("", {"interval": "5m", "dry_run": True}, False),  # as upstream, none in a dry run
    ("deschedulingInterval: 1m\n", {}, True),  # the file's own interval loops
])
def test_when_it_stays_off(tmp_path: Path, extra: str, kwargs: dict[str, object],
                           on: bool) -> None:
    config = RunConfig(koord(tmp_path, extra), **kwargs)  # type: ignore[arg-type]
    prepare(config)
    assert config.leader_elect is on


def test_an_upstream_policy_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n")
    config = RunConfig(str(path), interval="5m")
    prepare(config)
    assert not config.leader_elect and config.client_qps is None and config.protobuf


def test_client_connection(tmp_path: Path) -> None:
    config = RunConfig(koord(tmp_path), once=True)
    prepare(config)  # Koordinator's defaults: 50 and 100, protobuf
    assert resolve_rate_limit(config.client_qps, config.client_burst) == RateLimit(50.0, 100)
    assert config.protobuf
    config = RunConfig(koord(tmp_path, "clientConnection: {qps: 7, burst: 3, kubeconfig: "
                                       "/etc/kc, contentType: application/json}\n"), once=True)
    prepare(config)
    assert (config.client_qps, config.client_burst, config.kubeconfig) == (7, 3, "/etc/kc")
    assert config.protobuf is False
    config = RunConfig(koord(tmp_path, "clientConnection: {qps: 7, burst: 3}\n"), once=True,
                       client_qps=-1, kubeconfig="/mine", given=frozenset(
                           {"client_qps", "kubeconfig"}))
    prepare(config)  # the flags win: no limit, their kubeconfig
    assert resolve_rate_limit(config.client_qps, config.client_burst) is None
    assert config.kubeconfig == "/mine"
    with pytest.raises(InputError, match=r"clientConnection\.burst: must not be negative"):
        prepare(RunConfig(koord(tmp_path, "clientConnection: {burst: -1}\n"), once=True))


def test_a_flag_replaces_only_its_own_key_of_client_connection(tmp_path: Path) -> None:
    """--client-connection-qps beside a file's clientConnection.burst: the flag wins for the
    QPS, the file's burst still applies (it was dropped, leaving client-go's 10)."""
    config = RunConfig(koord(tmp_path, "clientConnection: {qps: 7, burst: 300}\n"), once=True,
                       client_qps=20, given=frozenset({"client_qps"}))
    prepare(config)
    assert resolve_rate_limit(config.client_qps, config.client_burst) == RateLimit(20.0, 300)
    config = RunConfig(koord(tmp_path, "clientConnection: {qps: 7, burst: 300}\n"), once=True,
                       client_burst=40, given=frozenset({"client_burst"}))
    prepare(config)
    assert resolve_rate_limit(config.client_qps, config.client_burst) == RateLimit(7.0, 40)


@pytest.mark.parametrize(("value", "address"), [
    ("0.0.0.0:10251", "0.0.0.0:10251"),
    ("127.0.0.1", "127.0.0.1:10251"),  # Koordinator gives a bare IP its port
    (":9090", ":9090"),
    ("127.0.0.1:0", None),  # port 0: no listener, as Koordinator
])
def test_bind_addresses(tmp_path: Path, value: str, address: str | None) -> None:
    path = koord(tmp_path, f"healthzBindAddress: {value!r}\nmetricsBindAddress: {value!r}\n")
    config = RunConfig(path, once=True)
    prepare(config)
    assert config.health_address == config.metrics_address == address
    config = RunConfig(path, once=True, metrics_address="127.0.0.1:1",
                       given=frozenset({"metrics_address"}))
    prepare(config)
    assert config.metrics_address == "127.0.0.1:1" and config.health_address == address


def run_cli(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[RunConfig, list[str]]:
    """`desched run ARGS` up to prepare(); the config it leaves and the notes it logged."""
    seen: dict[str, RunConfig] = {}
    notes: list[str] = []

    def record(config: RunConfig, **kwargs: object) -> int:
        prepare(config)
        seen["config"] = config
        return 0

    monkeypatch.setattr(desched.live.run, "run_command", record)
    monkeypatch.setattr(desched.live.run.log, "warning",
                        lambda message, *a, **k: notes.append(message))
    monkeypatch.setattr(desched.live.run.log, "info",
                        lambda message, *a, **k: notes.append(message))
    result = CliRunner().invoke(main, ["run", *args])
    assert result.exit_code == 0, result.output
    return seen["config"], notes


def test_the_command_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = koord(tmp_path, "enableProfiling: true\nenableContentionProfiling: true\n"
                           "leaderElection: {resourceLock: endpointsleases}\n")
    config, notes = run_cli(monkeypatch, "--config", path, "--interval=5m")
    assert config.leader_elect
    assert [n.split(": ", 1)[1] for n in notes] == [
        "leader election is on, as koord-descheduler's leaderElection default has it; "
        "--leader-elect=false turns it off",
        'leaderElection.resourceLock: "endpointsleases" is not applied: desched\'s lock is a '
        'coordination.k8s.io Lease ("leases"), named as the file says',
        "enableProfiling: true is not applied: desched has no Go profiler (pprof) to serve; "
        "profile the process with py-spy instead",
        "enableContentionProfiling: true is not applied: desched has no Go profiler (pprof) "
        "to serve; profile the process with py-spy instead"]
    config, _ = run_cli(monkeypatch, "--config", path, "--interval=5m", "--leader-elect=false")
    assert not config.leader_elect
    config, _ = run_cli(monkeypatch, "--config", path, "--interval=5m",
                        "--client-connection-qps=2", "--leader-elect-resource-name=x")
    assert (config.client_qps, config.client_burst, config.lease_name) == (2.0, None, "x")


def test_the_secure_port_keeps_metrics(tmp_path: Path) -> None:
    """The chart's --secure-port (maybe with --delegate-auth) serves /metrics: a shipped
    Koordinator file's metricsBindAddress opens no plain side door beside it."""
    path = koord(tmp_path, "healthzBindAddress: 0.0.0.0:10251\nmetricsBindAddress: "
                           "0.0.0.0:10251\n")
    config = RunConfig(path, once=True, secure=SecureServing("127.0.0.1:0", delegate_auth=True))
    prepare(config)
    assert config.metrics_address is None and config.health_address == "0.0.0.0:10251"

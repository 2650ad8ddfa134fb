"""Upstream `descheduler` command lines on `desched run`: each flag parsed by the real command
(click, with pflag's spellings) and mapped onto the run's settings; the run itself is replaced
by a recorder, so nothing connects anywhere (tests/live/test_run.py runs such command lines
against an emulated API server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import desched.live.run
from desched.commands.cli import main
from desched.commands.upstream_flags import IGNORED_BOOL_FLAGS, IGNORED_VALUE_FLAGS, normalize_args
from desched.errors import InputError

POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: default
  pluginConfig:
  - name: PodLifeTime
    args: {maxPodLifeTimeSeconds: 3600}
  plugins:
    deschedule: {enabled: [PodLifeTime]}
"""


@pytest.fixture
def policy(tmp_path: Path) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return str(path)


def invoke(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, dict[str, Any], str]:
    """`desched run ARGS`: exit code, what run_command was given, stderr."""
    seen: dict[str, Any] = {}

    def record(config: Any, **kwargs: Any) -> int:
        seen.update(config=config, **kwargs)
        return 0

    monkeypatch.setattr(desched.live.run, "run_command", record)
    result = CliRunner().invoke(main, ["run", *args])
    return result.exit_code, seen, result.stderr


def test_normalize_pflag_spellings() -> None:
    assert normalize_args(["--dry-run=true", "--leader-elect=false", "-v=3", "--v=4",
                           "--once=1", "--interval", "5m", "--once=false"]) == [
        "--dry-run", "--no-leader-elect", "-v", "3", "--v=4", "--once", "--interval", "5m"]
    assert normalize_args(["--", "--dry-run=false"]) == ["--", "--dry-run=false"]
    with pytest.raises(InputError, match='invalid argument "yes" for "--dry-run" flag'):
        normalize_args(["--dry-run=yes"])


@pytest.mark.parametrize("args", [
    # upstream's kustomize Job and CronJob, and its Deployment
    ["--policy-config-file", "{p}", "--v", "3"],
    ["--policy-config-file", "{p}", "--v", "3", "--descheduling-interval", "5m"],
    # upstream's Helm chart (cmdOptions {v: 3} rendered as --key=value)
    ["--policy-config-file={p}", "--v=3"],
    ["--policy-config-file={p}", "--descheduling-interval=5m", "--v=3",
     "--leader-elect=true", "--leader-elect-lease-duration=15s",
     "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s",
     "--leader-elect-resource-lock=leases", "--leader-elect-resource-name=descheduler",
     "--leader-elect-resource-namespace=kube-system"],
])
def test_upstream_manifests_command_lines(monkeypatch: pytest.MonkeyPatch, policy: str,
                                         args: list[str]) -> None:
    code, seen, stderr = invoke(monkeypatch, *(a.replace("{p}", policy) for a in args))
    assert code == 0, stderr
    config = seen["config"]
    assert config.policy_path == policy
    assert seen["log_level"] == "info" and seen["log_format"] == "text"
    if "5m" in " ".join(args):
        assert config.interval == "5m"
    if any(a.startswith("--leader-elect=") for a in args):
        assert config.leader_elect and config.lease_duration == "15s"
        assert config.lease_name == "descheduler" and config.lease_namespace == "kube-system"
        assert seen["warnings"] == [
            "--leader-elect-resource-lock is a flag of upstream's descheduler with no effect "
            "in desched: ignored"]
    else:
        assert seen["warnings"] == []


def test_verbosity_and_logging_format(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    _, seen, _ = invoke(monkeypatch, "--policy", policy, "-v", "4", "--logging-format=json")
    assert (seen["log_level"], seen["log_format"]) == ("debug", "json")
    _, seen, _ = invoke(monkeypatch, "--policy", policy, "--v=2")
    assert seen["log_level"] == "info"
    # desched's own flags win over upstream's spellings.
    _, seen, _ = invoke(monkeypatch, "--policy", policy, "--v=5", "--log-level", "warning",
                        "--logging-format", "json", "--log-format", "text")
    assert (seen["log_level"], seen["log_format"]) == ("warning", "text")


def test_secure_port_is_the_https_listener(monkeypatch: pytest.MonkeyPatch,
                                           policy: str) -> None:
    # As upstream's: HTTPS on --bind-address:--secure-port (tests/live/test_serving.py).
    _, seen, _ = invoke(monkeypatch, "--policy", policy, "--secure-port=10258")
    config = seen["config"]
    assert config.secure.address == "0.0.0.0:10258" and config.secure.metrics
    assert not config.secure.delegate_auth
    assert (config.metrics_address, config.health_address) == (None, None)
    assert seen["warnings"] == []
    _, seen, _ = invoke(monkeypatch, "--policy", policy, "--secure-port", "9443",
                        "--bind-address", "::1", "--disable-metrics",
                        "--health-address", "127.0.0.1:8080")
    config = seen["config"]
    assert (config.metrics_address, config.health_address) == (None, "127.0.0.1:8080")
    assert (config.secure.address, config.secure.metrics) == ("[::1]:9443", False)
    _, seen, _ = invoke(monkeypatch, "--policy", policy, "--secure-port=0")
    assert seen["config"].secure is None
    code, _, stderr = invoke(monkeypatch, "--policy", policy, "--secure-port=70000")
    assert code == 2
    assert stderr == "error: --secure-port: must be a port number 0-65535, got 70000\n"


def test_every_other_upstream_flag_is_accepted_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    args = ["--policy", policy]
    for flag in IGNORED_VALUE_FLAGS:
        args.append(f"{flag}=x")
    args += [f"{flag}=true" for flag in IGNORED_BOOL_FLAGS]
    code, seen, stderr = invoke(monkeypatch, *args)
    assert code == 0, stderr
    flags = [w.split(" ", 1)[0] for w in seen["warnings"]]
    assert sorted(flags) == sorted((*IGNORED_VALUE_FLAGS, *IGNORED_BOOL_FLAGS))
    # A false boolean is not given at all: nothing to warn about.
    _, seen, _ = invoke(monkeypatch, "--policy", policy, "--enable-http2=false")
    assert seen["warnings"] == []


def test_bad_values_are_one_line_exit_2(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    for args, message in (
            (["--v=x"], "'x' is not a valid integer range"),
            (["--logging-format=xml"], "'xml' is not one of 'text', 'json'"),
            (["--dry-run=maybe"], 'invalid argument "maybe" for "--dry-run" flag'),
            (["--no-such-flag"], "No such option '--no-such-flag'")):
        code, _, stderr = invoke(monkeypatch, "--policy", policy, *args)
        assert code == 2, args
        assert len(stderr.splitlines()) == 1 and message in stderr, stderr


def test_feature_gates_reach_the_run(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    code, seen, stderr = invoke(monkeypatch, "--policy", policy,
                                "--feature-gates=EvictionsInBackground=true")
    assert code == 0, stderr
    assert seen["config"].feature_gates.on == {"EvictionsInBackground"}
    assert seen["warnings"] == []
    code, seen, _ = invoke(monkeypatch, "--policy", policy)
    assert seen["config"].feature_gates.on == frozenset()
    for value, message in (("Foo=true", "unrecognized feature gate: Foo"),
                           ("EvictionsInBackground=on", "invalid value of "
                                                        "EvictionsInBackground: on")):
        code, _, stderr = invoke(monkeypatch, "--policy", policy, "--feature-gates", value)
        assert code == 2
        assert len(stderr.splitlines()) == 1 and message in stderr, stderr


def test_tls_flags_tune_the_secure_port(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    code, seen, stderr = invoke(
        monkeypatch, "--policy", policy, "--secure-port=10258", "--tls-min-version=VersionTLS13",
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,"
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "--tls-cipher-suites", "TLS_AES_128_GCM_SHA256", "--tls-sni-cert-key", "a.crt,a.key")
    assert code == 0, stderr
    secure = seen["config"].secure
    assert secure.min_tls_version == "VersionTLS13"
    assert secure.cipher_suites == ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                                    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                                    "TLS_AES_128_GCM_SHA256")
    assert secure.sni_cert_keys == ("a.crt,a.key",)
    assert seen["warnings"] == []
    # Upstream's Job tunes its default secure port; without one here, one warning line.
    code, seen, stderr = invoke(monkeypatch, "--policy", policy,
                                "--tls-min-version=VersionTLS12")
    assert code == 0, stderr
    assert seen["warnings"] == ["--tls-min-version has no effect without --secure-port: "
                                "ignored"]

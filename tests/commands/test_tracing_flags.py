"""Upstream's --otel-* flags on `desched run`, parsed by the real command (pflag's spellings
included) into the run's TracingConfig; the run is replaced by a recorder (tests/live/
test_tracing.py exports to a real OTLP receiver)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_upstream_flags import invoke, policy  # noqa: F401  (the fixture)

from desched.live.tracing import TracingConfig


def test_the_flags_make_the_tracing_config(monkeypatch: pytest.MonkeyPatch,
                                           policy: str) -> None:  # noqa: F811
    code, seen, stderr = invoke(
        monkeypatch, "--policy-config-file", policy, "--otel-collector-endpoint=otel:4317",
        "--otel-transport-ca-cert", "/etc/otel/ca.pem", "--otel-service-name=desched",
        "--otel-trace-namespace=kube-system", "--otel-sample-rate=0.1",
        "--otel-fallback-no-op-on-error=true")
    assert code == 0, stderr
    assert seen["config"].tracing == TracingConfig(
        "otel:4317", ca_cert="/etc/otel/ca.pem", service_name="desched",
        namespace="kube-system", sample_rate=0.1, fallback_no_op_on_error=True)
    assert seen["warnings"] == []


def test_defaults_are_upstreams(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:  # noqa: F811
    _, seen, _ = invoke(monkeypatch, "--policy", policy, "--otel-collector-endpoint",
                        "127.0.0.1:4317", "--otel-fallback-no-op-on-error=false")
    assert seen["config"].tracing == TracingConfig("127.0.0.1:4317")
    assert seen["config"].tracing.service_name == "descheduler"
    # Without an endpoint: no tracing; the others given say they do nothing.
    _, seen, _ = invoke(monkeypatch, "--policy", policy)
    assert seen["config"].tracing is None and seen["warnings"] == []
    _, seen, _ = invoke(monkeypatch, "--policy", policy, "--otel-collector-endpoint=",
                        "--otel-sample-rate=0.5")
    assert seen["config"].tracing is None
    assert seen["warnings"] == [
        "--otel-sample-rate has no effect without --otel-collector-endpoint: ignored"]


def test_a_bad_rate_is_one_line_exit_2(monkeypatch: pytest.MonkeyPatch,
                                      policy: str, tmp_path: Path) -> None:  # noqa: F811
    code, _, stderr = invoke(monkeypatch, "--policy", policy, "--otel-collector-endpoint=x:1",
                             "--otel-sample-rate=lots")
    assert code == 2
    assert stderr == ('error: --otel-sample-rate: invalid argument "lots" for '
                      '"--otel-sample-rate" flag: strconv.ParseFloat: parsing "lots": invalid '
                      'syntax\n')

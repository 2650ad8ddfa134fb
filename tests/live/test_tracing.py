"""Tracing (live/tracing.py, upstream's --otel-* flags) against a real OTLP/gRPC receiver on
127.0.0.1 (otlp_receiver.py): `desched run --once --dry-run` as a process exports one trace per
cycle with upstream's span and attribute names, parents and resource; TLS with
--otel-transport-ca-cert; the sample rate; the flags' errors; and no OpenTelemetry import
without an endpoint."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import Emulator, FakeApiServer, node
from otlp_receiver import Span, receiver
from test_run import cluster, command_env, config, kubeconfig, policy_file, run, start

from builders import COMMAND_WAIT
from desched.commands.upstream_flags import tracing_config
from desched.errors import InputError
from desched.live.health import Address
from desched.live.serving import self_signed
from desched.live.tracing import TracingConfig, parse_sample_rate, start_tracing
from desched.model.resources import RESOURCES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()


def by_name(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]


def one_cycle(spans: list[Span]) -> bool:
    return bool(by_name(spans, "runDeschedulerLoop"))


def check_cycle_trace(spans: list[Span], evicted: set[str], failed: set[str]) -> None:
    """One cycle of test_run's PodLifeTime policy: the span tree and upstream's attributes."""
    [loop] = by_name(spans, "runDeschedulerLoop")
    assert loop.parent_id == ""  # each cycle is a trace of its own
    assert loop.attributes == {"cycle": 1, "dryRun": True}
    [profiles] = by_name(spans, "runProfiles")
    assert profiles.parent_id == loop.span_id
    [plugin] = by_name(spans, "PodLifeTime")
    assert plugin.parent_id == profiles.span_id
    assert plugin.attributes == {"plugin": "PodLifeTime", "profile": "default",
                                 "operation": "deschedule"}
    evictions = by_name(spans, "EvictPod")
    assert {f"{e.attributes['podNamespace']}/{e.attributes['podName']}"
            for e in evictions} == evicted | failed
    for span in evictions:
        assert span.parent_id == plugin.span_id
        assert span.attributes["operation"] == "evict"
        assert "lifetime" in span.attributes["reason"].lower()
        pod = f"{span.attributes['podNamespace']}/{span.attributes['podName']}"
        if pod in failed:
            [(event, fields)] = span.events
            assert event == "Eviction Failed" and fields["node"] and fields["err"]
        else:
            assert span.events == []
    assert {s.trace_id for s in spans} == {loop.trace_id}
    assert {s.scope for s in spans} == {"sigs.k8s.io/descheduler"}


@pytest.mark.process
@pytest.mark.asyncio
async def test_the_command_exports_each_cycle_to_the_collector(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    kube = kubeconfig(tmp_path, str(emulator.url).rstrip("/"))
    with receiver() as collector:
        process = await start(
            "--policy-config-file", policy_file(tmp_path), "--kubeconfig", kube,
            "--log-format", "json", "--once", "--dry-run",
            "--otel-collector-endpoint", collector.endpoint, "--otel-service-name",
            "desched-test", "--otel-trace-namespace", "kube-system", "--otel-sample-rate=1")
        _, err = await asyncio.wait_for(process.communicate(), COMMAND_WAIT)
        assert process.returncode == 0, err.decode()
        # Exported before the process exited (the provider's shutdown flushes its queue).
        spans = collector.spans()
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    assert not [line for line in lines if "has no effect" in line.get("event", "")]
    evicted = {line["pod"] for line in lines
               if line.get("event") == "Evicted pod in dry run mode"}
    assert evicted == {"default/old-1", "default/old-2"}
    check_cycle_trace(spans, evicted, failed={"default/db-0"})  # its PDB allows none
    resource = spans[0].resource
    assert resource["service.name"] == "desched-test"
    assert resource["service.namespace"] == "kube-system"
    assert resource["process.pid"] == process.pid
    assert all(s.resource == resource for s in spans)


@pytest.mark.asyncio
async def test_tls_to_a_collector_the_ca_certificate_names(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    cert, key = self_signed(Address("127.0.0.1", 0))
    ca = tmp_path / "ca.pem"
    ca.write_bytes(cert)
    with receiver((cert, key)) as collector:
        tracing = start_tracing(TracingConfig(collector.endpoint, ca_cert=str(ca)))
        assert tracing is not None
        try:
            _, code = await run(config(tmp_path, emulator, once=True, dry_run=True),
                                tracing=tracing)
        finally:
            await asyncio.to_thread(tracing.shutdown)
        assert code == 0
        spans = collector.spans()
    check_cycle_trace(spans, {"default/old-1", "default/old-2"}, {"default/db-0"})
    assert spans[0].resource["service.name"] == "descheduler"  # upstream's default
    assert "service.namespace" not in spans[0].resource


@pytest.mark.asyncio
async def test_a_sample_rate_of_zero_exports_nothing(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    with receiver() as collector:
        tracing = start_tracing(TracingConfig(collector.endpoint, sample_rate=0.0))
        assert tracing is not None
        _, code = await run(config(tmp_path, emulator, once=True, dry_run=True),
                            tracing=tracing)
        await asyncio.to_thread(tracing.shutdown)
        assert code == 0
        assert collector.spans() == []


@pytest.mark.asyncio
async def test_a_skipped_cycle_says_why(tmp_path: Path, emulator: Emulator,
                                       api: FakeApiServer) -> None:
    api.serve(*(r.kind for r in RESOURCES))
    api.add_now("Node", node("n1"))  # one ready node: upstream skips the cycle
    with receiver() as collector:
        tracing = start_tracing(TracingConfig(collector.endpoint))
        assert tracing is not None
        _, code = await run(config(tmp_path, emulator, once=True, dry_run=True),
                            tracing=tracing)
        await asyncio.to_thread(tracing.shutdown)
        spans = collector.spans()
    assert code == 0
    [profiles] = by_name(spans, "runProfiles")
    [(event, fields)] = profiles.events
    assert event == "Skipping descheduling cycle" and ">=2 nodes" in fields["reason"]
    assert {s.name for s in spans} == {"runDeschedulerLoop", "runProfiles"}


@pytest.mark.asyncio
async def test_an_unreachable_collector_does_not_hold_the_run(
        tmp_path: Path, emulator: Emulator, api: FakeApiServer) -> None:
    cluster(api)
    with receiver() as collector:  # a port that was just free, now closed
        endpoint = collector.endpoint
    tracing = start_tracing(TracingConfig(endpoint))
    assert tracing is not None
    runner, code = await run(config(tmp_path, emulator, once=True, dry_run=True),
                             tracing=tracing)
    assert code == 0 and len(runner.reports) == 1
    started = time.monotonic()
    await asyncio.to_thread(tracing.shutdown)
    assert time.monotonic() - started < 40  # the exporter's bounded retries, then gives up


def flags(**values: Any) -> dict[str, Any]:
    names = ("otel_collector_endpoint", "otel_transport_ca_cert", "otel_service_name",
             "otel_trace_namespace", "otel_sample_rate")
    out: dict[str, Any] = dict.fromkeys(names)
    out["otel_fallback_no_op_on_error"] = False
    out.update(values)
    return out


def test_flags_become_the_config_and_leave_the_rest() -> None:
    values = flags(otel_collector_endpoint="otel:4317", otel_sample_rate="0.25",
                   otel_trace_namespace="ops", upstream_vmodule="x=2")
    config, warnings = tracing_config(values)
    assert config == TracingConfig("otel:4317", sample_rate=0.25, namespace="ops")
    assert warnings == [] and values == {"upstream_vmodule": "x=2"}


def test_flags_without_an_endpoint_say_they_do_nothing() -> None:
    config, warnings = tracing_config(flags(otel_service_name="x",
                                            otel_fallback_no_op_on_error=True))
    assert config is None
    assert warnings == [
        "--otel-service-name has no effect without --otel-collector-endpoint: ignored",
        "--otel-fallback-no-op-on-error has no effect without --otel-collector-endpoint: "
        "ignored"]
    assert tracing_config(flags()) == (None, [])


def test_sample_rate_is_go_float_syntax_clamped_as_go_samples() -> None:
    assert parse_sample_rate("0.5") == 0.5
    assert parse_sample_rate("2") == 1.0  # Go: at least 1 samples every trace
    assert parse_sample_rate("-1") == 0.0
    assert parse_sample_rate("1e-1") == pytest.approx(0.1)
    for bad in ("half", " 0.5", "1_0", ""):
        with pytest.raises(InputError, match=f'invalid argument "{bad}" for '
                           '"--otel-sample-rate" flag: strconv.ParseFloat'):
            parse_sample_rate(bad)


def test_a_bad_ca_file_is_an_input_error_or_no_tracing_with_the_fallback(
        tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(InputError, match=r"--otel-transport-ca-cert.*cannot read"):
        start_tracing(TracingConfig("127.0.0.1:4317", ca_cert=missing))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(InputError, match="holds no PEM certificate"):
        start_tracing(TracingConfig("127.0.0.1:4317", ca_cert=str(junk)))
    assert start_tracing(TracingConfig("127.0.0.1:4317", ca_cert=str(junk),
                                       fallback_no_op_on_error=True)) is None


@pytest.mark.process
def test_command_line_errors_exit_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "desched", "run", "--policy-config-file",
         str(ROOT / "examples" / "policy.yaml"), "--once",
         "--otel-collector-endpoint", "127.0.0.1:1", "--otel-sample-rate", "most"],
        capture_output=True, text=True, env=command_env(), timeout=120)
    assert result.returncode == 2
    assert 'invalid argument "most" for "--otel-sample-rate" flag' in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.process
def test_without_an_endpoint_nothing_of_opentelemetry_is_imported() -> None:
    # simulate leaves by os._exit: the interpreter's import log says what it loaded.
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "desched", "simulate", "--policy",
         str(ROOT / "examples" / "policy.yaml"), "--snapshot",
         str(ROOT / "examples" / "cluster.yaml")],
        capture_output=True, text=True, env=command_env(), timeout=120)
    assert result.returncode in (0, 1), result.stderr
    loaded = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
              if line.startswith("import time:")]
    assert "desched.commands.cli" in loaded
    assert [m for m in loaded if m.split(".")[0] in ("opentelemetry", "grpc")] == []

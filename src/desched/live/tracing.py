"""OpenTelemetry tracing of `desched run`: upstream's `--otel-*` flags (its pkg/tracing).

With `--otel-collector-endpoint HOST:PORT`, each cycle is a trace exported over OTLP/gRPC (TLS
with `--otel-transport-ca-cert`, plaintext without), with upstream's span and attribute names:

    runDeschedulerLoop          one per cycle (desched's `cycle` number, `dryRun`)
      runProfiles
        <plugin name>           one per plugin run: plugin, profile, operation (deschedule/balance)
          EvictPod              one per eviction request: podName, podNamespace, reason,
                                operation=evict; a refusal or failure is an `Eviction Failed`
                                event with `node` and `err`

Upstream also opens `Run`, `RunDeschedulerStrategies` and `NonSlidingUntil` spans that last the
whole process and parent every cycle, so a Deployment's trace is never complete until it exits;
desched makes each cycle a trace of its own and has no such spans (docs/running.md).

The resource carries `service.name` (`--otel-service-name`, default `descheduler`),
`service.namespace` (`--otel-trace-namespace`, when given) and the process's attributes; the
sampler is ParentBased(TraceIdRatioBased(`--otel-sample-rate`)), as upstream's. Without an
endpoint none of OpenTelemetry is imported: the SDK and gRPC are imported on start (0.27 s of
CPU, 1.0 s of wall time on a busy two-core machine), and a run without tracing neither pays that
nor wraps a single call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from desched.errors import InputError
from desched.framework.evictor import ExecutionResult, Executor
from desched.live.cycle import GuardedExecutor
from desched.model.pod import Pod

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer


log = structlog.get_logger("desched.tracing")

T = TypeVar("T")

DEFAULT_SERVICE_NAME = "descheduler"
TRACER_NAME = "sigs.k8s.io/descheduler"  # upstream's instrumentation scope
EVICT_OPERATION = "evict"
# Outcomes of an eviction request that are a failure to upstream (an `Eviction Failed` event).
FAILED = frozenset(("failed", "pdb-blocked"))


@dataclass(frozen=True)
class TracingConfig:
    """The `--otel-*` flags, validated; built only when an endpoint is given."""

    endpoint: str
    ca_cert: str | None = None
    service_name: str = DEFAULT_SERVICE_NAME
    namespace: str = ""
    sample_rate: float = 1.0
    fallback_no_op_on_error: bool = False


def parse_sample_rate(text: str) -> float:
    """pflag's float64: strconv.ParseFloat's syntax and message. Go's TraceIDRatioBased takes
    any value (at least 1: every trace, below 0 or NaN: none); the SDK here takes [0, 1]."""
    try:
        if text != text.strip() or "_" in text:  # Python's float() allows both, Go does not
            raise ValueError(text)
        value = float(text)
    except ValueError:
        raise InputError("--otel-sample-rate",
                         f'invalid argument "{text}" for "--otel-sample-rate" flag: '
                         f'strconv.ParseFloat: parsing "{text}": invalid syntax') from None
    return min(max(value, 0.0), 1.0) if value == value else 0.0


class Tracing:
    """The spans of one `desched run` (see the module's docstring)."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer: Tracer = provider.get_tracer(TRACER_NAME)

    def cycle(self, run: Callable[[], T], number: int, dry_run: bool) -> Callable[[], T]:
        """`run` (a cycle, called in the cycle's thread) inside its runDeschedulerLoop and
        runProfiles spans; a skipped cycle says why in an event, a failed one records the
        exception."""

        def traced() -> T:
            with self.tracer.start_as_current_span(
                    "runDeschedulerLoop", attributes={"cycle": number, "dryRun": dry_run}), \
                    self.tracer.start_as_current_span("runProfiles") as span:
                result = run()
                if isinstance(result, str) and result:  # run_cycle's reason to skip
                    span.add_event("Skipping descheduling cycle", {"reason": result})
                return result

        return traced

    @contextmanager
    def plugin(self, profile: str, plugin: str, point: str) -> Iterator[None]:
        """The hook around each plugin run (framework/runner.py, PluginRunHook)."""
        with self.tracer.start_as_current_span(
                plugin, attributes={"plugin": plugin, "profile": profile, "operation": point}):
            yield

    def guarded(self, inner: Executor, stopping: threading.Event,
                guard: Callable[[], str | None] | None) -> GuardedExecutor:
        """The cycle's GuardedExecutor, tracing each eviction request."""
        return TracedExecutor(inner, stopping, guard, self.tracer)

    def shutdown(self) -> None:
        """Export what is still queued, then close the exporter (a --once run's spans are all
        still queued when the cycle ends)."""
        self.provider.shutdown()


class TracedExecutor(GuardedExecutor):
    """The cycle's guarded executor with an EvictPod span around every eviction request (the
    guard's refusals included); a budget check, a restart or a cordon is no eviction."""

    def __init__(self, inner: Executor, stopping: threading.Event,
                 guard: Callable[[], str | None] | None, tracer: Tracer) -> None:
        super().__init__(inner, stopping, guard)
        self.tracer = tracer

    def evict(self, pod: Pod, profile: str, plugin: str, reason: str) -> ExecutionResult:
        with self.tracer.start_as_current_span("EvictPod", attributes={
                "podName": pod.name, "podNamespace": pod.namespace, "reason": reason,
                "operation": EVICT_OPERATION}) as span:
            result = super().evict(pod, profile, plugin, reason)
            if result.outcome in FAILED:
                span.add_event("Eviction Failed", {"node": pod.node_name,
                                                   "err": result.message})
            elif result.outcome != "evicted":
                span.set_attribute("outcome", result.outcome)
            return result


def start_tracing(config: TracingConfig | None) -> Tracing | None:
    """The tracer provider exporting to `config.endpoint`; None without a config. A CA file
    that cannot be read or holds no certificate is an InputError naming the flag, or, with
    --otel-fallback-no-op-on-error, one logged error and no tracing (upstream's fallback)."""
    if config is None:
        return None
    try:
        return _start(config)
    except InputError as err:
        if not config.fallback_no_op_on_error:
            raise
        log.error("ran into an error trying to set up a trace provider; falling back to "
                  "no tracing", error=str(err))
        return None


def _start(config: TracingConfig) -> Tracing:
    credentials = _credentials(config.ca_cert) if config.ca_cert else None
    # The SDK and gRPC: imported here only (module docstring).
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import ProcessResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    attributes: dict[str, Any] = {"service.name": config.service_name or DEFAULT_SERVICE_NAME}
    if config.namespace:
        attributes["service.namespace"] = config.namespace
    resource = Resource.create(attributes).merge(ProcessResourceDetector().detect())
    if credentials is None:
        exporter = OTLPSpanExporter(endpoint=config.endpoint, insecure=True)
    else:
        exporter = OTLPSpanExporter(endpoint=config.endpoint, credentials=credentials)
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(config.sample_rate)),
                              resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    log.info("tracing enabled", endpoint=config.endpoint, tls=credentials is not None,
             service=attributes["service.name"], sample_rate=config.sample_rate)
    return Tracing(provider)


def _credentials(path: str) -> Any:
    """gRPC TLS credentials trusting the PEM CA certificates in `path`."""
    try:
        pem = Path(path).read_bytes()
    except OSError as err:
        raise InputError("--otel-transport-ca-cert",
                         f"cannot read the CA certificate {path}: {err.strerror}") from None
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise InputError("--otel-transport-ca-cert",
                         f"{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    import grpc

    return grpc.ssl_channel_credentials(root_certificates=pem)

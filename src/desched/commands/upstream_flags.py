"""Upstream `descheduler`'s command-line flags on `desched run`.

A Deployment, Job or CronJob written for upstream's binary runs unchanged: the flags with a meaning
here are mapped (verbosity to the log level, `--logging-format`; the secure port and bind address
are the HTTPS listener, as upstream's), the others are accepted and reported once as having no
effect. Upstream parses flags with pflag, whose booleans also take `--flag=true|false` and whose
shorthands take `-v=3`; click does neither, so the arguments are normalised before click sees them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from desched.errors import InputError

if TYPE_CHECKING:
    from desched.live.tracing import TracingConfig

# Upstream flags that take a value and mean nothing here (TLS tuning of the secure server,
# klog tuning). --tls-cert-file and
# --tls-private-key-file are desched's own options (live/serving.py).
IGNORED_VALUE_FLAGS = (
    "--leader-elect-resource-lock",
    "--cert-dir", "--tls-curve-preferences",
    "--http2-max-streams-per-connection", "--vmodule", "--log-flush-frequency",
    "--log-text-info-buffer-size", "--log-json-info-buffer-size",
)
IGNORED_BOOL_FLAGS = (
    "--permit-port-sharing", "--permit-address-sharing", "--disable-http2-serving",
    "--enable-http2", "--log-text-split-stream",
    "--log-json-split-stream",
)
OTEL_FLAGS = ("--otel-collector-endpoint", "--otel-transport-ca-cert", "--otel-service-name",
              "--otel-trace-namespace", "--otel-sample-rate")
# Booleans `desched run` has (its own and upstream's): pflag lets them take `=true` / `=false`.
BOOL_FLAGS = frozenset(("--once", "--dry-run", "--leader-elect", "--disable-metrics",
                        "--delegate-auth", "--authentication-skip-lookup",
                        "--otel-fallback-no-op-on-error",
                        *IGNORED_BOOL_FLAGS))
# Booleans whose `=false` is told apart from their absence (a Koordinator file's default
# yields to it): given as click's --no-NAME.
NEGATABLE_FLAGS = frozenset(("--leader-elect",))
# strconv.ParseBool's spellings.
_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_FALSE = frozenset(("0", "f", "F", "FALSE", "false", "False"))
# klog verbosity from which upstream's detail (per-pod filter reasons, V(4)) shows.
DEBUG_VERBOSITY = 4


def normalize_args(args: Sequence[str]) -> list[str]:
    """pflag's forms click lacks: `--dry-run=false` (dropped), `--dry-run=true` (bare), `-v=3`."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + list(args[i:])
        name, eq, value = arg.partition("=")
        if eq and name in BOOL_FLAGS:
            if value in _TRUE:
                out.append(name)
            elif value in _FALSE:
                if name in NEGATABLE_FLAGS:
                    out.append("--no-" + name[2:])
            else:
                raise InputError(name, f'invalid argument "{value}" for "{name}" flag: '
                                       f'strconv.ParseBool: parsing "{value}": invalid syntax')
        elif eq and name == "-v":
            out += ["-v", value]
        else:
            out.append(arg)
    return out


def _dest(flag: str) -> str:
    return "upstream_" + flag.lstrip("-").replace("-", "_")


def upstream_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The accepted-and-ignored flags, hidden from --help (the command's epilog names them)."""
    for flag in IGNORED_VALUE_FLAGS:
        command = click.option(flag, _dest(flag), hidden=True)(command)
    for flag in IGNORED_BOOL_FLAGS:
        command = click.option(flag, _dest(flag), is_flag=True, hidden=True)(command)
    return command


def tracing_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Upstream's --otel-* flags (live/tracing.py), with its defaults."""
    for flag, help_ in reversed((
            ("--otel-collector-endpoint", "Export a trace of each cycle (its plugin runs and "
             "eviction requests) over OTLP/gRPC to this HOST:PORT; empty: no tracing."),
            ("--otel-transport-ca-cert", "PEM CA certificate(s) the collector's TLS "
             "certificate must chain to; empty: plaintext gRPC."),
            ("--otel-service-name", "The traces' service.name. [default: descheduler]"),
            ("--otel-trace-namespace", "The traces' service.namespace (none when empty)."),
            ("--otel-sample-rate", "Fraction of cycles traced (ParentBased(TraceIDRatioBased))."
             " [default: 1.0]"))):
        command = click.option(flag, _dest(flag).removeprefix("upstream_"), help=help_,
                               metavar="TEXT")(command)
    return click.option("--otel-fallback-no-op-on-error", "otel_fallback_no_op_on_error",
                        is_flag=True, help="Run without tracing, with an error logged, when "
                        "tracing cannot be set up (a bad CA file) instead of exiting.")(command)


def tracing_config(values: dict[str, Any]) -> tuple[TracingConfig | None, list[str]]:
    """The --otel-* flags, taken out of `values` (the run command's keyword arguments): their
    config when an endpoint is given, and the warnings about the others given without one."""
    from desched.live.tracing import DEFAULT_SERVICE_NAME, TracingConfig, parse_sample_rate

    flags = {flag: values.pop(flag.lstrip("-").replace("-", "_"))
             for flag in (*OTEL_FLAGS, "--otel-fallback-no-op-on-error")}
    endpoint = flags["--otel-collector-endpoint"]
    if not endpoint:
        return None, [f"{flag} has no effect without --otel-collector-endpoint: ignored"
                      for flag, value in flags.items() if value not in (None, False)
                      and flag != "--otel-collector-endpoint"]
    rate = flags["--otel-sample-rate"]
    return TracingConfig(
        endpoint, ca_cert=flags["--otel-transport-ca-cert"] or None,
        service_name=flags["--otel-service-name"] or DEFAULT_SERVICE_NAME,
        namespace=flags["--otel-trace-namespace"] or "",
        sample_rate=1.0 if rate is None else parse_sample_rate(rate),
        fallback_no_op_on_error=flags["--otel-fallback-no-op-on-error"]), []


@dataclass
class UpstreamSettings:
    """What upstream's flags change in a run."""

    log_format: str
    log_level: str
    metrics_address: str | None
    health_address: str | None
    # HOST:PORT of the HTTPS listener (--bind-address, --secure-port); None: no such listener.
    secure_address: str | None = None
    warnings: list[str] = field(default_factory=list)


def apply_upstream_flags(ctx: click.Context, *, verbosity: int | None,
                         logging_format: str | None, secure_port: int | None,
                         bind_address: str | None, disable_metrics: bool, log_format: str,
                         log_level: str, metrics_address: str | None,
                         health_address: str | None,
                         ignored: dict[str, Any]) -> UpstreamSettings:
    """Map upstream's flags onto desched's; desched's own flags, when given, win."""

    def given(param: str) -> bool:
        return ctx.get_parameter_source(param) not in (
            click.core.ParameterSource.DEFAULT, None)

    out = UpstreamSettings(log_format, log_level, metrics_address, health_address)
    if logging_format is not None and not given("log_format"):
        out.log_format = logging_format
    if verbosity is not None and not given("log_level"):
        out.log_level = "debug" if verbosity >= DEBUG_VERBOSITY else "info"
    if secure_port is not None:
        if not 0 <= secure_port <= 65535:
            raise InputError("--secure-port", f"must be a port number 0-65535, got {secure_port}")
        if secure_port != 0:  # upstream: port 0 turns the server off
            host = bind_address or "0.0.0.0"
            out.secure_address = (f"[{host}]:{secure_port}" if ":" in host
                                  else f"{host}:{secure_port}")
    elif bind_address is not None:
        out.warnings.append("--bind-address has no effect without --secure-port")
    for dest, value in ignored.items():
        if value not in (None, False):
            flag = "--" + dest.removeprefix("upstream_").replace("_", "-")
            out.warnings.append(f"{flag} is a flag of upstream's descheduler with no effect in "
                                f"desched: ignored")
    return out


# Upstream's TLS flags that tune the secure port (live/tls_options.py).
TLS_FLAGS = ("--tls-min-version", "--tls-cipher-suites", "--tls-sni-cert-key")


def tls_flag_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for flag, multiple, help_ in reversed((
            ("--tls-min-version", False, "Least TLS version --secure-port accepts: "
             "VersionTLS10, VersionTLS11, VersionTLS12 (the default) or VersionTLS13."),
            ("--tls-cipher-suites", True, "Go's names of the TLS 1.0-1.2 suites "
             "--secure-port offers, in order (comma-separated, repeatable); TLS 1.3's are "
             "always on."),
            ("--tls-sni-cert-key", True, "CERT,KEY[:NAME,...]: another certificate for "
             "--secure-port, served to clients asking for one of NAMEs (else the "
             "certificate's own names) by SNI; repeatable."))):
        command = click.option(flag, _dest(flag).removeprefix("upstream_"), multiple=multiple,
                               help=help_)(command)
    return command


def tls_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The TLS flags, taken out of `values` (the run command's keyword arguments), as
    SecureServing's fields; the flags given, for the check that needs --secure-port."""
    from desched.live.tls_options import split_list

    version = values.pop("tls_min_version")
    suites = tuple(split_list(values.pop("tls_cipher_suites")))
    sni = tuple(values.pop("tls_sni_cert_key"))
    return {"min_tls_version": version, "cipher_suites": suites, "sni_cert_keys": sni}

"""The `desched` command line. Invalid input exits 2 with one line on stderr."""

from __future__ import annotations

import functools
import gc
import io
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from desched import errors
from desched.commands.upstream_flags import (
    TLS_FLAGS,
    tls_flag_options,
    tls_settings,
    tracing_options,
    upstream_options,
)
from desched.decoding.feature_gates import known_features, parse_feature_gates
from desched.errors import InputError, quote

if TYPE_CHECKING:
    from desched.scheduler.profile import SchedulerConfig


F = TypeVar("F", bound=Callable[..., Any])


def _holding_warnings(command: F) -> F:
    """A command that finishes prints its warnings once its input was accepted: refused
    input gets its one error line alone (errors.holding)."""
    @functools.wraps(command)
    def held(*args: Any, **kwargs: Any) -> Any:
        with errors.holding():
            return command(*args, **kwargs)
    return cast(F, held)


def _fail(message: str, code: int = 2) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _parse_now(value: str | None) -> datetime | None:
    """None without --now: the simulation then runs at the snapshot's own time."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InputError("--now", f"not an RFC 3339 time: {value!r}") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


class _Group(click.Group):
    """Turns InputError into one line and exit code 2; anything unexpected into exit code 1."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Click's own usage errors (missing, unknown or invalid flags) as one line too: click
        would print the usage, a hint and the error over four lines."""
        if not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)
        try:
            rv = super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.ClickException as err:
            if type(err).__name__ == "NoArgsIsHelpError":  # no command given (click >= 8.2)
                err.show()
                sys.exit(err.exit_code)
            message = " ".join(err.format_message().split())
            if isinstance(err, click.UsageError) and err.ctx is not None:
                message += f" (see '{err.ctx.command_path} --help')"
            _fail(message, err.exit_code)
        except click.exceptions.Abort:
            _fail("aborted", 1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except InputError as err:
            _fail(str(err))
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:
            sys.exit(0)
        except Exception as err:  # a bug: say so in one line, keep the traceback for debugging
            if os.environ.get("DESCHED_DEBUG"):
                raise
            _fail(f"unexpected failure: {type(err).__name__}: {err} "
                  f"(set DESCHED_DEBUG=1 for a traceback)", 1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="desched")
def main() -> None:
    """desched: a Kubernetes descheduler for upstream and Koordinator policies."""


@main.command("version")
def version_command() -> None:
    """Print desched's version (as --version does; upstream's `descheduler version`)."""
    from importlib.metadata import version

    click.echo(f"desched, version {version('desched')}")


_policy_option = click.option(
    "--policy", "--policy-config-file", "--config", "policy_path", required=True,
    type=click.Path(dir_okay=False, allow_dash=True), help="Policy file (DeschedulerPolicy, "
    "DeschedulerConfiguration, or a ConfigMap holding one); - reads standard input.")
_snapshot_option = click.option(
    "--snapshot", "snapshots", multiple=True, required=True,
    type=click.Path(allow_dash=True),
    help="Snapshot file: `desched snapshot` output, or `kubectl get ... -o json|yaml` output "
         "(Lists, JSON lines, YAML); a directory: every .json, .jsonl, .yaml and .yml file in "
         "it, by name (not its subdirectories); repeatable, - reads standard input.")


def _one_stdin(policy_path: str, snapshots: tuple[str, ...],
               scheduler_config: str | None = None) -> None:
    if [policy_path, *snapshots, scheduler_config].count("-") > 1:
        flags = "--policy, --snapshot and --scheduler-config" if scheduler_config is not None \
            else "--policy and --snapshot"
        raise InputError("", f"only one of {flags} can be - (standard input)")


_SCHEDULER_HELP = ("The scheduler model --reschedule places replacements with: kube-scheduler "
                   "(kube-default) or koord-scheduler with LoadAwareScheduling "
                   "(koord-load-aware), each running kube-scheduler's default profile, or the "
                   "profiles of --scheduler-config.")
_scheduler_option = click.option(
    "--scheduler", type=click.Choice(["kube-default", "koord-load-aware"]),
    default="kube-default", show_default=True, help=_SCHEDULER_HELP)
_scheduler_config_option = click.option(
    "--scheduler-config", "scheduler_config_path", type=click.Path(dir_okay=False,
                                                                   allow_dash=True),
    help="The scheduler's KubeSchedulerConfiguration (kube-scheduler's --config, or "
         "koord-scheduler's; or a ConfigMap holding it): its profiles, chosen by each pod's "
         "schedulerName, place replacements. - reads standard input.")


def _scheduler_config(path: str | None, reschedule: bool) -> SchedulerConfig:
    """The configuration in `path` (the default profile without one); its warnings on stderr."""
    from desched.scheduler.config import load_scheduler_config
    from desched.scheduler.profile import DEFAULT_CONFIG

    if path is None:
        return DEFAULT_CONFIG
    config, warnings = load_scheduler_config(path)
    _warn(warnings)
    if not reschedule:
        _warn([f"--scheduler-config {path}: only --reschedule places pods; without it the "
               f"configuration is checked and changes nothing"])
    return config


@main.command()
@_policy_option
@click.option("--strict", is_flag=True,
              help="Also refuse (exit 2) a policy with warnings (keys nothing reads, plugin "
                   "args notes) or one that enables no deschedule or balance plugin.")
def validate(policy_path: str, strict: bool) -> None:
    """Check a policy file: prints `ok`, or the errors and exits 2."""
    from desched.framework.runner import check_policy
    from desched.plugins.catalog import PLUGINS
    from desched.policy_files.loader import load_policy
    from desched.policy_files.unknown import duplicate_profiles, idle_warning

    policy = load_policy(policy_path, PLUGINS)
    check_policy(policy)
    duplicated = duplicate_profiles(policy) if strict else []
    if duplicated:  # refused as Koordinator's format refuses it: one line, the warnings unsaid
        i, earlier, name = duplicated[0]
        raise InputError(policy.path, f"profiles[{i}].name: Duplicate value: {quote(name)} "
                                      f"(profiles[{earlier}] has it too); with --strict each "
                                      f"profile needs its own name")
    _warn(policy.warnings)
    if strict and policy.warnings:
        # The warnings above say what; this line says why they now fail the check.
        idle = bool(idle_warning(policy))
        others = len(policy.warnings) - idle
        why = [*(["the policy enables no deschedule or balance plugin"] if idle else []),
               *([f"{others} {'other ' if idle else ''}warning(s) above"] if others else [])]
        raise InputError(policy.path, f"--strict: {' and '.join(why)}; with --strict every "
                                      f"warning is an error")
    click.echo("ok")


@main.command()
@_policy_option
@click.option("--output", "-o", type=click.Choice(["yaml", "json"]), default="yaml",
              show_default=True, help="Format of the printed policy (YAML has the notes as "
              "comments; with json they go to stderr).")
def convert(policy_path: str, output: str) -> None:
    """Print a policy (upstream v1alpha1 or v1alpha2, Koordinator's DeschedulerConfiguration,
    or a ConfigMap holding one) as the descheduler/v1alpha2 DeschedulerPolicy desched runs.
    What v1alpha2 cannot hold is refused when it changes decisions, else noted."""
    from desched.plugins.catalog import PLUGINS
    from desched.policy_files.convert import convert_policy, render

    converted = convert_policy(policy_path, PLUGINS)
    _warn(converted.policy.warnings)
    if output == "json":
        for note in converted.notes:
            click.echo(f"note: {note}", err=True)
    click.echo(render(converted, output), nl=False)


@main.command()
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="A table, or one JSON object per plugin in a list.")
def plugins(output: str) -> None:
    """List the plugins policies can enable: the built-ins and those of installed packages
    (the `desched.plugins` entry-point group), each with its extension points and source."""
    import json

    from desched.framework.types import EXTENSION_POINTS
    from desched.plugins.catalog import PLUGINS

    listed = [(name, [p for p in EXTENSION_POINTS if p in spec.extension_points],
               PLUGINS.source(name)) for name, spec in PLUGINS.items()]
    if output == "json":
        click.echo(json.dumps([
            {"name": name, "extensionPoints": points, "source": str(source),
             "distribution": source.distribution, "version": source.version,
             "entryPoint": source.entry_point} for name, points, source in listed], indent=2))
        return
    table = [("NAME", "EXTENSION POINTS", "SOURCE"),
             *((name, ", ".join(points), str(source)) for name, points, source in listed)]
    widths = [max(len(row[i]) for row in table) for i in range(2)]
    for row in table:
        click.echo(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}")


def _warn(warnings: list[str]) -> None:
    """The policy's warnings (ignored keys, nothing enabled), on stderr: never an error."""
    for warning in warnings:
        errors.warn(warning)


def _same_destination() -> bool:
    """Whether stdout and stderr end up in one place (a terminal, `2>&1`): a warning the
    report carries is then shown once, in the report."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    return (out.st_dev, out.st_ino, out.st_rdev) == (err.st_dev, err.st_ino, err.st_rdev)


@main.command()
@_policy_option
@_snapshot_option
@click.option("--now", "now_text",
              help="Fix the clock (RFC 3339). Default: the snapshot's capture time, else its "
                   "newest timestamp.")
@click.option("--cycles", type=click.IntRange(min=1), default=1, show_default=True,
              help="Descheduling cycles to run over the snapshot, one deschedulingInterval "
                   "apart; state such as LowNodeLoad's anomaly detector carries over.")
@click.option("--reschedule", is_flag=True,
              help="Recreate evicted owned pods and place them between cycles.")
@_scheduler_option
@_scheduler_config_option
@click.option("--outcomes", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --reschedule: simulate this many outcomes of kube-scheduler's random "
                   "choice among equally scored nodes (the first breaks ties by node name) and "
                   "give the balance figures after as a range (text output).")
@click.option("--output", "-o", type=click.Choice(["text", "json", "html"]), default="text",
              show_default=True, help="Report format: text for reading, json for tools "
              "(docs/report.md), html for a browser.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Write here, not stdout.")
@click.option("--group-by", "group_by", metavar="LABEL",
              help="Give the balance before and after per value of this node label (e.g. "
                   "node-pool, topology.kubernetes.io/zone), in every output.")
@_holding_warnings
def simulate(policy_path: str, snapshots: tuple[str, ...], now_text: str | None, cycles: int,
             reschedule: bool, scheduler: str, scheduler_config_path: str | None,
             outcomes: int, output: str, out_path: str | None, group_by: str | None) -> None:
    """Run the policy against a cluster snapshot and report what it would evict."""
    from desched.report.render import render
    from desched.simulate.simulation import Simulation

    _one_stdin(policy_path, snapshots, scheduler_config_path)
    # One run, left through _exit_fast: the cyclic garbage collector would only scan what the
    # run keeps (0.8 s of collections at 150,000 pods, bench/README.md); the loader and each
    # cycle pause it already.
    gc.disable()
    now = _parse_now(now_text)
    config = _scheduler_config(scheduler_config_path, reschedule)
    if outcomes > 1 and not reschedule:
        _warn([f"--outcomes {outcomes}: only --reschedule places pods; without it there is one "
               f"outcome"])
    elif outcomes > 1 and output != "text":
        _warn([f"--outcomes {outcomes}: the ranges are in the text summary; {output} shows "
               f"the first outcome"])
    result = Simulation(policy_path, list(snapshots), now, cycles=cycles, reschedule=reschedule,
                        scheduler=scheduler, scheduler_config=config, with_frames=True,
                        group_by=group_by).outcomes(outcomes)
    _warn(result.policy.warnings)
    if group_by is not None and not any(result.groups.values()):
        _warn([f"--group-by {group_by}: no node in the snapshot has this label; every node is "
               f"in one group"])
    text = render(result, output)
    shown = result.warnings if output == "text" and not out_path and _same_destination() else ()
    errors.release(skip=shown)
    _write(text, out_path)
    _exit_fast()


@main.command()
@_policy_option
@_snapshot_option
@click.option("--goal", "goals", multiple=True, required=True, metavar="EXPR",
              help='What the cluster should look like after the run, e.g. "max cpu requests '
                   '<= 70%", "std memory usage < 10", "nodes over 80% cpu usage == 0"; '
                   "repeatable (all must hold).")
@click.option("--vary", multiple=True, metavar="PLUGIN.ARG=LOW:HIGH[:STEP]",
              help="A setting to search and its bounds, e.g. "
                   "LowNodeUtilization.targetThresholds.cpu=50:80:5, or a top-level limit "
                   "(maxNoOfPodsToEvictPerNode=1:10); repeatable. Default: every threshold of "
                   "the policy's balance plugins, over the snapshot's utilization spread.")
@click.option("--cycles", type=click.IntRange(min=1), default=3, show_default=True,
              help="Descheduling cycles each candidate runs.")
@click.option("--reschedule/--no-reschedule", default=True, show_default=True,
              help="Replace evicted pods with the scheduler model between cycles (without it "
                   "evicted pods are gone: an optimistic reading).")
@_scheduler_option
@_scheduler_config_option
@click.option("--now", "now_text",
              help="Fix the clock (RFC 3339). Default: the snapshot's capture time, else its "
                   "newest timestamp.")
@click.option("--max-evictions", type=click.IntRange(min=0), metavar="N",
              help="A candidate may evict at most N pods in a cycle.")
@click.option("--group-by", "group_by", metavar="LABEL",
              help="Give the balance after per value of this node label.")
@click.option("--max-candidates", type=click.IntRange(min=1), default=60, show_default=True,
              help="Run at most this many candidates.")
@click.option("--jobs", type=click.IntRange(min=1), metavar="N",
              help="Worker processes for the candidates. Default: the CPUs available, at most 4.")
@click.option("--floor-time-limit", type=click.FloatRange(min=0), default=60.0,
              show_default=True, metavar="SECONDS",
              help="Time for the floor's solver (the fewest pod moves any descheduler could "
                   "meet the goals with); 0 skips the floor.")
@click.option("--output", "-o", type=click.Choice(["text", "yaml", "json", "html"]),
              default="text", show_default=True,
              help="text: the summary; yaml: the recommended policy file, in the input's "
                   "format; json: everything, for tools; html: a page with the trade-off plot, "
                   "each candidate opening to its figures or its simulate report.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Write here, not stdout.")
@_holding_warnings
def tune(policy_path: str, snapshots: tuple[str, ...], goals: tuple[str, ...],
         vary: tuple[str, ...], cycles: int, reschedule: bool, scheduler: str,
         scheduler_config_path: str | None, now_text: str | None, max_evictions: int | None,
         group_by: str | None, max_candidates: int, jobs: int | None, floor_time_limit: float,
         output: str, out_path: str | None) -> None:
    """Find the balance thresholds that meet a goal with the fewest evictions."""
    from desched.tune.goals import parse_goals
    from desched.tune.render import render
    from desched.tune.tuner import Settings, Tuner, default_jobs

    _one_stdin(policy_path, snapshots, scheduler_config_path)
    parsed = parse_goals(goals)
    settings = Settings(cycles=cycles, reschedule=reschedule, scheduler=scheduler,
                        scheduler_config=_scheduler_config(scheduler_config_path, reschedule),
                        scheduler_config_path=scheduler_config_path,
                        now=_parse_now(now_text), group_by=group_by,
                        max_evictions=max_evictions, budget=max_candidates,
                        jobs=jobs or default_jobs(), floor_time_limit=floor_time_limit)
    tuner = Tuner(policy_path, list(snapshots), parsed, list(vary), settings)
    _warn(tuner.policy.warnings)
    result = tuner.tune()
    # Only the page embeds simulate's reports: each is one more run.
    text = render(result, output, tuner.reports(result) if output == "html" else None)
    errors.release()
    _write(text, out_path)
    _exit_fast()


def _write(text: str, out_path: str | None) -> None:
    if out_path:
        try:
            with open(out_path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as err:
            raise InputError(out_path, f"cannot write output: {err.strerror or err}") from None
    else:
        click.echo(text, nl=not text.endswith("\n"))


def _exit_fast() -> None:
    """Leave without tearing down the snapshot object by object (measured in bench/README.md):
    everything the command had to say is written; nothing else needs cleaning up."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@main.command()
@_policy_option
@_snapshot_option
@click.option("--pod", "pod_ref", help="NAMESPACE/NAME of the pod to explain; NAME alone "
              "when one namespace holds a pod of that name.")
@click.option("--node", "node_name", help="Explain every pod on this node.")
@click.option("--now", "now_text",
              help="Fix the clock (RFC 3339). Default: the snapshot's capture time, else its "
                   "newest timestamp.")
@click.option("--cycles", type=click.IntRange(min=1), default=1, show_default=True,
              help="Cycles to simulate, one deschedulingInterval apart; each is explained.")
@click.option("--reschedule", is_flag=True,
              help="Recreate evicted owned pods and place them between cycles.")
@_scheduler_option
@_scheduler_config_option
@_holding_warnings
def explain(policy_path: str, snapshots: tuple[str, ...], pod_ref: str | None,
            node_name: str | None, now_text: str | None, cycles: int, reschedule: bool,
            scheduler: str, scheduler_config_path: str | None) -> None:
    """Explain why a pod (or each pod on a node) would or would not be evicted."""
    from desched.simulate.explain import explain_run

    _one_stdin(policy_path, snapshots, scheduler_config_path)
    if (pod_ref is None) == (node_name is None):
        raise InputError("", "give exactly one of --pod NAMESPACE/NAME or --node NAME")
    if pod_ref is not None and pod_ref.count("/") > 1:
        raise InputError("--pod", f"expected NAMESPACE/NAME or NAME, got {pod_ref!r}")
    now = _parse_now(now_text)
    config = _scheduler_config(scheduler_config_path, reschedule)
    click.echo(explain_run(policy_path, list(snapshots), now, pod_ref, node_name,
                           cycles=cycles, reschedule=reschedule, scheduler=scheduler,
                           scheduler_config=config))


@main.command()
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config).")
@click.option("--context", help="Kubeconfig context to use.")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Snapshot file to write (one list page per line, as `simulate` reads).")
def snapshot(kubeconfig: str | None, context: str | None, out_path: str) -> None:
    """Dump the cluster's objects that descheduling reads into a snapshot file."""
    from desched.live.capture import run_capture

    count = run_capture(kubeconfig, context, out_path)
    click.echo(f"wrote {count} objects to {out_path}", err=True)


def _given_on_command_line() -> frozenset[str]:
    ctx = click.get_current_context()
    return frozenset(name for name in ctx.params if ctx.get_parameter_source(name)
                     is click.core.ParameterSource.COMMANDLINE)


class _UpstreamCommand(click.Command):
    """Takes upstream's pflag spellings (`--dry-run=true`, `-v=3`) as well as click's."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from desched.commands.upstream_flags import normalize_args

        return super().parse_args(ctx, normalize_args(args))


@main.command(cls=_UpstreamCommand, epilog=(
    "Upstream descheduler's other flags (--cert-dir, --tls-curve-preferences, "
    "--vmodule, ...) are accepted, each reported once as having no "
    "effect."))
@_policy_option
@click.option("--kubeconfig", "--client-connection-kubeconfig", "kubeconfig",
              type=click.Path(dir_okay=False),
              help="Kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config).")
@click.option("--context", help="Kubeconfig context to use.")
@click.option("--once", is_flag=True, help="Run one cycle and exit (the default without "
              "--interval, --cron or a policy deschedulingInterval).")
@click.option("--interval", "--descheduling-interval", "interval",
              help="Run a cycle every DURATION (Go syntax: 5m, 1h30m), start to start; "
                   "0 means once.")
@click.option("--cron", "cron", help="Run cycles on a 5-field crontab schedule, e.g. "
              "'*/2 * * * *'; in UTC unless a CRON_TZ=ZONE prefix or --cron-timezone names a "
              "time zone ('CRON_TZ=Europe/Berlin 0 3 * * *').")
@click.option("--cron-timezone", help="The IANA time zone --cron's times are in (default UTC), "
              "e.g. Europe/Berlin; daylight saving time as docs/running.md says.")
@click.option("--trigger-on", "trigger_on", multiple=True, metavar="EVENT,...",
              help="Also run a cycle on these node events (with --interval or --cron): "
                   "node-added, node-ready, node-uncordoned, node-taints, node-labels, or all; "
                   "a burst is one cycle.")
@click.option("--trigger-debounce", default="10s", show_default=True,
              help="How long after the last node event of a burst its cycle starts (at most "
                   "a minute after its first).")
@click.option("--trigger-max-per-minute", type=int, default=4, show_default=True,
              help="Cycles node events and requests (POST /cycles/run) may start in any "
                   "minute, together.")
@click.option("--dry-run", is_flag=True, help="Decide and report, evict nothing (PDBs and "
              "limits are still applied, in simulation).")
@click.option("--leader-elect/--no-leader-elect", help="Run cycles only while holding a "
              "coordination.k8s.io Lease (for several replicas); a Koordinator configuration "
              "file has it on unless it or --leader-elect=false says otherwise.")
@click.option("--leader-elect-resource-name", default="desched", show_default=True,
              help="Name of the Lease (and of the <name>-state ConfigMap).")
@click.option("--leader-elect-resource-namespace",
              help="Namespace of the Lease (default: $POD_NAMESPACE, the service account's "
                   "namespace, else kube-system).")
@click.option("--leader-elect-lease-duration", default="137s", show_default=True,
              help="How long a Lease is held without renewal before others may take it.")
@click.option("--leader-elect-renew-deadline", default="107s", show_default=True,
              help="How long the holder keeps retrying a renewal before it stops cycles.")
@click.option("--leader-elect-retry-period", default="26s", show_default=True,
              help="Wait between attempts to take or renew the Lease.")
@click.option("--stale-cache-timeout", help="How long a due cycle waits for the cluster "
              "cache to be current again after a watch broke before the cycle is skipped "
              "(Go duration; default: one interval).")
@click.option("--metrics-address", help="Serve /metrics on HOST:PORT (e.g. :10258).")
@click.option("--health-address", help="Serve /healthz and /readyz on HOST:PORT "
              "(e.g. :10259).")
@click.option("--cycles-page/--no-cycles-page", default=True, show_default=True,
              help="Serve /cycles and /cycles.json on the metrics address: the report of the "
                   "cycles this instance keeps (read-only).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Log lines on stderr: key=value text or JSON lines.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True, help="Least severe level logged.")
@click.option("-v", "--v", "verbosity", type=click.IntRange(min=0),
              help="Upstream's klog verbosity: 4 and up log at debug level, below at info "
                   "(--log-level wins).")
@click.option("--logging-format", type=click.Choice(["text", "json"]),
              help="Upstream's spelling of --log-format (--log-format wins).")
@click.option("--secure-port", type=int, help="Serve HTTPS on this port (upstream's flag): "
              "/metrics, /cycles, /cycles.json, /healthz and /readyz; 0 or not given: no "
              "HTTPS listener (upstream's default is 10258).")
@click.option("--bind-address", help="Upstream's address for --secure-port (default 0.0.0.0).")
@click.option("--disable-metrics", is_flag=True,
              help="Upstream's: do not serve /metrics (nor /cycles) on --secure-port.")
@click.option("--tls-cert-file", type=click.Path(dir_okay=False),
              help="PEM certificate (chain) for --secure-port; without it and "
                   "--tls-private-key-file, a self-signed one is generated in memory at start.")
@click.option("--tls-private-key-file", type=click.Path(dir_okay=False),
              help="PEM private key of --tls-cert-file.")
@tls_flag_options
@click.option("--delegate-auth", is_flag=True,
              help="On --secure-port, authenticate the bearer token with a TokenReview and "
                   "authorize the request with a SubjectAccessReview (non-resource path, verb "
                   "get) against the API server: no token 401, not allowed 403.")
@click.option("--authentication-kubeconfig", type=click.Path(dir_okay=False),
              help="Kubeconfig for the TokenReviews (default: the run's own connection); "
                   "implies --delegate-auth.")
@click.option("--authorization-kubeconfig", type=click.Path(dir_okay=False),
              help="Kubeconfig for the SubjectAccessReviews (default: the run's own "
                   "connection); implies --delegate-auth.")
@click.option("--authorization-always-allow-paths", default="/healthz,/readyz,/livez",
              show_default=True, help="Paths --delegate-auth lets anyone GET (comma-separated; "
              "a trailing * matches a prefix).")
@click.option("--authentication-token-webhook-cache-ttl", default="10s", show_default=True,
              help="How long a TokenReview's answer is kept.")
@click.option("--authorization-webhook-cache-authorized-ttl", default="10s", show_default=True,
              help="How long an allowing SubjectAccessReview's answer is kept.")
@click.option("--authorization-webhook-cache-unauthorized-ttl", default="10s",
              show_default=True, help="How long a denying SubjectAccessReview's answer is kept.")
@click.option("--authentication-skip-lookup", is_flag=True, hidden=True,
              help="kube-scheduler's: desched never reads the client CA from "
                   "extension-apiserver-authentication (no client-certificate authentication).")
@click.option("--client-connection-qps", "client_qps", type=float,
              help="Requests per second to the API server (client-go's token bucket); 0: 5, "
                   "negative: no limit; neither this nor --client-connection-burst: no limit.")
@click.option("--client-connection-burst", "client_burst", type=int,
              help="Requests the rate limit lets through at once; 0: 10.")
@click.option("--feature-gates", "feature_gates", multiple=True, metavar="NAME=BOOL,...",
              help="Upstream's feature gates (repeatable; a later pair wins): "
                   + ", ".join(known_features()) + ".")
@tracing_options
@upstream_options
def run(policy_path: str, kubeconfig: str | None, context: str | None, once: bool,
        interval: str | None, cron: str | None, cron_timezone: str | None,
        trigger_on: tuple[str, ...], trigger_debounce: str, trigger_max_per_minute: int,
        dry_run: bool,
        leader_elect: bool,
        leader_elect_resource_name: str, leader_elect_resource_namespace: str | None,
        leader_elect_lease_duration: str, leader_elect_renew_deadline: str,
        leader_elect_retry_period: str, metrics_address: str | None,
        health_address: str | None, stale_cache_timeout: str | None, log_format: str,
        log_level: str, verbosity: int | None,
        logging_format: str | None, secure_port: int | None, bind_address: str | None,
        disable_metrics: bool, cycles_page: bool, tls_cert_file: str | None,
        tls_private_key_file: str | None, delegate_auth: bool,
        authentication_kubeconfig: str | None, authorization_kubeconfig: str | None,
        authorization_always_allow_paths: str, authentication_token_webhook_cache_ttl: str,
        authorization_webhook_cache_authorized_ttl: str,
        authorization_webhook_cache_unauthorized_ttl: str, authentication_skip_lookup: bool,
        client_qps: float | None, client_burst: int | None, feature_gates: tuple[str, ...],
        **ignored: Any) -> int:
    """Deschedule a live cluster: once, every interval, or on a cron schedule."""
    from desched.commands.upstream_flags import apply_upstream_flags, tracing_config
    from desched.live.config import duration
    from desched.live.run import RunConfig, run_command
    from desched.live.serving import SecureServing
    from desched.live.triggers import parse_trigger_on

    tracing, otel_warnings = tracing_config(ignored)  # takes the --otel-* flags out
    tls = tls_settings(ignored)  # takes the TLS flags out
    upstream = apply_upstream_flags(
        click.get_current_context(), verbosity=verbosity, logging_format=logging_format,
        secure_port=secure_port, bind_address=bind_address, disable_metrics=disable_metrics,
        log_format=log_format, log_level=log_level, metrics_address=metrics_address,
        health_address=health_address, ignored=ignored)
    delegate_auth = delegate_auth or bool(authentication_kubeconfig or authorization_kubeconfig)
    secure = None
    if upstream.secure_address is not None:
        secure = SecureServing(
            upstream.secure_address, metrics=not disable_metrics, cert_file=tls_cert_file,
            key_file=tls_private_key_file, delegate_auth=delegate_auth,
            authentication_kubeconfig=authentication_kubeconfig,
            authorization_kubeconfig=authorization_kubeconfig,
            always_allow_paths=tuple(p.strip() for p in
                                     authorization_always_allow_paths.split(",") if p.strip()),
            authn_ttl=duration(authentication_token_webhook_cache_ttl,
                               "--authentication-token-webhook-cache-ttl"),
            authorized_ttl=duration(authorization_webhook_cache_authorized_ttl,
                                    "--authorization-webhook-cache-authorized-ttl"),
            unauthorized_ttl=duration(authorization_webhook_cache_unauthorized_ttl,
                                      "--authorization-webhook-cache-unauthorized-ttl"), **tls)
    else:
        needs = [flag for flag, on in (
            ("--delegate-auth", delegate_auth), ("--tls-cert-file", tls_cert_file),
            ("--tls-private-key-file", tls_private_key_file)) if on]
        if needs:
            raise InputError(needs[0], "applies to the HTTPS listener: give --secure-port PORT "
                                       "(e.g. --secure-port=10258)")
        # Upstream's manifests tune its default secure port: here there is none to tune.
        upstream.warnings += [f"{flag} has no effect without --secure-port: ignored"
                              for flag, value in zip(TLS_FLAGS, tls.values(), strict=True)
                              if value]

    config = RunConfig(
        policy_path=policy_path, kubeconfig=kubeconfig, context=context, once=once,
        interval=interval, cron=cron, cron_timezone=cron_timezone,
        trigger_on=parse_trigger_on(trigger_on),
        trigger_debounce=duration(trigger_debounce, "--trigger-debounce"),
        trigger_max_per_minute=trigger_max_per_minute, dry_run=dry_run,
        leader_elect=leader_elect,
        lease_name=leader_elect_resource_name,
        lease_namespace=leader_elect_resource_namespace,
        lease_duration=leader_elect_lease_duration, renew_deadline=leader_elect_renew_deadline,
        retry_period=leader_elect_retry_period, metrics_address=upstream.metrics_address,
        health_address=upstream.health_address, cycles_page=cycles_page,
        stale_cache_timeout=None if stale_cache_timeout is None else duration(
            stale_cache_timeout, "--stale-cache-timeout"), secure=secure,
        feature_gates=parse_feature_gates(feature_gates), client_qps=client_qps,
        client_burst=client_burst, given=_given_on_command_line(), tracing=tracing)
    return run_command(config, log_format=upstream.log_format, log_level=upstream.log_level,
                       warnings=upstream.warnings + otel_warnings)


if __name__ == "__main__":
    main()

"""`kubectl desched`: desched as a kubectl plugin, the `kubectl-desched` executable on PATH.

kubectl runs `kubectl-desched` with the arguments that follow `desched` on its command line and
its own environment (KUBECONFIG among it); it passes none of its global flags (and
`kubectl --context x desched` does not even find the plugin). So the plugin takes the flags a
kubectl user types where they mean something, and otherwise is `desched`:

- the kubeconfig is found as kubectl finds it: `--kubeconfig`, else $KUBECONFIG, else
  ~/.kube/config, and only then the pod's service account (desched itself, made to run in a
  pod, prefers the service account to ~/.kube/config);
- `snapshot` and `run` read the kubeconfig's current context unless `--context` names another;
- `simulate` and `explain` without `--snapshot` first capture the cluster of that context (the
  file is kept and named, to be given to `--snapshot` again), and take `--kubeconfig` and
  `--context` for it;
- `explain --pod NAME` takes the namespace from `-n/--namespace`, else from the context, as
  `kubectl get pod NAME` does (`--pod NAMESPACE/NAME` as ever).
"""

from __future__ import annotations

import copy
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import click

from desched.errors import InputError

HELP = """desched as a kubectl plugin: `kubectl desched COMMAND` is `desched COMMAND`, for the
cluster of the current kubectl context unless --context NAME (or --kubeconfig FILE) says
otherwise; kubectl passes its own global flags to no plugin, so give them after the command.

\b
  kubectl desched snapshot --out cluster.jsonl
  kubectl desched simulate --policy policy.yaml -o html --out report.html
  kubectl desched explain --policy policy.yaml --pod web-1 -n shop
  kubectl desched validate --policy policy.yaml

simulate and explain without --snapshot capture the cluster first, into a file they name (give
it to --snapshot to ask again about the same moment); explain --pod NAME finds the pod in
-n NAMESPACE, else in the context's namespace.
"""

_CAPTURING = ("simulate", "explain")
_CONNECTING = ("snapshot", "run")
_KUBECONFIG_FLAGS = ("--kubeconfig", "--client-connection-kubeconfig")


def _take(args: list[str], *names: str) -> str | None:
    """Remove the flag (`--flag VALUE` or `--flag=VALUE`, any of `names`) from `args`; its
    value, the last one given."""
    value = None
    i = 0
    while i < len(args):
        name, eq, inline = args[i].partition("=")
        if name in names and (eq or i + 1 < len(args)):
            value = inline if eq else args[i + 1]
            del args[i:i + (1 if eq else 2)]
        else:
            i += 1
    return value


def _has(args: Sequence[str], *names: str) -> bool:
    return any(a.partition("=")[0] in names for a in args)


def _context_namespace(kubeconfig: str | None, context: str | None) -> tuple[str, str]:
    """The context's name and namespace, as kubectl picks them."""
    from desched.live.client import load_config

    config = load_config(kubeconfig, context)
    return config.context_name, config.namespace


def _capture(kubeconfig: str | None, context: str | None) -> str:
    """The cluster of the context into a snapshot file under the temporary directory."""
    from desched.live.capture import run_capture

    name, _ = _context_namespace(kubeconfig, context)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = Path(tempfile.gettempdir()) / "desched-snapshots"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', name)}-{stamp}.jsonl"
    count = run_capture(kubeconfig, context, str(out))
    click.echo(f"note: captured {count} objects of context {name!r} into {out} (give it to "
               f"--snapshot to ask again about this moment)", err=True)
    return str(out)


def _kubectl_kubeconfig() -> str | None:
    """~/.kube/config when kubectl would read it (no $KUBECONFIG), and it exists."""
    if os.environ.get("KUBECONFIG"):
        return None
    path = Path("~/.kube/config").expanduser()
    return str(path) if path.is_file() else None


def plugin_args(argv: Sequence[str]) -> list[str]:
    """The `desched` arguments for what a kubectl user typed after `kubectl desched`."""
    args = list(argv)
    command = next((a for a in args if not a.startswith("-")), None)
    if _has(args, "-h", "--help"):
        return args
    if command in _CONNECTING:
        default = None if _has(args, *_KUBECONFIG_FLAGS) else _kubectl_kubeconfig()
        return args if default is None else [*args, "--kubeconfig", default]
    if command not in _CAPTURING:
        return args
    kubeconfig = _take(args, "--kubeconfig")
    context = _take(args, "--context")
    connection_given = kubeconfig is not None or context is not None
    kubeconfig = kubeconfig or _kubectl_kubeconfig()
    namespace = _take(args, "-n", "--namespace")
    asked_context = False  # whether the context was read (for a pod's namespace)
    if command == "explain":
        pod = _take(args, "--pod")
        if pod is not None:
            if "/" not in pod:
                asked_context = namespace is None
                namespace = namespace or _context_namespace(kubeconfig, context)[1]
                pod = f"{namespace}/{pod}"
            elif namespace is not None and pod.split("/", 1)[0] != namespace:
                raise InputError("--namespace", f"--pod {pod} names another namespace than "
                                                f"-n {namespace}")
            args += ["--pod", pod]
    elif namespace is not None:
        raise InputError("--namespace", "simulate reads the whole cluster (every node's pods "
                                        "count): -n/--namespace is for explain --pod")
    if not _has(args, "--snapshot"):
        args += ["--snapshot", _capture(kubeconfig, context)]
    elif connection_given and not asked_context:
        raise InputError("--context", f"{command} --snapshot reads the file, not a cluster: "
                                      "--kubeconfig and --context are for a run without "
                                      "--snapshot (or explain --pod NAME's namespace)")
    return args


# What the plugin's simulate and explain take besides desched's flags (plugin_args reads them).
_CAPTURE_HELP = ("Without --snapshot: the cluster of the current kubectl context, captured into a "
                 "file first (named on stderr). --context NAME and --kubeconfig FILE pick "
                 "another cluster for that capture.")
_NAMESPACE_HELP = ("--pod NAME alone finds the pod in -n/--namespace NAMESPACE, else in the "
                   "context's namespace, as `kubectl get pod NAME` does.")


def _capturing(command: click.Command) -> click.Command:
    """`command` (simulate, explain) as the plugin runs it: --snapshot is optional (the
    plugin captures the cluster without it), and the help says so."""
    plugin = copy.copy(command)
    params: list[click.Parameter] = []
    for param in command.params:
        if param.name == "snapshots" and isinstance(param, click.Option):
            param = copy.copy(param)
            param.required = False
            param.help = f"{param.help} Default: the current context's cluster, captured."
        params.append(param)
    plugin.params = params
    plugin.epilog = " ".join([_CAPTURE_HELP,
                              *([_NAMESPACE_HELP] if command.name == "explain" else [])])
    return plugin


def main() -> None:
    from desched.commands.cli import main as desched

    plugin = copy.copy(desched)  # the same commands; the help says what this is
    plugin.help = HELP
    plugin.commands = {name: _capturing(command) if name in _CAPTURING else command
                       for name, command in desched.commands.items()}
    try:
        args = plugin_args(sys.argv[1:])
    except InputError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(2)
    plugin.main(args, prog_name="kubectl desched")

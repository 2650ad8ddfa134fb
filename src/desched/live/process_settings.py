"""Koordinator's process settings (the `DeschedulerConfiguration` keys that are about the
koord-descheduler process, not about descheduling) applied to `desched run`.

As koord-descheduler does, a flag given on the command line wins over the file, and the file
wins over the defaults:
- `leaderElection`: Koordinator elects a leader unless the file says `leaderElect: false`, so a
  replicated Deployment moved over unchanged never runs two active instances. A run of one
  cycle takes no Lease. The Lease keys the file sets apply; those it leaves out take
  koord-descheduler's defaults (Lease `koord-descheduler` in `koordinator-system`, 15s/10s/2s)
  when the election comes from the file, and desched's when `--leader-elect` switched it on (its
  manifests' RBAC names desched's Lease). `--leader-elect=false` turns it off. On by the default
  alone (the file says nothing), a Lease the run may not use (403, or its namespace missing:
  desched's own manifests without an election) turns it off with a warning (live/run.py).
- `clientConnection`: `kubeconfig` is --kubeconfig; `qps` and `burst` the client's rate limit
  (Koordinator's defaults 50 and 100 when neither flag is given; a flag replaces its own key
  only, the file's other key still applies); `contentType` / `acceptContentTypes` whether
  desched asks for protobuf.
- `healthzBindAddress` / `metricsBindAddress` (when the file sets them): plain-HTTP listeners
  as --health-address / --metrics-address (one listener when they are the same address; port 0:
  none, as Koordinator); `metricsBindAddress` not beside --secure-port, which serves /metrics.
- `enableProfiling` / `enableContentionProfiling`: Go's pprof, which desched has no equivalent
  of; `true` in the file is reported, once, as not applied.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from desched.errors import InputError, quote
from desched.framework.policy import Policy, ProcessSettings
from desched.live.config import RunConfig

KOORD_QPS = 50.0
KOORD_BURST = 100
KOORD_PORT = 10251  # Koordinator's DefaultInsecureDeschedulerPort
PROTOBUF = "application/vnd.kubernetes.protobuf"
JSON = "application/json"


@dataclass(frozen=True)
class _LeaseKey:
    param: str  # the click parameter of its flag (RunConfig.given)
    config: str  # the RunConfig field
    field: str  # ProcessSettings' field (leaderElection's key)
    koordinator: str  # koord-descheduler's default


_LEASE_KEYS = (
    _LeaseKey("leader_elect_lease_duration", "lease_duration", "lease_duration", "15s"),
    _LeaseKey("leader_elect_renew_deadline", "renew_deadline", "renew_deadline", "10s"),
    _LeaseKey("leader_elect_retry_period", "retry_period", "retry_period", "2s"),
    _LeaseKey("leader_elect_resource_name", "lease_name", "resource_name",
              "koord-descheduler"),
    _LeaseKey("leader_elect_resource_namespace", "lease_namespace", "resource_namespace",
              "koordinator-system"),
)


def apply_process_settings(config: RunConfig, policy: Policy, *, looping: bool) -> list[str]:
    """Apply `policy`'s process settings to `config` (in place), under the flags given on the
    command line (`config.given`); the notes to log, one line each. InputError for a value
    no client could use."""
    process = policy.process
    if process is None:
        return []
    notes: list[str] = []
    path = policy.path
    _leader_election(config, process, path, looping=looping,
                     dry_run=config.dry_run or policy.dry_run, notes=notes)
    _client_connection(config, process, path, notes)
    for key, param, flag in (("healthzBindAddress", "health_address", "--health-address"),
                             ("metricsBindAddress", "metrics_address", "--metrics-address")):
        value = getattr(process, _snake(key))
        if value is None or param in config.given:
            continue
        if param == "metrics_address" and config.secure is not None:
            # The command line chose where /metrics is served, and may guard it there.
            notes.append(f"{path}: {key}: {quote(value)} is not applied: /metrics is served "
                         "on --secure-port")
            continue
        address = _listen_address(value)
        setattr(config, param, address)
        notes.append(f"{path}: {key}: {quote(value)} is applied as {flag} "
                     + (address if address else "(port 0: no listener)"))
    for key in ("enableProfiling", "enableContentionProfiling"):
        if getattr(process, _snake(key)):
            notes.append(f"{path}: {key}: true is not applied: desched has no Go profiler "
                         "(pprof) to serve; profile the process with py-spy instead")
    return notes


def _snake(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


def _leader_election(config: RunConfig, process: ProcessSettings, path: str, *,
                     looping: bool, dry_run: bool, notes: list[str]) -> None:
    from_flag = "leader_elect" in config.given
    if not from_flag:
        wanted = process.leader_elect is not False  # Koordinator's default: on
        if wanted and looping and not dry_run:
            config.leader_elect = True
            config.leader_elect_by_default = process.leader_elect is None
            notes.append(f"{path}: leader election is on, as koord-descheduler's "
                         f"leaderElection{'' if process.leader_elect else ' default'} has it; "
                         "--leader-elect=false turns it off")
        elif process.leader_elect and not looping:
            notes.append(f"{path}: leaderElection.leaderElect: true is not applied: a run of "
                         "one cycle (--once, no interval) takes no Lease")
    # koord-descheduler's Lease defaults only where its election is the one running: a run of
    # one cycle (or one elected by --leader-elect) keeps desched's, which also name where a
    # one-cycle run keeps LowNodeLoad's detectors (live/detector_state.py).
    elected_by_file = not from_flag and config.leader_elect
    for key in _LEASE_KEYS:
        if key.param in config.given:
            continue
        value = getattr(process, key.field)
        if value is None and elected_by_file:
            value = key.koordinator
        if value is not None:
            setattr(config, key.config, value)
    lock = process.resource_lock
    if lock is not None and lock != "leases" and config.leader_elect:
        notes.append(f"{path}: leaderElection.resourceLock: {quote(lock)} is not applied: "
                     "desched's lock is a coordination.k8s.io Lease (\"leases\"), named as "
                     "the file says")


def _client_connection(config: RunConfig, process: ProcessSettings, path: str,
                       notes: list[str]) -> None:
    if process.kubeconfig and "kubeconfig" not in config.given:
        config.kubeconfig = process.kubeconfig
    if process.burst is not None and process.burst < 0:
        raise InputError(path, f"clientConnection.burst: must not be negative, got "
                               f"{process.burst} (client-go would refuse every request)")
    qps_given, burst_given = "client_qps" in config.given, "client_burst" in config.given
    if not qps_given and not burst_given:
        # Koordinator's defaulting: 0 (or absent) is 50 and 100.
        config.client_qps = process.qps or KOORD_QPS
        config.client_burst = process.burst or KOORD_BURST
    elif not qps_given and process.qps:  # each flag replaces its own key only
        config.client_qps = process.qps
    elif not burst_given and process.burst:
        config.client_burst = process.burst
    accept = process.accept_content_types or process.content_type
    if accept is None:
        return
    types = [t.strip() for t in accept.split(",") if t.strip()]
    unknown = [t for t in types if t not in (PROTOBUF, JSON)]
    if unknown:
        notes.append(f"{path}: clientConnection content type {quote(unknown[0])} is not "
                     f"applied: desched reads {JSON} and {PROTOBUF}")
        return
    config.protobuf = PROTOBUF in types


def _listen_address(value: str) -> str | None:
    """A Koordinator bind address as desched's HOST:PORT (None: no listener): a bare IP gets
    Koordinator's port, an empty host is every interface, port 0 turns the listener off."""
    host, sep, port = value.rpartition(":")
    try:
        ipaddress.ip_address(value)
    except ValueError:
        pass
    else:
        host, sep, port = value, ":", str(KOORD_PORT)
    if not sep or port == "0":
        return None
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"

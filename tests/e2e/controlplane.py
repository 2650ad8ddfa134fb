"""A throwaway Kubernetes control plane on loopback, started from the binaries that
`KUBEBUILDER_ASSETS` names (envtest's convention): etcd and kube-apiserver at least; with
kube-controller-manager and kube-scheduler when they are there. Its own free ports, its own data
directory, torn down at the end (also on failure or a signal).

    python tests/e2e/controlplane.py [--assets DIR] [--workdir DIR] -- COMMAND ...

starts it, runs COMMAND with `DESCHED_E2E_KUBECONFIG` (admin), `DESCHED_E2E_COMPONENTS` and
`DESCHED_E2E_WORKDIR` set, stops it and exits with COMMAND's status. `scripts/test` runs the suite
this way when KUBEBUILDER_ASSETS is set; the e2e conftest uses `ControlPlane` directly when pytest
runs alone.

What it writes in the work directory: `kubeconfig` (admin, system:masters), `viewer.kubeconfig`
(a user with no group and no RBAC: every resource request is 403), `audit.log` (the API server's
own record of evictions, pod deletions and Deployment/Lease writes: what the fault tests judge by),
`logs/<component>.log`, and `bin` (a link to the assets, where the benches look for binaries)."""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ASSETS_ENV = "KUBEBUILDER_ASSETS"
KUBECONFIG_ENV = "DESCHED_E2E_KUBECONFIG"
COMPONENTS_ENV = "DESCHED_E2E_COMPONENTS"
WORKDIR_ENV = "DESCHED_E2E_WORKDIR"
REQUIRED = ("etcd", "kube-apiserver")
# The controllers the suite leans on: namespaces go away, every namespace gets its default
# ServiceAccount, budgets are computed, evicted pods come back, Deployments roll out.
CONTROLLERS = "namespace,serviceaccount,disruption,replicaset,deployment,statefulset"

# What the fault tests judge by; everything else is not recorded (the log stays small).
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: [pods/eviction]
- level: Metadata
  verbs: [delete, deletecollection]
  resources:
  - group: ""
    resources: [pods]
- level: Metadata
  verbs: [create, update, patch]
  resources:
  - group: apps
    resources: [deployments]
  - group: coordination.k8s.io
    resources: [leases]
  - group: scheduling.koordinator.sh
    resources: [podmigrationjobs]
- level: Metadata  # every request of the two desched users: the APF fault counts their 429s
  users: [desched-a, desched-b]
  omitStages: [RequestReceived]
- level: None
"""


class ControlPlaneError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing_components(assets: Path) -> list[str]:
    return [name for name in REQUIRED if not os.access(assets / name, os.X_OK)]


@dataclass
class ControlPlane:
    assets: Path
    workdir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    api_port: int = 0
    etcd_port: int = 0
    tokens: dict[str, str] = field(default_factory=dict)
    audit_from: int = 0  # where a test's share of the audit log starts (the fault tests)
    apiserver_args: list[str] = field(default_factory=list)

    # -- what runs ---------------------------------------------------------------------------------
    @property
    def components(self) -> list[str]:
        return list(self.processes)

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def binary(self, name: str) -> Path | None:
        path = self.assets / name
        return path if os.access(path, os.X_OK) else None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self, scheduler: bool = True, controllers: bool = True) -> None:
        missing = missing_components(self.assets)
        if missing:
            raise ControlPlaneError(f"{ASSETS_ENV}={self.assets} lacks {', '.join(missing)}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        link = self.workdir / "bin"
        if not link.exists():
            link.symlink_to(self.assets.resolve())
        try:
            self._certificates()
            self._start_etcd()
            self._start_apiserver()
            if controllers and self.binary("kube-controller-manager"):
                self._start_controller_manager()
            if scheduler and self.binary("kube-scheduler"):
                self._start_scheduler()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process (scheduler first, etcd last); SIGKILL what ignores SIGTERM."""
        for name in reversed(list(self.processes)):
            proc = self.processes[name]
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGCONT)  # a fault test may have stopped it
                    proc.terminate()
        # A throwaway server owes no one a graceful shutdown: a few seconds, then SIGKILL.
        deadline = time.monotonic() + 5
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.processes.clear()

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults (the fault tests drive these) ------------------------------------------------
    def pause(self, name: str) -> None:
        self.processes[name].send_signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self.processes[name].send_signal(signal.SIGCONT)

    def restart_apiserver(self, down_for: float = 0.0) -> None:
        proc = self.processes.pop("kube-apiserver")
        proc.kill()
        proc.wait()
        time.sleep(down_for)
        self._start_apiserver(port=self.api_port)
        # Keep the order stop() tears down in: the API server before etcd.
        for name in ("kube-controller-manager", "kube-scheduler"):
            if name in self.processes:
                self.processes[name] = self.processes.pop(name)

    # -- pieces ------------------------------------------------------------------------------------
    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], cwd=self.workdir, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def _certificates(self) -> None:
        w = self.workdir
        if not (w / "apiserver.crt").exists():
            self._openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
                          "-out", "ca.crt", "-days", "30", "-subj", "/CN=desched-e2e-ca")
            self._openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key",
                          "-out", "apiserver.csr", "-subj", "/CN=kube-apiserver")
            (w / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost,"
                                       "DNS:kubernetes.default.svc,IP:10.96.0.1\n")
            self._openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey",
                          "ca.key", "-CAcreateserial", "-out", "apiserver.crt", "-days", "30",
                          "-extfile", "san.ext")
            self._openssl("genrsa", "-out", "sa.key", "2048")
            self._openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        # desched-a and desched-b: two replicas of desched the audit log tells apart.
        users = {"admin": "system:masters", "system:kube-controller-manager": "system:masters",
                 "system:kube-scheduler": "system:masters", "viewer": "",
                 "desched-a": "system:masters", "desched-b": "system:masters"}
        self.tokens = {user: secrets.token_hex(24) for user in users}
        rows = [f'{self.tokens[u]},{u},{u}-uid{"," + g if g else ""}' for u, g in users.items()]
        tokens = w / "tokens.csv"
        tokens.write_text("\n".join(rows) + "\n")
        tokens.chmod(0o600)
        (w / "audit-policy.yaml").write_text(AUDIT_POLICY)

    def write_kubeconfig(self, path: Path, user: str, server: str | None = None) -> Path:
        """A kubeconfig for `user`, to the API server or to `server` (a relay in front of it on
        127.0.0.1: the certificate names the address, not the port)."""
        ca = base64.b64encode((self.workdir / "ca.crt").read_bytes()).decode()
        text = (f"apiVersion: v1\nkind: Config\n"
                f"clusters: [{{name: e2e, cluster: {{server: \"{server or self.server}\", "
                f"certificate-authority-data: \"{ca}\"}}}}]\n"
                f"users: [{{name: {user}, user: {{token: \"{self.tokens[user]}\"}}}}]\n"
                f"contexts: [{{name: e2e, context: {{cluster: e2e, user: {user}}}}}]\n"
                f"current-context: e2e\n")
        path.write_text(text)
        path.chmod(0o600)
        return path

    def audit(self) -> list[dict[str, Any]]:
        """The audit log's events so far (ResponseComplete), oldest first."""
        path = self.workdir / "audit.log"
        if not path.exists():
            return []
        events = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:  # the last line may be half written
                continue
            if event.get("stage") == "ResponseComplete":
                events.append(event)
        return events

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = (self.workdir / "logs" / f"{name}.log").open("ab")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.processes[name] = proc
        return proc

    def _alive(self, name: str) -> None:
        proc = self.processes[name]
        if proc.poll() is not None:
            tail = (self.workdir / "logs" / f"{name}.log").read_text(errors="replace")
            raise ControlPlaneError(f"{name} exited {proc.returncode}: "
                                    f"{' | '.join(tail.strip().splitlines()[-3:])}")

    def _start_etcd(self) -> None:
        self.etcd_port, peer = free_port(), free_port()
        etcd = str(self.assets / "etcd")
        client_url, peer_url = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{peer}"
        data = str(self.workdir / "etcd")
        helptext = subprocess.run([etcd, "--help"], capture_output=True, text=True,
                                  check=False)
        if "listen-client-urls" in helptext.stdout + helptext.stderr:  # a released etcd
            args = [etcd, "--data-dir", data, "--listen-client-urls", client_url,
                    "--advertise-client-urls", client_url, "--listen-peer-urls", peer_url,
                    "--initial-advertise-peer-urls", peer_url,
                    "--initial-cluster", f"default={peer_url}", "--unsafe-no-fsync",
                    "--log-level", "warn"]
        else:  # the embed-based etcd of ../shared/realk8s: -listen-client, -listen-peer
            args = [etcd, "-data-dir", data, "-listen-client", client_url,
                    "-listen-peer", peer_url]
        self._spawn("etcd", args)
        self._wait("etcd", lambda: _http_ok(f"{client_url}/health"), 60)

    def _start_apiserver(self, port: int | None = None) -> None:
        self.api_port = port or free_port()
        w = self.workdir
        args = [
            str(self.assets / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.api_port}",
            f"--cert-dir={w / 'certs'}",
            f"--tls-cert-file={w / 'apiserver.crt'}",
            f"--tls-private-key-file={w / 'apiserver.key'}",
            f"--client-ca-file={w / 'ca.crt'}",
            f"--token-auth-file={w / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={w / 'sa.pub'}",
            f"--service-account-signing-key-file={w / 'sa.key'}",
            "--api-audiences=https://kubernetes.default.svc",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--enable-priority-and-fairness=false",
            f"--audit-policy-file={w / 'audit-policy.yaml'}",
            f"--audit-log-path={w / 'audit.log'}",
            "--audit-log-format=json",
            *os.environ.get("DESCHED_E2E_APISERVER_ARGS", "").split(),
            *self.apiserver_args,
        ]
        self._spawn("kube-apiserver", args)
        self.write_kubeconfig(self.kubeconfig, "admin")
        self.write_kubeconfig(w / "viewer.kubeconfig", "viewer")
        self._wait("kube-apiserver", self._ready, 120)

    def _ready(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.workdir / "ca.crt"))
        request = urllib.request.Request(f"{self.server}/readyz", headers={
            "Authorization": f"Bearer {self.tokens['admin']}"})
        return _http_ok(request, context)

    def _start_controller_manager(self) -> None:
        config = self.write_kubeconfig(self.workdir / "kcm.kubeconfig",
                                       "system:kube-controller-manager")
        self._spawn("kube-controller-manager", [
            str(self.assets / "kube-controller-manager"), f"--kubeconfig={config}",
            f"--controllers={CONTROLLERS}", "--leader-elect=false", "--secure-port=0",
            "--use-service-account-credentials=false",
            "--concurrent-replicaset-syncs=10", "--concurrent-deployment-syncs=10"])
        self._settle("kube-controller-manager")

    def _start_scheduler(self) -> None:
        config = self.write_kubeconfig(self.workdir / "ksched.kubeconfig",
                                       "system:kube-scheduler")
        self._spawn("kube-scheduler", [
            str(self.assets / "kube-scheduler"), f"--kubeconfig={config}",
            "--leader-elect=false", "--secure-port=0"])
        self._settle("kube-scheduler")

    def _settle(self, name: str) -> None:
        """A controller has no readiness endpoint here (no serving port): it must still be
        running a moment later (a bad flag or kubeconfig ends it at once)."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            self._alive(name)
            time.sleep(0.1)

    def _wait(self, name: str, ready: object, timeout: float) -> None:
        assert callable(ready)
        deadline = time.monotonic() + timeout
        while not ready():
            self._alive(name)
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{name} not ready after {timeout:g} s; see "
                                        f"{self.workdir / 'logs' / (name + '.log')}")
            time.sleep(0.2)


def _http_ok(request: str | urllib.request.Request,
             context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def running(assets: Path, workdir: Path | None = None,
            apiserver_args: list[str] | None = None) -> Iterator[ControlPlane]:
    """A started control plane in `workdir` (a fresh temporary directory when None, removed
    afterwards); `apiserver_args` are extra kube-apiserver flags."""
    owned = workdir is None
    path = Path(tempfile.mkdtemp(prefix="desched-e2e-")) if workdir is None else workdir
    plane = ControlPlane(assets, path, apiserver_args=list(apiserver_args or []))
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()
        if owned:
            shutil.rmtree(path, ignore_errors=True)


def environment(plane: ControlPlane) -> dict[str, str]:
    return {KUBECONFIG_ENV: str(plane.kubeconfig), COMPONENTS_ENV: ",".join(plane.components),
            WORKDIR_ENV: str(plane.workdir), ASSETS_ENV: str(plane.assets)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assets", default=os.environ.get(ASSETS_ENV),
                        help=f"directory of binaries (default ${ASSETS_ENV})")
    parser.add_argument("--workdir", help="keep state and logs here (default: a temporary "
                                          "directory, removed at the end)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.assets or not command:
        parser.error(f"need --assets (or ${ASSETS_ENV}) and a command after --")
    # A signal ends the command and then, through the finally below, the control plane.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = Path(args.workdir).resolve() if args.workdir else None
    started = time.monotonic()
    try:
        with running(Path(args.assets).resolve(), workdir) as plane:
            print(f"control plane: {', '.join(plane.components)} on {plane.server} "
                  f"({time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)
            proc = subprocess.Popen(command, env={**os.environ, **environment(plane)})
            try:
                return proc.wait()
            except BaseException:
                proc.terminate()
                proc.wait()
                raise
    except ControlPlaneError as err:
        print(f"control plane: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

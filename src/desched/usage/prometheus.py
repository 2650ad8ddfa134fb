"""Node usage from Prometheus instant queries (upstream's prometheusUsageClient),
over plain HTTP(S) from the standard library.

A query is evaluated at the run's clock (`--now` in a simulation, so a simulation can replay a
past moment within the server's retention) and must return an instant vector with one sample per
node, labelled `instance` = node name, whose value is a fraction in [0, 1]. Two ways to use it:
- upstream's `MetricResource` mode (LowNodeUtilization `metricsUtilization.source: Prometheus`):
  one query; usage = int(value * 100) of a pseudo-resource whose capacity is 100;
- per-resource mode: one query per resource (e.g. `NODE_EXPORTER_QUERIES`, the node-exporter CPU
  and memory utilisation expressions Volcano's LoadAware uses, over all nodes at once); usage =
  int(value * allocatable), so cpu/memory thresholds work as with requests.
Prometheus says nothing about single pods, so the eviction loop cannot account for what an
eviction frees (upstream's unconstrained mode: one pod per node unless evictionLimits.node).

Authentication: upstream reads a bearer token from a Secret (`authToken.secretReference`) or
uses the in-cluster service account token. desched, which may run with no cluster at all,
reads it from the file named by DESCHED_PROMETHEUS_TOKEN_FILE (re-read every run, so rotation
works) or from DESCHED_PROMETHEUS_TOKEN; without either, and with no secretReference, it uses
the service account token when running in a pod. DESCHED_PROMETHEUS_CA_FILE adds a CA bundle
for https (the service account's ca.crt is added when present, as upstream).

Beyond upstream, bad samples never fail the run: a node without a sample, with two samples, or
with a value that is NaN or outside [0, 1] is left out of the run with its reason. An unreachable
server, an error answer, a result that is not a vector, an empty vector or one without any
`instance` label ends the run with its reason.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from http.client import HTTPException

import msgspec

from desched.model.node import Node
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage.base import Amounts, UsageUnavailable, as_utc
from desched.usage.drift import PodMoves
from desched.usage.metrics_server import moved_usage

log = logging.getLogger("desched.usage")

METRIC_RESOURCE = "MetricResource"
TOKEN_ENV = "DESCHED_PROMETHEUS_TOKEN"
TOKEN_FILE_ENV = "DESCHED_PROMETHEUS_TOKEN_FILE"
CA_FILE_ENV = "DESCHED_PROMETHEUS_CA_FILE"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TIMEOUT_SECONDS = 30.0
INSTANCE = "instance"

# Node-exporter utilisation over the last 2 minutes, one sample per instance (cf. Volcano's
# LoadAware queries, which ask per node; these ask for every node in one query).
NODE_EXPORTER_QUERIES = {
    "cpu": ('avg_over_time((1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}'
            "[1m])))[2m:30s])"),
    "memory": ("avg_over_time((1 - avg by (instance) (node_memory_MemAvailable_bytes / "
               "node_memory_MemTotal_bytes)))[2m:30s])"),
}


class PrometheusError(Exception):
    """A query that produced no usable result; the message says why (one line)."""


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


def format_time(at: datetime) -> str:
    """Seconds since the epoch with the fraction Prometheus accepts ("1795348800",
    "1795348800.25")."""
    at = as_utc(at)
    whole = int(at.timestamp())
    text = f"{whole}.{at.microsecond:06d}".rstrip("0").rstrip(".")
    return text


# -- the HTTP client ---------------------------------------------------------------------------


class _VectorSample(msgspec.Struct):
    metric: dict[str, str] = {}
    value: tuple[float, str] = (0.0, "NaN")


class _Data(msgspec.Struct, rename="camel"):
    result_type: str = ""
    result: msgspec.Raw = msgspec.Raw(b"null")


class _Response(msgspec.Struct, rename="camel"):
    status: str = ""
    data: _Data | None = None
    error_type: str = ""
    error: str = ""
    warnings: list[str] = []


_RESPONSE = msgspec.json.Decoder(_Response)
_VECTOR = msgspec.json.Decoder(list[_VectorSample])


@dataclass(frozen=True)
class BearerToken:
    """A bearer token read from `path` on every use (so a rotated token is picked up) or given
    as `value`; neither means no Authorization header."""

    path: str | None = None
    value: str | None = None

    def __call__(self) -> str | None:
        if self.path:
            try:
                with open(self.path, encoding="utf-8") as handle:
                    return handle.read().strip() or None
            except OSError as err:
                raise PrometheusError(f"cannot read the bearer token file {self.path}: "
                                      f"{err.strerror or err}") from None
        return self.value or None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, secret_configured: bool = False,
                 service_account_dir: str = SERVICE_ACCOUNT_DIR) -> BearerToken:
        """DESCHED_PROMETHEUS_TOKEN_FILE, then DESCHED_PROMETHEUS_TOKEN, then (only when the
        policy names no secret, as upstream) the in-cluster service account token."""
        env = os.environ if env is None else env
        if env.get(TOKEN_FILE_ENV):
            return cls(path=env[TOKEN_FILE_ENV])
        if env.get(TOKEN_ENV):
            return cls(value=env[TOKEN_ENV])
        account_token = os.path.join(service_account_dir, "token")
        if not secret_configured and os.path.isfile(account_token):
            return cls(path=account_token)
        return cls()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _ssl_context(ca_file: str | None, service_account_dir: str) -> ssl.SSLContext:
    context = ssl.create_default_context()
    account_ca = os.path.join(service_account_dir, "ca.crt")
    for path in (account_ca, ca_file):
        if path and os.path.isfile(path):
            context.load_verify_locations(cafile=path)
    return context


class _MethodNotAllowed(Exception):
    pass


class PrometheusClient:
    """Instant queries against `url` (a path prefix is kept: http://host/prometheus). POST with
    a form body like client_golang, falling back to GET when the server refuses POST."""

    def __init__(self, url: str, token: Callable[[], str | None] | None = None,
                 timeout: float = TIMEOUT_SECONDS, ca_file: str | None = None,
                 service_account_dir: str = SERVICE_ACCOUNT_DIR) -> None:
        self.url = url
        self.endpoint = url.rstrip("/") + "/api/v1/query"
        self.token = token or BearerToken()
        self.timeout = timeout
        self._bad_url: str | None = None
        try:
            parsed = urllib.parse.urlsplit(url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                self._bad_url = f"{url!r} is not an http(s) URL with a host"
        except ValueError as err:
            self._bad_url = f"{url!r} is not a valid URL: {err}"
            parsed = urllib.parse.urlsplit("")
        handlers: list[urllib.request.BaseHandler] = []
        # Like Go's ProxyFromEnvironment: never proxy requests to this machine.
        if _is_loopback(parsed.hostname or ""):
            handlers.append(urllib.request.ProxyHandler({}))
        if parsed.scheme == "https":
            ca = ca_file if ca_file is not None else os.environ.get(CA_FILE_ENV)
            handlers.append(urllib.request.HTTPSHandler(
                context=_ssl_context(ca, service_account_dir)))
        self._opener = urllib.request.build_opener(*handlers)

    def query(self, expr: str, at: datetime) -> list[Sample]:
        """The instant vector `expr` evaluates to at `at`."""
        if self._bad_url is not None:
            raise PrometheusError(f"the Prometheus URL {self._bad_url}")
        form = urllib.parse.urlencode({"query": expr, "time": format_time(at)})
        try:
            body = self._send("POST", form)
        except _MethodNotAllowed:
            body = self._send("GET", form)
        try:
            response = _RESPONSE.decode(body)
        except msgspec.DecodeError as err:
            raise PrometheusError(f"unreadable answer from {self.endpoint}: {err}") from None
        if response.status != "success" or response.data is None:
            raise PrometheusError(f"query failed: {response.error_type or 'error'}: "
                                  f"{response.error or 'no data in the answer'}")
        for warning in response.warnings:
            log.info("prometheus warning for %r: %s", expr, warning)
        data = response.data
        if data.result_type != "vector":
            raise PrometheusError(f'expected query results to be of type "vector", got '
                                  f'"{data.result_type}" instead')
        try:
            raw = _VECTOR.decode(data.result)
        except msgspec.DecodeError as err:
            raise PrometheusError(f"unreadable vector in the answer: {err}") from None
        samples = []
        for item in raw:
            try:
                value = float(item.value[1])
            except ValueError:
                value = math.nan
            samples.append(Sample(item.metric, value))
        return samples

    def _send(self, method: str, form: str) -> bytes:
        headers = {"Accept": "application/json"}
        token = self.token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if method == "POST":
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            request = urllib.request.Request(self.endpoint, data=form.encode(),
                                             headers=headers, method="POST")
        else:
            request = urllib.request.Request(f"{self.endpoint}?{form}", headers=headers,
                                             method="GET")
        try:
            with self._opener.open(request, timeout=self.timeout) as reply:
                body: bytes = reply.read()
                return body
        except urllib.error.HTTPError as err:
            if err.code == 405 and method == "POST":
                raise _MethodNotAllowed from None
            raise PrometheusError(self._http_error(err)) from None
        except (urllib.error.URLError, OSError, HTTPException, ValueError) as err:
            reason = getattr(err, "reason", None) or err
            raise PrometheusError(f"cannot reach {self.endpoint}: {reason}") from None

    def _http_error(self, err: urllib.error.HTTPError) -> str:
        status = f"HTTP {err.code} {err.reason}"
        try:
            answer = _RESPONSE.decode(err.read())
        except (msgspec.DecodeError, OSError, HTTPException):
            answer = None
        if answer is not None and answer.error:
            status += f": {answer.error_type}: {answer.error}"
        if err.code in (401, 403):
            status += (f" (desched sends the token from {TOKEN_FILE_ENV} or {TOKEN_ENV}; "
                       f"a policy's authToken secret is not read outside a cluster)")
        return f"{self.endpoint} answered {status}"


# -- the usage source --------------------------------------------------------------------------


def _by_instance(samples: Sequence[Sample], expr: str) -> tuple[dict[str, float], set[str]]:
    """Sample values by `instance`, and the instances with more than one sample."""
    if not samples:
        raise UsageUnavailable(f"the query returned an empty vector: {expr}")
    values: dict[str, float] = {}
    duplicated: set[str] = set()
    for sample in samples:
        instance = sample.labels.get(INSTANCE)
        if instance is None:
            continue  # such a sample names no node; the nodes it should have named say so
        if instance in values:
            duplicated.add(instance)
        values[instance] = sample.value
    if not values:
        raise UsageUnavailable(f"the collected metrics samples are missing the '{INSTANCE}' "
                               f"label, which must hold the node name: {expr}")
    return values, duplicated


def _node_value(node: str, values: Mapping[str, float], duplicated: set[str]) -> float | str:
    """The node's sample value, or why it has no usable one."""
    value = values.get(node)
    if value is None:
        return f"unable to find metric entry for {node}"
    if node in duplicated:
        return f'the query returned more than one sample with {INSTANCE}="{node}"'
    if math.isnan(value):
        return f'the collected metrics sample for "{node}" is NaN'
    if value < 0 or value > 1:
        return (f'the collected metrics sample for "{node}" has value {value!r} outside of '
                f"<0; 1> interval")
    return value


class PrometheusUsage:
    """Node usage from one instant query per resource; `pods` is the node's non-terminal pod
    count. `queries` maps a resource to its expression: MetricResource gives int(value * 100),
    any other resource int(value * the node's allocatable).

    Kept across the runs of one simulation, it corrects what the server answers for the pods
    moved since it was made (`PodMoves`): the server cannot see simulated evictions, and
    without the correction every cycle would find the same node as hot. A moved pod counts
    with its PodMetrics, else its requests; for MetricResource, as its share of the node's cpu
    (the usual query is node cpu utilization: stated, since Prometheus cannot say). Live, a
    source lives one cycle: nothing has moved between its query and its use."""

    pod_usage_known = False

    def __init__(self, snapshot: ClusterSnapshot, client: PrometheusClient,
                 queries: Mapping[str, str], names: Sequence[str],
                 now: Callable[[], datetime]) -> None:
        unknown = [r for r in names if r != "pods" and r not in queries]
        if unknown:
            raise ValueError(f"no query for {unknown}")
        self.snapshot = snapshot
        self.client = client
        self.queries = dict(queries)
        self.names = tuple(names)
        self.now = now
        self._usage: dict[str, Amounts] = {}
        self._pods: dict[str, list[Pod]] = {}
        self.moves = PodMoves(snapshot)
        # Node -> usage as the server answered, by the first sync and by the latest.
        self.first: dict[str, Amounts] = {}
        self._answered: dict[str, Amounts] = {}

    def sync(self, nodes: Sequence[Node]) -> dict[str, str]:
        self._usage.clear()
        self._pods.clear()
        self._answered.clear()
        at = self.now()
        results: dict[str, tuple[dict[str, float], set[str]]] = {}
        for resource in self.names:
            if resource == "pods":
                continue
            expr = self.queries[resource]
            try:
                samples = self.client.query(expr, at)
            except PrometheusError as err:
                raise UsageUnavailable(f"unable to capture prometheus metrics: {err}") from None
            results[resource] = _by_instance(samples, expr)
        problems: dict[str, str] = {}
        snapshot = self.snapshot
        for node in nodes:
            name = node.name
            usage: Amounts = {}
            problem = None
            for resource in self.names:
                if resource == "pods":
                    usage["pods"] = snapshot.node_requested(name).get("pods", 0)
                    continue
                value = _node_value(name, *results[resource])
                if isinstance(value, str):
                    problem = value
                    break
                if resource == METRIC_RESOURCE:
                    usage[resource] = int(value * 100)  # truncated, as upstream
                else:
                    allocatable = node.allocatable.get(resource)
                    if allocatable is None:
                        problem = f"no allocatable {resource} to scale the query result by"
                        break
                    usage[resource] = int(value * allocatable)
            if problem is not None:
                if len(results) > 1:
                    problem = f"{problem} (query for {resource})"
                problems[name] = problem
                continue
            self._answered[name] = dict(usage)
            self.first.setdefault(name, dict(usage))
            self._usage[name] = usage
            self._pods[name] = snapshot.pods_on_node(name)
        self._correct(self._usage)
        return problems

    def _correct(self, usage: dict[str, Amounts]) -> None:
        """Take the pods that left each node off its usage, add those that arrived."""
        nodes = self.snapshot.nodes
        metrics = self.snapshot.metrics_pods
        for name, moved in self.moves.since().items():
            amounts = usage.get(name)
            node = nodes.get(name)
            if amounts is None or node is None:
                continue
            cpu = node.allocatable.get("cpu", 0)
            for pod, sign in moved:
                shift = moved_usage(pod, metrics.get(pod.key))
                for resource in amounts:
                    if resource == METRIC_RESOURCE:
                        delta = shift["cpu"] * 100 // cpu if cpu > 0 else 0
                    elif resource in shift:
                        delta = shift[resource]
                    else:
                        continue
                    amounts[resource] = max(0, amounts[resource] + sign * delta)

    def percentages(self, first: bool = False) -> dict[str, dict[str, float]]:
        """Series ("MetricResource usage", "cpu usage", "memory usage") -> node -> percent of
        capacity: as first answered (`first`), else as the latest answer corrected for the
        pods moved since (a report's figures after a cycle)."""
        if first:
            usage = {name: dict(amounts) for name, amounts in self.first.items()}
        else:
            usage = {name: dict(amounts) for name, amounts in self._answered.items()}
            self._correct(usage)
        out: dict[str, dict[str, float]] = {}
        nodes = self.snapshot.nodes
        for name, amounts in usage.items():
            node = nodes.get(name)
            if node is None:
                continue
            for resource, amount in amounts.items():
                if resource == METRIC_RESOURCE:
                    out.setdefault(f"{METRIC_RESOURCE} usage", {})[name] = float(amount)
                elif resource in ("cpu", "memory") and node.allocatable.get(resource, 0) > 0:
                    out.setdefault(f"{resource} usage", {})[name] = (
                        amount * 100.0 / node.allocatable[resource])
        return out

    def node_usage(self, node: str) -> Amounts:
        return self._usage[node]

    def pods(self, node: str) -> list[Pod]:
        return self._pods[node]

    def pod_usage(self, pod: Pod) -> Amounts:
        """Prometheus node queries say nothing about a pod; callers check pod_usage_known."""
        return {}

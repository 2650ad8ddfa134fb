"""Node usage from Prometheus instant queries (upstream's prometheusUsageClient): the query logic
and the reading of the answers. The requests themselves are made by whoever runs the cycle
(framework.types.UsageQueries): `desched run` over the live layer's HTTP client
(live/prometheus.py), on the event loop; `simulate` makes none, and a plugin run that needs
Prometheus there ends with a note (RecordedQueries gives a run recorded answers instead).

A query is evaluated at the run's clock and must return an instant vector with one sample per
node, labelled `instance` = node name, whose value is a fraction in [0, 1]. Two ways to use it:
- upstream's `MetricResource` mode (LowNodeUtilization `metricsUtilization.source: Prometheus`):
  one query; usage = int(value * 100) of a pseudo-resource whose capacity is 100;
- per-resource mode: one query per resource (e.g. `NODE_EXPORTER_QUERIES`, the node-exporter CPU
  and memory utilisation expressions Volcano's LoadAware uses, over all nodes at once); usage =
  int(value * allocatable), so cpu/memory thresholds work as with requests.
Prometheus says nothing about single pods, so the eviction loop cannot account for what an
eviction frees (upstream's unconstrained mode: one pod per node unless evictionLimits.node).

Beyond upstream, bad samples never fail the run: a node without a sample, with two samples, or
with a value that is NaN or outside [0, 1] is left out of the run with its reason. An unreachable
server, an error answer, a result that is not a vector, an empty vector or one without any
`instance` label ends the run with its reason.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import msgspec

from desched.framework.types import QueryAnswer, QueryFailed, UsageQueries
from desched.model.node import Node
from desched.model.pod import Pod
from desched.snapshot.cluster import ClusterSnapshot
from desched.usage.base import Amounts, UsageUnavailable, as_utc
from desched.usage.drift import PodMoves
from desched.usage.metrics_server import moved_usage

log = logging.getLogger("desched.usage")

METRIC_RESOURCE = "MetricResource"
# Where `desched run` takes the bearer token and the CA bundle from (live/prometheus.py).
TOKEN_ENV = "DESCHED_PROMETHEUS_TOKEN"
TOKEN_FILE_ENV = "DESCHED_PROMETHEUS_TOKEN_FILE"
CA_FILE_ENV = "DESCHED_PROMETHEUS_CA_FILE"
INSTANCE = "instance"
QUERY_PATH = "/api/v1/query"
# Why a run without a way to query (simulate) has no Prometheus usage.
NO_QUERIES = ("prometheus client not initialized: only desched run queries Prometheus (a "
              "simulation makes no network requests)")

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


def query_url(url: str) -> str:
    """The instant-query endpoint under a server URL (a path prefix is kept:
    http://host/prometheus)."""
    return url.rstrip("/") + QUERY_PATH


# -- reading answers ---------------------------------------------------------------------------


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

# The HTTP reason phrases of the statuses a Prometheus answers with (an answer without one).
_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 422: "Unprocessable Entity",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
            503: "Service Unavailable", 504: "Gateway Timeout"}


def read_answer(answer: QueryAnswer, expr: str) -> list[Sample]:
    """The instant vector in a server's answer to `expr`; PrometheusError when there is
    none."""
    if answer.status >= 400:
        raise PrometheusError(_http_error(answer))
    try:
        response = _RESPONSE.decode(answer.body)
    except msgspec.DecodeError as err:
        raise PrometheusError(f"unreadable answer from {answer.endpoint}: {err}") from None
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


def _http_error(answer: QueryAnswer) -> str:
    reason = answer.reason or _REASONS.get(answer.status, "")
    status = f"HTTP {answer.status} {reason}".rstrip()
    try:
        decoded: _Response | None = _RESPONSE.decode(answer.body)
    except msgspec.DecodeError:
        decoded = None
    if decoded is not None and decoded.error:
        status += f": {decoded.error_type}: {decoded.error}"
    if answer.status in (401, 403):
        status += (f" (desched sends the token from {TOKEN_FILE_ENV} or {TOKEN_ENV}; "
                   f"a policy's authToken secret is not read outside a cluster)")
    return f"{answer.endpoint} answered {status}"


# A query as the usage source asks it: (expression, evaluation time) -> the instant vector.
Query = Callable[[str, datetime], list[Sample]]
# How an instant query reaches a server: the form of /api/v1/query -> its answer (see
# framework.types.UsageQueries.prometheus, bound to one provider).
Transport = Callable[[Mapping[str, str]], QueryAnswer]


def instant_query(transport: Transport) -> Query:
    """The query function of one provider: sends the expression at the run's time through
    `transport` and reads the answer; PrometheusError when it has no usable vector."""

    def query(expr: str, at: datetime) -> list[Sample]:
        try:
            answer = transport({"query": expr, "time": format_time(at)})
        except QueryFailed as err:
            raise PrometheusError(str(err)) from None
        return read_answer(answer, expr)

    return query


def provider_query(queries: UsageQueries, url: str,
                   auth_secret: tuple[str, str] | None = None) -> Query:
    """The query function of the policy's Prometheus provider, over `queries`."""
    return instant_query(partial(queries.prometheus, url, auth_secret))


class RecordedQueries:
    """UsageQueries from recorded answers, for a run that must not reach a server (a
    simulation, a test): `answers` maps (url, expression) to the body the server gave, the JSON
    of /api/v1/query; an expression without one gets an empty vector. Every query asked is
    kept in `asked` as (url, form)."""

    def __init__(self, answers: Mapping[tuple[str, str], bytes]) -> None:
        self.answers = dict(answers)
        self.asked: list[tuple[str, dict[str, str]]] = []

    def prometheus(self, url: str, auth_secret: tuple[str, str] | None,
                   params: Mapping[str, str]) -> QueryAnswer:
        self.asked.append((url, dict(params)))
        body = self.answers.get((url, params.get("query", "")),
                                b'{"status":"success","data":{"resultType":"vector",'
                                b'"result":[]}}')
        return QueryAnswer(200, "OK", body, query_url(url))


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

    def __init__(self, snapshot: ClusterSnapshot, query: Query,
                 queries: Mapping[str, str], names: Sequence[str],
                 now: Callable[[], datetime]) -> None:
        unknown = [r for r in names if r != "pods" and r not in queries]
        if unknown:
            raise ValueError(f"no query for {unknown}")
        self.snapshot = snapshot
        self.query = query
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
                samples = self.query(expr, at)
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

"""A real OTLP/gRPC trace receiver for the tests: grpcio's server on 127.0.0.1 with the
opentelemetry-proto TraceService, keeping every ExportTraceServiceRequest it decodes (plaintext,
or TLS with a given certificate). What it received is read back as flat Span records."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]
    scope: str
    status: int


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.lock = threading.Lock()
        self.port = 0

    def Export(self, request: trace_service_pb2.ExportTraceServiceRequest,
               context: grpc.ServicerContext) -> trace_service_pb2.ExportTraceServiceResponse:
        with self.lock:
            self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def spans(self) -> list[Span]:
        with self.lock:
            requests = list(self.requests)
        out = []
        for request in requests:
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.append(Span(
                            span.name, span.trace_id.hex(), span.span_id.hex(),
                            span.parent_span_id.hex(), _attributes(span.attributes),
                            [(e.name, _attributes(e.attributes)) for e in span.events],
                            resource, scope_spans.scope.name, span.status.code))
        return out

    def wait_for(self, check: Callable[[list[Span]], bool], timeout: float = 30.0) -> list[Span]:
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if check(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)


@contextmanager
def receiver(cert_key: tuple[bytes, bytes] | None = None) -> Iterator[Receiver]:
    """A receiver listening on a free port of 127.0.0.1 (TLS with `cert_key`, PEM)."""
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    servicer = Receiver()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    if cert_key is None:
        servicer.port = server.add_insecure_port("127.0.0.1:0")
    else:
        cert, key = cert_key
        servicer.port = server.add_secure_port(
            "127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
    server.start()
    try:
        yield servicer
    finally:
        server.stop(grace=None)

"""A real HTTP server on 127.0.0.1 that answers /api/v1/query like Prometheus, recording every
request (method, path, parameters, headers) so tests can assert what the client sent."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]


def vector(values: dict[str, float | str], **extra_labels: str) -> dict[str, Any]:
    """A successful instant-vector answer: one sample per instance."""
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": name, **extra_labels}, "value": [1795348800, str(value)]}
        for name, value in values.items()]}}


Answer = tuple[int, Any]  # (HTTP status, JSON body or raw bytes)


@dataclass
class FakePrometheus:
    url: str = ""
    requests: list[Request] = field(default_factory=list)
    # query text -> answer; `default` answers any other query.
    answers: dict[str, Answer] = field(default_factory=dict)
    default: Answer = (200, {"status": "success",
                             "data": {"resultType": "vector", "result": []}})
    refuse_post: bool = False
    hook: Callable[[Request], Answer | None] | None = None

    def answer(self, request: Request) -> Answer:
        if self.hook is not None:
            custom = self.hook(request)
            if custom is not None:
                return custom
        return self.answers.get(request.params.get("query", ""), self.default)


def _handler(fake: FakePrometheus) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self, method: str) -> None:
            parsed = urllib.parse.urlsplit(self.path)
            params = dict(urllib.parse.parse_qsl(parsed.query))
            if method == "POST":
                length = int(self.headers.get("Content-Length", "0"))
                params.update(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
            request = Request(method, parsed.path, params, dict(self.headers.items()))
            fake.requests.append(request)
            if method == "POST" and fake.refuse_post:
                status, body = 405, b"method not allowed"
            elif not parsed.path.endswith("/api/v1/query"):
                status, body = 404, b"not found"
            else:
                status, body = fake.answer(request)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


def serve() -> tuple[FakePrometheus, ThreadingHTTPServer, threading.Thread]:
    fake = FakePrometheus()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    return fake, server, thread


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    """A fake Prometheus on 127.0.0.1, stopped after the test: the fixture of the usage and
    the live tests (each conftest imports it)."""
    fake, server, thread = serve()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

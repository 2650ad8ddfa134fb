"""Logging for `desched run`: structlog, rendered as text (key=value) or JSON lines on stderr.

structlog's own loggers (the loop, evictions) and the standard-library loggers the rest of desched
uses (informers, plugins) go through the same renderer, so a JSON log is JSON throughout.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

LEVELS = ("debug", "info", "warning", "error")
# Chatty libraries: one line per HTTP request (watches reconnect every few minutes).
_QUIET = ("httpx2", "httpx", "httpcore", "aiohttp.access", "asyncio")


def configure(fmt: str = "text", level: str = "info", stream: TextIO | None = None) -> None:
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.stdlib.PositionalArgumentsFormatter(),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: loggers created at import time must follow a later configure().
        cache_logger_on_first_use=False,
    )
    renderer: Any
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
        tail: list[Any] = [structlog.processors.format_exc_info]
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
        tail = []
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail,
                    renderer],
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _QUIET:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))


def get_logger(name: str) -> Any:
    """A structlog logger (key-value events) writing through the standard library."""
    return structlog.stdlib.get_logger(name)

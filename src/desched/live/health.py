"""The HTTP listeners of `desched run`: /metrics on --metrics-address, /healthz and /readyz on
--health-address (one listener when both name the same address), plain HTTP; the HTTPS listener
of --secure-port is built on the same server (live/serving.py).

- /healthz: the process is alive and its event loop answers (always 200 "ok").
- /readyz: 200 "ok" once every informer has synced and, with leader election, while this
  instance leads or stands by; otherwise 503 with the reason.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from desched.errors import InputError

# aiohttp is imported when a listener is started: it slows start-up (bench/README.md).
if TYPE_CHECKING:
    from aiohttp import web

Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


@dataclass(frozen=True)
class Address:
    host: str  # "" means every interface
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_address(text: str, flag: str) -> Address:
    """HOST:PORT, [IPv6]:PORT or :PORT (every interface). Port 0 picks a free port."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise InputError(flag, f"expected HOST:PORT (e.g. :10258 or 127.0.0.1:10258), "
                               f"got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise InputError(flag, f"not an IPv6 address: {host!r}") from None
    elif ":" in host:
        raise InputError(flag, f"write an IPv6 address in brackets ([::1]:10258), got {text!r}")
    if host in ("0.0.0.0", "*"):
        host = ""
    return Address(host, int(port_text))


class Readiness:
    """Why the process is not ready yet (None when it is), from callables set by the loop."""

    def __init__(self) -> None:
        self.checks: list[Callable[[], str | None]] = []

    def reason(self) -> str | None:
        for check in self.checks:
            why = check()
            if why:
                return why
        return None


def health_routes(readiness: Readiness) -> dict[str, Handler]:
    from aiohttp import web

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        why = readiness.reason()
        if why is None:
            return web.Response(text="ok")
        return web.Response(status=503, text=why)

    return {"/healthz": healthz, "/readyz": readyz}


class HttpServer:
    """One aiohttp listener serving GET routes (and POST ones, keyed "POST /path")."""

    def __init__(self, address: Address, routes: Mapping[str, Handler], *,
                 ssl_context: ssl.SSLContext | None = None,
                 middlewares: Sequence[Any] = (),
                 on_stop: Callable[[], Awaitable[None]] | None = None) -> None:
        """`ssl_context`: serve HTTPS (live/serving.py); `middlewares` run before routing;
        `on_stop` is awaited when the server stops."""
        from aiohttp import web

        self.address = address
        self.ssl_context = ssl_context
        self._on_stop = on_stop
        app = web.Application(middlewares=list(middlewares))
        for path, handler in routes.items():
            if path.startswith("POST "):  # the one route that writes (live/on_demand.py)
                app.router.add_post(path.removeprefix("POST "), handler)
            else:
                app.router.add_get(path, handler)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self.port = address.port

    async def start(self) -> None:
        from aiohttp import web

        await self._runner.setup()
        site = web.TCPSite(self._runner, self.address.host or None, self.address.port,
                           reuse_address=True, ssl_context=self.ssl_context)
        try:
            await site.start()
        except OSError as err:
            await self._runner.cleanup()
            raise InputError(str(self.address), f"cannot listen: {err.strerror or err}") from None
        for name in self._runner.addresses:
            if isinstance(name, tuple) and len(name) >= 2:
                self.port = int(name[1])  # the real port when 0 was asked for
                break

    async def stop(self) -> None:
        await self._runner.cleanup()
        if self._on_stop is not None:
            await self._on_stop()


async def start_servers(
        listeners: Sequence[tuple[Address, Mapping[str, Handler]]]) -> list[HttpServer]:
    """Start one server per distinct address; routes for the same address are merged (port 0,
    "any free port", is never the same address twice)."""
    groups: list[tuple[Address, dict[str, Handler]]] = []
    for address, routes in listeners:
        same = [g for g in groups if g[0] == address and address.port != 0]
        if same:
            same[0][1].update(routes)
        else:
            groups.append((address, dict(routes)))
    servers: list[HttpServer] = []
    try:
        for address, routes in groups:
            server = HttpServer(address, routes)
            await server.start()
            servers.append(server)
    except BaseException:
        for server in servers:
            await server.stop()
        raise
    return servers

"""The secure listener of `desched run` (upstream's `--secure-port`): HTTPS for /metrics,
/cycles, /cycles.json and the health paths, and, with `--delegate-auth`, the API server's
decision on who may read them.

- TLS: `--tls-cert-file` / `--tls-private-key-file` when given (read at start), else a
  self-signed certificate generated in memory at start (ECDSA P-256, one year, for localhost,
  the loopback addresses, the host name and the bind address), as upstream's SecureServing does
  without certificates. The key never touches a file system: Python's ssl module loads a chain
  only from a path, so it is given an anonymous memory file (memfd) where Linux has one.
- Delegated authentication and authorization, as kube-scheduler's (component-base's
  DelegatingAuthenticationOptions / DelegatingAuthorizationOptions): the request's bearer token
  goes to a TokenReview (authentication.k8s.io/v1), the user it names to a SubjectAccessReview
  (authorization.k8s.io/v1, nonResourceAttributes {path, verb}). No token or a refused token:
  401; a user the review does not allow: 403; paths in `--authorization-always-allow-paths` are
  answered without either (/healthz, /readyz, /livez by default). Both answers are cached for a
  few seconds (upstream's flags and defaults: 10 s each), in bounded maps, so that Prometheus
  scraping every few seconds costs the API server a review pair per TTL, not per scrape.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import ipaddress
import os
import socket
import ssl
import tempfile
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from desched.errors import InputError
from desched.live import logging as desched_logging
from desched.live import tls_options
from desched.live.client import ApiClient, ApiError, ConnectionLost, load_config
from desched.live.health import Address, Handler, HttpServer, parse_address

if TYPE_CHECKING:
    from aiohttp import web

log = desched_logging.get_logger("desched.serving")

DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
DEFAULT_CACHE_TTL = 10.0  # seconds: upstream's three cache TTL flags all default to 10s
CACHE_SIZE = 1024  # decisions kept per cache (least recently used dropped first)
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class SecureServing:
    """The secure listener's settings (from the flags)."""

    address: str  # HOST:PORT, from --bind-address and --secure-port
    metrics: bool = True  # /metrics (and /cycles) there; False with --disable-metrics
    cert_file: str | None = None
    key_file: str | None = None
    delegate_auth: bool = False
    authentication_kubeconfig: str | None = None
    authorization_kubeconfig: str | None = None
    always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS
    authn_ttl: float = DEFAULT_CACHE_TTL
    authorized_ttl: float = DEFAULT_CACHE_TTL
    unauthorized_ttl: float = DEFAULT_CACHE_TTL
    # Upstream's TLS flags (live/tls_options.py).
    min_tls_version: str | None = None
    cipher_suites: tuple[str, ...] = ()
    sni_cert_keys: tuple[str, ...] = ()

    def check(self) -> Address:
        """Everything that can be checked before serving (exit 2 with one line otherwise)."""
        address = parse_address(self.address, "--secure-port")
        if (self.cert_file is None) != (self.key_file is None):
            given, missing = (("--tls-cert-file", "--tls-private-key-file")
                              if self.cert_file else ("--tls-private-key-file", "--tls-cert-file"))
            raise InputError(given, f"needs {missing} too (a certificate and its key)")
        for path in self.always_allow_paths:
            if not path.startswith("/"):
                raise InputError("--authorization-always-allow-paths",
                                 f"a path must start with /, got {path!r}")
        for flag, kubeconfig in (("--authentication-kubeconfig", self.authentication_kubeconfig),
                                 ("--authorization-kubeconfig", self.authorization_kubeconfig)):
            if kubeconfig:
                try:
                    load_config(kubeconfig)
                except InputError as err:
                    raise InputError(flag, str(err)) from None
        tls_context(self, address)
        return address


def check_secure(serving: SecureServing, metrics_address: str | None) -> None:
    """The secure listener's settings, and the plain one beside it: with delegated auth,
    /metrics and /cycles over plain HTTP only on a loopback address (a sidecar, a port-forward),
    or the guard would have an open side door."""
    secure = serving.check()
    if not (serving.delegate_auth and metrics_address):
        return
    plain = parse_address(metrics_address, "--metrics-address")
    if not is_loopback(plain):
        raise InputError("--metrics-address", f"{metrics_address} would serve /metrics and "
                         f"/cycles over plain HTTP without authentication beside the "
                         f"authenticated HTTPS listener on {secure}: give a loopback address "
                         f"(127.0.0.1:PORT or [::1]:PORT) or leave it out")


def is_loopback(address: Address) -> bool:
    if address.host == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.host).is_loopback
    except ValueError:
        return False


# -- TLS -------------------------------------------------------------------------------------

def _server_context(serving: SecureServing) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = tls_options.min_version(serving.min_tls_version)
    tls_options.set_cipher_suites(context, serving.cipher_suites)
    return context


def _load_pair(context: ssl.SSLContext, cert_file: str, key_file: str, flags: tuple[str, str],
               ) -> None:
    for flag, path in zip(flags, (cert_file, key_file), strict=True):
        try:
            with open(path, "rb"):
                pass
        except OSError as err:
            raise InputError(flag, f"cannot read {path}: {err.strerror or err}") from None
    try:
        context.load_cert_chain(cert_file, key_file)
    except (ssl.SSLError, OSError) as err:
        raise InputError(flags[0], f"cannot load the certificate {cert_file} with the key "
                                   f"{key_file}: {err}") from None


def _with_sni(context: ssl.SSLContext, serving: SecureServing) -> ssl.SSLContext:
    """--tls-sni-cert-key: a context per further certificate, chosen by the SNI name."""
    named: list[tuple[str, ssl.SSLContext]] = []
    for value in serving.sni_cert_keys:
        pair = tls_options.parse_sni_cert_key(value)
        other = _server_context(serving)
        _load_pair(other, pair.cert_file, pair.key_file,
                   ("--tls-sni-cert-key", "--tls-sni-cert-key"))
        try:
            names = pair.names or tls_options.cert_names(pair.cert_file)
        except ValueError as err:
            raise InputError("--tls-sni-cert-key", f"cannot read the names of "
                                                   f"{pair.cert_file}: {err}") from None
        named += [(name, other) for name in names]
    if named:
        def choose(sock: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
            wanted = (server_name or "").lower()
            # An exact name first, then a wildcard, as the apiserver picks them.
            for exact in (True, False):
                for pattern, other in named:
                    if (pattern == wanted) if exact else tls_options.matches(pattern, wanted):
                        sock.context = other
                        return
        context.sni_callback = choose
    return context


def tls_context(serving: SecureServing, address: Address) -> ssl.SSLContext:
    context = _server_context(serving)  # TLS 1.2 at least unless --tls-min-version says less
    if serving.cert_file and serving.key_file:
        _load_pair(context, serving.cert_file, serving.key_file,
                   ("--tls-cert-file", "--tls-private-key-file"))
    else:
        cert, key = self_signed(address)
        with _memory_file(cert + key) as path:
            context.load_cert_chain(path)
    return _with_sni(context, serving)


def self_signed(address: Address, *, days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed serving certificate and its key (PEM) for localhost, the loopback
    addresses, this host's name and the bind address."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    host = socket.gethostname()
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    if host and host != "localhost":
        names.append(x509.DNSName(host))
    ips = {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
    with contextlib.suppress(ValueError):
        ips.add(ipaddress.ip_address(address.host))
    names += [x509.IPAddress(ip) for ip in sorted(ips, key=str)]
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                            f"{host or 'localhost'}@{int(now.timestamp())}")])
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_encipherment=False, content_commitment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM,
                              serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path to `data` for a reader that takes only paths: an anonymous memory file (Linux),
    else a private temporary file removed at once."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("desched-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="desched-tls-") as tmp:
        path = Path(tmp) / "tls.pem"
        path.touch(mode=0o600)
        path.write_bytes(data)
        yield str(path)


# -- delegated authentication and authorization --------------------------------------------------

class _User(msgspec.Struct):
    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = msgspec.field(default_factory=dict)


class _TokenReviewStatus(msgspec.Struct):
    authenticated: bool = False
    user: _User = msgspec.field(default_factory=_User)
    error: str = ""


class _TokenReview(msgspec.Struct):
    status: _TokenReviewStatus = msgspec.field(default_factory=_TokenReviewStatus)


class _AccessStatus(msgspec.Struct, rename="camel"):
    allowed: bool = False
    reason: str = ""
    evaluation_error: str = ""


class _AccessReview(msgspec.Struct):
    status: _AccessStatus = msgspec.field(default_factory=_AccessStatus)


class TtlCache(Generic[K, V]):
    """At most `size` entries, each kept for the TTL it was put with; least recently used
    dropped first."""

    def __init__(self, size: int = CACHE_SIZE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.size = size
        self.clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> tuple[bool, V | None]:
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        if entry[0] <= self.clock():
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, entry[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        self._entries[key] = (self.clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


@dataclass(frozen=True)
class Verdict:
    status: int  # 200 (let through), 401, 403 or 500
    message: str = ""
    user: str = ""


ClientFactory = Callable[[], ApiClient]


class Delegator:
    """Asks the API server who a bearer token belongs to and whether that user may GET a
    path; remembers both answers for their TTLs. `authn` / `authz` build the clients the
    reviews are sent with (one client when both are the same factory), on first need."""

    def __init__(self, authn: ClientFactory, authz: ClientFactory | None = None, *,
                 always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS,
                 authn_ttl: float = DEFAULT_CACHE_TTL,
                 authorized_ttl: float = DEFAULT_CACHE_TTL,
                 unauthorized_ttl: float = DEFAULT_CACHE_TTL,
                 size: int = CACHE_SIZE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._factories = (authn, authz or authn)
        self._clients: dict[ClientFactory, ApiClient] = {}
        self.exact = frozenset(p for p in always_allow_paths if not p.endswith("*"))
        self.prefixes = tuple(p[:-1] for p in always_allow_paths if p.endswith("*"))
        self.authn_ttl = authn_ttl
        self.authorized_ttl = authorized_ttl
        self.unauthorized_ttl = unauthorized_ttl
        self.users: TtlCache[bytes, _User | None] = TtlCache(size, clock)
        self.decisions: TtlCache[tuple[Hashable, ...], tuple[bool, str]] = TtlCache(
            size, clock)
        self.token_reviews = 0  # sent, for tests and logs
        self.access_reviews = 0

    @classmethod
    def from_settings(cls, serving: SecureServing, kubeconfig: str | None,
                      context: str | None) -> Delegator:
        def run_client() -> ApiClient:
            return ApiClient.from_config(kubeconfig, context)

        def client_of(path: str | None) -> ClientFactory:
            return (lambda: ApiClient.from_config(path)) if path else run_client

        return cls(client_of(serving.authentication_kubeconfig),
                   client_of(serving.authorization_kubeconfig),
                   always_allow_paths=serving.always_allow_paths,
                   authn_ttl=serving.authn_ttl, authorized_ttl=serving.authorized_ttl,
                   unauthorized_ttl=serving.unauthorized_ttl)

    def always_allowed(self, path: str) -> bool:
        return path in self.exact or path.startswith(self.prefixes)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    def _client(self, which: int) -> ApiClient:
        factory = self._factories[which]
        client = self._clients.get(factory)
        if client is None:
            client = self._clients[factory] = factory()
        return client

    async def verdict(self, path: str, verb: str, authorization: str | None) -> Verdict:
        if self.always_allowed(path):
            return Verdict(200)
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Verdict(401, "Unauthorized")
        user = await self._authenticate(token)
        if user is None:
            return Verdict(401, "Unauthorized")
        allowed, reason = await self._authorize(user, path, verb)
        if allowed is None:
            return Verdict(500, f"cannot authorize user {user.username!r}: {reason}",
                           user.username)
        if not allowed:
            why = f": {reason}" if reason else ""
            return Verdict(403, f'forbidden: User "{user.username}" cannot {verb} path '
                                f'"{path}"{why}', user.username)
        return Verdict(200, user=user.username)

    async def _authenticate(self, token: str) -> _User | None:
        key = hashlib.sha256(token.encode()).digest()  # no token is kept in memory
        hit, user = self.users.get(key)
        if hit:
            return user
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token}}
        self.token_reviews += 1
        try:
            _, review = await self._client(0).call("POST", TOKEN_REVIEWS, _TokenReview,
                                                   what="create tokenreviews", body=body)
        except (InputError, ApiError, ConnectionLost) as err:
            # Upstream answers 401 when the authenticator fails; not cached.
            log.error("cannot authenticate a request: the TokenReview failed", error=str(err))
            return None
        status = review.status if review is not None else _TokenReviewStatus()
        found = status.user if status.authenticated else None
        self.users.put(key, found, self.authn_ttl)
        return found

    async def _authorize(self, user: _User, path: str, verb: str) -> tuple[bool | None, str]:
        extra = tuple(sorted((k, tuple(v)) for k, v in user.extra.items()))
        key = (user.username, user.uid, user.groups, extra, path, verb)
        hit, decision = self.decisions.get(key)
        if hit and decision is not None:
            return decision
        spec: dict[str, Any] = {"user": user.username, "groups": list(user.groups),
                                "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = user.extra
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": spec}
        self.access_reviews += 1
        try:
            _, review = await self._client(1).call("POST", ACCESS_REVIEWS, _AccessReview,
                                                   what="create subjectaccessreviews",
                                                   body=body)
        except (InputError, ApiError, ConnectionLost) as err:
            log.error("cannot authorize a request: the SubjectAccessReview failed",
                      error=str(err), user=user.username, path=path)
            return None, str(err)
        status = review.status if review is not None else _AccessStatus()
        if status.evaluation_error and not status.allowed:
            log.warning("SubjectAccessReview evaluation error", user=user.username, path=path,
                        error=status.evaluation_error)
        decision = (status.allowed, status.reason)
        self.decisions.put(key, decision,
                           self.authorized_ttl if status.allowed else self.unauthorized_ttl)
        return decision


@functools.cache
def user_key() -> Any:
    """Where the guard leaves the request's authenticated user for the handler
    (live/on_demand.py): a typed key where aiohttp has them (3.12), else a name."""
    from aiohttp import web

    typed = getattr(web, "RequestKey", None)
    return typed("desched_user", str) if typed is not None else "desched_user"


def guard(delegator: Delegator) -> Callable[..., Awaitable[web.StreamResponse]]:
    """aiohttp middleware: every request passes the delegator's verdict first (before routing,
    as upstream's filters run before its mux: an unknown path is 401 to no one, 404 to a user
    allowed to GET it)."""
    from aiohttp import web

    @web.middleware
    async def check(request: web.Request,
                    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                    ) -> web.StreamResponse:
        verb = "get" if request.method in ("GET", "HEAD") else request.method.lower()
        verdict = await delegator.verdict(request.path, verb,
                                          request.headers.get("Authorization"))
        if verdict.status == 200:
            request[user_key()] = verdict.user  # "" on an always-allowed path
            return await handler(request)
        reason = {401: "Unauthorized", 403: "Forbidden"}.get(verdict.status,
                                                            "InternalError")
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": verdict.message, "reason": reason, "code": verdict.status}
        headers = {"WWW-Authenticate": 'Bearer realm="desched"'} if verdict.status == 401 \
            else None
        return web.json_response(status, status=verdict.status, headers=headers)

    return check


async def start_secure(serving: SecureServing, routes: Mapping[str, Handler], *,
                       kubeconfig: str | None, context: str | None) -> HttpServer:
    """The HTTPS listener, guarded by delegated authentication and authorization when asked."""
    address = parse_address(serving.address, "--secure-port")
    delegator = (Delegator.from_settings(serving, kubeconfig, context)
                 if serving.delegate_auth else None)
    server = HttpServer(address, routes, ssl_context=tls_context(serving, address),
                        middlewares=[guard(delegator)] if delegator is not None else [],
                        on_stop=delegator.close if delegator is not None else None)
    await server.start()
    return server

"""Async access to the Kubernetes API: raw bytes in, so desched decodes them into its own lean
structs (never a client library's full models; docs/architecture.md).

lightkube 1.0 provides the configuration side: kubeconfig parsing, in-cluster service accounts,
exec credential plugins, client certificates and TLS verification, and the httpx2 client built
from them. Requests go through that httpx2 client directly, because desched needs what lightkube's
typed API hides: the raw body of each list page and each watch line, the list's resourceVersion
and continue token, and watch bookmarks.

Every failure the user can fix is raised as desched.errors.InputError with one line: a bad or
missing kubeconfig, an unreachable server, a TLS failure, 401/403 (naming the verb and resource).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import importlib.metadata
import os
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Container, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, cast

import httpx2
import msgspec
import yaml
from lightkube.config.client_adapter import AsyncClient as _adapter_client
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, User
from lightkube.core.exceptions import ConfigError

from desched.errors import InputError
from desched.live.rate_limit import TokenBucket
from desched.model import proto_decode
from desched.model.kinds import JSON_DECODERS
from desched.model.pod import Pod

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_KUBECONFIG = "~/.kube/config"


class AccessDenied(InputError):
    """401/403: the credentials are wrong or lack a permission."""


class Unreachable(InputError):
    """The API server could not be connected to (DNS, refused, TLS, timeout)."""


class ApiError(Exception):
    """A non-success answer from the API server (other than 401/403)."""

    def __init__(self, code: int, reason: str, message: str, what: str,
                 retry_after: float | None = None) -> None:
        super().__init__(f"cannot {what}: {code} {reason}: {message}".rstrip(": "))
        self.code = code
        self.reason = reason
        self.message = message
        self.what = what
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Worth retrying: the server is overloaded or failing, not refusing the request."""
        return self.code == 429 or self.code >= 500


class ConnectionLost(Exception):
    """The connection failed after it was made: a dropped watch stream, a read timeout."""


class _Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


_status_decoder = msgspec.json.Decoder(_Status)


class _Version(msgspec.Struct):
    major: str = ""
    minor: str = ""


_version_decoder = msgspec.json.Decoder(_Version)
_encoder = msgspec.json.Encoder()
T = TypeVar("T")


class _PodMeta(msgspec.Struct, rename="camel"):
    uid: str = ""
    deletion_timestamp: str | None = None


class _PodHead(msgspec.Struct):
    metadata: _PodMeta = msgspec.field(default_factory=_PodMeta)


_pod_head_decoder = msgspec.json.Decoder(_PodHead)

# What a GET shows of a pod after a request whose answer was lost (ApiClient.pod_state).
PodState = Literal["there", "terminating", "replaced", "gone", "unknown"]


@dataclass
class ReadPod:
    """A pod as read from the server: its JSON as the API gives it (what a write or a
    Reservation copies) and, decoded from the same bytes, desched's lean struct."""

    raw: dict[str, Any]
    body: bytes

    @cached_property
    def pod(self) -> Pod:
        decoded: Pod = JSON_DECODERS["Pod"].decode(self.body)
        return decoded


def _decode(answer: bytes, into: type[T], code: int, what: str) -> T:
    try:
        return msgspec.json.decode(answer, type=into)
    except msgspec.DecodeError as err:  # ValidationError included
        raise ApiError(code, "InvalidResponse", f"cannot decode the answer: {err}",
                       what) from None


def decode_status(body: bytes | msgspec.Raw) -> _Status | None:
    """The metav1.Status in an error body or an ERROR watch event (JSON or protobuf), if it
    is one."""
    if memoryview(body)[:4] == proto_decode.MAGIC:
        found = proto_decode.decode_status(bytes(body))
        return _Status(*found) if found is not None else None
    try:
        return _status_decoder.decode(body)
    except msgspec.DecodeError:
        return None


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- configuration -----------------------------------------------------------------------------

# Fields of kubeconfig entries that name files, resolved against the file that holds them (as
# kubectl does), so several merged KUBECONFIG files keep working.
_PATH_FIELDS = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key", "tokenFile")),
}


def _read_kubeconfig(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(str(path), f"cannot read kubeconfig: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise InputError(str(path), f"kubeconfig is not UTF-8 text: {err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(str(path), f"invalid kubeconfig YAML: {where}{problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(str(path), "invalid kubeconfig: expected a mapping at the top level")
    base = path.resolve().parent
    for section, (inner, fields) in _PATH_FIELDS.items():
        entries = data.get(section) or []
        if not isinstance(entries, list):
            raise InputError(str(path), f"invalid kubeconfig: {section} must be a list")
        for entry in entries:
            body = entry.get(inner) if isinstance(entry, dict) else None
            if isinstance(body, dict):
                for name in fields:
                    value = body.get(name)
                    if isinstance(value, str) and value and not os.path.isabs(value):
                        body[name] = str(base / os.path.expanduser(value))
    return data


def _merge(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """KUBECONFIG merging as kubectl does it: the first file defining a name wins, and the first
    current-context set wins."""
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": []}
    for doc in documents:
        for section in ("clusters", "contexts", "users"):
            seen = {e.get("name") for e in merged[section]}
            for entry in doc.get(section) or []:
                if not isinstance(entry, dict) or "name" not in entry:
                    raise InputError("", f"invalid kubeconfig: an entry of {section} has no name")
                if entry["name"] not in seen:
                    merged[section].append(entry)
                    seen.add(entry["name"])
        if "current-context" not in merged and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
    return merged


def _kubeconfig_files(kubeconfig: str | None, env: Mapping[str, str]) -> list[Path] | None:
    """The kubeconfig files to read, or None for the in-cluster configuration."""
    if kubeconfig:
        return [Path(kubeconfig).expanduser()]
    listed = env.get("KUBECONFIG", "")
    if listed:
        paths = [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
        existing = [p for p in paths if p.is_file()]
        if not existing:
            raise InputError("KUBECONFIG", f"no such file: {listed}")
        return existing
    if env.get("KUBERNETES_SERVICE_HOST"):
        return None
    default = Path(DEFAULT_KUBECONFIG).expanduser()
    if default.is_file():
        return [default]
    raise InputError("", "no Kubernetes configuration: pass --kubeconfig FILE, set KUBECONFIG, "
                         "create ~/.kube/config, or run in a pod with a service account")


def _usable_user(user: User | None, source: str) -> User:
    """lightkube needs a user (an empty one means no authentication, as kubectl does) and
    supports exec plugins but not auth-provider: an OIDC auth-provider's current id-token is
    used as a bearer token, any other provider is refused with the fix."""
    if user is None:
        return User()
    provider = user.auth_provider
    if not provider:
        return user
    name = provider.get("name", "")
    token = (provider.get("config") or {}).get("id-token")
    if name == "oidc" and token:
        return msgspec.structs.replace(user, token=token, auth_provider=None)
    raise InputError(source, f"auth-provider {name!r} is not supported: use an exec credential "
                             "plugin (e.g. kubelogin, gke-gcloud-auth-plugin) instead")


def load_config(kubeconfig: str | None = None, context: str | None = None, *,
                service_account_dir: str = SERVICE_ACCOUNT_DIR,
                env: Mapping[str, str] | None = None) -> SingleConfig:
    """The connection settings, chosen as kubectl and the descheduler do: --kubeconfig, else the
    KUBECONFIG files (merged), else the pod's service account when running in a cluster, else
    ~/.kube/config. `context` picks a context (default: the current-context)."""
    env = os.environ if env is None else env
    files = _kubeconfig_files(kubeconfig, env)
    if files is None:
        if context:
            raise InputError("--context", "needs a kubeconfig file (running in-cluster, none "
                                          "was given)")
        return _in_cluster(service_account_dir, env)
    source = str(files[0])
    merged = _merge([_read_kubeconfig(p) for p in files])
    try:
        config = KubeConfig.from_dict(merged, fname=files[0])
    except (msgspec.ValidationError, KeyError, TypeError) as err:
        raise InputError(source, f"invalid kubeconfig: {_one_line(str(err))}") from None
    name = context or config.current_context
    if not name:
        raise InputError(source, "no current-context is set: pass --context NAME")
    ctx = config.contexts.get(name)
    if ctx is None:
        known = ", ".join(sorted(config.contexts)) or "none"
        raise InputError(source, f"context {name!r} not found (contexts: {known})")
    if ctx.cluster not in config.clusters:
        raise InputError(source, f"context {name!r} names cluster {ctx.cluster!r}, which is not "
                                 "defined")
    if ctx.user and ctx.user not in config.users:
        raise InputError(source, f"context {name!r} names user {ctx.user!r}, which is not "
                                 "defined")
    single = config.get(name)
    assert single is not None  # a name was given, so lightkube returns a config or raises
    return single._replace(user=_usable_user(single.user, source))


def _in_cluster(account_dir: str, env: Mapping[str, str]) -> SingleConfig:
    base = Path(account_dir)
    token_file = base / "token"
    if not token_file.is_file():
        raise InputError("in-cluster config", f"no service account token at {token_file}")
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:
        host = f"[{host}]"
    ca = base / "ca.crt"
    cluster = Cluster(server=f"https://{host}:{port}",
                      certificate_auth=str(ca) if ca.is_file() else None)
    # A token file (not the token itself), so the rotated token is re-read on 401.
    user = User(token_file=str(token_file))
    config = KubeConfig.from_one(cluster=cluster, user=user, context_name="in-cluster")
    single = config.get()
    assert single is not None
    return single


# -- the client ----------------------------------------------------------------------------------

# What a list of a kind desched decodes from protobuf asks for: protobuf where the server
# serves it (built-in kinds), JSON otherwise (CRDs, aggregated APIs, test servers).
PROTOBUF_OR_JSON = f"{proto_decode.CONTENT_TYPE}, application/json"
PROTOBUF_STREAM_OR_JSON = f"{proto_decode.CONTENT_TYPE};stream=watch, application/json"


class ApiClient:
    """One connection pool to one API server; raw GETs and line-by-line streams.

    `protobuf`: whether get(..., protobuf=True) may ask for protobuf (False: always JSON).
    `limiter`: the client-side rate limit every request waits for (live/rate_limit.py)."""

    def __init__(self, config: SingleConfig, *, timeout: float = 60.0,
                 transport: httpx2.AsyncBaseTransport | None = None,
                 trust_env: bool = True, protobuf: bool = True,
                 limiter: TokenBucket | None = None) -> None:
        self.config = config
        self.protobuf = protobuf
        self.limiter = limiter
        self.watch_list: bool | None = None  # see offers_watch_list
        self._version_lock = asyncio.Lock()
        self.server = config.cluster.server
        self.source = str(config.fname) if config.fname else config.context_name
        self._timeout = timeout
        # lightkube types `transport` as the sync kind; the async client takes the async one.
        params = ConnectionParams(timeout=httpx2.Timeout(timeout), trust_env=trust_env,
                                  transport=cast(Any, transport))
        try:
            self._http: httpx2.AsyncClient = _adapter_client(config, params)
        except (OSError, ssl.SSLError, binascii.Error, ValueError, ConfigError) as err:
            raise InputError(self.source, "cannot set up the connection to "
                                          f"{self.server}: {_one_line(str(err))}") from None
        # Names desched in the API server's audit log and request metrics.
        self._http.headers["User-Agent"] = f"desched/{_version()}"

    @classmethod
    def from_config(cls, kubeconfig: str | None = None, context: str | None = None,
                    **options: Any) -> ApiClient:
        return cls(load_config(kubeconfig, context), **options)

    @classmethod
    def for_server(cls, server: str, *, token: str | None = None,
                   ca_data: bytes | None = None, **options: Any) -> ApiClient:
        """A client for a server URL without a kubeconfig (tests, tools)."""
        ca = base64.b64encode(ca_data).decode() if ca_data else None
        cluster = Cluster(server=server, certificate_auth_data=ca)
        config = KubeConfig.from_one(cluster=cluster, user=User(token=token)).get()
        assert config is not None
        return cls(config, **options)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def get(self, path: str, params: Mapping[str, str] | None = None, *,
                  what: str, protobuf: bool = False) -> bytes:
        """The body of a GET, decompressed. `what` names the request in errors ("list pods").
        `protobuf`: accept a protobuf body (it starts with proto_decode.MAGIC) as well as JSON,
        for a kind desched decodes from both."""
        headers = {"Accept": PROTOBUF_OR_JSON} if protobuf and self.protobuf else None
        if self.limiter is not None:
            await self.limiter.wait()
        try:
            response = await self._http.get(path, params=params, headers=headers)
        except Exception as err:
            raise self._transport_error(err, what) from None
        if response.status_code >= 400:
            raise self._status_error(response, response.content, what)
        return response.content

    async def request(self, method: str, path: str, *, what: str, body: bytes | None = None,
                      timeout: float | None = None,
                      content_type: str = "application/json") -> httpx2.Response:
        """Any request (writes: POST, PUT, PATCH, DELETE) with a JSON body (a PATCH names its
        kind in `content_type`, e.g. application/merge-patch+json). Transport problems raise as
        get() raises them; the status is the caller's to judge (see status_error), as each
        write gives some codes a meaning of its own (409, 429, 404)."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        limit = httpx2.Timeout(timeout) if timeout is not None else httpx2.USE_CLIENT_DEFAULT
        if self.limiter is not None:
            await self.limiter.wait()
        try:
            return await self._http.request(method, path, content=body, headers=headers,
                                            timeout=limit)
        except Exception as err:
            raise self._transport_error(err, what) from None

    async def offers_watch_list(self) -> bool:
        """Whether the server streams a watch's initial state (sendInitialEvents, the WatchList
        feature): on by default from Kubernetes 1.34 (1.32 had it on, 1.33 off again). Asked
        once (GET /version); a server that refuses it after all (422) sets `watch_list` False,
        and a server that does not say its version is not asked to stream."""
        async with self._version_lock:
            if self.watch_list is None:
                try:
                    body = await self.get("/version", what="read the server version")
                    version = _version_decoder.decode(body)
                    minor = int("".join(c for c in version.minor if c.isdigit()) or 0)
                    self.watch_list = (int(version.major or 0), minor) >= (1, 34)
                except (ApiError, InputError, ConnectionLost, msgspec.DecodeError, ValueError):
                    self.watch_list = False
        return self.watch_list

    def status_error(self, response: httpx2.Response, what: str) -> Exception:
        """The one-line error get() would raise for this response's status."""
        return self._status_error(response, response.content, what)

    async def call(self, method: str, path: str, into: type[T], *, what: str,
                   body: object = None, allow: Container[int] = (),
                   timeout: float | None = None) -> tuple[int, T | None]:
        """A request whose answer is decoded into `into` (a dict, a lean struct); `body`, when
        given, goes as JSON. A status in `allow` comes back with None, for the caller to judge
        (404: gone, 409: conflict); any other error status raises as get() raises it, and an
        answer that does not decode raises ApiError InvalidResponse."""
        code, answer = await self._answer(method, path, what, body, allow, timeout)
        return code, None if answer is None else _decode(answer, into, code, what)

    async def read_pod(self, namespace: str, name: str, uid: str | None = None, *,
                       timeout: float | None = None) -> ReadPod | None:
        """The pod, or None when it is gone (404) or, given `uid`, replaced by another pod of
        that name. Errors raise as call() raises them."""
        what = f"get pod {namespace}/{name}"
        code, answer = await self._answer("GET", f"/api/v1/namespaces/{namespace}/pods/{name}",
                                          what, None, (404,), timeout)
        if answer is None:
            return None
        raw = _decode(answer, dict[str, Any], code, what)
        if uid and (raw.get("metadata") or {}).get("uid") != uid:
            return None
        return ReadPod(raw, answer)

    async def pod_state(self, namespace: str, name: str, uid: str, *,
                        timeout: float | None = None) -> PodState:
        """What a GET shows of pod `uid` after a request whose answer was lost: still there,
        terminating, replaced by another pod of that name, gone (404), or unknown (the GET
        failed, or its answer says nothing of the pod's identity)."""
        try:
            code, answer = await self._answer(
                "GET", f"/api/v1/namespaces/{namespace}/pods/{name}",
                f"get pod {namespace}/{name}", None, range(300, 600), timeout)
        except (InputError, ConnectionLost):
            return "unknown"
        if answer is None or code != 200:
            return "gone" if code == 404 else "unknown"
        try:
            meta = _pod_head_decoder.decode(answer).metadata
        except msgspec.DecodeError:
            return "unknown"
        if meta.uid and meta.uid != uid:
            return "replaced"
        if meta.deletion_timestamp:
            return "terminating"
        return "there" if meta.uid else "unknown"

    async def _answer(self, method: str, path: str, what: str, body: object,
                      allow: Container[int], timeout: float | None) -> tuple[int, bytes | None]:
        content = _encoder.encode(body) if body is not None else None
        response = await self.request(method, path, what=what, body=content, timeout=timeout)
        code = response.status_code
        if code in allow:
            return code, None
        if code >= 400:
            raise self.status_error(response, what)
        return code, response.content

    @asynccontextmanager
    async def stream(self, path: str, params: Mapping[str, str] | None = None, *, what: str,
                     read_timeout: float | None = None,
                     protobuf: bool = False) -> AsyncIterator[AsyncIterator[bytes]]:
        """A streamed GET (a watch) as an iterator of its events: JSON lines without the line
        ends, or with `protobuf` (and a server that answers in it) the watch stream's
        length-prefixed protobuf WatchEvent messages, told apart by the response's Content-Type.

        `read_timeout` bounds the silence between chunks: a half-dead connection then fails
        instead of hanging forever."""
        timeout = httpx2.Timeout(self._timeout, read=read_timeout)
        headers = {"Accept": PROTOBUF_STREAM_OR_JSON} if protobuf and self.protobuf else None
        request = self._http.build_request("GET", path, params=params, timeout=timeout,
                                           headers=headers)
        if self.limiter is not None:
            await self.limiter.wait()
        try:
            response = await self._http.send(request, stream=True)
        except Exception as err:
            raise self._transport_error(err, what) from None
        try:
            if response.status_code >= 400:
                try:
                    body = await response.aread()
                except httpx2.HTTPError:
                    body = b""
                raise self._status_error(response, body, what)
            framed = response.headers.get("Content-Type", "").startswith(
                proto_decode.CONTENT_TYPE)
            lines = self._frames(response, what) if framed else self._lines(response, what)
            try:
                yield lines
            finally:
                await lines.aclose()
        finally:
            await response.aclose()

    async def _lines(self, response: httpx2.Response, what: str) -> AsyncGenerator[bytes, None]:
        buf = bytearray()
        scanned = 0  # buf[:scanned] holds no line end
        try:
            async for chunk in response.aiter_bytes():
                buf += chunk
                start = 0
                while (end := buf.find(b"\n", scanned)) >= 0:
                    if end > start:
                        yield bytes(buf[start:end])
                    start = scanned = end + 1
                if start:
                    del buf[:start]
                scanned = len(buf)
        except httpx2.TransportError as err:
            raise ConnectionLost(f"{what}: {_describe(err)}") from None
        # Anything after the last line end is an event cut off mid-way: it is dropped.

    async def _frames(self, response: httpx2.Response, what: str) -> AsyncGenerator[bytes, None]:
        """A protobuf watch stream's messages: each is preceded by its length (4 bytes, big
        endian)."""
        buf = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                buf += chunk
                start = 0
                while len(buf) - start >= 4:
                    end = start + 4 + int.from_bytes(buf[start:start + 4], "big")
                    if end > len(buf):
                        break
                    yield bytes(buf[start + 4:end])
                    start = end
                if start:
                    del buf[:start]
        except httpx2.TransportError as err:
            raise ConnectionLost(f"{what}: {_describe(err)}") from None
        # A frame cut off mid-way is dropped, as a partial JSON line is.

    def _transport_error(self, err: Exception, what: str) -> Exception:
        if isinstance(err, httpx2.ConnectError | httpx2.ConnectTimeout | httpx2.UnsupportedProtocol
                      | httpx2.ProxyError | httpx2.InvalidURL):
            return Unreachable(self.server, f"cannot connect to the API server to {what}: "
                                            f"{_describe(err)}")
        if isinstance(err, httpx2.TransportError):
            return ConnectionLost(f"{what}: {_describe(err)}")
        if isinstance(err, ConfigError | OSError | ValueError | KeyError):
            # Raised while authenticating, e.g. by an exec credential plugin.
            return InputError(self.source, f"cannot get credentials to {what}: "
                                           f"{_one_line(str(err) or type(err).__name__)}")
        return err

    def _status_error(self, response: httpx2.Response, body: bytes, what: str) -> Exception:
        code = response.status_code
        status = decode_status(body)
        message = status.message if status and status.message else \
            _one_line(body.decode("utf-8", "replace"), 200)
        reason = status.reason if status and status.reason else response.reason_phrase
        if code == 401:
            return AccessDenied(self.server, f"unauthorized (401) to {what}: the credentials in "
                                             f"{self.source} were refused: {_one_line(message)}")
        if code == 403:
            return AccessDenied(self.server, f"forbidden (403) to {what}: {_one_line(message)}")
        retry_after: float | None = None
        header = response.headers.get("Retry-After")
        if header and header.isdigit():
            retry_after = float(header)
        return ApiError(code, reason, _one_line(message), what, retry_after)


def _version() -> str:
    try:
        return importlib.metadata.version("desched")
    except importlib.metadata.PackageNotFoundError:
        return "dev"


def transport_error_text(err: Exception) -> str:
    """A transport error on one line: httpx's message, else the underlying cause's, else the
    error's type (httpx raises some with no message)."""
    text = str(err)
    cause = err.__cause__ or err.__context__
    if not text and cause is not None:
        text = str(cause) or type(cause).__name__
    return " ".join((text or type(err).__name__).split())


def run_on_loop(loop: asyncio.AbstractEventLoop, request: Coroutine[Any, Any, T],
                refusal: str) -> T:
    """Run `request` on `loop` and wait for its answer, from a thread other than the loop's
    (the cycle's): RuntimeError(`refusal`) on the loop itself, which would wait for itself."""
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        request.close()
        raise RuntimeError(refusal)
    return asyncio.run_coroutine_threadsafe(request, loop).result()


def _describe(err: Exception) -> str:
    """A transport error in a few words."""
    return _one_line(transport_error_text(err))

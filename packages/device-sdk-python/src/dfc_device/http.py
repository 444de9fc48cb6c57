"""The device side of the HTTP API: standard-library HTTP in a worker thread, typed answers,
one error type (and its subclass for answers the SDK cannot use). Every request has a deadline,
reads a bounded answer and follows no redirect. Used by :class:`dfc_device.Device`; usable on
its own.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.client import HTTPMessage
from typing import IO, Any, Literal, TypedDict, Union

#: A base URL, or a function returning the current one (a service that moved, a test restart).
UrlSource = Union[str, Callable[[], Union[str, Awaitable[str]]]]

#: The whole request, connecting to the last byte of the answer.
REQUEST_TIMEOUT_S = 10.0
#: The largest answer read; the service's largest (a published manifest, a stored result) stay well below.
MAX_ANSWER_BYTES = 1024 * 1024
#: The service takes input nested at most 64 levels deep; its envelopes add a few.
MAX_ANSWER_DEPTH = 128


class _CapabilityFields(TypedDict):
    name: str
    kind: Literal["read", "control"]
    #: JSON Schema of the arguments object.
    arguments: dict[str, Any]


class Capability(_CapabilityFields, total=False):
    description: str


class ChildManifest(TypedDict):
    #: Stable per child: the service keeps the child's device id for the same key.
    key: str
    name: str
    kind: Literal["device", "service"]
    capabilities: list[Capability]


class _ManifestFields(TypedDict):
    capabilities: list[Capability]


class Manifest(_ManifestFields, total=False):
    children: list[ChildManifest]


class DeviceCommand(TypedDict):
    """A command handed to the device by ``next``."""

    id: str
    #: Which device runs it: this device, or one of its gateway children.
    deviceId: str
    capability: str
    args: dict[str, Any]
    status: str
    createdAt: int
    expiresAt: int
    dispatchedAt: int


class ErrorBody(TypedDict):
    code: str
    message: str


class _ReportFields(TypedDict):
    ok: bool


class ResultReport(_ReportFields, total=False):
    """``{"ok": True, "result": ...}`` or ``{"ok": False, "error": {"code", "message"}}``."""

    result: Any
    error: ErrorBody


@dataclass(frozen=True)
class DeviceCredentials:
    device_id: str
    #: The device credential (``dfc_device_…``): keep it secret, never log it.
    token: str
    #: The 64-hex workspace routing id sent as ``x-service-workspace``.
    workspace: str

    def __repr__(self) -> str:
        # A credential printed by accident (a log line, a traceback) must not leak the token.
        return f"DeviceCredentials(device_id={self.device_id!r}, token='***', workspace={self.workspace!r})"


class ApiError(Exception):
    """A non-2xx answer, or no answer at all (status 0)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    @property
    def retryable(self) -> bool:
        """Worth trying again later: no answer, a timeout, a rate limit or a server-side failure."""
        return self.status in (0, 408, 429) or self.status >= 500

    @property
    def unauthorized(self) -> bool:
        """The credential is unknown or revoked: retrying cannot help."""
        return self.status == 401


class InvalidAnswerError(ApiError):
    """A 2xx answer the SDK cannot use: larger than ``max_answer_bytes`` (``answer_too_large``),
    not JSON (``answer_not_json``), nested deeper than 128 levels (``answer_too_deep``) or not the
    shape the call answers (``answer_malformed``). :attr:`status` is the answer's. Retryable: every
    device call is safe to repeat, and a proxy in the way may answer properly next time."""

    @property
    def retryable(self) -> bool:
        return True


async def resolve_url(source: UrlSource) -> str:
    if isinstance(source, str):
        url = source
    else:
        produced = source()
        url = produced if isinstance(produced, str) else await produced
    return url.rstrip("/")


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Answers a 3xx as it is instead of following it. urllib would send the device token on to
    whatever host the redirect names, and turn a POST into a GET without its body: a result
    reported that way reaches no one, yet a 200 from the other host would count as delivered."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None  # urllib then raises the 3xx as an HTTPError


class _Deadline:
    """Ends a request at its deadline wherever it waits: connecting, sending, reading the status
    line, the headers or the body. A socket timeout alone restarts with every byte, so an answer
    that drips a byte at a time would hold the call (and its worker thread) for ever."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.expired = False

    def watch(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            if self.expired:
                _cut(sock)
            else:
                self._sockets.append(sock)
        return sock

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _cut(sock)


def _cut(sock: socket.socket) -> None:
    """Wakes whatever blocks on the socket in the worker thread: its next read sees the end."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _watched(http_class: Any, deadline: _Deadline) -> Callable[..., http.client.HTTPConnection]:
    """``http_class`` whose raw socket (before any TLS handshake) the deadline can cut."""

    def make(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection = http_class(*args, **kwargs)
        # The one place http.client opens its socket, for plain HTTP, TLS and proxy tunnels alike.
        create = getattr(connection, "_create_connection")
        setattr(connection, "_create_connection", lambda *a, **k: deadline.watch(create(*a, **k)))
        return connection

    return make


class _WatchedHTTP(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> http.client.HTTPResponse:
        return super().do_open(_watched(http_class, self._deadline), req, **kwargs)


class _WatchedHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> http.client.HTTPResponse:
        return super().do_open(_watched(http_class, self._deadline), req, **kwargs)


@dataclass(frozen=True)
class _Limits:
    timeout: float
    max_answer_bytes: int


#: What the ``data`` of a call's 2xx answer must look like; anything else is ``answer_malformed``.
Shape = Callable[[Any], bool]


def _post(url: str, token: str, body: Any, headers: dict[str, str], limits: _Limits, deadline: _Deadline, shape: Shape) -> Any:
    """One blocking POST; runs in a worker thread. Returns the answer's ``data``."""
    sent = {"authorization": f"Bearer {token}", **headers}
    data = None
    if body is not None:
        data = json.dumps(body, allow_nan=False).encode()
        sent["content-type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=sent, method="POST")
    opener = urllib.request.build_opener(_RefuseRedirects, _WatchedHTTP(deadline), _WatchedHTTPS(deadline))
    try:
        try:
            with opener.open(request, timeout=limits.timeout) as response:
                text = _read_bounded(response, response.status, limits.max_answer_bytes)
                status = int(response.status)
        except urllib.error.HTTPError as error:
            if 300 <= error.code < 400:
                raise ApiError(
                    error.code,
                    "redirected",
                    f"The service answered HTTP {error.code} with a redirect to {error.headers.get('location')!r}, "
                    "which the SDK does not follow: configure the service URL it should use instead.",
                ) from None
            try:
                problem = _problem(_envelope(error.code, _read_bounded(error, error.code, limits.max_answer_bytes)))
            except (InvalidAnswerError, http.client.HTTPException, OSError):
                problem = {}  # a proxy's HTML error page, or a body cut short: keep the status, drop the body
            raise ApiError(
                error.code,
                str(problem.get("code", "http_error")),
                str(problem.get("message", f"HTTP {error.code}")),
            ) from None
        if deadline.expired:
            # A cut answer without a length ends like a complete one: the deadline tells them apart.
            raise _timed_out(limits)
    except ApiError:
        raise
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as error:
        if deadline.expired:
            raise _timed_out(limits) from None
        raise ApiError(0, "unreachable", f"The service did not answer: {error}") from None
    envelope = _envelope(status, text)
    if "data" not in envelope or not shape(envelope["data"]):
        path = urllib.parse.urlsplit(url).path
        raise InvalidAnswerError(status, "answer_malformed", f"The answer to POST {path} is not the shape the SDK expects.")
    return envelope["data"]


def _timed_out(limits: _Limits) -> ApiError:
    return ApiError(0, "timeout", f"The service did not answer within {limits.timeout:g} s.")


def _read_bounded(response: Any, status: int, limit: int) -> bytes:
    """The body, read a chunk at a time and given up as soon as it is over ``limit`` bytes."""
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise InvalidAnswerError(
            status, "answer_too_large", f"The answer declares {declared} bytes, over the {limit} bytes the SDK reads."
        )
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read(64 * 1024)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise InvalidAnswerError(status, "answer_too_large", f"The answer is over the {limit} bytes the SDK reads.")
        chunks.append(chunk)


def _envelope(status: int, text: bytes) -> dict[str, Any]:
    """The answer parsed and checked: JSON, an object, and not too deep."""
    try:
        parsed = json.loads(text)
    except RecursionError:
        # The standard parser recurses per level: a deep answer would otherwise escape as a raw RecursionError.
        raise InvalidAnswerError(status, "answer_too_deep", f"The answer nests deeper than {MAX_ANSWER_DEPTH} levels.") from None
    except ValueError:
        raise InvalidAnswerError(status, "answer_not_json", f"The answer is not JSON ({len(text)} bytes).") from None
    if not isinstance(parsed, dict):
        raise InvalidAnswerError(status, "answer_malformed", "The answer is not a JSON object.")
    if _deeper_than(parsed, MAX_ANSWER_DEPTH):
        raise InvalidAnswerError(status, "answer_too_deep", f"The answer nests deeper than {MAX_ANSWER_DEPTH} levels.")
    return parsed


def _deeper_than(value: Any, limit: int) -> bool:
    """Does the value nest deeper than ``limit`` arrays and objects? Iterative: depth costs no stack."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _problem(envelope: dict[str, Any]) -> dict[str, Any]:
    problem = envelope.get("error")
    return problem if isinstance(problem, dict) else {}


async def call(
    url: UrlSource,
    path: str,
    token: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    *,
    request_timeout: float = REQUEST_TIMEOUT_S,
    max_answer_bytes: int = MAX_ANSWER_BYTES,
    shape: Shape = lambda data: True,
) -> Any:
    """POSTs to the service and returns the envelope's ``data``; raises :class:`ApiError`
    (:class:`InvalidAnswerError` for a 2xx answer it cannot use)."""
    target = f"{await resolve_url(url)}{path}"
    deadline = _Deadline()
    # Kept by the event loop rather than a thread of its own: cutting the socket never blocks.
    timer = asyncio.get_running_loop().call_later(request_timeout, deadline.expire)
    try:
        limits = _Limits(request_timeout, max_answer_bytes)
        return await asyncio.to_thread(_post, target, token, body, headers or {}, limits, deadline, shape)
    except asyncio.CancelledError:
        deadline.expire()  # nobody waits for the answer any more: free the worker thread now
        raise
    finally:
        timer.cancel()


def _is_record(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("id"), str)


def _is_attached(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and _is_record(data.get("device"))
        and isinstance(data.get("token"), str)
        and isinstance(data.get("workspace"), str)
    )


def _is_published(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    children = data.get("children")
    return (
        _is_record(data.get("device"))
        and isinstance(children, list)
        and all(_is_record(c) and (c.get("key") is None or isinstance(c.get("key"), str)) for c in children)
    )


def _is_command(data: Any) -> bool:
    if data is None:
        return True
    if not isinstance(data, dict):
        return False
    expires_at = data.get("expiresAt")
    return (
        all(isinstance(data.get(field), str) for field in ("id", "deviceId", "capability"))
        and isinstance(data.get("args"), dict)
        and isinstance(expires_at, (int, float))
        and not isinstance(expires_at, bool)
    )


def _is_ticket(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("ticket"), str)


@dataclass(frozen=True)
class AttachedDevice:
    credentials: DeviceCredentials
    #: The device record as the service stored it.
    device: dict[str, Any]


async def attach_device(
    url: UrlSource,
    setup_token: str,
    name: str,
    kind: Literal["device", "gateway"] = "device",
    *,
    request_timeout: float = REQUEST_TIMEOUT_S,
    max_answer_bytes: int = MAX_ANSWER_BYTES,
) -> AttachedDevice:
    """Attaches a device with a setup token (``POST /v1/sdk/devices``).

    Store the credentials (:func:`dfc_device.save_credentials`): they are shown once.
    ``request_timeout`` (seconds, the whole request) and ``max_answer_bytes`` bound the call.
    """
    data = await call(
        url,
        "/v1/sdk/devices",
        setup_token,
        {"name": name, "kind": kind},
        request_timeout=request_timeout,
        max_answer_bytes=max_answer_bytes,
        shape=_is_attached,
    )
    credentials = DeviceCredentials(data["device"]["id"], data["token"], data["workspace"])
    return AttachedDevice(credentials, data["device"])


class DeviceApi:
    """The calls a device makes with its own credential, each bounded by ``request_timeout``
    (seconds, the whole request) and ``max_answer_bytes``."""

    def __init__(
        self,
        url: UrlSource,
        credentials: DeviceCredentials,
        *,
        request_timeout: float = REQUEST_TIMEOUT_S,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self._url = url
        self._credentials = credentials
        self._base = f"/v1/device/{urllib.parse.quote(credentials.device_id, safe='')}"
        self._request_timeout = request_timeout
        self._max_answer_bytes = max_answer_bytes

    async def _call(self, name: str, shape: Shape, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        return await call(
            self._url,
            f"{self._base}/{name}",
            self._credentials.token,
            body,
            headers,
            request_timeout=self._request_timeout,
            max_answer_bytes=self._max_answer_bytes,
            shape=shape,
        )

    async def publish_manifest(self, manifest: Manifest) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("manifest", _is_published, manifest)
        return result

    async def next(self) -> DeviceCommand | None:
        headers = {"x-service-workspace": self._credentials.workspace}
        command: DeviceCommand | None = await self._call("next", _is_command, None, headers)
        return command

    async def report(self, action_id: str, report: ResultReport) -> Any:
        """Repeat-safe: the same report again is answered with the stored action."""
        return await self._call("result", lambda data: True, {"actionId": action_id, **report})

    async def report_state(self, values: dict[str, Any], device_id: str | None = None) -> int:
        """Last-known values of read functions, without an action (``POST /v1/device/{id}/state``);
        ``device_id`` names a gateway's child. Answers how many values the service stored."""
        body: dict[str, Any] = {"values": values, **({"deviceId": device_id} if device_id is not None else {})}
        data = await self._call("state", lambda data: isinstance(data, dict) and isinstance(data.get("accepted"), int), body)
        return int(data["accepted"])

    async def events_ticket(self) -> str:
        data = await self._call("events-ticket", _is_ticket)
        return str(data["ticket"])

    async def events_url(self, ticket: str) -> str:
        """The WebSocket URL for a ticket."""
        base = await resolve_url(self._url)
        scheme_swapped = "ws" + base[len("http"):] if base.startswith("http") else base
        return f"{scheme_swapped}{self._base}/events?ticket={urllib.parse.quote(ticket, safe='')}"

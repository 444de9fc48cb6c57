"""The device side of the HTTP API: standard-library HTTP in a worker thread, typed answers,
one error type. Used by :class:`dfc_device.Device`; usable on its own.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.client import HTTPMessage
from typing import IO, Any, Literal, TypedDict, Union

#: A base URL, or a function returning the current one (a service that moved, a test restart).
UrlSource = Union[str, Callable[[], Union[str, Awaitable[str]]]]

REQUEST_TIMEOUT_S = 10.0


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


_OPENER = urllib.request.build_opener(_RefuseRedirects)


def _post(url: str, token: str, body: Any, headers: dict[str, str]) -> Any:
    """One blocking POST; runs in a worker thread."""
    sent = {"authorization": f"Bearer {token}", **headers}
    data = None
    if body is not None:
        data = json.dumps(body, allow_nan=False).encode()
        sent["content-type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=sent, method="POST")
    try:
        with _OPENER.open(request, timeout=REQUEST_TIMEOUT_S) as response:
            return _data(response.read())
    except urllib.error.HTTPError as error:
        if 300 <= error.code < 400:
            raise ApiError(
                error.code,
                "redirected",
                f"The service answered HTTP {error.code} with a redirect to {error.headers.get('location')!r}, "
                "which the SDK does not follow: configure the service URL it should use instead.",
            ) from None
        text = error.read()
        envelope = _json(text)
        problem = envelope.get("error") if isinstance(envelope, dict) else None
        problem = problem if isinstance(problem, dict) else {}
        raise ApiError(
            error.code,
            str(problem.get("code", "http_error")),
            str(problem.get("message", f"HTTP {error.code}")),
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise ApiError(0, "unreachable", f"The service did not answer: {error}") from None


def _json(text: bytes) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return {}  # a proxy's HTML error page: keep the status, drop the body


def _data(text: bytes) -> Any:
    envelope = _json(text)
    return envelope.get("data") if isinstance(envelope, dict) else None


async def call(
    url: UrlSource,
    path: str,
    token: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """POSTs to the service and returns the envelope's ``data``; raises :class:`ApiError`."""
    target = f"{await resolve_url(url)}{path}"
    return await asyncio.to_thread(_post, target, token, body, headers or {})


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
) -> AttachedDevice:
    """Attaches a device with a setup token (``POST /v1/sdk/devices``).

    Store the credentials (:func:`dfc_device.save_credentials`): they are shown once.
    """
    data = await call(url, "/v1/sdk/devices", setup_token, {"name": name, "kind": kind})
    credentials = DeviceCredentials(data["device"]["id"], data["token"], data["workspace"])
    return AttachedDevice(credentials, data["device"])


class DeviceApi:
    """The calls a device makes with its own credential."""

    def __init__(self, url: UrlSource, credentials: DeviceCredentials) -> None:
        self._url = url
        self._credentials = credentials
        self._base = f"/v1/device/{urllib.parse.quote(credentials.device_id, safe='')}"

    async def publish_manifest(self, manifest: Manifest) -> dict[str, Any]:
        result: dict[str, Any] = await call(self._url, f"{self._base}/manifest", self._credentials.token, manifest)
        return result

    async def next(self) -> DeviceCommand | None:
        headers = {"x-service-workspace": self._credentials.workspace}
        command: DeviceCommand | None = await call(
            self._url, f"{self._base}/next", self._credentials.token, None, headers
        )
        return command

    async def report(self, action_id: str, report: ResultReport) -> Any:
        """Repeat-safe: the same report again is answered with the stored action."""
        return await call(self._url, f"{self._base}/result", self._credentials.token, {"actionId": action_id, **report})

    async def events_ticket(self) -> str:
        data = await call(self._url, f"{self._base}/events-ticket", self._credentials.token)
        return str(data["ticket"])

    async def events_url(self, ticket: str) -> str:
        """The WebSocket URL for a ticket."""
        base = await resolve_url(self._url)
        scheme_swapped = "ws" + base[len("http"):] if base.startswith("http") else base
        return f"{scheme_swapped}{self._base}/events?ticket={urllib.parse.quote(ticket, safe='')}"

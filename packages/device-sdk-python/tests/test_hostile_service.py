"""A service that answers like an attacker (or a broken proxy) cannot hold, flood or crash the
device: every call has a total deadline and reads a bounded answer, a malformed answer is an
:class:`InvalidAnswerError`, and the wake socket drops a peer that never finishes a frame.

Each server here is a real HTTP server on a loopback port, written to misbehave in one way.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from support import until

from dfc_device import ApiError, Device, DeviceApi, DeviceCredentials, InvalidAnswerError, attach_device

CREDENTIALS = DeviceCredentials("11111111-1111-4111-8111-111111111111", "dfc_device_SECRET", "a" * 64)
MIB = 1024 * 1024

Answer = Callable[[BaseHTTPRequestHandler, "Hostile"], None]


class Hostile:
    """A loopback HTTP server whose every request is answered by ``answer``; it counts the body
    bytes it managed to send and stops writing once the peer has gone."""

    def __init__(self, answer: Answer) -> None:
        self.sent = 0
        #: The path of every request that reached it.
        self.seen: list[str] = []
        self.closed = threading.Event()
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                hostile.seen.append(self.path)
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                try:
                    answer(self, hostile)
                except OSError:
                    pass  # the device hung up: what this server is for

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def write(self, handler: BaseHTTPRequestHandler, data: bytes) -> None:
        handler.wfile.write(data)
        handler.wfile.flush()
        self.sent += len(data)

    def drip(self, handler: BaseHTTPRequestHandler, data: bytes) -> None:
        """One byte at a time, until the peer or the test has gone."""
        for index in range(len(data)):
            if self.closed.wait(0.05):
                return
            self.write(handler, data[index : index + 1])

    def close(self) -> None:
        self.closed.set()
        self.server.shutdown()
        self.server.server_close()


STARTED: list[Device] = []


@pytest.fixture(autouse=True)
async def stop_devices() -> AsyncIterator[None]:
    """Stops what a test started, also when it failed half-way."""
    yield
    while STARTED:
        await STARTED.pop().stop()


def device(url: str, **options: Any) -> Device:
    started = Device(url, CREDENTIALS, fallback_poll=0.05, backoff_initial=0.02, backoff_max=0.2, **options)
    STARTED.append(started)
    return started


@pytest.fixture
def hostile() -> Iterator[Callable[[Answer], Hostile]]:
    started: list[Hostile] = []

    def start(answer: Answer) -> Hostile:
        server = Hostile(answer)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def head(handler: BaseHTTPRequestHandler, status: int = 200, **headers: str) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()


def json_answer(body: bytes, status: int = 200) -> Answer:
    def answer(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
        head(handler, status, content_type="application/json", content_length=str(len(body)))
        server.write(handler, body)

    return answer


def endless_chunks(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
    head(handler, content_type="application/json", transfer_encoding="chunked")
    chunk = b"[" * (64 * 1024)
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    while not server.closed.is_set():
        server.write(handler, framed)


class TestAnswerSize:
    async def test_an_endless_answer_is_refused_once_past_the_limit_while_it_streams(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        server = hostile(endless_chunks)
        api = DeviceApi(server.url, CREDENTIALS, max_answer_bytes=MIB)
        with pytest.raises(InvalidAnswerError) as refused:
            await api.next()
        assert (refused.value.status, refused.value.code) == (200, "answer_too_large")
        assert refused.value.retryable
        # The device stopped reading at the limit: what the server got out is the limit plus
        # the loopback socket buffers, never the 400 MiB it would go on sending.
        await until(lambda: server.sent > MIB or None)
        sent = server.sent
        await asyncio.sleep(0.2)
        assert server.sent - sent < 16 * MIB

    async def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_read(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        def huge(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
            head(handler, content_type="application/json", content_length=str(400 * MIB))
            server.drip(handler, b'{"data": null' + b" " * 1000)

        server = hostile(huge)
        with pytest.raises(InvalidAnswerError) as refused:
            await DeviceApi(server.url, CREDENTIALS).next()
        assert refused.value.code == "answer_too_large"
        assert str(400 * MIB) in refused.value.message

    async def test_the_limit_is_the_callers_to_set(self, hostile: Callable[[Answer], Hostile]) -> None:
        body = json.dumps({"data": {"ok": "x" * 5000}}).encode()
        server = hostile(json_answer(body))
        assert await DeviceApi(server.url, CREDENTIALS).report("a", {"ok": True}) == {"ok": "x" * 5000}
        with pytest.raises(InvalidAnswerError) as refused:
            await DeviceApi(server.url, CREDENTIALS, max_answer_bytes=4096).report("a", {"ok": True})
        assert refused.value.code == "answer_too_large"


class TestDeadline:
    async def test_an_answer_that_drips_a_byte_at_a_time_ends_at_the_request_deadline(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        def dripping(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
            body = b'{"data": null}' + b" " * 10_000
            head(handler, content_type="application/json", content_length=str(len(body)))
            server.drip(handler, body)

        server = hostile(dripping)
        with pytest.raises(ApiError) as timed_out:
            await DeviceApi(server.url, CREDENTIALS, request_timeout=0.5).next()
        assert (timed_out.value.status, timed_out.value.code) == (0, "timeout")
        assert timed_out.value.retryable
        assert server.sent > 0

    async def test_headers_that_drip_end_at_the_deadline_too(self, hostile: Callable[[Answer], Hostile]) -> None:
        def dripping_head(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
            server.drip(handler, b"HTTP/1.1 200 OK\r\n" + b"x-slow: " + b"a" * 10_000)

        server = hostile(dripping_head)
        with pytest.raises(ApiError) as timed_out:
            await attach_device(server.url, "dfc_setup_SECRET", "Lamp", request_timeout=0.5)
        assert timed_out.value.code == "timeout"

    async def test_a_chunked_answer_without_end_ends_at_the_deadline(self, hostile: Callable[[Answer], Hostile]) -> None:
        def slow_chunks(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
            head(handler, content_type="application/json", transfer_encoding="chunked")
            while not server.closed.wait(0.05):
                server.write(handler, b"1\r\n \r\n")

        server = hostile(slow_chunks)
        with pytest.raises(ApiError) as timed_out:
            await DeviceApi(server.url, CREDENTIALS, request_timeout=0.5).events_ticket()
        assert timed_out.value.code == "timeout"

    async def test_a_device_polling_a_dripping_service_reports_poll_errors_and_stops_when_asked(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        def dripping(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
            head(handler, content_type="application/json", content_length="100000")
            server.drip(handler, b" " * 100_000)

        server = hostile(dripping)
        events: list[dict[str, Any]] = []
        polling = device(server.url, request_timeout=0.3, on_event=events.append)
        await polling.start()
        await until(lambda: len([e for e in events if e["type"] == "poll-error"]) >= 2 or None)
        assert "did not answer within 0.3 s" in next(e for e in events if e["type"] == "poll-error")["error"]
        await asyncio.wait_for(polling.stop(), 10)
        assert polling.stopped


class TestMalformedAnswers:
    async def test_deeply_nested_json_is_answer_too_deep_not_a_recursion_error(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        depth = 200_000
        server = hostile(json_answer(b'{"data": ' + b"[" * depth + b"]" * depth + b"}"))
        with pytest.raises(InvalidAnswerError) as refused:
            await DeviceApi(server.url, CREDENTIALS).report("a", {"ok": True})
        assert (refused.value.status, refused.value.code) == (200, "answer_too_deep")

    async def test_nesting_past_128_levels_is_answer_too_deep_and_within_them_is_read(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        def nested(levels: int) -> bytes:
            return b'{"data": ' + b"[" * levels + b"]" * levels + b"}"

        within = hostile(json_answer(nested(127)))
        assert await DeviceApi(within.url, CREDENTIALS).report("a", {"ok": True}) is not None
        beyond = hostile(json_answer(nested(128)))
        with pytest.raises(InvalidAnswerError) as refused:
            await DeviceApi(beyond.url, CREDENTIALS).report("a", {"ok": True})
        assert refused.value.code == "answer_too_deep"

    async def test_a_2xx_answer_that_is_not_json_is_answer_not_json(self, hostile: Callable[[Answer], Hostile]) -> None:
        server = hostile(json_answer(b"<html>Welcome to the hotel wifi</html>"))
        with pytest.raises(InvalidAnswerError) as refused:
            await DeviceApi(server.url, CREDENTIALS).next()
        assert (refused.value.status, refused.value.code) == (200, "answer_not_json")
        assert isinstance(refused.value, ApiError) and refused.value.retryable

    @pytest.mark.parametrize(
        "body",
        [b"[]", b"{}", b'{"data": {"id": 5}}', b'{"data": {"id": "x", "deviceId": "y", "capability": "z", "args": [], "expiresAt": 1}}'],
    )
    async def test_a_command_of_the_wrong_shape_is_answer_malformed(
        self, body: bytes, hostile: Callable[[Answer], Hostile]
    ) -> None:
        server = hostile(json_answer(body))
        with pytest.raises(InvalidAnswerError) as refused:
            await DeviceApi(server.url, CREDENTIALS).next()
        assert refused.value.code == "answer_malformed"

    async def test_an_attach_answer_of_the_wrong_shape_is_answer_malformed_with_its_status(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        server = hostile(json_answer(b'{"data": {"device": "lamp", "token": 1}}', status=201))
        with pytest.raises(InvalidAnswerError) as refused:
            await attach_device(server.url, "dfc_setup_SECRET", "Lamp")
        assert (refused.value.status, refused.value.code) == (201, "answer_malformed")

    async def test_a_non_2xx_answer_that_is_not_json_keeps_its_status(self, hostile: Callable[[Answer], Hostile]) -> None:
        server = hostile(json_answer(b"<html>502 Bad Gateway</html>", status=502))
        with pytest.raises(ApiError) as refused:
            await DeviceApi(server.url, CREDENTIALS).next()
        assert not isinstance(refused.value, InvalidAnswerError)
        assert (refused.value.status, refused.value.code, refused.value.retryable) == (502, "http_error", True)


def upgrade(handler: BaseHTTPRequestHandler) -> None:
    """Accepts a WebSocket upgrade by hand, so the frames that follow can be anything."""
    key = handler.headers["sec-websocket-key"]
    accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    handler.send_response(101)
    handler.send_header("upgrade", "websocket")
    handler.send_header("connection", "Upgrade")
    handler.send_header("sec-websocket-accept", accept)
    handler.end_headers()
    handler.wfile.flush()


def wake_service(on_socket: Callable[[BaseHTTPRequestHandler, Hostile], None]) -> Answer:
    """Answers the device calls properly and hands each wake socket to ``on_socket``."""

    def answer(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
        if handler.headers.get("upgrade", "").lower() == "websocket":
            upgrade(handler)
            on_socket(handler, server)
            handler.close_connection = True
            return
        data: Any = None
        if handler.path.endswith("/events-ticket"):
            data = {"ticket": "dfc_ticket_x", "expiresAt": int(time.time() * 1000) + 30_000}
        json_answer(json.dumps({"data": data}).encode())(handler, server)

    return answer


class TestWakeSocket:
    async def test_a_message_over_64_kib_closes_the_socket_with_1009_and_the_device_reconnects(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        def oversized(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
            # A text frame that declares 100,000 bytes: refused from its header.
            server.write(handler, b"\x81\x7f" + struct.pack(">Q", 100_000) + b"{" * 1000)
            server.closed.wait(5)

        server = hostile(wake_service(oversized))
        events: list[dict[str, Any]] = []
        flooded = device(server.url, on_event=events.append)
        await flooded.start()
        await until(lambda: [e for e in events if e["type"] == "disconnected"] or None)
        assert next(e for e in events if e["type"] == "disconnected")["code"] == 1009
        await until(lambda: sum(e["type"] == "connected" for e in events) >= 2 or None)

    async def test_a_peer_that_drips_bytes_and_never_finishes_a_frame_is_dropped_as_silent(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        def dripping(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
            # A 65,000-byte text frame, one byte every 50 ms: bytes keep arriving for nearly an
            # hour, a whole frame never does.
            server.drip(handler, b"\x81\x7e" + struct.pack(">H", 65_000) + b" " * 65_000)

        server = hostile(wake_service(dripping))
        events: list[dict[str, Any]] = []
        dripped = device(server.url, silence_timeout=0.5, on_event=events.append)
        await dripped.start()
        await until(lambda: [e for e in events if e["type"] == "disconnected"] or None)
        assert next(e for e in events if e["type"] == "disconnected")["code"] == 1006

    async def test_stop_ends_within_the_close_timeout_when_the_peer_never_answers_the_close_frame(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        # Upgrades, then says nothing ever again.
        server = hostile(wake_service(lambda handler, server: server.closed.wait(60) and None))
        quiet = device(server.url, silence_timeout=600)
        await quiet.start()
        await until(lambda: quiet.connected or None)
        await asyncio.wait_for(quiet.stop(), 10)
        assert not quiet.connected

    async def test_a_redirected_upgrade_is_refused_and_nothing_reaches_the_other_origin(
        self, hostile: Callable[[Answer], Hostile]
    ) -> None:
        elsewhere = hostile(wake_service(lambda handler, server: server.closed.wait(5) and None))

        def redirecting(handler: BaseHTTPRequestHandler, server: Hostile) -> None:
            if handler.headers.get("upgrade", "").lower() == "websocket":
                head(handler, 307, location=f"{elsewhere.url.replace('http', 'ws')}/steal", content_length="0")
                return
            wake_service(lambda h, s: None)(handler, server)

        server = hostile(redirecting)
        events: list[dict[str, Any]] = []
        redirected = device(server.url, on_event=events.append)
        await redirected.start()
        dropped = await until(lambda: next((e for e in events if e["type"] == "disconnected"), None))
        assert "/steal" in dropped["reason"] or "307" in dropped["reason"]
        assert dropped["code"] == 1006
        assert not redirected.connected and elsewhere.seen == []

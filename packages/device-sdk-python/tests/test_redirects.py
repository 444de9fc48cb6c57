"""A redirect is an answer, never followed: the device token stays with the configured URL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dfc_device import ApiError, DeviceApi, DeviceCredentials, attach_device

CREDENTIALS = DeviceCredentials("11111111-1111-4111-8111-111111111111", "dfc_device_SECRET", "a" * 64)


class Receiver:
    """A real HTTP server on a loopback port: answers every request with ``status`` (and a
    ``Location`` when one is given) and records what reached it."""

    def __init__(self, status: int, location: str | None = None) -> None:
        seen: list[tuple[str, str, str | None]] = []

        class Answer(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                seen.append((self.command, self.path, self.headers.get("authorization")))
                body = b'{"data": null}'
                self.send_response(status)
                if location is not None:
                    self.send_header("location", location)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.seen = seen
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def elsewhere() -> Iterator[Receiver]:
    """Another origin a redirect points at, answering 200 to anything."""
    receiver = Receiver(200)
    yield receiver
    receiver.close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
class TestRedirectsAreNotFollowed:
    async def test_a_redirected_call_raises_ApiError_with_the_status_and_the_token_goes_nowhere_else(
        self, status: int, elsewhere: Receiver
    ) -> None:
        redirecting = Receiver(status, f"{elsewhere.url}/steal")
        try:
            api = DeviceApi(redirecting.url, CREDENTIALS)
            with pytest.raises(ApiError) as refused:
                await api.next()
            assert (refused.value.status, refused.value.code) == (status, "redirected")
            assert f"{elsewhere.url}/steal" in refused.value.message
            assert not refused.value.retryable and not refused.value.unauthorized
            with pytest.raises(ApiError):
                await api.report("22222222-2222-4222-8222-222222222222", {"ok": True, "result": 1})
            with pytest.raises(ApiError):
                await attach_device(redirecting.url, "dfc_setup_SECRET", "Lamp")
            assert [method for method, _, _ in redirecting.seen] == ["POST", "POST", "POST"]
            assert elsewhere.seen == []
        finally:
            redirecting.close()

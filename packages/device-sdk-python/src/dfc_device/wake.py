"""One wake socket: open it with a ticket URL, hand each frame on, tell how it closed.

Written against what websockets 10.4 (Debian 12) and the later releases share: the top-level
``websockets.connect``, ``recv()``, ``close()``, ``ConnectionClosed.rcvd`` and the
``InvalidHandshake`` family.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import websockets
import websockets.exceptions

# Looked up by name: websockets 10 loads it lazily, out of the type checker's sight.
_connect: Any = getattr(websockets, "connect")

#: The largest message read (a larger one closes the socket with 1009 and the device reconnects).
#: The service's wake and cancel frames are a few hundred bytes.
MAX_FRAME_BYTES = 64 * 1024


class WakeSocket:
    """An open socket; :meth:`listen` returns ``(code, reason)`` once it has closed."""

    def __init__(self, connection: Any, silence_timeout: float) -> None:
        self._connection = connection
        self._silence_timeout = silence_timeout
        self._last_heard = asyncio.get_running_loop().time()
        _on_every_frame(connection, self._heard)

    def _heard(self) -> None:
        self._last_heard = asyncio.get_running_loop().time()

    async def listen(self, on_frame: Callable[[dict[str, Any]], None]) -> tuple[int, str]:
        watchdog = asyncio.create_task(self._watch_silence())
        try:
            while True:
                message = await self._connection.recv()
                self._heard()
                try:
                    frame = json.loads(message)
                except ValueError:
                    continue
                if isinstance(frame, dict):
                    on_frame(frame)
        except websockets.exceptions.ConnectionClosed as closed:
            # The peer's close frame; else the one the device sent (1009: a message over
            # MAX_FRAME_BYTES) to a peer that never answered it; else the connection just ended.
            close = closed.rcvd or closed.sent
            if close is None:
                return 1006, "connection lost"
            return int(close.code), str(close.reason)
        finally:
            watchdog.cancel()

    async def close(self, code: int, reason: str) -> None:
        await self._connection.close(code, reason)

    async def _watch_silence(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            quiet = loop.time() - self._last_heard
            if quiet >= self._silence_timeout:
                # No close handshake with a peer that stopped answering: drop the connection.
                self._connection.transport.abort()
                return
            await asyncio.sleep(self._silence_timeout - quiet)


def _on_every_frame(connection: Any, heard: Callable[[], None]) -> None:
    """Calls ``heard`` for every ping received; :meth:`WakeSocket.listen` does for every message.

    websockets answers pings itself and tells nobody, so "heard nothing, not even a ping" is
    watched one level down: ``process_event`` sees every frame since websockets 14; before it,
    every ping is answered through ``pong`` (the frame reader itself is already waiting when the
    socket is handed over, so wrapping it would miss the first ping). Whole frames, not bytes: a
    server that drips a byte at a time and never finishes a frame is silent, and is dropped like one.
    """
    if hasattr(connection, "process_event"):
        process = connection.process_event

        def processed(event: Any) -> None:
            heard()
            process(event)

        connection.process_event = processed
    else:
        pong = connection.pong

        async def ponged(data: bytes = b"") -> Any:
            heard()
            return await pong(data)

        connection.pong = ponged


async def open_wake_socket(url: str, silence_timeout: float) -> WakeSocket | tuple[int, str]:
    """The open socket, or ``(1006, why)`` when the upgrade failed or was refused."""
    try:
        connector = _connect(
            url,
            # The service pings; a ping of the device's own closes the socket (1008).
            ping_interval=None,
            max_size=MAX_FRAME_BYTES,
            # At most this many messages wait unread: 4 × max_size × max_queue bytes at worst.
            max_queue=8,
            open_timeout=10,
            # A peer that does not answer the close handshake is cut after this long (twice in the
            # legacy implementation: its close frame, then the end of the connection).
            close_timeout=1,
        )
        _refuse_redirects(connector)
        connection = await connector
    except websockets.exceptions.InvalidHandshake as refused:
        status = _refused_status(refused)
        if status is None:
            return 1006, f"upgrade failed: {refused}"
        hint = " (ticket or device refused)" if status == 401 else ""
        return 1006, f"upgrade refused with HTTP {status}{hint}"
    except (OSError, asyncio.TimeoutError) as error:
        return 1006, f"unreachable: {error or type(error).__name__}"
    return WakeSocket(connection, silence_timeout)


def _refuse_redirects(connector: Any) -> None:
    """The socket opens where its ticket was issued or not at all, as the HTTP calls follow no
    redirect: websockets would follow up to 10, to any host. A redirected upgrade is refused."""
    if hasattr(connector, "process_redirect"):  # websockets >= 14: raise the 3xx as it came
        connector.process_redirect = lambda error: error
    else:

        def refuse(uri: str) -> None:
            raise websockets.exceptions.InvalidHandshake(f"redirected to {uri!r}, which the SDK does not follow")

        connector.handle_redirect = refuse


def _refused_status(error: Exception) -> int | None:
    """The HTTP status of a refused upgrade: ``status_code`` up to websockets 13, ``response`` after."""
    status = getattr(error, "status_code", None)
    if status is None:
        response = getattr(error, "response", None)
        status = getattr(response, "status_code", None)
    return int(status) if status is not None else None

"""The Device: keeps the wake socket open, fetches commands when woken, on every (re)connect
and by polling while the socket is down, runs the handlers one at a time and reports each
result until the service has it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .errors import CommandRecalled, DeviceRevoked, DeviceStopping
from .handlers import CommandContext, Handler, HandlerRegistry, run_handler
from .http import (
    MAX_ANSWER_BYTES,
    REQUEST_TIMEOUT_S,
    ApiError,
    DeviceApi,
    DeviceCommand,
    DeviceCredentials,
    Manifest,
    ResultReport,
    UrlSource,
)
from .schema import validate
from .wake import WakeSocket, open_wake_socket

#: What the device is doing, for logs and UIs: ``{"type": ..., ...}`` with the Node SDK's field
#: names, so both SDKs print the same lines. Never carries a credential or ticket.
DeviceEvent = dict[str, Any]

#: Keep this many finished action ids, so a command seen twice is reported again, never run twice.
REMEMBERED_RESULTS = 1000
#: How long past its deadline a failed report is still retried; the service stores a late one as it comes.
REPORT_GRACE_S = 5.0
#: Recalls remembered for commands not yet running (a cancel frame can overtake the ``next`` answer).
REMEMBERED_RECALLS = 100


def backoff_delay(attempt: int, initial: float, maximum: float, rand: Callable[[], float] = random.random) -> float:
    """Equal-jitter exponential backoff: half the step fixed, half random, so a fleet that lost
    the same server does not come back in one wave, and no device retries in a tight loop."""
    step = min(maximum, initial * 2.0 ** min(attempt, 30))
    return step / 2 + rand() * (step / 2)


class Device(HandlerRegistry):
    """A device (or gateway) connected to the service. Register handlers, then ``await run()``."""

    def __init__(
        self,
        url: UrlSource,
        credentials: DeviceCredentials,
        manifest: Manifest | None = None,
        *,
        fallback_poll: float = 2.0,
        idle_poll: float = 60.0,
        backoff_initial: float = 0.25,
        backoff_max: float = 30.0,
        silence_timeout: float = 45.0,
        request_timeout: float = REQUEST_TIMEOUT_S,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        on_event: Callable[[DeviceEvent], None] | None = None,
    ) -> None:
        """``manifest`` is published on start (retried until it is); omit it when it is published
        elsewhere. Times are in seconds: ``fallback_poll`` while the socket is down,
        ``idle_poll`` a safety poll while it is up (a wake may go missing), the reconnect backoff
        bounds, ``silence_timeout`` after which a socket that heard nothing, not even a
        ping, is dropped (three missed 15 s pings), and ``request_timeout`` for each HTTP call
        as a whole. ``max_answer_bytes`` is the largest answer a call reads."""
        super().__init__(credentials.device_id)
        self._api = DeviceApi(url, credentials, request_timeout=request_timeout, max_answer_bytes=max_answer_bytes)
        self._manifest = manifest
        self._fallback_poll = fallback_poll
        self._idle_poll = idle_poll
        self._backoff = (backoff_initial, backoff_max)
        self._silence_timeout = silence_timeout
        self._on_event = on_event
        self._finished: OrderedDict[str, ResultReport] = OrderedDict()
        self._recalled: OrderedDict[str, str] = OrderedDict()
        self._running: dict[str, Callable[[BaseException], None]] = {}
        self._schemas: dict[tuple[str | None, str], dict[str, Any]] = {}
        self._stopped = asyncio.Event()
        self._stop_done = asyncio.Event()
        self._revoked = False
        self._socket: WakeSocket | None = None
        self._connected = False
        self._draining: asyncio.Task[None] | None = None
        self._drain_again = False
        self._poll_timer: asyncio.TimerHandle | None = None
        self._connect_loop: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    @property
    def revoked(self) -> bool:
        return self._revoked

    async def report(self, capability: str, value: Any, child: str | None = None) -> None:
        """Reports the last-known value of one of this device's read functions on its own,
        without an action (docs/devices/state.md): agents read it without waking the device.
        The value is checked against the function's ``result`` schema; ``child`` names a gateway
        child by its manifest key or device id. A read handler's result becomes the value by itself."""
        device_id = None if child is None else (self.child_id(child) or child)
        await self._api.report_state({capability: value}, device_id)

    async def start(self) -> None:
        """Publishes the manifest (retrying while the service is unreachable), then connects."""
        if self._manifest is not None:
            await self._publish_manifest(self._manifest)
        if self.stopped:
            return
        self._connect_loop = asyncio.create_task(self._keep_connected())
        self._drain()

    async def run(self) -> None:
        """Starts and waits until :meth:`stop`; raises :class:`DeviceRevoked` if the owner revoked it."""
        await self.start()
        await self._stop_done.wait()
        if self._revoked:
            raise DeviceRevoked()

    async def stop(self) -> None:
        """Closes the socket and stops polling. A running handler is interrupted with
        :class:`DeviceStopping`; its report gets one more try."""
        if self.stopped:
            await self._stop_done.wait()
            return
        self._stopped.set()
        if self._poll_timer is not None:
            self._poll_timer.cancel()
        for interrupt in list(self._running.values()):
            interrupt(DeviceStopping())
        if self._socket is not None:
            await self._socket.close(1000, "device stopping")
        await self._settled()
        self._emit({"type": "stopped"})
        self._stop_done.set()

    async def _settled(self) -> None:
        tasks = [t for t in (self._connect_loop, self._draining) if t is not None and t is not asyncio.current_task()]
        await asyncio.gather(*tasks, return_exceptions=True)

    def _emit(self, event: DeviceEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:  # noqa: BLE001 - a broken listener must not break the device loop
            pass

    def _backoff_delay(self, attempt: int) -> float:
        return backoff_delay(attempt, *self._backoff)

    async def _sleep(self, seconds: float) -> None:
        """Returns after ``seconds``, or at once when the device stops."""
        try:
            await asyncio.wait_for(self._stopped.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    def _revoke(self) -> None:
        if self.stopped:
            return
        self._revoked = True
        self._emit({"type": "revoked"})
        # Held on to: the event loop keeps only a weak reference to a task.
        self._stopping = asyncio.get_running_loop().create_task(self.stop())

    async def _publish_manifest(self, manifest: Manifest) -> None:
        attempt = 0
        while not self.stopped:
            try:
                published = await self._api.publish_manifest(manifest)
            except ApiError as error:
                if not error.retryable:
                    if error.unauthorized:
                        self._revoke()
                        raise DeviceRevoked() from error
                    raise
                await self._sleep(self._backoff_delay(attempt))
                attempt += 1
                continue
            self._learn_manifest(manifest, published)
            return

    def _learn_manifest(self, manifest: Manifest, published: dict[str, Any]) -> None:
        self._child_keys.clear()
        for child in published.get("children", []):
            if child.get("key") is not None:
                self._child_keys[child["id"]] = child["key"]
        self._schemas = {(None, c["name"]): c["arguments"] for c in manifest["capabilities"]}
        for child_manifest in manifest.get("children", []):
            for capability in child_manifest["capabilities"]:
                self._schemas[(child_manifest["key"], capability["name"])] = capability["arguments"]
        children = [{"key": key, "deviceId": device_id} for device_id, key in self._child_keys.items()]
        self._emit({"type": "manifest", "children": children})

    async def _keep_connected(self) -> None:
        """Ticket, socket, and on every close a jittered, growing wait before the next try."""
        attempt = 0
        while not self.stopped:
            try:
                url = await self._api.events_url(await self._api.events_ticket())
                opened = await open_wake_socket(url, self._silence_timeout)
                if isinstance(opened, WakeSocket):
                    attempt = 0
                    code, reason = await self._listen(opened)
                else:
                    code, reason = opened
            except ApiError as error:
                if error.unauthorized:
                    return self._revoke()
                code, reason = 1006, error.message
            except Exception as error:  # noqa: BLE001 - whatever broke this try, the next one may work
                code, reason = 1006, str(error) or type(error).__name__
            if self.stopped:
                return
            if code == 4401:
                return self._revoke()
            retry_in = self._backoff_delay(attempt)
            attempt += 1
            self._emit({"type": "disconnected", "code": code, "reason": reason, "retryInMs": round(retry_in * 1000)})
            await self._sleep(retry_in)

    async def _listen(self, socket: WakeSocket) -> tuple[int, str]:
        if self.stopped:
            # stop() ran while this socket was opening, so it had no socket to close.
            await socket.close(1000, "device stopping")
            return 1000, "device stopping"
        self._socket = socket
        self._connected = True
        self._emit({"type": "connected"})
        self._drain()  # anything queued while the socket was down
        try:
            return await socket.listen(self._on_frame)
        finally:
            self._connected = False
            self._socket = None
            self._schedule_poll()  # falls back to polling while the socket is down

    def _on_frame(self, frame: dict[str, Any]) -> None:
        action_id = frame.get("actionId")
        if not isinstance(action_id, str):
            return
        if frame.get("type") == "wake":
            self._emit({"type": "wake", "deviceId": str(frame.get("deviceId")), "actionId": action_id})
            self._drain()
        elif frame.get("type") == "cancel":
            self._recall(str(frame.get("deviceId")), action_id, str(frame.get("reason")))

    def _recall(self, device_id: str, action_id: str, reason: str) -> None:
        """A cancel frame: interrupts the command if it runs, or before it starts."""
        self._emit({"type": "cancel", "deviceId": device_id, "actionId": action_id, "reason": reason})
        interrupt = self._running.get(action_id)
        if interrupt is not None:
            return interrupt(CommandRecalled(reason))
        if action_id in self._finished:
            return
        self._recalled[action_id] = reason
        while len(self._recalled) > REMEMBERED_RECALLS:
            self._recalled.popitem(last=False)

    def _schedule_poll(self, failed: bool = False) -> None:
        """The next poll: soon while the socket is down or the last poll failed, rarely otherwise."""
        if self._poll_timer is not None:
            self._poll_timer.cancel()
        if self.stopped:
            return
        delay = self._idle_poll if self._connected and not failed else self._fallback_poll
        self._poll_timer = asyncio.get_running_loop().call_later(delay, self._drain)

    def _drain(self) -> None:
        """Fetches and runs commands until the queue is empty; one drain at a time."""
        if self.stopped:
            return
        if self._draining is not None:
            self._drain_again = True
            return
        self._draining = asyncio.get_running_loop().create_task(self._drain_loop())

    async def _drain_loop(self) -> None:
        failed = False
        try:
            while True:
                self._drain_again = False
                while not self.stopped:
                    command = await self._api.next()
                    if command is None:
                        break
                    await self._run(command)
                if not self._drain_again or self.stopped:
                    break
        except ApiError as error:
            failed = True
            if error.unauthorized:
                self._revoke()
            else:
                self._emit({"type": "poll-error", "error": error.message})
        except Exception as error:  # noqa: BLE001 - the next poll starts afresh
            failed = True
            self._emit({"type": "poll-error", "error": str(error) or type(error).__name__})
        finally:
            # Right after the last look at _drain_again: a wake arriving now starts a new drain.
            self._draining = None
            self._schedule_poll(failed)

    async def _run(self, command: DeviceCommand) -> None:
        earlier = self._finished.get(command["id"])
        if earlier is not None:
            return await self._report(command, earlier)  # seen before: report again, never run twice
        handler, child_key = self._handler_for(command)
        self._emit({"type": "command", "command": command, "childKey": child_key})
        report = await self._outcome(command, handler, child_key)
        self._finished[command["id"]] = report
        while len(self._finished) > REMEMBERED_RESULTS:
            self._finished.popitem(last=False)
        await self._report(command, report)

    async def _outcome(self, command: DeviceCommand, handler: Handler | None, child_key: str | None) -> ResultReport:
        if handler is None:
            message = f"No handler for {command['capability']} on this device."
            return {"ok": False, "error": {"code": "unknown_capability", "message": message}}
        schema = self._schemas.get((child_key, command["capability"]))
        problems = validate(command["args"], schema) if schema is not None else []
        if problems:
            # The service checked them already; a device trusts its own schema, not the network.
            return {"ok": False, "error": {"code": "invalid_arguments", "message": "; ".join(problems)[:1024]}}
        context = CommandContext(
            action_id=command["id"],
            device_id=command["deviceId"],
            child_key=child_key,
            capability=command["capability"],
            expires_at=command["expiresAt"],
        )
        recalled = self._recalled.pop(command["id"], None)
        early: BaseException | None = DeviceStopping() if self.stopped else None
        if recalled is not None:
            early = CommandRecalled(recalled)
        deadline = command["expiresAt"] / 1000 - time.time()
        try:
            return await run_handler(
                handler,
                command["args"],
                context,
                early=early,
                deadline=deadline,
                register=lambda interrupt: self._running.__setitem__(command["id"], interrupt),
            )
        finally:
            self._running.pop(command["id"], None)

    async def _report(self, command: DeviceCommand, report: ResultReport) -> None:
        """Reports until the service has the result. The service answers a repeat of the same
        report with the stored action, so retrying after a lost answer is safe; a late report is
        stored too. Gives up when the service refuses the report (409: another report was
        stored) or the deadline has long passed."""
        attempt = 1
        while True:
            try:
                await self._api.report(command["id"], report)
                self._emit({"type": "result", "actionId": command["id"], "report": report, "attempts": attempt})
                return
            except ApiError as error:
                if error.unauthorized:
                    return self._revoke()
                late = time.time() > command["expiresAt"] / 1000 + REPORT_GRACE_S
                if not error.retryable or late or self.stopped:
                    self._emit({"type": "report-dropped", "actionId": command["id"], "error": error.message})
                    return
                retry_in = self._backoff_delay(attempt - 1)
                self._emit(
                    {"type": "report-retry", "actionId": command["id"], "error": error.message, "retryInMs": round(retry_in * 1000)}
                )
                await self._sleep(retry_in)
                attempt += 1

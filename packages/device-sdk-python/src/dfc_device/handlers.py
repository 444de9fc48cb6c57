"""Handlers: registering them per function (and per gateway child), and running one so that an
interruption (recall, deadline, stop) reaches it as a typed exception."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from .errors import CommandCancelled, CommandError, CommandExpired
from .http import DeviceCommand, ResultReport


@dataclass
class CommandContext:
    """What a handler gets besides the arguments."""

    action_id: str
    #: The device that runs the command: this device or, on a gateway, a child.
    device_id: str
    #: The child's manifest key on a gateway; None for the device itself.
    child_key: str | None
    capability: str
    #: The action's deadline (Unix ms): a result after it is still stored, but the action stays ``expired``.
    expires_at: int
    #: Set when the command must stop (a :class:`CommandRecalled`, :class:`CommandExpired` or
    #: :class:`DeviceStopping`). An async handler also gets it raised at its current ``await``;
    #: a plain function (run in a worker thread) should look at it between slow steps.
    cancelled: CommandCancelled | None = None


#: ``handler(args, ctx)`` returns the result (any JSON value), or raises; a :class:`CommandError`
#: sets the reported error code. ``async def`` handlers run on the event loop, plain functions in
#: a worker thread (so a slow one never holds up the wake socket).
Handler = Callable[[dict[str, Any], CommandContext], Any]
_H = TypeVar("_H", bound=Handler)
_Self = TypeVar("_Self", bound="_Handlers")


class _Handlers:
    def __init__(self) -> None:
        self._registry: dict[str, Handler] = {}

    @overload
    def handle(self: _Self, capability: str, handler: Handler) -> _Self: ...

    @overload
    def handle(self, capability: str) -> Callable[[_H], _H]: ...

    def handle(self, capability: str, handler: Handler | None = None) -> Any:
        """Registers the handler of one function: ``handle("name", fn)``, or ``@handle("name")``."""
        if handler is not None:
            self._registry[capability] = handler
            return self

        def register(function: _H) -> _H:
            self._registry[capability] = function
            return function

        return register


class ChildHandlers(_Handlers):
    """A gateway child's handlers; ``handle`` works as on the device."""


class HandlerRegistry(_Handlers):
    def __init__(self, device_id: str) -> None:
        super().__init__()
        self.device_id = device_id
        self._child_handlers: dict[str, ChildHandlers] = {}  # by child key or child device id
        self._child_keys: dict[str, str] = {}  # child device id -> key

    def child(self, key_or_device_id: str) -> ChildHandlers:
        """Handlers for a gateway child, named by its manifest key or its device id."""
        return self._child_handlers.setdefault(key_or_device_id, ChildHandlers())

    def child_id(self, key: str) -> str | None:
        """The device id of a gateway child, once the manifest is published."""
        return next((device_id for device_id, k in self._child_keys.items() if k == key), None)

    def _handler_for(self, command: DeviceCommand) -> tuple[Handler | None, str | None]:
        device_id, capability = command["deviceId"], command["capability"]
        if device_id == self.device_id:
            return self._registry.get(capability), None
        child_key = self._child_keys.get(device_id)
        children = self._child_handlers.get(child_key) if child_key is not None else None
        children = children or self._child_handlers.get(device_id)
        return (children._registry.get(capability) if children else None), child_key


class _Interruptible:
    """Drives a handler's coroutine; when its task is cancelled with a pending interruption, the
    coroutine gets that typed exception at its ``await`` instead of a bare CancelledError."""

    def __init__(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        self._coroutine = coroutine
        self.pending: BaseException | None = None

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self._coroutine.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                step = inner.send(sent) if thrown is None else inner.throw(thrown)
            except StopIteration as finished:
                return finished.value
            try:
                sent, thrown = (yield step), None
            except asyncio.CancelledError as cancelled:
                sent, thrown, self.pending = None, self.pending or cancelled, None
            except BaseException as error:  # noqa: BLE001 - handed to the handler, as await would
                sent, thrown = None, error


def _failure(code: str, message: str) -> ResultReport:
    return {"ok": False, "error": {"code": code[:64], "message": message[:1024]}}


async def _settle(outcome: Awaitable[Any]) -> ResultReport:
    try:
        result = await outcome
        if inspect.isawaitable(result):
            result = await result
        if result is not None:
            json.dumps(result, allow_nan=False)  # what the report can carry: no NaN, no objects
    except CommandError as error:
        return _failure(error.code, error.message)
    except CommandCancelled as error:
        return _failure(error.code, error.message)
    except Exception as error:  # noqa: BLE001 - any other failure is the handler's, reported as such
        return _failure("handler_error", str(error) or type(error).__name__)
    return {"ok": True} if result is None else {"ok": True, "result": result}


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(getattr(handler, "__call__", None))


async def run_handler(
    handler: Handler,
    args: dict[str, Any],
    context: CommandContext,
    *,
    early: BaseException | None,
    deadline: float,
    register: Callable[[Callable[[BaseException], None]], None],
) -> ResultReport:
    """Runs one handler to its report. ``early`` (recalled or stopping before it began) or a
    deadline already past means it is not called at all; ``register`` receives the function that
    interrupts it later."""
    if early is None and deadline <= 0:
        early = CommandExpired()
    if isinstance(early, CommandCancelled):
        context.cancelled = early
        return _failure(early.code, early.message)
    runner: _Interruptible | None = None
    if _is_async(handler):
        runner = _Interruptible(handler(args, context))
        task = asyncio.ensure_future(_settle(runner))
    else:
        task = asyncio.ensure_future(_settle(asyncio.to_thread(handler, args, context)))

    def interrupt(reason: BaseException) -> None:
        if isinstance(reason, CommandCancelled):
            context.cancelled = reason
        # A plain function in a thread cannot be interrupted; it reads context.cancelled.
        if runner is not None and not task.done():
            runner.pending = reason
            task.cancel()

    register(interrupt)
    timer = asyncio.get_running_loop().call_later(deadline, interrupt, CommandExpired())
    try:
        await asyncio.wait({task})
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        timer.cancel()
    if task.cancelled():
        reason = context.cancelled
        return _failure(reason.code, reason.message) if reason else _failure("handler_error", "The handler was cancelled.")
    return task.result()

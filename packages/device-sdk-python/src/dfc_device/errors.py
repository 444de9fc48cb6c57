"""The exceptions a device meets: its own handler errors, interruptions, a dead credential."""

from __future__ import annotations

import asyncio


class CommandError(Exception):
    """Raise from a handler to report ``failed`` with this code (any other exception: ``handler_error``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class CommandCancelled(asyncio.CancelledError):
    """Raised inside a running async handler at its current ``await`` when the command must stop.

    A subclass of :class:`asyncio.CancelledError`, so ``except Exception`` does not swallow it and
    ``async with`` blocks unwind as for any cancellation. Catch it to stop the hardware and return
    what was done: that return value is reported as usual. Left uncaught, the command is reported
    ``failed`` with :attr:`code`.
    """

    code = "cancelled"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CommandRecalled(CommandCancelled):
    """The service recalled the command (a ``cancel`` frame): the permission it was requested
    under was withdrawn. :attr:`reason` is the Action's ``cancelReason`` (``grant_revoked`` …)."""

    code = "recalled"

    def __init__(self, reason: str) -> None:
        super().__init__(f"The service recalled this command ({reason}).")
        self.reason = reason


class CommandExpired(CommandCancelled):
    """The action's deadline passed; a result reported now is kept, but the action stays ``expired``."""

    code = "expired"

    def __init__(self) -> None:
        super().__init__("The action's deadline passed.")


class DeviceStopping(CommandCancelled):
    """The device is stopping (:meth:`dfc_device.Device.stop`)."""

    code = "device_stopping"

    def __init__(self) -> None:
        super().__init__("The device is stopping.")


class DeviceRevoked(Exception):
    """The owner revoked the device (a 401 answer, or the wake socket closed with 4401).

    The credential is dead: the device stopped, and retrying cannot help. Attach again with a new
    setup token.
    """

    def __init__(self) -> None:
        super().__init__("The device was revoked: its credential is no longer accepted.")

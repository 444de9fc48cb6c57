"""A small blocking front for scripts: the asyncio API run to completion on its own loop."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Literal

from .credentials import attach_or_load
from .device import Device
from .http import AttachedDevice, DeviceCredentials, UrlSource, attach_device


def attach_device_sync(
    url: UrlSource, setup_token: str, name: str, kind: Literal["device", "gateway"] = "device"
) -> AttachedDevice:
    """:func:`dfc_device.attach_device`, blocking."""
    return asyncio.run(attach_device(url, setup_token, name, kind))


def attach_or_load_sync(
    url: UrlSource,
    path: str | os.PathLike[str],
    *,
    setup_token: str | None,
    name: str,
    kind: Literal["device", "gateway"] = "device",
) -> DeviceCredentials:
    """:func:`dfc_device.attach_or_load`, blocking."""
    return asyncio.run(attach_or_load(url, path, setup_token=setup_token, name=name, kind=kind))


def run_device(device: Device) -> None:
    """Runs the device until SIGINT or SIGTERM stops it (then returns), or until the owner
    revokes it (then raises :class:`dfc_device.DeviceRevoked`)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stopping: list[asyncio.Task[None]] = []  # held on to: the loop keeps only weak references
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, lambda: stopping.append(loop.create_task(device.stop())))
        await device.run()

    asyncio.run(main())

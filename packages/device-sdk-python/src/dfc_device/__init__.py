"""The device SDK for Device Function Control (``dfc-device``, the Python twin of ``@dfc/device``):
attach with a setup token, publish a manifest, stay reachable over the wake WebSocket, run
handlers, report results::

    credentials = await attach_or_load(url, "lamp-credentials.json", setup_token=token, name="Desk lamp")
    lamp = Device(url, credentials, manifest)

    @lamp.handle("set_power")
    async def set_power(args, ctx):
        return {"on": args["on"]}

    await lamp.run()
"""

from .credentials import attach_or_load, load_credentials, save_credentials
from .device import Device, DeviceEvent, backoff_delay
from .errors import (
    CommandCancelled,
    CommandError,
    CommandExpired,
    CommandRecalled,
    DeviceRevoked,
    DeviceStopping,
)
from .handlers import ChildHandlers, CommandContext, Handler
from .http import (
    ApiError,
    AttachedDevice,
    Capability,
    ChildManifest,
    DeviceApi,
    DeviceCommand,
    DeviceCredentials,
    InvalidAnswerError,
    Manifest,
    ResultReport,
    UrlSource,
    attach_device,
    split_setup_token,
)
from .schema import validate
from .sync import attach_device_sync, attach_or_load_sync, run_device

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "AttachedDevice",
    "Capability",
    "ChildHandlers",
    "ChildManifest",
    "CommandCancelled",
    "CommandContext",
    "CommandError",
    "CommandExpired",
    "CommandRecalled",
    "Device",
    "DeviceApi",
    "DeviceCommand",
    "DeviceCredentials",
    "DeviceEvent",
    "DeviceRevoked",
    "DeviceStopping",
    "Handler",
    "InvalidAnswerError",
    "Manifest",
    "ResultReport",
    "UrlSource",
    "attach_device",
    "split_setup_token",
    "attach_device_sync",
    "attach_or_load",
    "attach_or_load_sync",
    "backoff_delay",
    "load_credentials",
    "run_device",
    "save_credentials",
    "validate",
]

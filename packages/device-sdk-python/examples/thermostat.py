"""A hall thermostat built with dfc-device: a gateway with its own two functions and one child,
a radio sensor in the bedroom. Run it beside the service:

    DFC_URL=http://127.0.0.1:8787 DFC_SETUP_TOKEN=dfc_setup_… python3 thermostat.py

The first start attaches with the setup token and stores the device's credential in
thermostat-credentials.json (or DFC_CREDENTIALS), readable by its owner only; later starts
reuse it. DFC_SETUP_TOKEN may be the console's QR text (`<service URL>/#setup-token=<token>`).
Ctrl-C or SIGTERM stops it. Exit code 1: a person must act (the owner revoked it, there is no
credential yet and no setup token, or the setup token is refused); 2: the service could not be
reached at the first start.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from dfc_device import (
    ApiError,
    Capability,
    CommandContext,
    CommandError,
    Device,
    DeviceEvent,
    DeviceRevoked,
    Manifest,
    attach_or_load_sync,
    run_device,
    split_setup_token,
)

# The service: DFC_URL, else the one named by a QR-code setup token, else the local default.
URL = os.environ.get("DFC_URL") or split_setup_token(os.environ.get("DFC_SETUP_TOKEN", ""))[0] or "http://127.0.0.1:8787"
CREDENTIALS = os.environ.get("DFC_CREDENTIALS", "thermostat-credentials.json")

# What the service shows agents and checks every request against: names, kinds and a JSON
# Schema per function. Arguments outside the schema are refused before the device hears of them.
READ_TEMPERATURE: Capability = {
    "name": "read_temperature",
    "kind": "read",
    "description": "The measured temperature in °C.",
    "arguments": {"type": "object", "properties": {}, "additionalProperties": False},
}
MANIFEST: Manifest = {
    "capabilities": [
        READ_TEMPERATURE,
        {
            "name": "set_target",
            "kind": "control",
            "description": "Heat to a target temperature in °C, in half degrees.",
            "arguments": {
                "type": "object",
                "properties": {"celsius": {"type": "number", "minimum": 5, "maximum": 30, "multipleOf": 0.5}},
                "required": ["celsius"],
                "additionalProperties": False,
            },
        },
    ],
    # A gateway child: its own device id and grants; the key keeps that id across restarts.
    "children": [{"key": "bedroom", "name": "Bedroom sensor", "kind": "device", "capabilities": [READ_TEMPERATURE]}],
}

# The hardware, simulated. This model's heater reaches 26 °C, below what the schema allows.
HEATER_LIMIT = 26
hall = {"celsius": 20.5, "target": 20.0}
bedroom = {"celsius": 18.5}


def log(event: DeviceEvent) -> None:
    print(json.dumps(event), flush=True)  # events never carry the token


def fatal(message: str, code: int) -> int:
    print(f"thermostat: {message}", file=sys.stderr)
    return code


def main() -> int:
    # A setup token attaches once and is then spent: the stored credential is this device's only one.
    # A failure to start ends in one line on stderr: exit code 1 for what only a person can fix
    # (no credential yet, a refused setup token), 2 when the service cannot be reached (a
    # restart may help: see "Running as a service").
    try:
        credentials = attach_or_load_sync(
            URL, CREDENTIALS, setup_token=os.environ.get("DFC_SETUP_TOKEN"), name="Hall thermostat", kind="gateway"
        )
    except ValueError:
        return fatal(f"no credential in {CREDENTIALS} yet: set DFC_SETUP_TOKEN to a setup token from the owner", 1)
    except ApiError as error:
        if error.retryable:
            return fatal(f"cannot reach the service at {URL}: {error.message}", 2)
        return fatal(f"the setup token was refused ({error.code}: {error.message}); ask the owner for a new one", 1)
    thermostat = Device(URL, credentials, MANIFEST, on_event=log)

    # A handler's return value is reported as `succeeded` with that result; a CommandError as
    # `failed` with its code and message (any other exception: code `handler_error`).
    @thermostat.handle("read_temperature")
    def read_temperature(args: dict[str, Any], ctx: CommandContext) -> Any:
        return {"celsius": hall["celsius"], "target": hall["target"]}

    @thermostat.handle("set_target")
    def set_target(args: dict[str, Any], ctx: CommandContext) -> Any:
        if args["celsius"] > HEATER_LIMIT:
            raise CommandError("above_heater_limit", f"This heater reaches {HEATER_LIMIT} °C at most.")
        hall["target"] = args["celsius"]
        return {"target": hall["target"], "celsius": hall["celsius"]}

    @thermostat.child("bedroom").handle("read_temperature")
    def read_bedroom(args: dict[str, Any], ctx: CommandContext) -> Any:
        return {"celsius": bedroom["celsius"]}

    try:
        run_device(thermostat)  # publishes the manifest, then keeps the wake socket open until stopped
    except DeviceRevoked:
        return 1  # the owner detached it: the credential is dead
    return 0


if __name__ == "__main__":
    sys.exit(main())

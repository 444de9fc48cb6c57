"""The shared device protocol scenarios (test/devices/device-protocol/scenarios.json), run against the
live service with the Python SDK; test/devices/device-sdk-scenarios.test.ts runs the same table with
the Node SDK."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from support import SCENARIOS, Owner, Service, UpgradeRefusingProxy, until, waited

from dfc_device import CommandContext, CommandError, CommandRecalled, Device, DeviceRevoked, attach_device

TABLE = json.loads(SCENARIOS.read_text(encoding="utf-8"))


def fill(template: Any, args: dict[str, Any], child_key: str | None, recall_reason: str | None) -> Any:
    if isinstance(template, dict):
        return {k: fill(v, args, child_key, recall_reason) for k, v in template.items()}
    if template == "$childKey":
        return child_key
    if template == "$recallReason":
        return recall_reason
    if isinstance(template, str) and template.startswith("$args."):
        return args[template[len("$args.") :]]
    return template


def handler_for(spec: dict[str, Any], running: asyncio.Event) -> Any:
    async def handler(args: dict[str, Any], ctx: CommandContext) -> Any:
        recall_reason = None
        if spec.get("awaitsRecall"):
            running.set()
            try:
                await asyncio.Event().wait()
            except CommandRecalled as recalled:
                recall_reason = recalled.reason
        if "commandError" in spec:
            raise CommandError(spec["commandError"]["code"], spec["commandError"]["message"])
        if "fails" in spec:
            raise RuntimeError(spec["fails"])
        return fill(spec["returns"], args, ctx.child_key, recall_reason)

    return handler


def matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and matches(v, actual[k]) for k, v in expected.items())
    return bool(expected == actual)


def in_order(expected: list[str], seen: list[str]) -> bool:
    remaining = iter(seen)
    return all(any(kind == want for kind in remaining) for want in expected)


@pytest.mark.parametrize("scenario", TABLE["scenarios"], ids=[s["name"] for s in TABLE["scenarios"]])
async def test_scenario(scenario: dict[str, Any], service: Service, owner: Owner) -> None:
    proxy = UpgradeRefusingProxy(service.url) if scenario["transport"] == "poll" else None
    url = proxy.url if proxy else service.url
    kind = "gateway" if scenario["device"] == "gateway" else "device"
    attached = await attach_device(url, owner.setup_token(), "Scenario device", kind)
    events: list[dict[str, Any]] = []
    device = Device(
        url,
        attached.credentials,
        TABLE["manifests"][scenario["device"]],
        fallback_poll=0.05,
        backoff_initial=0.02,
        backoff_max=0.2,
        on_event=events.append,
    )
    request = scenario["request"]
    running = asyncio.Event()
    if scenario["handler"] is not None:
        handlers = device if request["target"] == "device" else device.child(request["target"])
        handlers.handle(request["capability"], handler_for(scenario["handler"], running))
    run = asyncio.create_task(device.run())
    try:
        if scenario.get("maker") == "stop-right-after-start":
            # run() is start() then a wait: right after start is right after the manifest.
            await until(lambda: any(e["type"] == "manifest" for e in events) or None)
            await asyncio.wait_for(device.stop(), 5)
            await asyncio.wait_for(run, 5)
        elif scenario["transport"] == "socket":
            await until(lambda: device.connected or None)
        else:
            await until(lambda: any(e["type"] == "disconnected" for e in events) or None)
        if scenario.get("maker"):
            pass  # nothing more: the device's own program acted
        elif scenario.get("owner") == "revoke-device":
            owner.post(f"/v1/devices/{device.device_id}/revoke", expect=200)
            with pytest.raises(DeviceRevoked):
                await asyncio.wait_for(run, 30)
        else:
            target = device.device_id if request["target"] == "device" else device.child_id(request["target"])
            assert target is not None
            owner.grant(target, [request["capability"]])
            action_id = owner.request(target, request["capability"], request["arguments"])
            if scenario.get("owner") == "revoke-grant-while-running":
                await waited(running)
                owner.revoke_grants(target)
            action = await owner.finished(action_id)
            assert matches(scenario["expect"]["action"], action), action
        # The service stores a report before the device hears the answer and emits "result".
        last = scenario["expect"]["events"][-1]
        await until(lambda: any(e["type"] == last for e in events) or None)
        seen = [e["type"] for e in events]
        assert in_order(scenario["expect"]["events"], seen), seen
        assert not set(scenario["expect"].get("noEvents", [])) & set(seen), seen
    finally:
        await device.stop()
        await asyncio.gather(run, return_exceptions=True)
        if proxy:
            proxy.close()

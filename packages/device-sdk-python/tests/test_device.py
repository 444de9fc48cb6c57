"""The Python SDK against the live service: what a device maker relies on beyond the shared
scenarios (credential storage, restarts, exactly-once reports, interruptions, sockets)."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import dfc_device.device
import dfc_device.wake
import pytest
from support import Owner, Service, until, waited

from dfc_device import (
    ApiError,
    CommandContext,
    CommandExpired,
    Device,
    DeviceApi,
    DeviceCommand,
    DeviceCredentials,
    DeviceRevoked,
    Manifest,
    UrlSource,
    attach_device,
    attach_or_load,
    load_credentials,
    save_credentials,
)

LAMP: Manifest = {
    "capabilities": [
        {
            "name": "set_power",
            "kind": "control",
            "arguments": {
                "type": "object",
                "properties": {"on": {"type": "boolean"}},
                "required": ["on"],
                "additionalProperties": False,
            },
        }
    ]
}
GATEWAY: Manifest = {"capabilities": [], "children": [{"key": "bulb", "name": "Bulb", "kind": "device", "capabilities": LAMP["capabilities"]}]}


STARTED: list[Device] = []


def fast(url: UrlSource, credentials: Any, manifest: Manifest = LAMP, **options: Any) -> Device:
    device = Device(url, credentials, manifest, fallback_poll=0.05, backoff_initial=0.02, backoff_max=0.2, **options)
    STARTED.append(device)
    return device


@pytest.fixture(autouse=True)
async def stop_devices() -> AsyncIterator[None]:
    """Stops what a test started, also when it failed half-way."""
    yield
    while STARTED:
        await STARTED.pop().stop()


class TestCredentials:
    async def test_attach_stores_the_credential_readable_by_its_owner_only_and_a_restart_reuses_it(
        self, service: Service, owner: Owner, tmp_path: Path
    ) -> None:
        path = tmp_path / "lamp-credentials.json"
        setup_token = owner.setup_token()
        first = await attach_or_load(service.url, path, setup_token=setup_token, name="Stored lamp")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert load_credentials(path) == first
        assert first.token not in repr(first)
        # The setup token is spent: a restart must come from the file, not a second attach.
        again = await attach_or_load(service.url, path, setup_token=None, name="Stored lamp")
        assert again == first
        with pytest.raises(ApiError) as refused:
            await attach_device(service.url, setup_token, "Second lamp")
        assert refused.value.status in (401, 403)

    async def test_a_first_start_without_a_setup_token_says_what_is_missing(self, service: Service, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="setup token"):
            await attach_or_load(service.url, tmp_path / "none.json", setup_token=None, name="Lamp")


class TestCredentialFile:
    """What is next to the credential file never decides who can read the token."""

    CREDENTIALS = DeviceCredentials("11111111-1111-4111-8111-111111111111", "dfc_device_SECRET", "a" * 64)

    @staticmethod
    def guessable(target: Path) -> Path:
        # The name a temporary file named after the process would get: one anyone can plant.
        return target.with_name(f".{target.name}.{os.getpid()}.tmp")

    def test_a_world_readable_file_left_where_the_temporary_file_could_go_never_makes_it_readable(self, tmp_path: Path) -> None:
        target = tmp_path / "device.json"
        left = self.guessable(target)
        left.write_text("")
        left.chmod(0o644)
        save_credentials(target, self.CREDENTIALS)
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
        assert load_credentials(target) == self.CREDENTIALS
        assert left.read_text() == ""

    def test_a_planted_symlink_is_not_followed_and_the_token_stays_in_the_owners_file(self, tmp_path: Path) -> None:
        target = tmp_path / "device.json"
        elsewhere = tmp_path / "readable-by-all"
        elsewhere.write_text("")
        elsewhere.chmod(0o644)
        self.guessable(target).symlink_to(elsewhere)
        save_credentials(target, self.CREDENTIALS)
        assert not target.is_symlink()
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
        assert elsewhere.read_text() == ""

    def test_an_existing_world_readable_credential_file_is_replaced_by_one_readable_by_its_owner_only(self, tmp_path: Path) -> None:
        target = tmp_path / "device.json"
        target.write_text("{}")
        target.chmod(0o644)
        save_credentials(target, self.CREDENTIALS)
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
        assert sorted(p.name for p in tmp_path.iterdir()) == ["device.json"]


class TestRevoked:
    async def test_a_revoked_credential_stops_a_restarted_device_with_DeviceRevoked(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Detached lamp")
        owner.post(f"/v1/devices/{attached.credentials.device_id}/revoke", expect=200)
        events: list[dict[str, Any]] = []
        device = fast(service.url, attached.credentials, on_event=events.append)
        with pytest.raises(DeviceRevoked):
            await asyncio.wait_for(device.run(), 30)
        await until(lambda: device.stopped or None)
        assert device.revoked
        assert events[0] == {"type": "revoked"}


class TestManifest:
    async def test_publishes_functions_with_schemas_and_keeps_a_childs_id_across_restarts(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Hub", "gateway")
        events: list[dict[str, Any]] = []
        first = fast(service.url, attached.credentials, GATEWAY, on_event=events.append)
        await first.start()
        bulb = first.child_id("bulb")
        assert bulb is not None
        assert events[0] == {"type": "manifest", "children": [{"key": "bulb", "deviceId": bulb}]}
        listed = owner.device(bulb)
        assert listed["parentId"] == attached.credentials.device_id
        assert listed["capabilities"][0]["arguments"] == LAMP["capabilities"][0]["arguments"]
        await first.stop()
        second = fast(service.url, attached.credentials, GATEWAY)
        await second.start()
        assert second.child_id("bulb") == bulb
        await second.stop()

    async def test_a_manifest_the_service_refuses_raises_its_error(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Bad lamp")
        bad: Any = {"capabilities": [{"name": "x y", "kind": "control", "arguments": {}}]}
        with pytest.raises(ApiError) as refused:
            await fast(service.url, attached.credentials, bad).start()
        assert refused.value.status == 400


class TestState:
    async def test_report_stores_a_last_known_value_and_a_read_handlers_result_becomes_the_value(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Stateful lamp")
        manifest: Manifest = {"capabilities": [{"name": "get_state", "kind": "read", "arguments": {"type": "object"}}, *LAMP["capabilities"]]}
        device = fast(service.url, attached.credentials, manifest)
        device.handle("get_state", lambda args, ctx: {"on": False})
        await device.start()
        device_id = attached.credentials.device_id
        await device.report("get_state", {"on": True})
        state = owner.get(f"/v1/devices/{device_id}/state")
        assert [(v["capability"], v["value"], v["source"]) for v in state["values"]] == [("get_state", {"on": True}, "report")]
        with pytest.raises(ApiError) as refused:
            await device.report("set_power", {"on": True})
        assert refused.value.status == 400

        owner.grant(device_id, ["get_state"])
        action_id = owner.request(device_id, "get_state", {})
        await owner.finished(action_id)
        state = owner.get(f"/v1/devices/{device_id}/state")
        assert [(v["value"], v["source"], v["actionId"]) for v in state["values"]] == [({"on": False}, "result", action_id)]


class TestExactlyOnce:
    async def test_a_command_seen_twice_runs_once_and_its_stored_report_is_sent_again(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Once lamp")
        api = DeviceApi(service.url, attached.credentials)
        await api.publish_manifest(LAMP)
        owner.grant(attached.credentials.device_id, ["set_power"])
        action_id = owner.request(attached.credentials.device_id, "set_power", {"on": True})
        command = await api.next()
        assert command is not None and command["id"] == action_id
        runs: list[str] = []
        events: list[dict[str, Any]] = []
        device = fast(service.url, attached.credentials, on_event=events.append)
        device.handle("set_power", lambda args, ctx: runs.append(ctx.action_id) or {"on": args["on"]})
        # The same command handed over twice (a lost `next` answer, a restart of the service):
        await device._run(command)
        await device._run(command)
        assert runs == [action_id]
        assert [e["type"] for e in events if e["type"] == "result"] == ["result", "result"]
        assert (await owner.finished(action_id))["result"] == {"on": True}

    async def test_the_service_answers_a_repeated_report_with_the_stored_action_and_refuses_another(
        self, service: Service, owner: Owner
    ) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Report lamp")
        api = DeviceApi(service.url, attached.credentials)
        await api.publish_manifest(LAMP)
        owner.grant(attached.credentials.device_id, ["set_power"])
        action_id = owner.request(attached.credentials.device_id, "set_power", {"on": True})
        assert await api.next() is not None
        first = await api.report(action_id, {"ok": True, "result": {"on": True}})
        assert await api.report(action_id, {"ok": True, "result": {"on": True}}) == first
        with pytest.raises(ApiError) as conflict:
            await api.report(action_id, {"ok": True, "result": {"on": False}})
        assert conflict.value.status == 409


class TestReports:
    async def handed(self, service: Service, owner: Owner, name: str) -> tuple[Device, DeviceCommand]:
        """A device whose manifest is published and a command the service handed to it."""
        attached = await attach_device(service.url, owner.setup_token(), name)
        await DeviceApi(service.url, attached.credentials).publish_manifest(LAMP)
        owner.grant(attached.credentials.device_id, ["set_power"])
        owner.request(attached.credentials.device_id, "set_power", {"on": True})
        command = await DeviceApi(service.url, attached.credentials).next()
        assert command is not None
        device = fast(service.url, attached.credentials)
        await device.start()
        return device, command

    async def test_a_result_json_cannot_hold_is_reported_as_handler_error(self, service: Service, owner: Owner) -> None:
        device, command = await self.handed(service, owner, "NaN lamp")
        device.handle("set_power", lambda args, ctx: {"level": float("nan")})
        await device._run(command)
        action = await owner.finished(command["id"])
        assert (action["status"], action["error"]["code"]) == ("failed", "handler_error")

    async def test_arguments_outside_the_published_schema_never_reach_the_handler(self, service: Service, owner: Owner) -> None:
        device, command = await self.handed(service, owner, "Checked lamp")
        calls: list[Any] = []
        device.handle("set_power", lambda args, ctx: calls.append(args))
        # What the service would never send: the device checks anyway.
        await device._run({**command, "args": {"on": "yes", "colour": "red"}})
        action = await owner.finished(command["id"])
        assert calls == []
        assert action["error"] == {
            "code": "invalid_arguments",
            "message": "args.on: must be boolean; args.colour: not allowed",
        }


class TestInterruptions:
    async def test_a_recall_the_handler_does_not_catch_is_reported_failed_with_code_recalled(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Recalled lamp")
        device = fast(service.url, attached.credentials)
        running = asyncio.Event()

        @device.handle("set_power")
        async def set_power(args: dict[str, Any], ctx: CommandContext) -> Any:
            running.set()
            await asyncio.sleep(3600)

        await device.start()
        await until(lambda: device.connected or None)
        owner.grant(device.device_id, ["set_power"])
        action_id = owner.request(device.device_id, "set_power", {"on": True})
        await waited(running)
        owner.revoke_grants(device.device_id)
        action = await owner.finished(action_id)
        assert action["status"] == "failed"
        assert action["error"] == {"code": "recalled", "message": "The service recalled this command (grant_revoked)."}
        await device.stop()

    async def test_at_the_deadline_the_handler_gets_CommandExpired_and_its_late_report_is_kept(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Slow lamp")
        device = fast(service.url, attached.credentials)

        @device.handle("set_power")
        async def set_power(args: dict[str, Any], ctx: CommandContext) -> Any:
            try:
                await asyncio.sleep(3600)
            except CommandExpired:
                return {"gaveUp": True}

        await device.start()
        owner.grant(device.device_id, ["set_power"])
        action_id = owner.request(device.device_id, "set_power", {"on": True}, ttl=1)

        def reported_late() -> dict[str, Any] | None:
            action = owner.action(action_id)
            return action if action.get("reportedLateAt") else None

        action = await until(reported_late)
        assert action["status"] == "expired"
        assert action["result"] == {"gaveUp": True}
        await device.stop()

    async def test_a_plain_function_runs_in_a_worker_thread_and_reads_the_recall_from_its_context(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Threaded lamp")
        device = fast(service.url, attached.credentials)
        recalled = threading.Event()
        running = threading.Event()
        threads: list[bool] = []

        def set_power(args: dict[str, Any], ctx: CommandContext) -> Any:
            threads.append(threading.current_thread() is threading.main_thread())
            running.set()
            while ctx.cancelled is None:
                recalled.wait(0.01)
            return {"stoppedBecause": ctx.cancelled.code}

        device.handle("set_power", set_power)
        await device.start()
        await until(lambda: device.connected or None)
        owner.grant(device.device_id, ["set_power"])
        action_id = owner.request(device.device_id, "set_power", {"on": True})
        await asyncio.to_thread(running.wait, 30)
        owner.revoke_grants(device.device_id)
        action = await owner.finished(action_id)
        assert action["result"] == {"stoppedBecause": "recalled"}
        assert threads == [False]
        await device.stop()


class TestWakeSocket:
    async def test_the_services_pings_keep_a_socket_open_and_answered(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Pinged lamp")
        events: list[dict[str, Any]] = []
        # The test service pings every second: a 1.5 s silence limit holds while pings arrive,
        # and the service drops a peer that does not answer them.
        device = fast(service.url, attached.credentials, silence_timeout=1.5, on_event=events.append)
        await device.start()
        await until(lambda: device.connected or None)
        await asyncio.sleep(4)
        assert [e["type"] for e in events].count("connected") == 1
        assert not [e for e in events if e["type"] == "disconnected"]
        await device.stop()

    async def test_a_socket_that_hears_nothing_is_dropped_and_reopened_with_a_new_ticket(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Quiet lamp")
        events: list[dict[str, Any]] = []
        # The service pings every second: a 0.3 s silence limit sees the socket as dead.
        device = fast(service.url, attached.credentials, silence_timeout=0.3, on_event=events.append)
        await device.start()
        await until(lambda: sum(e["type"] == "connected" for e in events) >= 2 or None)
        dropped = [e for e in events if e["type"] == "disconnected"]
        assert dropped[0]["code"] == 1006
        await device.stop()

    async def test_stop_while_the_socket_is_opening_still_ends_the_device(
        self, service: Service, owner: Owner, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Hasty lamp")
        device = fast(service.url, attached.credentials)
        stopping: list[asyncio.Task[None]] = []

        async def open_then_stop(url: str, silence_timeout: float) -> Any:
            opened = await dfc_device.wake.open_wake_socket(url, silence_timeout)
            # stop() runs after the socket opened, before the device holds it.
            stopping.append(asyncio.create_task(device.stop()))
            await asyncio.sleep(0)
            return opened

        monkeypatch.setattr(dfc_device.device, "open_wake_socket", open_then_stop)
        await device.start()
        await until(lambda: stopping or None)
        await asyncio.wait_for(stopping[0], 10)
        assert device.stopped and not device.connected

    async def test_stop_closes_the_socket_and_ends_run(self, service: Service, owner: Owner) -> None:
        attached = await attach_device(service.url, owner.setup_token(), "Stopping lamp")
        events: list[dict[str, Any]] = []
        device = fast(service.url, attached.credentials, on_event=events.append)
        run = asyncio.create_task(device.run())
        await until(lambda: device.connected or None)
        await device.stop()
        await run
        assert not device.connected and device.stopped and not device.revoked
        assert events[-1] == {"type": "stopped"}


class TestReconnects:
    async def test_a_service_restart_on_the_same_database_loses_no_command_and_runs_none_twice(self, tmp_path: Path) -> None:
        first = Service(tmp_path)
        restarted: list[Service] = [first]
        try:
            owner = Owner(first, "restart-owner")
            attached = await attach_device(first.url, owner.setup_token(), "Restarted lamp")
            events: list[dict[str, Any]] = []
            # The URL is read on every request and reconnect: the service comes back on another port.
            device = fast(lambda: restarted[-1].url, attached.credentials, on_event=events.append)
            runs: list[str] = []
            device.handle("set_power", lambda args, ctx: runs.append(ctx.action_id) or {"on": args["on"]})
            await device.start()
            await until(lambda: device.connected or None)
            owner.grant(device.device_id, ["set_power"])
            before = owner.request(device.device_id, "set_power", {"on": True})
            await owner.finished(before)

            first.process.kill()
            first.process.wait()
            await until(lambda: not device.connected or None)
            restarted.append(Service(tmp_path))
            owner.url = restarted[-1].url
            await until(lambda: device.connected or None)
            after = owner.request(device.device_id, "set_power", {"on": False})
            assert (await owner.finished(after))["result"] == {"on": False}
            assert runs == [before, after]
            assert [e["type"] for e in events].count("connected") == 2
            assert any(e["type"] == "disconnected" and e["retryInMs"] <= 200 for e in events)
        finally:
            for service in restarted:
                service.stop()

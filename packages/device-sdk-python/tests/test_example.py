"""The README's thermostat (examples/thermostat.py) run as a device maker runs it: its own
process, one JSON event a line on stdout, against the live service.

By default it runs from this folder with the package's source on the path. ``DFC_EXAMPLE_PYTHON``
(an interpreter where dfc-device is installed, e.g. a fresh venv) and ``DFC_EXAMPLE_DIR`` (a
folder outside the repository holding thermostat.py) run the installed package instead.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from support import Owner, Service, until

PACKAGE = Path(__file__).resolve().parents[1]


class Thermostat:
    def __init__(self, service: Service, folder: Path, env: dict[str, str]) -> None:
        python = os.environ.get("DFC_EXAMPLE_PYTHON", sys.executable)
        source = {} if "DFC_EXAMPLE_PYTHON" in os.environ else {"PYTHONPATH": str(PACKAGE / "src")}
        self.events: list[dict[str, Any]] = []
        self.process = subprocess.Popen(
            [python, "thermostat.py"],
            cwd=folder,
            env={"PATH": os.environ.get("PATH", ""), "DFC_URL": service.url, "DFC_CREDENTIALS": str(folder / "credentials.json"), **source, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.events.append(json.loads(line))

    async def connected(self) -> None:
        def check() -> bool | None:
            if self.process.poll() is not None:
                assert self.process.stderr is not None
                raise AssertionError(f"the thermostat exited ({self.process.returncode}): {self.process.stderr.read()}")
            return True if any(e["type"] == "connected" for e in self.events) else None

        await until(check)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(20)


def example_folder(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("DFC_EXAMPLE_DIR") or tmp_path)
    if not (folder / "thermostat.py").exists():
        (folder / "thermostat.py").write_text((PACKAGE / "examples/thermostat.py").read_text(encoding="utf-8"), encoding="utf-8")
    return folder


async def act(owner: Owner, device_id: str, capability: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return await owner.finished(owner.request(device_id, capability, arguments, ttl=60))


async def test_the_thermostat_attaches_as_a_gateway_runs_commands_and_reuses_its_credential_on_restart(
    service: Service, tmp_path: Path
) -> None:
    owner = Owner(service, "thermostat-owner")
    folder = example_folder(tmp_path)
    (folder / "credentials.json").unlink(missing_ok=True)
    first = Thermostat(service, folder, {"DFC_SETUP_TOKEN": owner.setup_token()})
    await first.connected()

    devices = owner.get("/v1/devices")
    hall = next(d for d in devices if d["name"] == "Hall thermostat")
    bedroom = next(d for d in devices if d["name"] == "Bedroom sensor")
    assert (hall["kind"], hall["parentId"]) == ("gateway", None)
    assert (bedroom["kind"], bedroom["parentId"]) == ("device", hall["id"])
    assert stat.S_IMODE(os.stat(folder / "credentials.json").st_mode) == 0o600

    owner.grant(hall["id"], ["read_temperature", "set_target"])
    owner.grant(bedroom["id"], ["read_temperature"])
    set_target = await act(owner, hall["id"], "set_target", {"celsius": 22.5})
    assert (set_target["status"], set_target["result"]) == ("succeeded", {"target": 22.5, "celsius": 20.5})
    read = await act(owner, hall["id"], "read_temperature", {})
    assert read["result"] == {"celsius": 20.5, "target": 22.5}
    assert (await act(owner, bedroom["id"], "read_temperature", {}))["result"] == {"celsius": 18.5}
    too_hot = await act(owner, hall["id"], "set_target", {"celsius": 28})
    assert (too_hot["status"], too_hot["error"]) == (
        "failed",
        {"code": "above_heater_limit", "message": "This heater reaches 26 °C at most."},
    )
    types = [e["type"] for e in first.events]
    assert {"manifest", "connected", "wake", "command", "result"} <= set(types)
    assert first.stop() == 0
    assert first.events[-1] == {"type": "stopped"}

    # No setup token this time (it is spent): the stored credential attaches the same device.
    second = Thermostat(service, folder, {})
    await second.connected()
    assert (await act(owner, bedroom["id"], "read_temperature", {}))["result"] == {"celsius": 18.5}
    owner.post(f"/v1/devices/{hall['id']}/revoke", expect=200)
    assert second.process.wait(20) == 1
    assert [e["type"] for e in second.events][-2:] == ["revoked", "stopped"]


def run_to_end(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    python = os.environ.get("DFC_EXAMPLE_PYTHON", sys.executable)
    source = {} if "DFC_EXAMPLE_PYTHON" in os.environ else {"PYTHONPATH": str(PACKAGE / "src")}
    base = {"PATH": os.environ.get("PATH", ""), "DFC_CREDENTIALS": str(folder / "credentials.json"), **source}
    return subprocess.run([python, "thermostat.py"], cwd=folder, env={**base, **env}, capture_output=True, text=True, timeout=60)


def test_the_thermostat_without_a_credential_or_setup_token_ends_in_one_line_with_code_1(service: Service, tmp_path: Path) -> None:
    folder = example_folder(tmp_path)
    (folder / "credentials.json").unlink(missing_ok=True)
    done = run_to_end(folder, {"DFC_URL": service.url})
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"thermostat: no credential in {folder / 'credentials.json'} yet: set DFC_SETUP_TOKEN to a setup token from the owner"]


def test_the_thermostat_with_a_spent_setup_token_ends_in_one_line_with_code_1(service: Service, tmp_path: Path) -> None:
    owner = Owner(service, "thermostat-spent")
    token = owner.setup_token()
    owner.post("/v1/sdk/devices", {}, token=token, expect=201)
    folder = example_folder(tmp_path)
    (folder / "credentials.json").unlink(missing_ok=True)
    done = run_to_end(folder, {"DFC_URL": service.url, "DFC_SETUP_TOKEN": token})
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("thermostat: the setup token was refused (") and line.endswith("ask the owner for a new one")


def test_the_thermostat_that_cannot_reach_the_service_ends_in_one_line_with_code_2(tmp_path: Path) -> None:
    folder = example_folder(tmp_path)
    (folder / "credentials.json").unlink(missing_ok=True)
    done = run_to_end(folder, {"DFC_URL": "http://127.0.0.1:9", "DFC_SETUP_TOKEN": "dfc_setup_x"})
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("thermostat: cannot reach the service at http://127.0.0.1:9: ")


async def test_the_thermostat_attaches_from_the_qr_text_alone(service: Service, tmp_path: Path) -> None:
    owner = Owner(service, "thermostat-qr")
    folder = example_folder(tmp_path)
    (folder / "credentials.json").unlink(missing_ok=True)
    # No DFC_URL: the service URL comes from the QR text, as a camera would read it.
    qr = f"{service.url}/#setup-token={owner.setup_token()}"
    thermostat = Thermostat(service, folder, {"DFC_URL": "", "DFC_SETUP_TOKEN": qr})
    await thermostat.connected()
    assert [d["name"] for d in owner.get("/v1/devices") if d["parentId"] is None] == ["Hall thermostat"]
    assert thermostat.stop() == 0

"""The real service for the tests: started from this repository as its own process on a loopback
port with a temp database, and the owner and agent calls the tests make against it."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(os.environ.get("DFC_REPO_ROOT", Path(__file__).resolve().parents[3]))
NODE = os.environ.get("DFC_NODE", "node")
SCENARIOS = ROOT / "test/devices/device-protocol/scenarios.json"

# The limits the repository's own tests relax (test/helpers/server.ts RELAXED_LIMITS).
RELAXED_LIMITS = {
    name: "100000"
    for name in (
        "RATE_LIMIT_AGENT_PER_SECOND",
        "RATE_LIMIT_AGENT_BURST",
        "RATE_LIMIT_DEVICE_PER_SECOND",
        "RATE_LIMIT_DEVICE_BURST",
        "RATE_LIMIT_OWNER_PER_SECOND",
        "RATE_LIMIT_OWNER_BURST",
        "AUTH_FAILURES_PER_MINUTE",
        "WORKSPACE_MAX_AGENT_CONNECTIONS",
        "WORKSPACE_MAX_SETUP_TOKENS",
        "WORKSPACE_MAX_GRANTS",
    )
}


def _tsx(script: str) -> list[str]:
    # The TypeScript source through tsx, as test/helpers/child-service.ts runs it: always the
    # current code, with no build step that could be stale.
    return [NODE, "--import", "tsx", script]


def _die_with_parent() -> None:
    """Runs in the service's process before exec: a killed test run takes its service with it."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Service:
    """``src/main.ts`` as its own process; ``url`` once it logs that it listens."""

    def __init__(self, directory: Path) -> None:
        self.env = {
            **os.environ,
            "HOST": "127.0.0.1",
            "PORT": "0",
            "LOG_LEVEL": "info",
            "DATABASE_URL": f"file:{directory / 'service.db'}",
            # Pings every second, so the tests see the socket's liveness rules at work.
            "WS_PING_SECONDS": "1",
            **RELAXED_LIMITS,
        }
        self._output: list[str] = []
        self.process = subprocess.Popen(
            _tsx("src/main.ts"),
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        self.url = self._listening()
        threading.Thread(target=self._drain_output, daemon=True).start()

    def _listening(self) -> str:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._output.append(line)
            if '"msg":"listening"' in line:
                return str(json.loads(line)["url"]).rstrip("/")
        raise RuntimeError("the service exited before listening:\n" + "".join(self._output[-40:]))

    def _drain_output(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._output.append(line)

    def owner_token(self, subject: str) -> str:
        """A session signed by the development identity provider (``npm run owner-token``)."""
        done = subprocess.run(
            [*_tsx("src/cli/owner-token.ts"), "--sub", subject], cwd=ROOT, env=self.env, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@dataclass
class Answer:
    status: int
    body: Any

    @property
    def data(self) -> Any:
        return self.body.get("data") if isinstance(self.body, dict) else None


def http(method: str, url: str, token: str | None = None, body: Any = None) -> Answer:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return Answer(response.status, json.loads(response.read() or b"null"))
    except urllib.error.HTTPError as error:
        return Answer(error.code, json.loads(error.read() or b"null"))


class Owner:
    """An owner session and the agent connection the tests request actions with."""

    def __init__(self, service: Service, subject: str) -> None:
        self.url = service.url
        self.token = service.owner_token(subject)
        agent = self.post("/v1/agent-connections", {"name": "agent", "access": "act"})
        self.agent_token = str(agent["token"])
        self.principal = str(agent["principal"])

    def post(self, path: str, body: Any = None, token: str | None = None, expect: int | None = None) -> Any:
        answer = http("POST", self.url + path, token or self.token, body)
        assert answer.status == expect if expect else answer.status < 300, (answer.status, answer.body)
        return answer.data

    def get(self, path: str, token: str | None = None) -> Any:
        answer = http("GET", self.url + path, token or self.token)
        assert answer.status == 200, (answer.status, answer.body)
        return answer.data

    def setup_token(self) -> str:
        return str(self.post("/v1/device-setup-tokens", {"name": "setup"}, expect=201)["token"])

    def device(self, device_id: str) -> dict[str, Any]:
        return next(d for d in self.get("/v1/devices") if d["id"] == device_id)

    def grant(self, device_id: str, capabilities: list[str]) -> None:
        body = {"principal": self.principal, "deviceId": device_id, "capabilities": capabilities}
        self.post("/v1/grants", body, expect=201)

    def revoke_grants(self, device_id: str) -> None:
        self.post("/v1/grants/revoke", {"principal": self.principal, "deviceId": device_id}, expect=200)

    def request(self, device_id: str, capability: str, arguments: dict[str, Any], ttl: int = 120) -> str:
        body = {"capability": capability, "arguments": arguments, "ttlSeconds": ttl}
        return str(self.post(f"/v1/devices/{device_id}/actions", body, token=self.agent_token, expect=201)["id"])

    def action(self, action_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self.get(f"/v1/actions/{action_id}", token=self.agent_token)
        return data

    async def finished(self, action_id: str) -> dict[str, Any]:
        """The action once the device reported it (the test's timeout bounds the wait)."""
        return await until(lambda: _settled(self.action(action_id)))


def _settled(action: dict[str, Any]) -> dict[str, Any] | None:
    return None if action["status"] in ("queued", "received") else action


T = TypeVar("T")


#: A bound on every wait, so a behaviour that never happens fails the test instead of hanging it.
WAIT_LIMIT_S = 30.0


async def until(check: Callable[[], T | None], pause: float = 0.02) -> T:
    """Waits until ``check`` returns a value (not a timed assertion: the limit only ends a hang)."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        value = await asyncio.to_thread(check)
        if value is not None:
            return value
        await asyncio.sleep(pause)
    raise AssertionError(f"still waiting after {WAIT_LIMIT_S} s for {check}")


async def waited(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), WAIT_LIMIT_S)


class UpgradeRefusingProxy:
    """A real HTTP proxy that forwards requests but refuses WebSocket upgrades, as some
    corporate proxies do: a device behind it can only poll."""

    def __init__(self, target: str) -> None:
        class Forward(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                request = urllib.request.Request(
                    target + self.path, data=self.rfile.read(length), headers=headers, method="POST"
                )
                try:
                    with urllib.request.urlopen(request, timeout=10) as answer:
                        status, body = answer.status, answer.read()
                except urllib.error.HTTPError as error:
                    status, body = error.code, error.read()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self.send_response(501)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

# A single-file device client in MicroPython style: attach with a setup token, publish a
# manifest, long-poll `next`, run the command, report its result. Copy it to the board as
# main.py next to urequests (or micropython-lib `requests`), set the constants below, and
# replace `run_command` with what your device does. docs/devices/micropython/README.md says
# how to choose TLS, where the credential is kept and how often to poll.
import sys
import time

try:
    import ujson as json
except ImportError:
    import json

try:
    import urequests as requests
except ImportError:
    import requests

# What the owner gives you: the service's URL and a setup token, or the QR code's text
# `<service URL>/#setup-token=<token>` in SETUP alone.
SERVICE_URL = "https://dfc.example.com"
SETUP = "dfc_setup_..."
# Where the device keeps its own credential once attached (flash). Keep it: the setup token is
# spent on the first attach, and a lost credential means asking the owner for a new one.
CREDENTIAL_FILE = "dfc-credential.json"
# How long each `next` may wait for a command (0-30 s). The socket timeout must exceed it.
WAIT_SECONDS = 25
HTTP_TIMEOUT = WAIT_SECONDS + 10
# After a failure the pause doubles up to this, so a fleet never hammers a recovering service.
MAX_BACKOFF_SECONDS = 60

MANIFEST = {
    "capabilities": [
        {
            "name": "set_led",
            "kind": "control",
            "description": "Switch the LED on or off.",
            "arguments": {
                "type": "object",
                "properties": {"on": {"type": "boolean"}},
                "required": ["on"],
                "additionalProperties": False,
            },
        },
        {
            "name": "get_state",
            "kind": "read",
            "description": "Whether the LED is on.",
            "arguments": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    ]
}

state = {"on": False}


def run_command(capability, args):
    """Does what a command asks; returns its result (JSON) or raises ValueError to fail it."""
    if capability == "set_led":
        state["on"] = bool(args["on"])  # e.g. machine.Pin(2, machine.Pin.OUT).value(...)
        return {"on": state["on"]}
    if capability == "get_state":
        return {"on": state["on"]}
    raise ValueError("unknown capability " + capability)


class Stop(Exception):
    """Something only a person can fix: the message says what, the code is the exit status."""

    def __init__(self, message, code):
        Exception.__init__(self, message)
        self.code = code


def unquote(text):
    out = ""
    i = 0
    while i < len(text):
        if text[i] == "%" and i + 2 < len(text):
            out += chr(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            out += text[i]
            i += 1
    return out


def split_setup(service_url, setup):
    """The QR code's `<url>/#setup-token=<token>` gives both; a bare token keeps service_url."""
    mark = "#setup-token="
    at = setup.find(mark)
    if at < 0:
        return service_url.rstrip("/"), setup
    return setup[:at].rstrip("/"), unquote(setup[at + len(mark) :])


def call(method, url, token, body=None, headers=None):
    """One HTTPS call; answers (status, parsed JSON or None). Network errors raise OSError."""
    sent = {"Authorization": "Bearer " + token}
    if headers:
        sent.update(headers)
    if body is not None:
        sent["Content-Type"] = "application/json"
    response = requests.request(
        method, url, data=None if body is None else json.dumps(body), headers=sent, timeout=HTTP_TIMEOUT
    )
    try:
        status = response.status_code
        try:
            parsed = response.json()
        except ValueError:
            parsed = None
        return status, parsed
    finally:
        response.close()


def load_credential(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError:
        return None


def save_credential(path, credential):
    import os

    with open(path + ".new", "w") as f:
        json.dump(credential, f)
    os.rename(path + ".new", path)


def attach(service_url, setup, path):
    """Attaches once with the setup token and keeps the device's own credential in `path`."""
    base, token = split_setup(service_url, setup)
    status, body = call("POST", base + "/v1/sdk/devices", token, {"kind": "device"})
    code = body.get("error", {}).get("code") if isinstance(body, dict) else None
    if status == 401 or code == "device_limit_reached":
        raise Stop("the setup token was refused (spent, expired or revoked): ask the owner for a new one", 1)
    if status != 201:
        raise Stop("attach failed with HTTP %d: %s" % (status, body), 1)
    data = body["data"]
    credential = {"service": base, "deviceId": data["device"]["id"], "token": data["token"], "workspace": data["workspace"]}
    save_credential(path, credential)
    return credential


def publish(credential):
    url = "%s/v1/device/%s/manifest" % (credential["service"], credential["deviceId"])
    status, body = call("POST", url, credential["token"], MANIFEST)
    if status == 401:
        raise Stop("the device credential was revoked: delete %s and attach again" % CREDENTIAL_FILE, 1)
    if status != 200:
        raise Stop("manifest refused with HTTP %d: %s" % (status, body), 1)


def report(credential, command, ok, payload):
    url = "%s/v1/device/%s/result" % (credential["service"], credential["deviceId"])
    body = {"actionId": command["id"], "ok": ok}
    body["result" if ok else "error"] = payload
    # A report may be repeated safely: retry it until the service has it.
    pause = 1
    while True:
        try:
            status, _ = call("POST", url, credential["token"], body)
            if status < 500 and status != 429:
                return status
        except OSError:
            pass
        time.sleep(pause)
        pause = min(pause * 2, MAX_BACKOFF_SECONDS)


def serve(credential, max_commands=None):
    """Long-polls `next` and runs each command; returns after `max_commands` (None: forever)."""
    url = "%s/v1/device/%s/next?waitSeconds=%d" % (credential["service"], credential["deviceId"], WAIT_SECONDS)
    headers = {"x-service-workspace": credential["workspace"]}
    handled = 0
    pause = 1
    while max_commands is None or handled < max_commands:
        try:
            status, body = call("POST", url, credential["token"], None, headers)
        except OSError as error:
            print("network error, retrying in %d s: %s" % (pause, error))
            time.sleep(pause)
            pause = min(pause * 2, MAX_BACKOFF_SECONDS)
            continue
        if status == 401:
            raise Stop("the device credential was revoked: delete %s and attach again" % CREDENTIAL_FILE, 1)
        if status != 200:
            # 429 and 503 say when to come back (Retry-After); anything else is retried slowly.
            time.sleep(pause)
            pause = min(pause * 2, MAX_BACKOFF_SECONDS)
            continue
        pause = 1
        command = body["data"]
        if command is None:
            continue  # nothing came within WAIT_SECONDS: ask again (a battery device sleeps here)
        try:
            report(credential, command, True, run_command(command["capability"], command["args"]))
        except ValueError as error:
            report(credential, command, False, {"code": "device_error", "message": str(error)})
        handled += 1


def main(service_url=SERVICE_URL, setup=SETUP, path=CREDENTIAL_FILE, max_commands=None):
    try:
        credential = load_credential(path) or attach(service_url, setup, path)
        publish(credential)
        print("attached as device %s" % credential["deviceId"])
        serve(credential, max_commands)
    except Stop as stop:
        print("dfc: " + str(stop))
        sys.exit(stop.code)
    except OSError as error:
        print("dfc: cannot reach the service: %s" % error)
        sys.exit(2)


if __name__ == "__main__":
    # On a board there is no command line: the constants above apply. On a computer:
    # client.py SERVICE_URL SETUP [CREDENTIAL_FILE [MAX_COMMANDS]]
    argv = getattr(sys, "argv", [])[1:]
    main(
        argv[0] if len(argv) > 0 else SERVICE_URL,
        argv[1] if len(argv) > 1 else SETUP,
        argv[2] if len(argv) > 2 else CREDENTIAL_FILE,
        int(argv[3]) if len(argv) > 3 else None,
    )

"""Storing the device credential: one JSON file, readable by its owner only."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Literal

from .http import DeviceCredentials, UrlSource, attach_device


def save_credentials(path: str | os.PathLike[str], credentials: DeviceCredentials) -> None:
    """Writes the credential file with mode 0600, atomically (a crash leaves the old file or the new one).

    The format is the Node SDK example's (``{"deviceId", "token", "workspace"}``), so either SDK
    can read the other's file.
    """
    target = Path(path)
    # A fresh file under an unpredictable name, created exclusively (O_EXCL, no symlink
    # followed): a file or symlink planted or left next to the target is never written through.
    # Made 0600 before the token is written, so it is never readable by others.
    descriptor, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    temporary = Path(name)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            os.fchmod(file.fileno(), 0o600)
            json.dump(
                {"deviceId": credentials.device_id, "token": credentials.token, "workspace": credentials.workspace},
                file,
            )
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def load_credentials(path: str | os.PathLike[str]) -> DeviceCredentials | None:
    """The stored credential, or None when there is no file yet."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    data = json.loads(text)
    return DeviceCredentials(str(data["deviceId"]), str(data["token"]), str(data["workspace"]))


async def attach_or_load(
    url: UrlSource,
    path: str | os.PathLike[str],
    *,
    setup_token: str | None,
    name: str,
    kind: Literal["device", "gateway"] = "device",
) -> DeviceCredentials:
    """The credential stored at ``path``, or a new one: attaches with ``setup_token`` and stores it.

    A setup token attaches once and is then spent, so later starts must reuse the stored file.
    """
    stored = load_credentials(path)
    if stored is not None:
        return stored
    if not setup_token:
        raise ValueError(f"No credential at {os.fspath(path)} yet: a setup token is needed for the first start.")
    attached = await attach_device(url, setup_token, name, kind)
    save_credentials(path, attached.credentials)
    return attached.credentials

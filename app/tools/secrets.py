"""HTTP servers' header values (tokens): in the OS keyring where ``keyring`` is importable and has a working
backend, else in a file only the user can read (mode 0600)."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from engine import user_data_dir

log = logging.getLogger(__name__)

SERVICE = "ssd-chat-mcp"
FILE_MODE = 0o600  # read and write for the user alone


def _keyring() -> Any:
    """The keyring module where it works here, else None."""
    try:
        import keyring  # type: ignore[import-not-found, unused-ignore]
        from keyring.backends import fail  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return None if isinstance(keyring.get_keyring(), fail.Keyring) else keyring


def _file() -> os.PathLike[str]:
    return user_data_dir() / "mcp-secrets.json"


def _read_file() -> dict[str, dict[str, str]]:
    try:
        with open(_file(), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def headers(server: str) -> dict[str, str]:
    """A server's header values ({} when none are kept)."""
    ring = _keyring()
    if ring is not None:
        try:
            raw = ring.get_password(SERVICE, server)
            return dict(json.loads(raw)) if raw else {}
        except Exception as exc:  # a keyring backend's own errors: it stands in for a missing file
            log.warning("the keyring could not be read: %s", exc)
    return dict(_read_file().get(server, {}))


def set_headers(server: str, values: dict[str, str]) -> None:
    """Keep a server's header values (none: forget them)."""
    ring = _keyring()
    if ring is not None:
        try:
            if values:
                ring.set_password(SERVICE, server, json.dumps(values))
            elif ring.get_password(SERVICE, server) is not None:
                ring.delete_password(SERVICE, server)
            return
        except Exception as exc:  # fall back to the file, as where there is no keyring
            log.warning("the keyring could not be written: %s", exc)
    data = _read_file()
    if values:
        data[server] = values
    else:
        data.pop(server, None)
    path = _file()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    os.chmod(path, FILE_MODE)  # a file made earlier with a wider mode
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)

"""The MCP servers the user added, in the ``mcp.json`` shape Claude Desktop, LM Studio and Cline share, with the
per-server and per-tool switches and the tools the user always allows."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.tools import secrets
from engine import user_data_dir

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """An mcp.json that cannot be read; the message names what is wrong."""


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One server: a local program over stdio (``command``, ``args``, ``env``) or a URL over streamable HTTP
    (``url``, ``headers``: their values are secrets, kept out of the file). ``disabled_tools`` and
    ``always_allow`` hold tool names."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)
    enabled: bool = True
    disabled_tools: frozenset[str] = frozenset()
    always_allow: frozenset[str] = frozenset()

    @property
    def kind(self) -> str:
        return "http" if self.url else "stdio"

    def session_key(self) -> tuple[object, ...]:
        """What a running connection depends on: a change restarts it (switches do not)."""
        return (self.command, self.args, self.env, self.url, self.headers)

    def describe(self) -> str:
        return self.url if self.url else " ".join((self.command, *self.args))


def parse(data: Mapping[str, Any]) -> list[ServerSpec]:
    """The servers of an mcp.json document (``{"mcpServers": {name: {...}}}``)."""
    servers = data.get("mcpServers")
    if not isinstance(servers, Mapping):
        raise ConfigError('no "mcpServers" object')
    out = []
    for name, entry in servers.items():
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{name}: not an object")
        command, url = entry.get("command", ""), entry.get("url", entry.get("serverUrl", ""))
        if not isinstance(command, str) or not isinstance(url, str) or bool(command) == bool(url):
            raise ConfigError(f'{name}: needs either "command" or "url"')
        args, env, headers = entry.get("args", []), entry.get("env", {}), entry.get("headers", {})
        if not isinstance(args, list) or not isinstance(env, Mapping) or not isinstance(headers, Mapping):
            raise ConfigError(f'{name}: "args" must be a list, "env" and "headers" objects')
        out.append(ServerSpec(
            str(name), command, tuple(str(a) for a in args), tuple((str(k), str(v)) for k, v in env.items()), url,
            tuple((str(k), str(v)) for k, v in headers.items()), not entry.get("disabled", False),
            frozenset(map(str, entry.get("disabledTools", []))), frozenset(map(str, entry.get("alwaysAllow", [])))))
    return out


def read_file(path: Path) -> list[ServerSpec]:
    """The servers of an mcp.json file (ConfigError says why it cannot be read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path.name}: {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigError('no "mcpServers" object')
    return parse(data)


def to_json(specs: list[ServerSpec]) -> dict[str, Any]:
    """The file's document: header names only (their values are in the secret store)."""
    servers: dict[str, Any] = {}
    for s in specs:
        entry: dict[str, Any] = {"url": s.url} if s.url else {"command": s.command, "args": list(s.args),
                                                               "env": dict(s.env)}
        if s.headers:
            entry["secretHeaders"] = [k for k, _ in s.headers]
        entry["disabled"] = not s.enabled
        entry["disabledTools"] = sorted(s.disabled_tools)
        entry["alwaysAllow"] = sorted(s.always_allow)
        servers[s.name] = entry
    return {"mcpServers": servers}


def config_path() -> Path:
    return user_data_dir() / "mcp.json"


def load(path: Path | None = None) -> list[ServerSpec]:
    """The saved servers with their headers from the secret store ([] when there is no file or it is unreadable)."""
    path = path or config_path()
    if not path.exists():
        return []
    try:
        specs = read_file(path)
    except ConfigError as exc:
        log.warning("ignoring the tool servers' file: %s", exc)
        return []
    return [replace(s, headers=tuple(secrets.headers(s.name).items())) if s.url else s for s in specs]


def save(specs: list[ServerSpec], path: Path | None = None) -> None:
    """Write the servers; header values go to the secret store."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    for s in specs:
        if s.url:
            secrets.set_headers(s.name, dict(s.headers))
    path.write_text(json.dumps(to_json(specs), indent=2), encoding="utf-8")

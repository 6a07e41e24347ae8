"""Remote machines as the user names them: ``HOST:PORT[,HOST:PORT…]`` (llama.cpp's RPC endpoint form)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from engine.errors import ParameterError

DEFAULT_PORT = 50052  # llama.cpp's rpc-server default, so a bare host means what llama.cpp's tools mean
MAX_SERVERS = 16  # GGML_RPC_MAX_SERVERS in ggml-rpc.h: llama.cpp keeps no more


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One RPC server: a host name or address and a TCP port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        """Whether the address is this machine only (127.0.0.0/8, ::1 or localhost)."""
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_endpoint(text: str) -> Endpoint:
    """``host:port``, ``[v6]:port`` or a bare host (port 50052); :class:`ParameterError` names what is wrong."""
    raw = text.strip()
    if not raw:
        raise ParameterError("an empty remote machine: expected HOST:PORT")
    if raw.startswith("["):
        host, sep, rest = raw[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ("" if not rest else None)
        if not sep or port_text is None:
            raise ParameterError(f"remote machine {raw!r}: expected [IPv6]:PORT")
    elif raw.count(":") > 1:
        raise ParameterError(f"remote machine {raw!r}: write an IPv6 address in brackets, [ADDRESS]:PORT")
    else:
        host, _, port_text = raw.partition(":")
    if not host or any(c.isspace() for c in host):
        raise ParameterError(f"remote machine {raw!r}: no host name before the port")
    if not port_text:
        return Endpoint(host, DEFAULT_PORT)
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ParameterError(f"remote machine {raw!r}: the port must be a number from 1 to 65535")
    return Endpoint(host, int(port_text))


def parse_endpoints(text: str | list[str] | tuple[str, ...]) -> tuple[Endpoint, ...]:
    """A comma-separated list (or a sequence of items), each :func:`parse_endpoint`; no repeats, at most 16."""
    items = text.split(",") if isinstance(text, str) else [p for t in text for p in t.split(",")]
    out: list[Endpoint] = []
    for item in items:
        ep = parse_endpoint(item)
        if ep in out:
            raise ParameterError(f"remote machine {ep} is named twice")
        out.append(ep)
    if len(out) > MAX_SERVERS:
        raise ParameterError(f"{len(out)} remote machines: llama.cpp takes at most {MAX_SERVERS}")
    return tuple(out)

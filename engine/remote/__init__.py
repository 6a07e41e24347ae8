"""Remote machines: the target's layers on other machines' devices over llama.cpp's RPC backend.

:mod:`.endpoints` parses ``HOST:PORT`` lists, :mod:`.wire` asks a server who it is before llama.cpp
connects, :mod:`.relay` carries llama.cpp's connections to it and counts their bytes, :mod:`.deadline`
ends a process whose remote went silent and :mod:`.proxy` is a delaying TCP relay for tests and the bench
(``python -m engine rpc-server`` is :mod:`engine.cli.rpc_server`). llama.cpp's RPC backend itself (through
ctypes) is :mod:`engine.native.rpc`.
"""

from .endpoints import Endpoint, parse_endpoint, parse_endpoints
from .wire import RemoteError, ServerInfo, probe

# Ids a remote target's greedy row brings back over the link (llama.cpp's greedy chain also returns the row's
# 151,936 logits, 608 KB): the best id, with room for ties (the lowest id wins, as on the host path).
LINK_TOP = 4



def remote_endpoints(text: str) -> tuple[str, ...]:
    """A comma-separated list of remote machines as ``HOST:PORT`` strings (empty text: none); ParameterError if bad."""
    return tuple(str(e) for e in parse_endpoints(text)) if text.strip() else ()


def ask_remote_machines(text: str) -> tuple[list[str], bool]:
    """One line per machine of ``text``: what it said (``127.0.0.1:50052: RPC 7.0.0, 1 device, …``) or why it
    cannot be used; and whether every one can (this build has RPC too)."""
    from engine.errors import EngineError
    from engine.native.rpc import NO_RPC, available

    try:
        eps = parse_endpoints(text)
    except EngineError as exc:
        return [str(exc)], False
    lines, ok = [], True
    for ep in eps:
        try:
            lines.append(probe(ep).text)
        except RemoteError as exc:
            lines.append(str(exc))
            ok = False
    if not available():
        lines.append(NO_RPC)
        ok = False
    return lines, ok


__all__ = [
    "LINK_TOP", "Endpoint", "RemoteError", "ServerInfo", "ask_remote_machines", "parse_endpoint", "parse_endpoints",
    "probe", "remote_endpoints",
]

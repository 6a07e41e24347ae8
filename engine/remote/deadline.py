"""The deadline: a remote machine that goes silent (frozen, or the network cut without a reset) leaves llama.cpp
waiting for ever (in ``llama_decode``, or in a model load), so a watcher ends the process that holds the connection.

Each remote machine's counting relay (:mod:`.relay`, :func:`watch`) says how long its server has owed an
answer and said nothing, for loads and decodes alike. Past the deadline the process is ended through ggml's
own abort, so it takes the path every llama.cpp fault takes: ``generate`` prints one line
and exits 2, the engine process dies with the message as its last words and its parent restarts it.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Protocol

DEADLINE_ENV = "SSD_CHAT_RPC_DEADLINE_S"  # tests and slow links: seconds a remote machine may owe an answer
# The longest healthy wait is one decode over RPC: a 512-token prompt batch of a large model on a remote CPU
# (tens of seconds); a silent server never answers at all, so a generous figure loses nothing.
DEADLINE_S = 120.0
CHECK_S = 0.25  # how often the watcher looks

_lock = threading.Lock()
_sources: list[Silence] = []  # the relays (each: one remote machine)
_started: list[bool] = []  # the watcher thread runs


class Silence(Protocol):
    """A remote machine's relay: its endpoint and how long its server has owed an answer."""

    @property
    def endpoint(self) -> object: ...

    def silent_s(self, now: float) -> float: ...


def deadline_s() -> float:
    text = os.environ.get(DEADLINE_ENV, "")
    try:
        value = float(text) if text else DEADLINE_S
    except ValueError:
        return DEADLINE_S
    return value if value > 0 else DEADLINE_S


def _abort(message: str) -> None:
    from engine.native import abort

    abort.raise_abort(message)


def watch(source: Silence) -> None:
    """Watch a relay from now on (the first one starts the watcher)."""
    with _lock:
        _sources.append(source)
    _start()


def _start() -> None:
    with _lock:
        if _started:
            return
        _started.append(True)
    threading.Thread(target=_watch, name="rpc-deadline", daemon=True).start()


def _watch() -> None:
    limit = deadline_s()
    while True:
        time.sleep(CHECK_S)
        now = time.monotonic()
        silent = [str(src.endpoint) for src in list(_sources) if src.silent_s(now) > limit]  # list(): one GIL step
        if silent:
            _abort(f"remote machine {', '.join(silent)} gave no answer for {limit:g} s (frozen, or the network "
                   "cut): the engine stopped waiting")
            return

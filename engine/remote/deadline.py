"""The deadline: a remote machine that goes silent (frozen, or the network cut without a reset) leaves llama.cpp
waiting for ever (in ``llama_decode``, or in a model load), so a watcher ends the process that holds the connection.

Each remote machine's counting relay (:mod:`.relay`, :func:`watch`) says how long its server has owed an
answer and said nothing, for loads and decodes alike. Where llama.cpp was connected without a relay
(:func:`arm`), each decode is timed by :func:`watching` instead. Past the deadline the process is ended
through ggml's own abort, so it takes the path every llama.cpp fault takes: ``generate`` prints one line
and exits 2, the engine process dies with the message as its last words and its parent restarts it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

DEADLINE_ENV = "SSD_CHAT_RPC_DEADLINE_S"  # tests and slow links: seconds a remote machine may owe an answer
# The longest healthy wait is one decode over RPC: a 512-token prompt batch of a large model on a remote CPU
# (tens of seconds); a silent server never answers at all, so a generous figure loses nothing.
DEADLINE_S = 120.0
CHECK_S = 0.25  # how often the watcher looks

_lock = threading.Lock()
_running: dict[int, float] = {}  # thread id -> when its decode began
_armed: list[str] = []  # the endpoints, once armed
_fire: list[Callable[[str], None]] = []
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
    from engine.process import abort

    abort.raise_abort(message)


def arm(endpoints: list[str], fire: Callable[[str], None] | None = None) -> None:
    """Start watching this process's decodes (once); ``fire(message)`` ends the process (ggml's abort by default)."""
    with _lock:
        _armed[:] = endpoints
        _fire[:] = [fire or _abort]
    _start()


def watch(source: Silence) -> None:
    """Watch a relay from now on; while any is watched, its silence is the deadline's measure, not decode time."""
    with _lock:
        _sources.append(source)
        if not _fire:
            _fire[:] = [_abort]
    _start()


def _start() -> None:
    with _lock:
        if _started:
            return
        _started.append(True)
    threading.Thread(target=_watch, name="rpc-deadline", daemon=True).start()


_IDLE = contextlib.nullcontext()  # shared: an unarmed decode (every local one) builds no context manager


def watching() -> contextlib.AbstractContextManager[None]:
    """Time one native decode on this thread (nothing to do until :func:`arm`, nor while relays are watched)."""
    return _timed() if _armed and not _sources else _IDLE


@contextlib.contextmanager
def _timed() -> Iterator[None]:
    me = threading.get_ident()
    _running[me] = time.monotonic()
    try:
        yield
    finally:
        _running.pop(me, None)


def _watch() -> None:
    limit = deadline_s()
    while True:
        time.sleep(CHECK_S)
        now = time.monotonic()
        silent = [str(src.endpoint) for src in list(_sources) if src.silent_s(now) > limit]
        started = min(list(_running.values()), default=None)  # list(): one step under the GIL
        if not silent and started is not None and now - started > limit:
            silent = list(_armed)
        if silent:
            _fire[0](f"remote machine {', '.join(silent)} gave no answer for {limit:g} s (frozen, or the network "
                     "cut): the engine stopped waiting")
            return

"""The decode deadline: a remote machine that goes silent (frozen, or the network cut without a reset) leaves
``llama_decode`` waiting for ever, so a watcher ends the process that holds the connection instead.

Armed once this process has connected to a remote machine (:func:`arm`); each decode is timed by
:func:`watching`. A decode still running after the deadline is ended through ggml's own abort, so it
takes the path every llama.cpp fault takes: ``generate`` prints one line and exits 2, the engine process
dies with the message as its last words and its parent restarts it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator

DEADLINE_ENV = "SSD_CHAT_RPC_DEADLINE_S"  # tests and slow links: seconds one decode may take
# One decode over RPC: a 512-token prompt batch of a large model on a remote CPU is the longest healthy
# one (tens of seconds); a silent server never answers at all, so a generous figure loses nothing.
DEADLINE_S = 120.0
CHECK_S = 0.25  # how often the watcher looks

_lock = threading.Lock()
_running: dict[int, float] = {}  # thread id -> when its decode began
_armed: list[str] = []  # the endpoints, once armed
_fire: list[Callable[[str], None]] = []


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
        first = not _armed
        _armed[:] = endpoints
        _fire[:] = [fire or _abort]
    if first:
        threading.Thread(target=_watch, name="rpc-deadline", daemon=True).start()


_IDLE = contextlib.nullcontext()  # shared: an unarmed decode (every local one) builds no context manager


def watching() -> contextlib.AbstractContextManager[None]:
    """Time one native decode on this thread (nothing to do until :func:`arm`)."""
    return _timed() if _armed else _IDLE


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
        started = min(list(_running.values()), default=None)  # list(): one step under the GIL
        if started is not None and time.monotonic() - started > limit:
            names = ", ".join(_armed)
            _fire[0](f"remote machine {names} gave no answer for {limit:g} s (frozen, or the network cut): "
                     "the engine stopped waiting")
            return

"""llama.cpp's start-up: the backend initialised once per process, its log lines routed into :mod:`logging`."""

from __future__ import annotations

import ctypes
import logging
import threading

import llama_cpp as ll

_native_log = logging.getLogger("engine.llama_cpp")

_GGML_LEVELS = {0: logging.CRITICAL, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}

# Load-time notes about a GGUF's own quirks that llama.cpp corrects as it loads (a token marked as text that it
# treats as control): logged at DEBUG, so a user does not see them on every start; errors are never matched.
_QUIRKS = (b"control-looking token",)

_init_lock = threading.Lock()
_initialised = False
_last_level = logging.DEBUG


@ll.llama_log_callback  # type: ignore[untyped-decorator]
def _log_callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
    # WORKAROUND: the callback llama_cpp installs on import maps ggml levels wrongly (DEBUG=1, INFO=2,
    # WARN=3, ERROR=4 in ggml.h) and prints every line to stderr.
    global _last_level
    lvl = _last_level if level == 5 else _GGML_LEVELS.get(level, logging.DEBUG)
    if lvl == logging.WARNING and any(q in text for q in _QUIRKS):
        lvl = logging.DEBUG
    _last_level = lvl
    if _native_log.isEnabledFor(lvl):
        _native_log.log(lvl, "%s", text.decode("utf-8", "replace").rstrip("\n"))


def init_backend() -> None:
    """Initialise llama.cpp once per process and route its log lines into :mod:`logging`."""
    global _initialised
    with _init_lock:
        if _initialised:
            return
        ll.llama_log_set(_log_callback, ctypes.c_void_p(0))
        ll.llama_backend_init()
        _initialised = True


"""ggml's abort callback: the one Python hook on a llama.cpp fault (``GGML_ABORT``, ``GGML_ASSERT``, RPC errors).

``ggml_abort`` formats its message, calls the callback if one is set, then calls ``abort()``: the
callback cannot return to the caller, only say something first (or end the process itself). The engine
process writes the message where its parent reads its last words; ``generate`` prints one line and
exits 2. llama-cpp-python does not wrap ``ggml_set_abort_callback``, so it is looked up in the loaded
libraries (libllama's handle finds its dependencies' symbols on Linux and macOS; ggml-base otherwise).
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import rpc

log = logging.getLogger(__name__)

ABORT_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_char_p)
FAULT_ENV = "SSD_CHAT_ENGINE_FAULT"  # tests: "abort:N" makes ggml abort after N tokens of a generation

_installed: list[object] = []  # the ctypes callback must outlive every call into llama.cpp


def _ggml_function(name: str) -> Any:
    """A function of ggml's C API, from libllama's handle or the ggml-base library beside it."""
    from llama_cpp import llama_cpp as lib

    handles: list[ctypes.CDLL] = [lib._lib]
    folder = Path(getattr(lib._lib, "_name", "") or ".").parent
    for pattern in ("libggml-base.*", "ggml-base.dll"):
        handles += [ctypes.CDLL(str(p)) for p in sorted(folder.glob(pattern)) if p.is_file()]
    for handle in handles:
        try:
            return getattr(handle, name)
        except AttributeError:
            continue
    return None


def install(on_abort: Callable[[str], None]) -> bool:
    """Call ``on_abort(message)`` on a ggml abort (it may end the process; else ``abort()`` follows).

    Returns False where this build of llama.cpp has no abort callback (then ggml prints its message).
    """
    setter = _ggml_function("ggml_set_abort_callback")
    if setter is None:
        log.warning("this llama.cpp has no ggml_set_abort_callback: its faults print their own message")
        return False

    def callback(message: bytes | None) -> None:
        try:
            on_abort(name_remotes((message or b"").decode("utf-8", "replace").strip()))
        except BaseException:  # nothing may escape into C; abort() follows anyway
            pass

    c_callback = ABORT_CALLBACK(callback)
    setter.restype = ctypes.c_void_p
    setter.argtypes = [ABORT_CALLBACK]
    setter(c_callback)
    _installed.append(c_callback)
    return True


def name_remotes(message: str) -> str:
    """An RPC failure's message with the remote machines this process is connected to (ggml's own
    "Remote RPC server crashed or returned malformed response" names none)."""
    endpoints = rpc.added() if "RPC" in message else ()
    if not endpoints or any(str(e) in message for e in endpoints):
        return message
    return f"{message} (remote machine {', '.join(map(str, endpoints))})"


def write_line_and_exit(prefix: str, code: int) -> Callable[[str], None]:
    """An ``on_abort`` that writes ``prefix + message`` as one line on stderr and ends the process with ``code``."""

    def on_abort(message: str) -> None:
        os.write(2, f"{prefix}{message}\n".encode("utf-8", "replace"))
        os._exit(code)

    return on_abort


def fault_after() -> int | None:
    """Tests: after how many tokens :func:`raise_abort` should run (``SSD_CHAT_ENGINE_FAULT=abort:N``)."""
    kind, _, count = os.environ.get(FAULT_ENV, "").partition(":")
    return int(count) if kind == "abort" and count.isdigit() else None


def raise_abort(message: str) -> None:
    """Call ggml's own ``ggml_abort`` (tests: a real llama.cpp fault, callback and all)."""
    abort = _ggml_function("ggml_abort")
    if abort is None:
        os.abort()
    abort.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p]
    abort.restype = None
    abort(b"ssd-chat", 0, b"%s", message.encode())

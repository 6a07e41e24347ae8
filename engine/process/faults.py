"""Child processes that may die inside llama.cpp: how they are started, and how their end is put in words.

Shared by the engine process and the CPU check's probe. Both start children with multiprocessing's
*spawn* method: it is the one start method every platform has (Windows and macOS have no safe fork),
a fresh interpreter holds no copy of the parent's threads or locks (a forked child of a process with
Qt, OpenMP or llama.cpp threads can deadlock), and PyInstaller freezes it: the frozen executable starts
itself again, and ``multiprocessing.freeze_support()`` at the top of its entry point turns that start
into the child. A child writes its C-level last words (faulthandler's "Fatal Python error", ggml's
abort message) into a file the parent reads once the child has ended.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from multiprocessing.context import SpawnContext
from pathlib import Path

ABORT_MARK = "llama.cpp aborted: "  # how the child's abort callback starts the line it writes
TAIL_BYTES = 16384  # of a child's stderr file read for its last words

# What a signal that ends a child most likely means here, in the user's words.
MEANING = {
    "SIGKILL": "ended by the system or another program, often for lack of memory",
    "SIGBUS": "a model file was cut short or changed while in use",
    "SIGABRT": "llama.cpp stopped on an error",
    "SIGSEGV": "a memory fault inside llama.cpp",
    "SIGILL": "an instruction this CPU cannot run",
    "SIGFPE": "an arithmetic fault inside llama.cpp",
}

# faulthandler's words for the fault signals it reports ("Fatal Python error: Bus error").
REPORTED = {"Segmentation fault": "SIGSEGV", "Bus error": "SIGBUS", "Illegal instruction": "SIGILL",
            "Aborted": "SIGABRT", "Floating-point exception": "SIGFPE"}


def spawn_context() -> SpawnContext:
    """The start method of every child the engine runs (see the module docstring for why)."""
    return multiprocessing.get_context("spawn")


def signal_name(code: int) -> str:
    """``-9`` -> ``"SIGKILL"``: the name of the signal an exit code (as ``Process.exitcode``) stands for."""
    return signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"


def redirect_stderr(path: Path) -> None:
    """In a child: send file descriptor 2 (C's stderr, faulthandler's reports) to ``path``, and enable faulthandler."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    import faulthandler

    faulthandler.enable()


def read_tail(path: Path) -> str:
    """The end of a child's stderr file ("" if there is none)."""
    with contextlib.suppress(OSError), open(path, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - TAIL_BYTES))
        return f.read().decode("utf-8", "replace")
    return ""


def fault_line(text: str) -> str:
    """The line that says what went wrong: ggml's abort message, faulthandler's "Fatal Python error: ..." line,
    else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    aborted = [ln for ln in lines if ln.startswith(ABORT_MARK)]
    if aborted:
        return aborted[-1]
    fatal = [ln for ln in lines if ln.startswith("Fatal Python error")]
    if not fatal:
        return lines[-1] if lines else ""
    rest = fatal[0].replace("Fatal Python error: ", "")  # two threads' reports may interleave:
    half = rest[: len(rest) // 2]  # "...: Fatal Python error: Illegal instructionIllegal instruction"
    return "Fatal Python error: " + (half if half + half == rest else rest)


def describe_exit(code: int | None, last_words: str = "") -> str:
    """How a child ended, e.g. ``"killed by SIGBUS (a model file was cut short...): Fatal Python error: Bus error"``."""
    line = fault_line(last_words)
    if code is None:
        what = "did not end"
    elif code < 0:
        name = signal_name(code)
        first = REPORTED.get(line.removeprefix("Fatal Python error: "), name)
        if name in REPORTED.values():  # a fault while faulthandler reported another: the first is the cause
            name = first
        what = f"killed by {name}" + (f" ({MEANING[name]})" if name in MEANING else "")
    else:
        what = f"exited with code {code}"
    return what + (f": {line}" if line else "")

"""Crash handling: Python errors (``sys.excepthook``) and native faults inside llama.cpp.

A native fault (SIGILL, SIGSEGV…) kills the process before any Python code can run, so it leaves
two files in the crash folder for the next start: the fault log that :mod:`faulthandler` writes,
and a small "reply in flight" marker that the reply session writes when a reply starts and
removes when it ends. :func:`take_crash_note` turns them into one sentence for the user and
clears them, so a note is shown once and nothing is written again in a loop.

The Python hook never loops either: an error raised again and again (a timer's slot failing every
second) is reported once; a crash log that cannot be written (the disk is full) leaves no empty
file behind; and a full disk itself is told in plain words, without a crash log.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import faulthandler
import json
import logging
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TextIO

from engine import user_data_dir

log = logging.getLogger(__name__)

FAULT_LOG = "native-fault.log"
LAST_FAULT_LOG = "native-fault-last-run.log"
REPLY_MARKER = "reply-in-flight.json"
MAX_CRASH_LOGS = 20  # per run: a bug that keeps raising new errors still cannot fill the disk
DISK_FULL_TEXT = ("The disk is full, so ssd-chat could not save a change ({detail}). Free some space;"
                  " ssd-chat keeps running and keeps unsaved replies in memory.")

_fault_stream: TextIO | None = None
_reported: set[tuple[str, str, str]] = set()  # errors already reported in this run
_logs_written = 0
_boxes: list[object] = []  # open message boxes (kept referenced; non-modal, so a loop cannot stack them)


@dataclass(frozen=True, slots=True)
class CrashNote:
    """What the previous run left behind: a sentence for the user and the reply it interrupted."""

    text: str
    message_id: int | None
    fault: str | None
    log_path: Path | None


def crash_log_dir() -> Path:
    """Where crash logs go."""
    return user_data_dir() / "crashes"


def write_crash_log(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> Path | None:
    """Write the traceback to a new file and return its path; None (and no file left) if it cannot be written."""
    path: Path | None = None
    try:
        path = _new_log_path("crash")
        path.write_text("".join(traceback.format_exception(exc_type, exc, tb)), encoding="utf-8")
    except OSError as err:
        log.error("could not write a crash log: %s", err)
        if path is not None:
            path.unlink(missing_ok=True)  # never leave an empty log behind
        return None
    return path


def excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """Log, write a crash log, and tell the user where it is, once per error; the app keeps running if it can."""
    global _logs_written
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)
        return
    try:  # the last line of defence: a failure here must not recurse
        key = _signature(exc_type, exc, tb)
        if key in _reported:
            log.debug("the same error again: %s: %s", exc_type.__name__, exc)
            return
        _reported.add(key)
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            log.error("the disk is full: %s", exc)
            _tell("ssd-chat: the disk is full", DISK_FULL_TEXT.format(detail=exc))
            return
        log.critical("unhandled exception", exc_info=(exc_type, exc, tb))
        path = write_crash_log(exc_type, exc, tb) if _logs_written < MAX_CRASH_LOGS else None
        _logs_written += path is not None
        where = f"A crash log was written to {path}." if path else "No crash log could be written."
        _tell("ssd-chat: unexpected error", f"Something went wrong: {exc_type.__name__}: {exc}\n\n{where}")
    except Exception:
        sys.__excepthook__(exc_type, exc, tb)


def _signature(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> tuple[str, str, str]:
    """What makes two errors "the same": type, message and the line that raised it."""
    where = ""
    if tb is not None:
        last = traceback.extract_tb(tb)[-1]
        where = f"{last.filename}:{last.lineno}"
    return exc_type.__name__, str(exc), where


def _tell(title: str, text: str) -> None:
    """A non-modal warning box when a Qt application runs (it cannot block a looping caller)."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication, QMessageBox

    if QApplication.instance() is None:
        return
    box = QMessageBox(QMessageBox.Icon.Critical, title, text)
    box.setObjectName("crash-box")
    box.setWindowModality(Qt.WindowModality.NonModal)
    box.finished.connect(lambda _result: _boxes.remove(box))
    _boxes.append(box)
    box.show()


def install() -> None:
    """Install :func:`excepthook` and send native fault reports to the fault log."""
    sys.excepthook = excepthook
    enable_fault_log()


def enable_fault_log() -> Path | None:
    """Let :mod:`faulthandler` write native faults to a fresh fault log (the last run's is set aside); None (faults
    then go to stderr) when the crash folder cannot be written."""
    global _fault_stream
    folder = crash_log_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _set_aside_last_fault()
        path = folder / FAULT_LOG
        _fault_stream = path.open("w", encoding="utf-8")  # open for the life of the process, by design
    except OSError as exc:
        log.warning("native faults go to stderr: the crash folder %s cannot be written (%s)", folder, exc)
        with contextlib.suppress(RuntimeError, ValueError, OSError):  # no stderr either (a windowed build)
            faulthandler.enable(all_threads=True)
        return None
    faulthandler.enable(file=_fault_stream, all_threads=True)
    return path


def fatal(title: str, text: str) -> int:
    """A modal error box that waits for the user before the app exits without its window; returns 1, the exit code."""
    from PySide6.QtWidgets import QApplication, QMessageBox

    log.critical("%s: %s", title, text)
    if QApplication.instance() is None:
        print(f"{title}: {text}", file=sys.stderr)
        return 1
    box = QMessageBox(QMessageBox.Icon.Critical, title, text)
    box.setObjectName("startup-error")
    box.exec()
    return 1


def fatal_exception(exc: BaseException) -> int:
    """:func:`fatal` for an unexpected error before the window is up, with a crash log if one can be written."""
    path = write_crash_log(type(exc), exc, exc.__traceback__)
    where = f"A crash log was written to {path}." if path else "No crash log could be written."
    return fatal("ssd-chat could not start", f"Something went wrong: {type(exc).__name__}: {exc}\n\n{where}")


def reply_started(conversation_id: int, message_id: int) -> None:
    """Mark a reply as in flight: if the process dies before :func:`reply_ended`, the next start says so."""
    data = {"conversation_id": conversation_id, "message_id": message_id, "pid": os.getpid()}
    marker = crash_log_dir() / REPLY_MARKER
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(data), encoding="utf-8")
    except OSError as exc:  # a full disk must not stop the reply; the next start just cannot tell
        log.warning("could not write the reply marker: %s", exc)
        reply_ended()


def reply_ended() -> None:
    """The reply in flight ended (finished, failed, stopped or saved at close)."""
    with contextlib.suppress(OSError):
        (crash_log_dir() / REPLY_MARKER).unlink(missing_ok=True)


def take_crash_note() -> CrashNote | None:
    """What the previous run left behind, as a note, or None; the marker and fault log are cleared."""
    folder = crash_log_dir()
    if not folder.is_dir():
        return None
    _set_aside_last_fault()
    marker = folder / REPLY_MARKER
    message_id = _marker_message_id(marker)
    in_flight = marker.exists()
    marker.unlink(missing_ok=True)
    last = folder / LAST_FAULT_LOG
    fault: str | None = None
    log_path: Path | None = None
    if last.exists():
        text = last.read_text(encoding="utf-8", errors="replace")
        fault = next((line.strip() for line in text.splitlines() if line.strip()), None)
        log_path = _new_log_path("native-crash")
        last.replace(log_path)  # kept once as a crash log; the next start finds nothing to report
    if fault is not None and in_flight:
        text = f"The last reply crashed inside llama.cpp: {fault}"
    elif fault is not None:
        text = f"ssd-chat crashed inside llama.cpp the last time it ran: {fault}"
    elif in_flight:
        text = "The last reply was interrupted: ssd-chat ended while it was writing it"
    else:
        return None
    if log_path is not None:
        text += f" (details in {log_path})"
    log.warning("previous run: %s", text)
    return CrashNote(text, message_id, fault, log_path)


def _set_aside_last_fault() -> None:
    """Move a non-empty fault log that this process is not writing to aside, for the note."""
    folder = crash_log_dir()
    path = folder / FAULT_LOG
    if _fault_stream is not None and Path(_fault_stream.name) == path:
        return
    try:
        if path.stat().st_size > 0:
            path.replace(folder / LAST_FAULT_LOG)
        else:
            path.unlink()
    except FileNotFoundError:
        pass


def _marker_message_id(marker: Path) -> int | None:
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
        return int(data["message_id"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        log.warning("ignoring an unreadable reply marker %s", marker)
        return None


def _new_log_path(prefix: str) -> Path:
    folder = crash_log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    return folder / f"{prefix}-{stamp}.log"

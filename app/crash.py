"""The top-level crash handler: ``sys.excepthook`` writes a crash log and shows a dialog."""

from __future__ import annotations

import datetime
import logging
import sys
import traceback
from pathlib import Path
from types import TracebackType

from engine.paths import user_data_dir

log = logging.getLogger(__name__)


def crash_log_dir() -> Path:
    """Where crash logs go."""
    return user_data_dir() / "crashes"


def write_crash_log(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> Path:
    """Write the traceback to a new file and return its path."""
    folder = crash_log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    path = folder / f"crash-{stamp}.log"
    path.write_text("".join(traceback.format_exception(exc_type, exc, tb)), encoding="utf-8")
    return path


def excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """Log, write a crash log, and tell the user where it is; the app keeps running if it can."""
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)
        return
    try:  # the last line of defence: a failure here must not recurse
        log.critical("unhandled exception", exc_info=(exc_type, exc, tb))
        path = write_crash_log(exc_type, exc, tb)
        from PySide6.QtWidgets import QApplication, QMessageBox

        if QApplication.instance() is not None:
            QMessageBox.critical(None, "ssd-chat: unexpected error",
                                 f"Something went wrong: {exc_type.__name__}: {exc}\n\n"
                                 f"A crash log was written to {path}.")
    except Exception:
        sys.__excepthook__(exc_type, exc, tb)


def install() -> None:
    """Install :func:`excepthook`."""
    sys.excepthook = excepthook

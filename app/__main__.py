"""``python -m app`` and the ``ssd-chat`` executable: ``--self-test`` (no Qt) or the chat window."""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.history.store import History


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="ssd-chat", description="Chat with local GGUF models, made fast by SSD.")
    p.add_argument("--self-test", action="store_true",
                   help="check llama.cpp and greedy ssd == ar on a tiny model, without Qt; exit 0 on success")
    p.add_argument("--verbose", action="store_true", help="log debug messages")
    args, _qt_args = p.parse_known_args(argv)
    return args


def early_check() -> str | None:
    """A plain-language problem that stops the app before the window, or None."""
    try:
        from engine import init_backend

        init_backend()
    except Exception as exc:  # any failure here means llama.cpp cannot run
        return (f"llama.cpp could not be loaded ({type(exc).__name__}: {exc}). "
                "Reinstall ssd-chat or llama-cpp-python.")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``ssd-chat``."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.self_test:
        from app.startup.selftest import run_self_test  # before any Qt import

        return run_self_test()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # llama.cpp's own log lines are for --verbose
        logging.getLogger("engine.llama_cpp").setLevel(logging.WARNING)
    return run_gui()


def run_gui() -> int:
    """Build the application and the window; returns the exit code."""
    from PySide6.QtWidgets import QApplication

    from app.startup import crash
    from app.startup.qt_platform import PluginWatch

    with PluginWatch():  # a platform plugin that cannot load: say which libraries are missing
        app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("ssd-chat")
    app.setOrganizationName("ssd-chat")
    crash.install()
    problem = early_check()
    if problem is not None:
        return crash.fatal("ssd-chat cannot start", problem)
    history = open_history()
    if history is None:
        return 1
    try:
        from .main_window import MainWindow

        window = MainWindow(history=history)
        window.show()
        window.pairs.start()
    except Exception as exc:  # before the window is up: say so and wait for the user, then exit
        return crash.fatal_exception(exc)
    return int(app.exec())


def open_history() -> History | None:
    """The chat history; None once a modal dialog has told the user why it cannot be opened and what to do."""
    from app.history.opening import HistoryOpenError
    from app.history.store import History
    from app.startup import crash

    try:
        return History()
    except HistoryOpenError as exc:
        crash.fatal("ssd-chat: the chat history cannot be opened", exc.text)
        return None


if __name__ == "__main__":
    multiprocessing.freeze_support()  # the engine process of a frozen build starts as this program (see installer/)
    sys.exit(main())

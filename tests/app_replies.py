"""Waiting for whole replies in the app tests: the tiny models are quick, a shared 2-core host under load is not."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.engine_worker import EngineState
from app.main_window import MainWindow
from tests.app_helpers import TIMEOUT_MS

REPLY_MS = 2 * TIMEOUT_MS  # a whole reply, prompt included, on a loaded machine


def send(qtbot: QtBot, window: MainWindow, text: str) -> int:
    """Type ``text``, send it, wait for the saved reply; returns the reply's message id."""
    window.prompt_edit.setPlainText(text)
    with qtbot.waitSignal(window.reply_saved, timeout=REPLY_MS) as blocker:
        window.send()
    qtbot.waitUntil(lambda: window.state == EngineState.READY, timeout=REPLY_MS)
    return int(blocker.args[0])  # type: ignore[index]

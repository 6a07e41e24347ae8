"""The chat follows a new message after a long reply: the question sent and the streaming answer are in view."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.chat.view import ChatView
from app.main_window import MainWindow
from app.worker.engine_worker import EngineState
from tests.app_helpers import QT_STRICT, TIMEOUT_MS, SteppingEngine, closing, stepping_window

pytestmark = QT_STRICT

__all__ = ["closing"]

LONG = "Here is a stack:\n\n```python\n" + "\n".join(
    f"    def method_{i}(self):\n        \"\"\"Docstring {i}.\"\"\"\n        return {i}" for i in range(80)) + "\n```"
FOLLOW_UP = "Now add a size method"


def in_view(view: ChatView, text: str) -> bool:
    """Whether ``text`` is on screen in the view (its first line, within the viewport)."""
    cursor = view.document().find(text)
    return not cursor.isNull() and view.viewport().rect().contains(view.cursorRect(cursor))


def at_end(view: ChatView) -> bool:
    bar = view.verticalScrollBar()
    return bar.maximum() > 0 and bar.value() == bar.maximum()


def test_a_follow_up_after_a_long_reply_is_followed(qtbot: QtBot, data_dir: Path, closing: list[MainWindow]) -> None:
    engine = SteppingEngine(LONG, step_s=0.0, per_round=8)
    w = stepping_window(qtbot, engine)
    closing.append(w)
    w.resize(1280, 720)
    w.prompt_edit.setPlainText("Write a Python stack class with docstrings")
    with qtbot.waitSignal(w.reply_saved, timeout=TIMEOUT_MS):
        w.send()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    view = w.chat_view
    qtbot.waitUntil(lambda: at_end(view), timeout=TIMEOUT_MS)

    engine.words, engine.step_s, engine.per_round = ["Sure, ", "here ", "it ", "is: "] * 50, 0.05, 1
    w.prompt_edit.setPlainText(FOLLOW_UP)
    w.send()
    for words in range(1, 9):  # as the answer streams in, repaint after repaint
        qtbot.waitUntil(lambda n=words: len((view.live_text() or "").split()) >= n, timeout=TIMEOUT_MS)
        painted = view.repaints
        qtbot.waitUntil(lambda p=painted: view.repaints > p, timeout=TIMEOUT_MS)
        assert at_end(view) and in_view(view, FOLLOW_UP)
    assert in_view(view, "Sure, here")
    w.stop()


def test_scrolling_up_stops_following_until_the_next_message(
    qtbot: QtBot, data_dir: Path, closing: list[MainWindow]
) -> None:
    engine = SteppingEngine(LONG, step_s=0.01, per_round=4)
    w = stepping_window(qtbot, engine)
    closing.append(w)
    w.prompt_edit.setPlainText("Write a Python stack class with docstrings")
    w.send()
    view = w.chat_view
    qtbot.waitUntil(lambda: view.verticalScrollBar().maximum() > view.height(), timeout=TIMEOUT_MS)
    view.verticalScrollBar().setValue(0)  # the user reads the start while the reply goes on
    assert not view.following
    qtbot.waitUntil(lambda: engine.rounds > 20, timeout=TIMEOUT_MS)
    assert view.verticalScrollBar().value() == 0 and in_view(view, "Write a Python stack")
    with qtbot.waitSignal(w.reply_saved, timeout=TIMEOUT_MS):
        w.stop()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    w.prompt_edit.setPlainText(FOLLOW_UP)
    w.send()
    assert view.following
    qtbot.waitUntil(lambda: in_view(view, FOLLOW_UP), timeout=TIMEOUT_MS)
    w.stop()

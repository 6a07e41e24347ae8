"""Switching a reply's version keeps its switcher (← 1/2 →) where it was on screen, whatever the length of the
version shown next: the view does not scroll it away."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QUrl
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from tests.app_helpers import QT_STRICT, closing, open_window

pytestmark = QT_STRICT

__all__ = ["closing"]

SHORT = "A short first answer."
LONG = "\n\n".join(f"Paragraph {n} of a long second answer, with enough words to wrap." for n in range(80))


def switcher_y(w: MainWindow, reply_id: int) -> float:
    """Where the reply's version links are in the view's viewport (0: its top edge)."""
    y = w.chat_view._header_y(reply_id)
    assert y is not None
    return y - w.chat_view.verticalScrollBar().value()


@pytest.mark.parametrize("first_shown", [SHORT, LONG])
def test_the_switcher_stays_on_screen(
    qtbot: QtBot, data_dir: Path, closing: list[MainWindow], first_shown: str
) -> None:
    w = open_window(qtbot, None)
    closing.append(w)
    w.resize(1400, 900)
    conv = w.history.create_conversation()
    for n in range(3):  # earlier turns above, so the reply is not at the top of the page
        reply = w.history.add_turn(conv.id, f"question {n}")
        w.history.update_message(reply.id, f"answer {n}\n\n" + "text " * 200, complete=True)
    reply = w.history.add_turn(conv.id, "the question")
    w.history.update_message(reply.id, SHORT if first_shown is LONG else LONG, complete=True)
    w.history.begin_version(reply.id)
    w.history.update_message(reply.id, first_shown, complete=True)  # version 2 of 2 is shown
    w.open_conversation(conv.id)
    view = w.chat_view
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())  # at the end, following it
    if first_shown is LONG:  # scroll up to the long reply's switcher, as a user would to click it
        bar.setValue(round(view._header_y(reply.id) or 0) - 200)
    before = switcher_y(w, reply.id)
    height = view.viewport().height()
    assert 0 <= before < height
    view.anchorClicked.emit(QUrl(f"version:{reply.id}:-1"))  # ← : the other version
    assert "1/2" in view.toPlainText()
    qtbot.wait(200)  # the page's layout finishes in steps
    after = switcher_y(w, reply.id)
    assert 0 <= after < height, (before, after, height)  # on screen
    if first_shown is SHORT:  # a longer version below it: the switcher keeps its very place
        assert abs(after - before) <= 2, (before, after)

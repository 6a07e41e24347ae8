"""A search that leaves the open chat out of the list does not keep it on screen: the first match opens, or
nothing when nothing matches; clearing the search keeps what is open."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from tests.app_helpers import QT_STRICT, closing, open_window

pytestmark = QT_STRICT

__all__ = ["closing"]


def test_a_filtered_out_chat_leaves_the_screen(qtbot: QtBot, data_dir: Path, closing: list[MainWindow]) -> None:
    w = open_window(qtbot, None)
    closing.append(w)
    ids = {}
    for title in ("apples", "pears"):
        conv = w.history.create_conversation()
        w.history.rename(conv.id, title)
        reply = w.history.add_turn(conv.id, f"tell me about {title}")
        w.history.update_message(reply.id, f"{title} are fruit", complete=True)
        ids[title] = conv.id
    w.refresh_conversations()
    w.open_conversation(ids["apples"])
    assert "apples are fruit" in w.chat_view.toPlainText()
    w.search_edit.setText("pear")
    assert w.conversation_id == ids["pears"] and w.panel.current_id() == ids["pears"]
    assert "apples" not in w.chat_view.toPlainText() and "pears are fruit" in w.chat_view.toPlainText()
    w.search_edit.setText("plums")
    assert w.conversation_id is None and w.conversation_list.count() == 0
    assert "fruit" not in w.chat_view.toPlainText()
    w.search_edit.setText("")
    assert w.conversation_list.count() == 2 and w.conversation_id is None  # nothing was open: nothing opens
    w.open_conversation(ids["apples"])
    w.search_edit.setText("apple")  # the open chat matches: it stays
    assert w.conversation_id == ids["apples"] and w.panel.current_id() == ids["apples"]

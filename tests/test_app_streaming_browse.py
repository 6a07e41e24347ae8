"""While a reply streams, the list, New chat, Rename and Delete stay usable; the reply keeps to its own chat."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialog, QInputDialog, QMessageBox
from pytestqt.qtbot import QtBot

from app.chat.readout import NO_REPLY
from app.main_window import MainWindow
from app.startup import crash
from app.worker.engine_worker import EngineState
from engine import TinyPair
from tests.app_helpers import (
    QT_STRICT,
    REPLY_MS,
    TIMEOUT_MS,
    ReplyGate,
    closing,
    fast_settings,
    open_window,
    send,
    tiny_pair,
)

pytestmark = QT_STRICT

__all__ = ["closing"]


def start_long_reply(qtbot: QtBot, w: MainWindow, text: str) -> int:
    w.prompt_edit.setPlainText(text)
    w.send()
    qtbot.waitUntil(lambda: len(w.chat_view.live_text() or "") > 10, timeout=TIMEOUT_MS)
    assert w.state == EngineState.GENERATING and w.replies.reply_id is not None
    return w.replies.reply_id


def test_browse_start_and_rename_while_a_reply_streams(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="ar", max_tokens=6))
    closing.append(w)
    send(qtbot, w, "an older chat", REPLY_MS)
    older = w.conversation_id
    w.apply_settings(fast_settings(mode="ar", max_tokens=3000, n_ctx=4096))  # still going when stopped
    w.new_conversation()
    streaming = w.conversation_id
    reply_id = start_long_reply(qtbot, w, "the streaming chat")
    for widget in (w.panel, w.conversation_list, w.panel.new_button, w.panel.rename_button,
                   w.panel.delete_button, w.new_action, w.search_edit):
        assert widget.isEnabled()
    assert not w.send_button.isEnabled() and w.stop_button.isEnabled()

    w.conversation_list.setCurrentRow([w.conversation_list.item(i).text()
                                       for i in range(w.conversation_list.count())].index("an older chat"))
    assert w.conversation_id == older
    assert "the streaming chat" not in w.chat_view.toPlainText() and "an older chat" in w.chat_view.toPlainText()
    assert w.readout.text().startswith("<b>ar</b> · 6 tokens")  # the older chat's last reply, not the live one
    shown = len(w.chat_view.live_text() or "")
    qtbot.waitUntil(lambda: len(w.chat_view.live_text() or "") > shown + 10, timeout=TIMEOUT_MS)  # still going
    assert "Assistant" in w.chat_view.toPlainText() and w.chat_view.toPlainText().count("Assistant") == 1

    w.new_action.trigger()  # a new chat while the other one streams
    assert w.conversation_id not in (older, streaming) and w.readout.text() == NO_REPLY
    assert w.chat_view.toPlainText().strip() == "Type a message below to start."
    monkeypatch.setattr(QInputDialog, "exec",
                        lambda d: (d.setTextValue("Renamed while streaming"), QDialog.DialogCode.Accepted)[1])
    w.open_conversation(streaming)
    w.refresh_conversations()
    w.panel.rename_button.click()
    assert w.history.conversation(streaming).title == "Renamed while streaming"
    assert "the streaming chat" in w.chat_view.toPlainText()
    qtbot.waitUntil(lambda: w.readout.text().startswith("<b>ar</b> ·") and "tok/s" in w.readout.text(),
                    timeout=TIMEOUT_MS)  # live again, for the chat on screen

    w.open_conversation(older)
    with qtbot.waitSignal(w.reply_saved, timeout=REPLY_MS) as blocker:
        w.stop()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=REPLY_MS)
    assert blocker.args == [reply_id]
    saved = w.history.message(reply_id)
    assert saved.conversation_id == streaming and saved.stats is not None and len(saved.content) >= shown + 10
    assert w.readout.text().startswith("<b>ar</b> · 6 tokens") and "the streaming chat" not in w.chat_view.toPlainText()
    w.open_conversation(streaming)
    assert "stopped" in w.readout.text() and "stopped" in w.chat_view.toPlainText()


def test_deleting_the_streaming_chat_stops_its_reply_first(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", max_tokens=1000))
    closing.append(w)
    ReplyGate(monkeypatch, w)
    start_long_reply(qtbot, w, "delete me while you talk")
    doomed = w.conversation_id
    assert doomed is not None
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    saved: list[int] = []
    w.reply_saved.connect(saved.append)
    w.panel.delete_button.click()
    assert w.conversation_id is None and w.conversation_list.count() == 0
    assert w.replies.reply_id is None and w.chat_view.live_text() is None
    assert not (data_dir / "crashes" / crash.REPLY_MARKER).exists()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=REPLY_MS)  # stopped within a round
    assert saved == [] and w.history.conversations() == []
    assert w.history._db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    w.apply_settings(fast_settings(mode="sd", max_tokens=6))
    send(qtbot, w, "the next chat works", REPLY_MS)
    assert w.conversation_list.count() == 1

"""A conversation longer than the context goes on: the oldest turns are left out (and the reply says so), or
the send stops with a message, as the setting says."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.history.store import History
from app.main_window import MainWindow
from app.settings.dialog import SettingsDialog
from app.worker.engine_worker import EngineState
from engine import DROP_OLDEST, TinyPair
from engine.chat.fit import STOP
from tests.app_helpers import QT_STRICT, REPLY_MS, closing, fast_settings, open_window, send, tiny_pair

pytestmark = QT_STRICT

__all__ = ["closing"]


def long_conversation(turns: int = 30) -> int:
    """A conversation of ``turns`` long exchanges, far beyond a 256-token context."""
    h = History()
    conv = h.create_conversation("Long", system_prompt="Answer in one line.")
    for n in range(turns):
        reply = h.add_turn(conv.id, f"question number {n} about the weather in many places")
        h.update_message(reply.id, f"answer number {n}: sunny, then rain, then sunny again", stats={"mode": "ar"})
    h.close()
    return conv.id


def test_the_oldest_turns_are_left_out_and_the_reply_says_how_many(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    conv_id = long_conversation()
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", max_tokens=16, n_ctx=256))
    closing.append(w)
    assert w.settings.context_overflow == DROP_OLDEST
    w.open_conversation(conv_id)
    reply_id = send(qtbot, w, "and tomorrow?", REPLY_MS)
    reply = w.history.message(reply_id)
    assert reply.complete and reply.stats is not None and reply.stats["new_tokens"] == 16
    dropped = reply.stats["dropped_turns"]
    assert 20 < dropped < 31  # most of the 31 turns go; the last one (this message) always stays
    note = f"{dropped} oldest turns left out to fit the context"
    assert note in w.chat_view.toPlainText() and note in w.readout.text()
    assert len(w.history.messages(conv_id)) == 2 * 30 + 2  # nothing is deleted from the history

    w.close()  # after a restart the note is still on the message
    closing.remove(w)
    again = open_window(qtbot, None)
    closing.append(again)
    again.open_conversation(conv_id)
    assert note in again.chat_view.toPlainText()


def test_stop_with_a_message_and_the_setting_in_the_dialog(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    conv_id = long_conversation()
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="ar", max_tokens=16, n_ctx=256))
    closing.append(w)
    dialog = SettingsDialog(w.settings, w)
    combo = dialog.choices["context_overflow"]
    assert [combo.itemText(i) for i in range(combo.count())] == [DROP_OLDEST, STOP]
    combo.setCurrentIndex(1)
    w.apply_settings(dialog.settings())
    assert w.store.load().context_overflow == STOP
    w.open_conversation(conv_id)
    w.prompt_edit.setPlainText("and tomorrow?")
    with qtbot.waitSignal(w.error_shown, timeout=REPLY_MS) as blocker:
        w.send()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=REPLY_MS)
    message = str(blocker.args[0])  # type: ignore[index]
    assert message.startswith("Generation failed: the conversation has ") and "the context holds 256 tokens" in message
    assert "let Settings drop the oldest turns" in message and w.error_banner.isVisible()
    assert w.history.messages(conv_id)[-1].content == "and tomorrow?"  # the message stays; no empty reply

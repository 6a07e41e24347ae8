"""The main window end to end with the tiny models: chat, stop, errors, restart, edit, export, verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QInputDialog, QMessageBox
from pytestqt.qtbot import QtBot

from app.history.store import History
from app.main_window import MainWindow
from app.settings.store import ActivePair
from app.startup import crash
from app.worker.engine_worker import EngineState
from engine import TinyPair, cpu_check_status
from tests.app_helpers import (
    QT_STRICT,
    TIMEOUT_MS,
    ReplyGate,
    closing,
    corrupt_model,
    fast_settings,
    open_window,
    send,
    tiny_pair,
)

pytestmark = QT_STRICT

__all__ = ["closing"]


def test_chat_streams_saves_stats_and_survives_restart(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings())
    closing.append(w)
    assert w.state == EngineState.READY and "Tiny test pair" in w.model_label.text()
    w.system_edit.setText("You are terse.")
    reply_id = send(qtbot, w, "Write *hello*")
    reply = w.history.message(reply_id)
    assert reply.complete and reply.stats is not None
    assert reply.stats["mode"] == "ssd" and reply.stats["new_tokens"] == 24
    assert reply.stats["acceptance_rate"] is not None and reply.stats["hit_rate"] is not None
    assert reply.runs and sum(n for n, _ in reply.runs) == len(reply.content)
    assert "tok/s" in w.readout.text() and "hit rate" in w.readout.toolTip()
    assert "tok/s" in w.chat_view.toPlainText() and "hit rate" in w.chat_view.toPlainText()
    assert w.conversation_list.count() == 1 and w.conversation_list.item(0).text() == "Write *hello*"
    conv_id = w.conversation_id
    w._on_system_edited()
    w.close()
    closing.remove(w)

    again = open_window(qtbot, None)
    closing.append(again)
    assert again.conversation_list.count() == 1
    again.conversation_list.setCurrentRow(0)
    assert again.conversation_id == conv_id
    assert again.system_edit.text() == "You are terse."
    msgs = again.history.messages(conv_id)
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].content == reply.content and msgs[1].stats == reply.stats
    assert reply.content.split()[0] in again.chat_view.toPlainText()
    assert "24 tokens" in again.chat_view.toPlainText()
    assert again.settings == fast_settings()


def test_stop_button_mid_reply_keeps_the_partial_reply(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", max_tokens=1000))
    closing.append(w)
    ReplyGate(monkeypatch, w, chars=0)
    w.prompt_edit.setPlainText("go on and on")
    with qtbot.waitSignal(w.reply_saved, timeout=TIMEOUT_MS) as blocker:
        with qtbot.waitSignal(w.host.token_generated, timeout=TIMEOUT_MS):
            w.send()
        assert w.state == EngineState.GENERATING
        assert w.stop_button.isEnabled() and not w.send_button.isEnabled()
        assert (data_dir / "crashes" / crash.REPLY_MARKER).exists()  # the next start would report a crash
        qtbot.mouseClick(w.stop_button, Qt.MouseButton.LeftButton)
    assert not (data_dir / "crashes" / crash.REPLY_MARKER).exists()
    reply = w.history.message(int(blocker.args[0]))  # type: ignore[index]
    assert reply.stats is not None and reply.stats["finish_reason"] == "stopped"
    assert 0 < reply.stats["new_tokens"] < 1000
    qtbot.waitUntil(lambda: w.send_button.isEnabled(), timeout=TIMEOUT_MS)
    assert "stopped" in w.chat_view.toPlainText()


def test_closing_mid_reply_loses_nothing_shown(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="ar", max_tokens=1000))
    ReplyGate(monkeypatch, w)
    w.prompt_edit.setPlainText("a long answer please")
    w.send()
    qtbot.waitUntil(lambda: len(w.chat_view.live_text() or "") > 20, timeout=TIMEOUT_MS)
    shown = w.chat_view.live_text()
    conv_id = w.conversation_id
    assert conv_id is not None and shown
    w.close()
    h = History()
    msgs = h.messages(conv_id)
    h.close()
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].content.startswith(shown) and not msgs[1].complete
    assert msgs[1].stats is None or msgs[1].stats["finish_reason"] == "app closed"

    again = open_window(qtbot, None)
    closing.append(again)
    again.conversation_list.setCurrentRow(0)
    assert "interrupted" in again.chat_view.toPlainText()


def test_corrupt_model_shows_an_error_and_the_app_stays_usable(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, tmp_path: Path, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, None, fast_settings(mode="ar"))
    closing.append(w)
    bad = corrupt_model(tmp_path / "bad.gguf")
    with qtbot.waitSignal(w.error_shown, timeout=TIMEOUT_MS) as blocker:
        w.pairs.activate(ActivePair("bad", "Broken pair", str(bad), None))
    message = str(blocker.args[0])  # type: ignore[index]
    assert message.startswith("Could not load Broken pair:") and "\n" not in message
    assert w.error_banner.isVisible() and w.error_banner.text() == message
    # the worker's FAILED follows its message; the UI thread may show the message before it is queued
    qtbot.waitUntil(lambda: w.state == EngineState.FAILED, timeout=TIMEOUT_MS)
    assert not w.send_button.isEnabled()
    with qtbot.waitSignal(w.host.model_loaded, timeout=TIMEOUT_MS):
        w.pairs.activate(tiny_pair(tiny))
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    assert not w.error_banner.isVisible()
    send(qtbot, w, "still there?")


def test_enter_sends_shift_enter_newlines_regenerate_and_edit(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(max_tokens=8))
    closing.append(w)
    qtbot.keyClicks(w.prompt_edit, "line one")
    qtbot.keyClick(w.prompt_edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(w.prompt_edit, "line two")
    assert w.prompt_edit.toPlainText() == "line one\nline two"
    with qtbot.waitSignal(w.reply_saved, timeout=TIMEOUT_MS):
        qtbot.keyClick(w.prompt_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: w.regen_button.isEnabled(), timeout=TIMEOUT_MS)
    conv = w.conversation_id
    assert conv is not None
    first = w.history.messages(conv)
    assert first[0].content == "line one\nline two"

    with qtbot.waitSignal(w.reply_saved, timeout=TIMEOUT_MS):
        w.regenerate()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    second = w.history.messages(conv)
    assert len(second) == 2 and second[1].id == first[1].id and (second[1].version, second[1].versions) == (2, 2)

    w.chat_view.edit_requested.emit(second[0].id)
    assert w.prompt_edit.toPlainText() == "line one\nline two" and w.edit_note.isVisible()
    w.prompt_edit.setPlainText("edited question")
    with qtbot.waitSignal(w.reply_saved, timeout=TIMEOUT_MS):
        w.send()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    third = w.history.messages(conv)
    assert third[0].content == "edited question" and len(third) == 2


def test_conversation_list_rename_delete_search_export(
    qtbot: QtBot,
    data_dir: Path,
    tiny: TinyPair,
    tmp_path: Path,
    closing: list[MainWindow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(max_tokens=6))
    closing.append(w)
    send(qtbot, w, "about apples")
    first = w.conversation_id
    assert first is not None
    w.new_conversation()
    send(qtbot, w, "about pears")
    assert w.conversation_list.count() == 2
    monkeypatch.setattr(QInputDialog, "exec", lambda d: (d.setTextValue("Fruit 1"), QDialog.DialogCode.Accepted)[1])
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    w.open_conversation(first)
    w.refresh_conversations()
    w.panel.rename_button.click()
    w.search_edit.setText("apples")
    assert [w.conversation_list.item(i).text() for i in range(w.conversation_list.count())] == ["Fruit 1"]
    w.search_edit.setText("")
    w.open_conversation(first)
    w.history.export_file(first, tmp_path / "c.md")
    w.history.export_file(first, tmp_path / "c.json")
    assert (tmp_path / "c.md").read_text().startswith("# Fruit 1")
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["messages"][0]["content"] == "about apples" and data["messages"][1]["stats"]["mode"] == "ssd"
    w.panel.delete_button.click()
    assert w.conversation_list.count() == 1 and w.conversation_id is None


def test_verify_exactness_and_tint(qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(max_tokens=16))
    closing.append(w)
    w.prompt_edit.setPlainText("check me")
    assert w.verify_action.isEnabled()
    with qtbot.waitSignal(w.host.verification_finished, timeout=TIMEOUT_MS):
        w.verify_action.trigger()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    result = w.exactness.last
    assert result is not None and result.mode == "ssd" and result.ar_tokens == 16
    assert result.identical and result.first_difference is None
    assert "Identical" in w.readout.text()
    send(qtbot, w, "tint this")
    before = w.chat_view.toHtml()
    w.tint_action.trigger()
    assert w.settings.tint_drafts and w.tint_button.isChecked()
    assert "#d9f2d9" in w.chat_view.toHtml() and "#d9f2d9" not in before


def test_settings_dialog_changes_reload_the_pair(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings())
    closing.append(w)
    w.open_settings()
    dialog = w.settings_dialog
    assert dialog.cpu_kernels.verdict.text().startswith("Fast CPU code for quantized models")
    dialog.cpu_kernels.set_choice("off")
    dialog.edits["temperature"].setText("0.5")
    with qtbot.waitSignal(w.host.model_loaded, timeout=TIMEOUT_MS):
        dialog.accept()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    assert w.settings.temperature == 0.5 and cpu_check_status().override == "off"
    assert w.store.load() == w.settings
    send(qtbot, w, "still fine without the extra kernels?")

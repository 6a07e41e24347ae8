"""The readout shows the live state of the conversation on screen only: new chat, restart, mode change, finished."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.chat.readout import NO_REPLY
from app.main_window import MainWindow
from app.worker.engine_worker import EngineState
from engine import GenerationStats, TinyPair
from engine.speculative.types import RoundResult
from engine.stats import StatsRecorder
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


def readout(w: MainWindow) -> str:
    return w.readout.text()


def details(w: MainWindow) -> str:
    """The readout's tooltip: the engine's other figures."""
    return w.readout.toolTip()


def test_new_chat_switching_and_restart(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", max_tokens=7))
    closing.append(w)
    assert readout(w) == NO_REPLY
    send(qtbot, w, "first chat", REPLY_MS)
    first = w.conversation_id
    assert readout(w).startswith("<b>sd</b> · 7 tokens") and "acceptance" in details(w)
    w.new_action.trigger()  # New chat: nothing from the previous chat stays
    assert w.conversation_id != first and readout(w) == NO_REPLY
    w.apply_settings(fast_settings(mode="ar", max_tokens=1))
    send(qtbot, w, "second chat", REPLY_MS)
    assert readout(w).startswith("<b>ar</b> · 1 token · ") and readout(w).endswith(" · length limit")
    w.open_conversation(first)
    assert readout(w).startswith("<b>sd</b> · 7 tokens")
    w.close()
    closing.remove(w)

    again = open_window(qtbot, None)
    closing.append(again)
    assert again.conversation_id == first  # the conversation shown at the close reopens (app/startup/restore.py)
    assert readout(again).startswith("<b>sd</b> · 7 tokens") and "acceptance" in details(again)
    again.new_action.trigger()
    assert readout(again) == NO_REPLY
    again.open_conversation(first)
    assert readout(again).startswith("<b>sd</b> · 7 tokens") and "acceptance" in details(again)


def test_a_mode_change_mid_reply_and_the_finished_reply(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="auto", max_tokens=1000))
    closing.append(w)
    ReplyGate(monkeypatch, w, chars=0)
    w.prompt_edit.setPlainText("a long answer")
    with qtbot.waitSignal(w.host.token_generated, timeout=TIMEOUT_MS):
        w.send()
    # What auto's recorder reports after 8 sd rounds and then 40 rounds of plain ar, as the engine sends it.
    stats = GenerationStats(mode="auto")
    recorder = StatsRecorder(stats)
    for rr in [RoundResult([1] * 5, "sd", "jit", drafted=4, accepted=4)] * 8 + [RoundResult([1], "ar")] * 40:
        recorder.round(rr)
        recorder.token()
    w.host.stats_changed.emit(stats.to_dict())
    assert readout(w).startswith("<b>auto → ar</b>") and "acceptance" not in details(w)
    recorder.round(RoundResult([1] * 5, "sd", "jit", drafted=4, accepted=3))
    w.host.stats_changed.emit(stats.to_dict())
    assert readout(w).startswith("<b>auto → sd</b>") and "acceptance 97%" in details(w)
    with qtbot.waitSignal(w.reply_saved, timeout=REPLY_MS) as blocker:
        w.stop()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=REPLY_MS)
    saved = w.history.message(int(blocker.args[0]))  # type: ignore[index]
    assert saved.stats is not None and saved.stats["finish_reason"] == "stopped"
    assert "→" not in readout(w) and readout(w).startswith("<b>auto") and "stopped" in readout(w)
    assert "→" not in w.chat_view.toPlainText().split("Assistant")[-1]

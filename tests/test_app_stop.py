"""Stop under a slow engine: "stopping…" shows at once, the reply ends within one round, and what was shown is
saved exactly (an engine stand-in whose rounds take 200 ms: the count of rounds after the click is the measure)."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.chat.readout import STOPPING
from app.main_window import MainWindow
from app.worker.engine_worker import EngineState
from tests.app_helpers import QT_STRICT, TIMEOUT_MS, SteppingEngine, closing, stepping_window

pytestmark = QT_STRICT

__all__ = ["closing"]

STEP_S = 0.2  # one round of the stand-in engine
REPLY = " ".join(f"word{i}" for i in range(200))


def test_stop_shows_stopping_at_once_and_ends_within_one_round(
    qtbot: QtBot, data_dir: Path, closing: list[MainWindow]
) -> None:
    engine = SteppingEngine(REPLY, step_s=STEP_S)
    w = stepping_window(qtbot, engine)
    closing.append(w)
    w.prompt_edit.setPlainText("a long answer, please")
    w.send()
    qtbot.waitUntil(lambda: engine.rounds >= 3, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(w.reply_saved, timeout=TIMEOUT_MS) as blocker:
        w.stop()
        at_click = engine.rounds
        assert STOPPING in w.readout.text() and w.state_label.text() == STOPPING  # before any event is handled
        assert not w.stop_button.isEnabled()
    assert engine.rounds - at_click <= 1  # the round in progress, and no other
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    saved = w.history.message(int(blocker.args[0]))  # type: ignore[index]
    assert saved.stats is not None and saved.stats["finish_reason"] == "stopped"
    assert saved.content == "".join(f"word{i} " for i in range(engine.rounds))  # every shown token, no other
    assert STOPPING not in w.readout.text() and "stopped" in w.readout.text()
    assert w.send_button.isEnabled() and w.state_label.text() == EngineState.READY.value

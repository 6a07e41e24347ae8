"""The app with the engine in its own process: SIGKILL, SIGBUS or SIGABRT of that process mid-reply, or its model file
cut short mid-reply, leaves the window up with the reply saved as far as it came and marked with the cause; the next
message restarts the engine with the same pair, and no engine process outlives the window."""

from __future__ import annotations

import os
import shutil
import signal
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.worker.engine_worker import EngineState
from engine import TinyPair
from engine.process import EngineProcess
from tests.app_helpers import QT_STRICT, REPLY_MS, TIMEOUT_MS, fast_settings, open_window, send, tiny_pair
from tests.process_helpers import pid_alive

pytestmark = [pytest.mark.timeout(300), *QT_STRICT]

LONG = fast_settings(mode="sd", max_tokens=900)  # seconds of decoding: a fault after the first words lands mid-reply
CHARS = 20  # characters streamed before the fault


def engine_of(window: MainWindow) -> EngineProcess:
    eng = window.host.worker._engine
    assert isinstance(eng, EngineProcess)
    return eng


def fault_mid_reply(qtbot: QtBot, window: MainWindow, fault: object) -> str:
    """Send a message, run ``fault()`` on the worker thread once CHARS characters have streamed; the error shown."""
    streamed: list[str] = []

    def on_token(text: str, _from_draft: bool) -> None:  # the worker thread, in step with the engine's tokens
        streamed.append(text)
        if len("".join(streamed)) > CHARS and not getattr(on_token, "done", False):
            on_token.done = True  # type: ignore[attr-defined]
            fault()  # type: ignore[operator]

    window.host.worker.token_generated.connect(on_token, Qt.ConnectionType.DirectConnection)
    window.prompt_edit.setPlainText("Tell me a long story")
    with qtbot.waitSignal(window.error_shown, timeout=REPLY_MS) as shown:
        window.send()
    window.host.worker.token_generated.disconnect(on_token)
    qtbot.waitUntil(lambda: window.state == EngineState.READY and window.replies.reply_id is None, timeout=TIMEOUT_MS)
    return str(shown.args[0])


@pytest.mark.parametrize(("sig", "name"), [(signal.SIGKILL, "SIGKILL"), (signal.SIGBUS, "SIGBUS"),
                                           (signal.SIGABRT, "SIGABRT")])
def test_a_killed_engine_leaves_the_window_and_the_partial_reply(
        qtbot: QtBot, data_dir: Path, tiny: TinyPair, sig: signal.Signals, name: str) -> None:
    w = open_window(qtbot, tiny_pair(tiny), LONG)
    first = engine_of(w).pid
    shown = fault_mid_reply(qtbot, w, lambda: os.kill(first, sig))
    assert f"the engine stopped: killed by {name}" in shown
    assert w.conversation_id is not None
    reply = w.history.messages(w.conversation_id)[-1]
    assert reply.role == "assistant" and not reply.complete and len(reply.content) > CHARS
    assert reply.stats is not None and reply.stats["finish_reason"].startswith(f"the engine stopped: killed by {name}")
    assert w.isVisible() and w.replies.restart_banner.isVisible()
    assert name in w.replies.restart_banner.label.text()
    assert not pid_alive(first)
    w.apply_settings(fast_settings(mode="sd"))
    again = send(qtbot, w, "And now a short one")  # starts the engine again with the same pair
    assert w.history.message(again).complete and w.history.message(again).content
    second = engine_of(w).pid
    assert second != first and pid_alive(second) and not w.replies.restart_banner.isVisible()
    w.close()
    assert not pid_alive(second), "the engine process outlived the window"


def test_restart_engine_button_starts_it_again(qtbot: QtBot, data_dir: Path, tiny: TinyPair) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd"))
    first = engine_of(w).pid
    with qtbot.waitSignal(w.host.engine_stopped, timeout=TIMEOUT_MS):
        os.kill(first, signal.SIGKILL)
    assert w.replies.restart_banner.isVisible()
    with qtbot.waitSignal(w.host.model_loaded, timeout=TIMEOUT_MS):
        w.replies.restart_banner.button.click()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    assert engine_of(w).pid != first and not w.replies.restart_banner.isVisible()
    assert w.history.message(send(qtbot, w, "Hello")).complete
    w.close()


def test_a_model_file_cut_short_mid_reply_is_one_message(qtbot: QtBot, data_dir: Path, tiny: TinyPair,
                                                         tmp_path: Path) -> None:
    target = Path(shutil.copy(tiny.target, tmp_path / "target.gguf"))
    w = open_window(qtbot, tiny_pair(replace(tiny, target=target)), LONG)
    first = engine_of(w).pid
    errors: list[str] = []
    w.error_shown.connect(errors.append)
    shown = fault_mid_reply(qtbot, w, lambda: os.truncate(target, target.stat().st_size // 2))
    qtbot.wait(200)  # anything else it would say has arrived by now
    assert errors == [shown]
    assert "the engine stopped: killed by SIGBUS (a model file was cut short or changed while in use)" in shown
    assert w.conversation_id is not None
    reply = w.history.messages(w.conversation_id)[-1]
    assert not reply.complete and len(reply.content) > CHARS
    assert w.isVisible() and not pid_alive(first)
    w.close()

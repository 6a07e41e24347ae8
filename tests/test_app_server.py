"""The app's "Local server" switch: a real server on a free loopback port over the tiny pair the app loaded,
driven with the openai client while the panel shows what it does."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.server.panel import status_texts
from app.worker.engine_worker import EngineState
from engine import TinyPair, server
from tests.app_helpers import QT_STRICT, TIMEOUT_MS, closing, fast_settings, open_window, send, tiny_pair
from tests.rpc_helpers import free_port

pytestmark = [*QT_STRICT, pytest.mark.timeout(180)]

__all__ = ["closing", "free_port"]


def port_is_free(port: int) -> bool:
    """Nothing listens on ``port`` (connections of the last requests may linger in TIME_WAIT)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def switch(qtbot: QtBot, w: MainWindow, on: bool) -> None:
    with qtbot.waitSignal(w.host.server_changed, timeout=TIMEOUT_MS):
        w.server_panel.switch.click()
    assert w.server_panel.switch.isChecked() == on == w.server_panel.listening


def chat(url: str, content: str = "Hello there") -> Any:
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60.0)
    model = client.models.list().data[0].id
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": content}],
                                          max_tokens=8, temperature=0)


def test_the_switch_serves_the_loaded_pair_beside_the_apps_own_replies(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="auto"))
    closing.append(w)
    panel = w.server_panel
    assert panel.dock is not None and not panel.dock.isVisible()
    panel.dock.toggleViewAction().trigger()  # Server ▸ Local server
    assert panel.dock.isVisible() and panel.switch.isEnabled()
    port = free_port()
    panel.port_edit.setValue(port)
    switch(qtbot, w, True)
    url = f"http://127.0.0.1:{port}/v1"
    assert panel.url_label.text() == f"{url} · model target" and not panel.port_edit.isEnabled()
    assert panel.indicator.isVisible() and panel.indicator.text() == f"Server: 127.0.0.1:{port} · 0 served"
    assert w.store.server_port() == port and not port_is_free(port)

    reply = chat(url)
    assert reply.choices[0].message.content and reply.usage is not None and reply.usage.completion_tokens == 8
    panel.refresh()
    assert panel.served_label.text().startswith("1 request · 0 waiting")
    assert panel.running_label.text() == "idle"

    # The app's reply holds one of the engine's two places (exclusive): a client's request runs beside it.
    hold, holding = threading.Event(), threading.Event()

    def block_first_token(_text: str, _draft: bool) -> None:  # on the engine thread, inside the app's turn
        if not holding.is_set():
            holding.set()
            hold.wait(30)

    w.host.worker.token_generated.connect(block_first_token, Qt.ConnectionType.DirectConnection)
    w.prompt_edit.setPlainText("and now the app")
    with ThreadPoolExecutor(1) as pool, qtbot.waitSignal(w.reply_saved, timeout=TIMEOUT_MS):
        w.send()
        assert holding.wait(30)
        beside = pool.submit(chat, url, "from a client while the app replies")
        assert beside.result(60).choices[0].message.content  # served while the app's reply is held
        hold.set()
    w.host.worker.token_generated.disconnect(block_first_token)
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    panel.refresh()
    assert panel.served_label.text().startswith("2 requests · 0 waiting")
    assert w.pairs.measured_rates(), "an auto reply leaves auto's measured rates for Settings"

    switch(qtbot, w, False)
    assert port_is_free(port) and panel.url_label.text() == "not listening" and not panel.indicator.isVisible()
    assert panel.message.text() == "Stopped." and panel.port_edit.isEnabled()
    assert panel.served_label.text().startswith("2 requests")  # the last counts stay
    send(qtbot, w, "the app alone again")

    switch(qtbot, w, True)  # a restart works
    with qtbot.waitSignal(w.host.server_changed, timeout=TIMEOUT_MS):  # a pair change stops it first
        w.pairs.activate(tiny_pair(tiny, draft=tiny.draft_same))
    assert not panel.listening and not panel.switch.isChecked() and port_is_free(port)
    assert "model pair changed" in panel.message.text()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    assert panel.switch.isEnabled()


def test_a_busy_port_is_an_inline_error(qtbot: QtBot, data_dir: Path, tiny: TinyPair,
                                        closing: list[MainWindow]) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings())
    closing.append(w)
    panel = w.server_panel
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        panel.port_edit.setValue(taken.getsockname()[1])
        with qtbot.waitSignal(w.host.server_changed, timeout=TIMEOUT_MS):
            panel.switch.click()
    assert not panel.switch.isChecked() and not panel.listening and panel.port_edit.isEnabled()
    text = panel.message.text()
    assert text.startswith("Could not start the local server: cannot listen on 127.0.0.1:") and "in use" in text
    assert "Traceback" not in text and "cf222e" in panel.message.styleSheet()
    assert not w.error_banner.isVisible()
    send(qtbot, w, "the app still works")


def test_no_pair_no_switch(qtbot: QtBot, data_dir: Path, closing: list[MainWindow]) -> None:
    w = open_window(qtbot, None)
    closing.append(w)
    assert not w.server_panel.switch.isEnabled()


def test_the_running_request_is_shown_with_its_progress(qtbot: QtBot) -> None:
    running = server.RunningRequest("chatcmpl-1", "chat.completions", True, 18, 42, 100.0)
    status = server.ServerStatus(url="http://127.0.0.1:8080/v1", listening=True, served=1, running=running,
                                 busy=True, queued=2, rejected=3, failed=1)
    url, served, now = status_texts(status, "qwen", now=103.4)
    assert url == "http://127.0.0.1:8080/v1 · model qwen"
    assert served == "1 request · 2 waiting · 3 requests turned away: too many were already waiting · 1 error"
    quiet = server.ServerStatus(url="http://127.0.0.1:8080/v1", listening=True, served=4, running=None, busy=False,
                                queued=0, rejected=0, failed=0)
    assert status_texts(quiet, "qwen", now=0.0)[1] == "4 requests · 0 waiting · 0 errors"  # nothing turned away
    assert now == "Streaming a chat reply: 42 tokens so far, from a prompt of 18 tokens, for 3 s"
    whole = server.RunningRequest("cmpl-2", "completions", False, 1, 1, 100.0)
    assert status_texts(server.ServerStatus(url="", listening=True, served=0, running=whole, busy=True, queued=0,
                                            rejected=0, failed=0), "qwen", now=160.0)[2] == (
        "Writing a completion: 1 token so far, from a prompt of 1 token, for 60 s")

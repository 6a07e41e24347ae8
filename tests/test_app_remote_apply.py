"""Settings › OK with remote machines that do not answer keeps the working pair (it used to unload it and leave
none): the machines are asked first, the notice says why the setting was not applied, and Try again and Settings…
are the way back; a load that fails with machines that answered the probe loads the pair again as it was. Remote
machines are a section of Settings of their own."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QGroupBox, QLineEdit, QPushButton
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.settings import remote_apply
from app.settings.cpu_kernels import CpuKernelsBox
from app.settings.dialog import SettingsDialog
from app.settings.store import SettingsStore
from app.settings.values import Settings
from app.worker.engine_worker import EngineState
from engine import CpuCheckStatus, CpuCheckVerdict, TinyPair
from tests.app_helpers import QT_STRICT, REPLY_MS, TIMEOUT_MS, closing, fast_settings, open_window, send, tiny_pair
from tests.rpc_helpers import end, free_port, needs_rpc, start_server

pytestmark = [*QT_STRICT, pytest.mark.timeout(300)]

__all__ = ["closing"]

SAFE = CpuCheckStatus(CpuCheckVerdict(True, "decoded a batch of 8 and 2 single tokens", "key", "now"), "auto", True)


class Loads:
    """The loads the window asks the worker for."""

    def __init__(self, w: MainWindow) -> None:
        self.configs: list[object] = []
        w.host.load_requested.connect(lambda request: self.configs.append(request.config))


def settings_ok(qtbot: QtBot, w: MainWindow, rpc: str, *, test_first: bool = True, mode: str | None = None) -> None:
    """Open Settings, type ``rpc`` (Test it: it says the machine cannot be reached), maybe change the mode, OK."""
    w.open_settings()
    dialog = w.settings_dialog
    dialog.edits["rpc"].setText(rpc)
    if mode is not None:
        dialog.mode.setCurrentIndex(dialog.mode.findData(mode))
    if test_first:
        with qtbot.waitSignal(dialog.remote_test.finished, timeout=30_000):
            dialog.remote_test.button.click()
        assert "cannot reach remote machine" in dialog.remote_test.result.text()
    dialog.accept()


def test_ok_with_an_unreachable_machine_keeps_the_working_pair(qtbot: QtBot, data_dir: Path, tiny: TinyPair,
                                                              closing: list[MainWindow]) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", max_tokens=8))
    closing.append(w)
    loads, engine, label = Loads(w), w.host.worker._engine, w.model_label.text()
    endpoint = f"127.0.0.1:{free_port()}"  # nothing listens there
    settings_ok(qtbot, w, endpoint, mode="ar")
    notice = w.remote_apply.notice
    qtbot.waitUntil(lambda: notice.label.text().startswith("Remote machines not applied"), timeout=TIMEOUT_MS)
    text = notice.label.text()
    assert f"cannot reach remote machine {endpoint}" in text and "The model pair stays loaded as it was (on this " \
        "machine only)" in text
    assert notice.isVisible() and notice.retry_button.isVisible() and notice.settings_button.isVisible()
    assert loads.configs == [] and w.host.worker._engine is engine and w.model_label.text() == label  # kept
    assert w.state == EngineState.READY and w.settings.rpc == "" and SettingsStore().load().rpc == ""
    assert w.settings.mode == "ar"  # the rest of the change was applied at once
    reply = send(qtbot, w, "still here?", REPLY_MS)
    assert w.history.message(reply).complete and w.history.message(reply).content

    notice.settings_button.click()  # the way back: Settings with the list that was not applied, to fix it
    assert w.settings_dialog.edits["rpc"].text() == endpoint
    w.settings_dialog.edits["rpc"].setText("")
    w.settings_dialog.accept()
    assert loads.configs == [] and w.settings.rpc == ""  # nothing changed: nothing loads
    notice.dismiss_button.click()
    assert not notice.isVisible()


@needs_rpc
def test_try_again_applies_the_machines_once_they_answer(qtbot: QtBot, data_dir: Path, tiny: TinyPair,
                                                         tmp_path: Path, closing: list[MainWindow]) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", max_tokens=8))
    closing.append(w)
    loads = Loads(w)
    port = free_port()
    endpoint = f"127.0.0.1:{port}"
    settings_ok(qtbot, w, endpoint, test_first=False)
    notice = w.remote_apply.notice
    qtbot.waitUntil(lambda: notice.retry_button.isVisible(), timeout=TIMEOUT_MS)
    assert loads.configs == [] and w.settings.rpc == ""
    srv = start_server(port, tmp_path / "rpc.log")  # the machine is up now
    try:
        with qtbot.waitSignal(w.host.model_loaded, timeout=TIMEOUT_MS):
            notice.retry_button.click()
        qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
        assert not notice.isVisible() and w.settings.rpc == endpoint and SettingsStore().load().rpc == endpoint
        assert [c.rpc for c in loads.configs] == [(endpoint,)]  # type: ignore[attr-defined]
        reply = send(qtbot, w, "through the remote machine", REPLY_MS)
        assert w.history.message(reply).complete
        w.close()
    finally:
        end(srv)


def test_a_load_that_fails_with_answering_machines_loads_the_pair_again(
        qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow],
        monkeypatch: pytest.MonkeyPatch) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", max_tokens=8))
    closing.append(w)
    loads = Loads(w)
    endpoint = f"127.0.0.1:{free_port()}"  # says it answers, then refuses the load
    monkeypatch.setattr(remote_apply, "ask_remote_machines", lambda text: ([f"{text}: RPC 3.0.0, 1 device"], True))
    settings_ok(qtbot, w, endpoint, test_first=False)
    notice = w.remote_apply.notice
    qtbot.waitUntil(lambda: "loading the pair with them failed" in notice.label.text(), timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: w.state == EngineState.READY and len(loads.configs) == 2, timeout=TIMEOUT_MS)
    assert [c.rpc for c in loads.configs] == [(endpoint,), ()]  # type: ignore[attr-defined]
    assert "The pair is loaded again as it was (on this machine only)" in notice.label.text()
    assert w.settings.rpc == "" and SettingsStore().load().rpc == "" and w.model_label.text().startswith("Model:")
    assert not w.error_banner.isVisible() or endpoint not in w.error_banner.text()  # said once, in the notice
    reply = send(qtbot, w, "back again", REPLY_MS)
    assert w.history.message(reply).complete


def test_remote_machines_have_a_section_of_their_own(qtbot: QtBot, data_dir: Path) -> None:
    dialog = SettingsDialog(Settings(), gpu_offload=False, cpu_kernels=CpuKernelsBox(SAFE))
    qtbot.addWidget(dialog)
    dialog.show()
    boxes = {box.title(): box for box in dialog.findChildren(QGroupBox)}
    assert list(boxes) == ["Decoding", "Sampling", "Hardware", "Remote machines"]
    remote = boxes["Remote machines"]
    assert dialog.edits["rpc"] in remote.findChildren(QLineEdit)
    assert dialog.remote_test.button in remote.findChildren(QPushButton)
    assert dialog.edits["rpc"] not in boxes["Hardware"].findChildren(QLineEdit)
    assert "the pair is kept as it is if one does not answer" in remote.findChild(type(dialog.mode_line),
                                                                                   "rpc-line").text()
    dialog.edits["rpc"].setText("gpu-box:50052")
    assert "OK reloads the model pair: Remote machines changed" in dialog.reload_note.text()

"""Settings › Remote machines: the field is checked inline, saved, carried into the engine's configuration and
its change reloads the pair; Test asks each machine off the GUI thread and shows what it said or why not (a real
RPC server where the build has RPC, a closed port everywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialogButtonBox
from pytestqt.qtbot import QtBot

from app.settings.cpu_kernels import CpuKernelsBox
from app.settings.dialog import SettingsDialog
from app.settings.store import SettingsStore
from app.settings.values import Settings, load_fields
from engine import CpuCheckStatus, CpuCheckVerdict
from tests.app_helpers import QT_STRICT, fast_settings, open_window, send, tiny_pair
from tests.rpc_helpers import end, free_port, needs_rpc, rpc_server, start_server
from tests.test_app_engine_process import CHARS, fault_mid_reply
from tests.tiny_models import TinyPair

pytestmark = [*QT_STRICT, pytest.mark.timeout(300)]

SAFE = CpuCheckStatus(CpuCheckVerdict(True, "decoded a batch of 8 and 2 single tokens", "key", "now"), "auto", True)


def _dialog(qtbot: QtBot, settings: Settings) -> SettingsDialog:
    dialog = SettingsDialog(settings, gpu_offload=False, cpu_kernels=CpuKernelsBox(SAFE))
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def test_remote_machines_are_checked_saved_and_reach_the_engine(qtbot: QtBot, data_dir: Path) -> None:
    dialog = _dialog(qtbot, Settings())
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert dialog.edits["rpc"].text() == "" and not dialog.remote_test.button.isEnabled()
    dialog.edits["rpc"].setText("gpu-box:99999")
    assert not ok.isEnabled() and "port must be a number from 1 to 65535" in dialog.errors["rpc"].text()
    dialog.edits["rpc"].setText("gpu-box:50052, 10.0.0.3:6000")
    assert ok.isEnabled() and dialog.remote_test.button.isEnabled()
    assert "Remote machines" in dialog.reload_note.text()  # read when the pair loads
    dialog.accept()
    got = dialog.settings()
    assert "rpc" in load_fields()
    assert got.engine_config("t.gguf", None).rpc == ("gpu-box:50052", "10.0.0.3:6000")
    store = SettingsStore()
    store.save(got)
    assert store.load().rpc == "gpu-box:50052, 10.0.0.3:6000"


def test_test_says_why_a_machine_cannot_be_used(qtbot: QtBot, data_dir: Path) -> None:
    port = free_port()
    dialog = _dialog(qtbot, Settings(rpc=f"127.0.0.1:{port}"))
    with qtbot.waitSignal(dialog.remote_test.finished, timeout=30_000):
        dialog.remote_test.button.click()
    assert f"cannot reach remote machine 127.0.0.1:{port}" in dialog.remote_test.result.text()


@needs_rpc
def test_test_shows_protocol_devices_and_free_memory(qtbot: QtBot, data_dir: Path, tmp_path: Path) -> None:
    with rpc_server(tmp_path) as (endpoint, _proc):
        dialog = _dialog(qtbot, Settings(rpc=endpoint))
        with qtbot.waitSignal(dialog.remote_test.finished, timeout=30_000):
            dialog.remote_test.button.click()
        text = dialog.remote_test.result.text()
    assert text.startswith(f"{endpoint}: RPC 7.0.0, 1 device, ") and " GiB free of " in text


@needs_rpc
def test_a_remote_machine_lost_mid_reply_keeps_the_window_and_the_partial_reply(
        qtbot: QtBot, data_dir: Path, tmp_path: Path, tiny: TinyPair) -> None:
    port = free_port()
    endpoint = f"127.0.0.1:{port}"
    srv = start_server(port, tmp_path / "rpc.log")
    try:
        w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", max_tokens=900, rpc=endpoint))
        shown = fault_mid_reply(qtbot, w, srv.kill)
        assert "Remote RPC server crashed" in shown and endpoint in shown
        assert w.conversation_id is not None
        reply = w.history.messages(w.conversation_id)[-1]
        assert reply.role == "assistant" and not reply.complete and len(reply.content) > CHARS
        assert w.isVisible() and w.replies.restart_banner.isVisible()
        srv.wait(timeout=30)  # reaped, so its Popen is not dropped running
        srv = start_server(port, tmp_path / "rpc.log")  # the machine is back: the next message loads again
        w.apply_settings(fast_settings(mode="sd", rpc=endpoint))
        again = send(qtbot, w, "And now a short one")
        assert w.history.message(again).complete and w.history.message(again).content
        w.close()
    finally:
        end(srv)

"""The entry point: ``--self-test`` dispatch without Qt, the crash hook, and a real-pair smoke test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

import app.startup.selftest
from app.__main__ import early_check, main, parse_args
from app.main_window import MainWindow
from app.startup import crash
from engine import offline
from tests.app_helpers import QT_STRICT, closing, fast_settings, open_window, send

pytestmark = QT_STRICT

__all__ = ["closing"]


def test_self_test_is_dispatched_before_any_qt_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.startup.selftest, "run_self_test", lambda: 7)
    assert main(["--self-test"]) == 7
    code = "import sys, app.__main__ as m; m.parse_args(['--self-test']); print('PySide6' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert not parse_args(["-platform", "offscreen"]).self_test
    assert early_check() is None


def test_crash_hook_writes_a_log(qtbot: QtBot, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, fresh in (("_reported", set()), ("_logs_written", 0), ("_boxes", [])):  # this run's, not the suite's
        monkeypatch.setattr(crash, name, fresh)
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        crash.excepthook(RuntimeError, exc, exc.__traceback__)
    logs = list((data_dir / "crashes").glob("crash-*.log"))
    assert len(logs) == 1 and "RuntimeError: boom" in logs[0].read_text()
    (box,) = crash._boxes
    assert isinstance(box, QMessageBox) and "boom" in box.text() and str(logs[0]) in box.text()
    box.close()  # a box left open would be counted by the next test that reports an error


@pytest.mark.realmodels
def test_real_pair_chat_smoke(
    qtbot: QtBot, data_dir: Path, real_pair: offline.OfflinePair, closing: list[MainWindow]
) -> None:
    from app.settings.store import ActivePair

    pair = ActivePair(offline.PAIR_ID, "Qwen2.5-Coder (offline)", str(real_pair.target), str(real_pair.draft))
    w = open_window(qtbot, pair, fast_settings(max_tokens=8, n_ctx=2048))
    closing.append(w)
    reply = w.history.message(send(qtbot, w, "Say hello in one word."))
    assert reply.content.strip() and reply.stats is not None and reply.stats["mode"] == "ssd"

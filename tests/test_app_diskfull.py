"""A full disk during a reply loses nothing: the reply stays in memory and on screen, the user is told once,
the save is retried until space returns, and the crash hook neither loops nor leaves empty logs.

Two ways to fill the disk: a real 4 MB tmpfs (when the tests run as root and may mount one), and, always,
SQLite's own page limit (``PRAGMA max_page_count``), which fails writes with the same SQLITE_FULL
"database or disk is full" a full disk gives: injected ENOSPC at the write layer, no mocks.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.history.save_queue import DISK_FULL, NOT_SENT
from app.main_window import MainWindow
from app.startup import crash
from app.worker.engine_worker import EngineState
from engine import TinyPair
from tests.app_helpers import QT_STRICT, REPLY_MS, TIMEOUT_MS, ReplyGate, closing, fast_settings, open_window, tiny_pair
from tests.test_app_history import fill, unfill

pytestmark = QT_STRICT

__all__ = ["closing"]


@pytest.fixture
def small_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real 4 MB tmpfs as the user-data folder (skipped unless root may mount one here)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    monkeypatch.setenv("SSD_CHAT_DATA_DIR", str(mount / "userdata"))
    monkeypatch.setattr(crash, "_reported", set())
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_disk(mount: Path, name: str = "filler") -> Path:
    """Write a file until the tmpfs has no byte left; returns it (delete it to free the space)."""
    filler = mount / name
    with filler.open("wb", buffering=0) as f:
        for size in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    return filler


def streaming_window(
    qtbot: QtBot, tiny: TinyPair, closing: list[MainWindow], monkeypatch: pytest.MonkeyPatch
) -> tuple[MainWindow, list[str], list[int], ReplyGate]:
    """A window whose reply is held mid-stream (release the gate once the disk is full)."""
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="ar", max_tokens=200, n_ctx=1024))
    closing.append(w)
    gate = ReplyGate(monkeypatch, w)
    w.replies.saves._retry.setInterval(50)  # try again soon (every 5 s in the app)
    shown: list[str] = []
    saved: list[int] = []
    w.error_shown.connect(shown.append)
    w.reply_saved.connect(saved.append)
    w.prompt_edit.setPlainText("write a long answer")
    w.send()
    qtbot.waitUntil(lambda: len(w.chat_view.live_text() or "") > 20, timeout=TIMEOUT_MS)
    return w, shown, saved, gate


def check_kept_told_once_and_refused_to_send(qtbot: QtBot, w: MainWindow, shown: list[str], saved: list[int],
                                             refill: Callable[[], object] = lambda: None) -> tuple[int, str]:
    qtbot.waitUntil(lambda: bool(saved) and w.state == EngineState.READY, timeout=REPLY_MS)
    reply_id = saved[0]
    final = w.replies.saves.pending[reply_id].content
    assert len(final) > 100 and w.history.message(reply_id).content != final  # not in the database...
    view = w.chat_view.toPlainText()
    assert final.split()[-1] in view and "not saved yet: the disk is full" in view  # ...but on screen
    assert shown == [DISK_FULL] and w.error_banner.text() == DISK_FULL  # told once, inline
    refill()  # the reply's end freed a little (its crash marker): take that too
    question = "one more question, " * 40  # more than a 512-byte page holds
    w.prompt_edit.setPlainText(question)
    w.send()
    assert shown == [DISK_FULL, NOT_SENT] and w.prompt_edit.toPlainText() == question
    return reply_id, final


def check_saved_once_space_returns(qtbot: QtBot, w: MainWindow, reply_id: int, final: str) -> None:
    qtbot.waitUntil(lambda: w.history.message(reply_id).content == final, timeout=TIMEOUT_MS)
    message = w.history.message(reply_id)
    assert message.complete and message.stats is not None and message.stats["finish_reason"] == "length"
    assert not w.replies.saves.pending and "not saved yet" not in w.chat_view.toPlainText()
    assert not w.error_banner.isVisible()
    w.send()
    qtbot.waitUntil(lambda: w.state == EngineState.GENERATING, timeout=TIMEOUT_MS)  # sending works again
    w.stop()


def test_injected_full_disk_keeps_the_reply(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir.mkdir()
    db = sqlite3.connect(data_dir / "history.sqlite3")  # 512-byte pages: a reply's text needs new pages
    db.executescript("PRAGMA page_size = 512; CREATE TABLE t (x); DROP TABLE t;")
    db.close()
    w, shown, saved, gate = streaming_window(qtbot, tiny, closing, monkeypatch)
    assert w.history._db.execute("PRAGMA page_size").fetchone()[0] == 512
    fill(w.history)
    gate.release()
    reply_id, final = check_kept_told_once_and_refused_to_send(qtbot, w, shown, saved)
    unfill(w.history)
    check_saved_once_space_returns(qtbot, w, reply_id, final)


def test_a_real_full_disk_keeps_the_reply_and_the_crash_hook_does_not_loop(
    qtbot: QtBot, small_disk: Path, tiny: TinyPair, closing: list[MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    w, shown, saved, gate = streaming_window(qtbot, tiny, closing, monkeypatch)
    fillers = [fill_disk(small_disk)]
    gate.release()
    reply_id, final = check_kept_told_once_and_refused_to_send(
        qtbot, w, shown, saved, lambda: fillers.append(fill_disk(small_disk, "filler-2")))

    crashes = small_disk / "userdata" / "crashes"
    before = set(crashes.iterdir())
    for _ in range(5):  # a timer's slot failing again and again while the disk is full
        try:
            raise RuntimeError("a bug that repeats")
        except RuntimeError as exc:
            crash.excepthook(RuntimeError, exc, exc.__traceback__)
    crash.excepthook(OSError, OSError(errno.ENOSPC, "No space left on device"), None)
    assert set(crashes.iterdir()) == before  # no empty crash logs
    boxes = [b for b in crash._boxes if b.isVisible()]  # type: ignore[attr-defined]
    assert [b.windowTitle() for b in boxes] == ["ssd-chat: unexpected error", "ssd-chat: the disk is full"]
    assert "No crash log could be written" in boxes[0].text()
    for box in boxes:
        box.close()

    for filler in fillers:
        filler.unlink()
    check_saved_once_space_returns(qtbot, w, reply_id, final)

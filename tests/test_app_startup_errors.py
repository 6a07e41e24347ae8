"""Start-up failures of the app: each is told in a modal dialog that waits for the user, naming the path and what
to do, and the history file is left as it was. Real SQLite files, a real second process holding a lock, real
Qt dialogs (answered by a timer, as a user would)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from app.__main__ import open_history
from app.history.db import SCHEMA_VERSION
from app.history.store import History
from app.startup import crash
from tests.app_helpers import QT_STRICT

pytestmark = [pytest.mark.timeout(120), *QT_STRICT]

V1 = """
CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, conversation_id INTEGER NOT NULL, role TEXT NOT NULL,
    content TEXT NOT NULL, stats TEXT, runs TEXT, complete INTEGER NOT NULL DEFAULT 1, created REAL NOT NULL);
INSERT INTO conversations VALUES (1, 'kept', '', 1.0, 1.0);
PRAGMA user_version = 1;
"""


class Answer:
    """Waits for the modal dialog the code under test opens, keeps its text, and closes it (the user's click)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.modal: list[bool] = []
        self._timer = QTimer()
        self._timer.setInterval(20)
        self._timer.timeout.connect(self._look)
        self._timer.start()

    def _look(self) -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            self.texts.append(box.text())
            self.modal.append(box.isModal())
            box.accept()

    def stop(self) -> str:
        self._timer.stop()
        assert self.modal == [True], "exactly one modal dialog was expected"
        return self.texts[0]


@pytest.fixture
def answer(qtbot: QtBot) -> Iterator[Answer]:
    a = Answer()
    yield a
    a._timer.stop()


def snapshot(path: Path) -> tuple[bytes, int, list[str]]:
    """The file's bytes, its modification time, and what lies beside it (no -wal or -shm may appear)."""
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir())


def test_history_path_that_is_a_folder(data_dir: Path, answer: Answer) -> None:
    (data_dir / "history.sqlite3").mkdir(parents=True)
    assert open_history() is None
    text = answer.stop()
    assert str(data_dir / "history.sqlite3") in text and "folder, not a file" in text and "Move or rename" in text


def test_a_newer_history_is_never_opened_for_writing(data_dir: Path, answer: Answer) -> None:
    path = data_dir / "history.sqlite3"
    data_dir.mkdir(parents=True)
    with sqlite3.connect(path) as db:  # a rollback-journal file: converting it to WAL would rewrite it
        db.executescript(V1.replace("user_version = 1", "user_version = 99"))
    db.close()
    before = snapshot(path)
    assert open_history() is None
    text = answer.stop()
    assert "newer ssd-chat (history version 99" in text and f"up to {SCHEMA_VERSION}" in text and "not changed" in text
    assert snapshot(path) == before


def test_a_file_with_another_schema_is_left_alone(data_dir: Path, answer: Answer) -> None:
    path = data_dir / "history.sqlite3"
    data_dir.mkdir(parents=True)
    with sqlite3.connect(path) as db:
        db.executescript("CREATE TABLE conversations (id INTEGER PRIMARY KEY, title TEXT); "
                         "INSERT INTO conversations VALUES (1, 'theirs');")
    db.close()
    before = snapshot(path)
    assert open_history() is None
    assert "not ssd-chat's history" in answer.stop()
    assert snapshot(path) == before


def hold_write_lock(path: Path) -> subprocess.Popen[str]:
    """Another process in the middle of a write to ``path`` (until its stdin closes)."""
    code = ("import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "db.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    proc.wait(timeout=30)
    proc.stdout.close()


def test_a_current_history_opens_while_another_process_writes(data_dir: Path) -> None:
    History().close()  # made by this version: nothing to migrate
    path = data_dir / "history.sqlite3"
    other = hold_write_lock(path)
    try:
        history = History()  # only reads: migrate() writes nothing when no migration is due
        assert history.conversations() == []
        history.close()
    finally:
        release(other)


def test_a_locked_history_that_needs_a_migration_waits_then_says_so(data_dir: Path, answer: Answer) -> None:
    path = data_dir / "history.sqlite3"
    data_dir.mkdir(parents=True)
    with sqlite3.connect(path) as db:
        db.executescript(V1)
    db.close()
    other = hold_write_lock(path)
    try:
        assert open_history() is None  # waits for the lock (5 s), then tells the user
        text = answer.stop()
        assert "locked for more than 5 s" in text and "Close the other program" in text
    finally:
        release(other)
    history = History()  # once the other program is done, the migration runs and nothing was lost
    assert [c.title for c in history.conversations()] == ["kept"]
    history.close()


def test_an_unwritable_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: Answer) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder should be")
    monkeypatch.setenv("SSD_CHAT_DATA_DIR", str(blocker / "userdata"))
    assert crash.enable_fault_log() is None  # the crash hook itself keeps going
    assert open_history() is None
    text = answer.stop()
    assert "folder cannot be written" in text and "SSD_CHAT_DATA_DIR" in text


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_data_folder(data_dir: Path, answer: Answer) -> None:
    data_dir.mkdir(parents=True)
    data_dir.chmod(0o555)
    try:
        assert open_history() is None
        assert "folder cannot be written" in answer.stop()
    finally:
        data_dir.chmod(0o755)


def test_the_app_waits_for_the_user_before_it_exits(tmp_path: Path) -> None:
    """The whole start-up in its own process: the dialog stays up (the process lives) until it is answered."""
    data = tmp_path / "userdata"
    (data / "history.sqlite3").mkdir(parents=True)
    env = {**os.environ, "SSD_CHAT_DATA_DIR": str(data), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen([sys.executable, "-m", "app"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "cannot be opened" in line:
                break
        assert "folder, not a file" in line
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=3)  # the dialog is modal and waits; before, the process ended at once
    finally:
        proc.kill()
        proc.communicate()  # reaped, its pipe closed

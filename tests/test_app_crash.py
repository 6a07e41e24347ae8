"""A native crash during a reply: a real child process dies by a signal, the next start says so once."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from app.history.store import History
from app.main_window import MainWindow
from app.startup import crash
from tests.app_helpers import QT_STRICT, closing

pytestmark = QT_STRICT

__all__ = ["closing"]

ROOT = Path(__file__).resolve().parent.parent


def die_in_reply(data_dir: Path, conversation_id: int, message_id: int, sig: signal.Signals) -> None:
    """What the app does at start and when a reply starts, then a fatal signal as llama.cpp's SIGILL."""
    code = (
        "import signal\n"
        "from app.startup import crash\n"
        "crash.install()\n"
        f"crash.reply_started({conversation_id}, {message_id})\n"
        f"signal.raise_signal(signal.{sig.name})\n"
    )
    env = {**os.environ, "SSD_CHAT_DATA_DIR": str(data_dir)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == -sig, proc.stderr.decode(errors="replace")


def conversation_with_partial_reply(text: str) -> tuple[int, int]:
    h = History()
    conv = h.create_conversation("Crashy")
    h.add_message(conv.id, "user", "count to ten")
    reply = h.add_message(conv.id, "assistant", text, complete=False)
    h.close()
    return conv.id, reply.id


def open_plain_window(qtbot: QtBot) -> MainWindow:
    w = MainWindow()
    qtbot.addWidget(w)
    w.show()
    return w


def test_next_start_shows_the_crash_note_once_and_marks_the_reply(
    qtbot: QtBot, data_dir: Path, closing: list[MainWindow]
) -> None:
    conv_id, reply_id = conversation_with_partial_reply("one, two,")
    die_in_reply(data_dir, conv_id, reply_id, signal.SIGILL)
    folder = data_dir / "crashes"
    assert (folder / crash.REPLY_MARKER).exists()
    assert "Fatal Python error: Illegal instruction" in (folder / crash.FAULT_LOG).read_text()

    w = open_plain_window(qtbot)
    closing.append(w)
    assert w.error_banner.isVisible()
    assert w.error_banner.text().startswith(
        "The last reply crashed inside llama.cpp: Fatal Python error: Illegal instruction")
    qtbot.waitUntil(lambda: w.notes.box is not None and w.notes.box.isVisible())
    assert w.notes.box is not None and w.notes.box.text() == w.error_banner.text()
    reply = w.history.message(reply_id)
    assert reply.content == "one, two," and not reply.complete
    assert reply.stats is not None and reply.stats["finish_reason"] == "crashed"
    w.open_conversation(conv_id)
    shown = w.chat_view.toPlainText()
    assert "crashed inside llama.cpp" in shown and "interrupted" not in shown
    assert not (folder / crash.REPLY_MARKER).exists() and not (folder / crash.FAULT_LOG).exists()
    kept = list(folder.glob("native-crash-*.log"))
    assert len(kept) == 1 and str(kept[0]) in w.error_banner.text()
    w.close()
    closing.remove(w)

    again = open_plain_window(qtbot)
    closing.append(again)
    assert again.crash_note is None and not again.error_banner.isVisible()
    qtbot.wait(50)  # the event loop runs: still no crash box
    assert again.notes.box is None
    assert len(list(folder.glob("native-crash-*.log"))) == 1


def test_a_killed_reply_is_noted_as_interrupted_without_a_fault(data_dir: Path) -> None:
    conv_id, reply_id = conversation_with_partial_reply("")
    die_in_reply(data_dir, conv_id, reply_id, signal.SIGKILL)  # no handler runs: no fault log
    note = crash.take_crash_note()
    assert note is not None and note.fault is None and note.message_id == reply_id
    assert note.text == "The last reply was interrupted: ssd-chat ended while it was writing it"
    assert crash.take_crash_note() is None


def test_a_fault_outside_a_reply_is_noted_without_a_reply(data_dir: Path) -> None:
    folder = data_dir / "crashes"
    folder.mkdir(parents=True)
    (folder / crash.FAULT_LOG).write_text("\nFatal Python error: Segmentation fault\n\nCurrent thread ...\n")
    note = crash.take_crash_note()
    assert note is not None and note.message_id is None
    assert note.text.startswith(
        "ssd-chat crashed inside llama.cpp the last time it ran: Fatal Python error: Segmentation fault")
    (folder / crash.FAULT_LOG).write_text("")  # a clean run leaves an empty fault log: nothing to say
    assert crash.take_crash_note() is None


@pytest.mark.parametrize("content", ["not json", '{"conversation_id": 1}'])
def test_an_unreadable_marker_still_gives_a_note(data_dir: Path, content: str) -> None:
    folder = data_dir / "crashes"
    folder.mkdir(parents=True)
    (folder / crash.REPLY_MARKER).write_text(content)
    note = crash.take_crash_note()
    assert note is not None and note.message_id is None and "interrupted" in note.text


def raise_and_hook(exc: BaseException) -> None:
    try:
        raise exc
    except BaseException as caught:
        crash.excepthook(type(caught), caught, caught.__traceback__)


def visible_boxes() -> list[QMessageBox]:
    return [b for b in crash._boxes if isinstance(b, QMessageBox) and b.isVisible()]


@pytest.fixture
def fresh_hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(crash, "_reported", set())
    monkeypatch.setattr(crash, "_logs_written", 0)
    yield
    for box in visible_boxes():
        box.close()


def test_an_error_that_repeats_is_reported_once(qtbot: QtBot, data_dir: Path, fresh_hook: None) -> None:
    for _ in range(30):  # as a timer's slot failing every second would
        raise_and_hook(RuntimeError("the same bug"))
    logs = list((data_dir / "crashes").glob("crash-*.log"))
    assert len(logs) == 1 and "RuntimeError: the same bug" in logs[0].read_text()
    boxes = visible_boxes()
    assert len(boxes) == 1 and str(logs[0]) in boxes[0].text()
    assert boxes[0].windowModality() == Qt.WindowModality.NonModal  # nothing blocks the caller
    for n in range(crash.MAX_CRASH_LOGS + 5):  # different errors: logs stop at the cap
        raise_and_hook(ValueError(f"bug {n}"))
    assert len(list((data_dir / "crashes").glob("crash-*.log"))) == crash.MAX_CRASH_LOGS
    assert "No crash log could be written" in visible_boxes()[-1].text()


def test_a_log_that_cannot_be_written_leaves_no_empty_file(qtbot: QtBot, data_dir: Path, fresh_hook: None) -> None:
    data_dir.mkdir(parents=True)
    (data_dir / "crashes").write_text("a file where the crash folder should be")
    raise_and_hook(RuntimeError("while the folder is unusable"))
    assert sorted(p.name for p in data_dir.iterdir()) == ["crashes"] and (data_dir / "crashes").is_file()
    assert "No crash log could be written" in visible_boxes()[0].text()
    crash.reply_started(1, 2)  # the marker cannot be written either: the reply goes on without it
    raise_and_hook(OSError(errno.ENOSPC, "No space left on device"))
    assert visible_boxes()[-1].windowTitle() == "ssd-chat: the disk is full"
    assert "keeps unsaved replies in memory" in visible_boxes()[-1].text()


def test_a_damaged_history_is_told_at_start(qtbot: QtBot, data_dir: Path, closing: list[MainWindow]) -> None:
    conversation_with_partial_reply("one, two,")
    path = data_dir / "history.sqlite3"
    with path.open("r+b") as f:
        f.write(b"\xff" * 100)  # the header overwritten
    w = open_plain_window(qtbot)
    closing.append(w)
    recovery = w.history.recovery
    assert recovery is not None and recovery.damaged.exists() and path.exists()
    assert w.error_banner.isVisible() and w.error_banner.text() == recovery.text
    assert str(recovery.damaged) in w.error_banner.text()
    qtbot.waitUntil(lambda: w.notes.box is not None and w.notes.box.isVisible())
    assert w.notes.box is not None and w.notes.box.windowTitle() == "ssd-chat: the chat history was damaged"
    assert [w.conversation_list.item(i).text() for i in range(w.conversation_list.count())] == ["Crashy"]
    w.conversation_list.setCurrentRow(0)
    assert "one, two," in w.chat_view.toPlainText()

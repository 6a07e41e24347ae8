"""What the last run left behind, told once when the window opens: a native crash, a damaged history."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QMessageBox, QWidget

from app.chat.reply_session import ReplySession
from app.chat.stats_text import CRASHED
from app.history.store import History
from app.startup import crash


class StartupNotes(QObject):
    """Reads the crash note and the history's recovery note, marks a crashed reply, and tells the user.

    Each note goes to the banner (through ``show``) and, once the window is up, into one non-modal
    box, because the banner is cleared when the model loads.
    """

    def __init__(self, history: History, replies: ReplySession, show: Callable[[str], None],
                 window: QWidget) -> None:
        super().__init__(window)
        self.crash_note = crash.take_crash_note()
        self.box: QMessageBox | None = None
        self._window = window
        texts: list[str] = []
        if self.crash_note is not None:
            mark_crashed(replies, self.crash_note)
            texts.append(self.crash_note.text)
        if history.recovery is not None:
            texts.append(history.recovery.text)
        for text in texts:
            show(text)
        if texts:
            QTimer.singleShot(0, lambda: self._open_box(texts))

    def _open_box(self, texts: list[str]) -> None:
        title = "ssd-chat: the last run crashed" if self.crash_note else "ssd-chat: the chat history was damaged"
        self.box = QMessageBox(QMessageBox.Icon.Warning, title, "\n\n".join(texts), parent=self._window)
        self.box.open()


def mark_crashed(replies: ReplySession, note: crash.CrashNote) -> None:
    """Mark the reply the previous run died in (it stays, cut short, with the reason under it)."""
    if note.message_id is None or note.fault is None:
        return
    try:
        message = replies.history.message(note.message_id)
    except KeyError:
        return
    stats = {**(message.stats or {}), "finish_reason": CRASHED}
    replies.saves.write(message.id, message.content, stats=stats, runs=message.runs, complete=False,
                        reasoning=message.reasoning)

"""Saving replies to the history, and keeping them in memory while the disk is full.

A reply's text is worth more than the database's consistency with it: when a write fails for lack
of space, the reply stays in memory (the view shows it, marked as not yet saved), the user is told
once, and the save is tried again on a timer and before every later write until it goes through.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.history.records import Message, Runs
from app.history.store import DiskFullError, History

log = logging.getLogger(__name__)

RETRY_MS = 5000
DISK_FULL = ("The disk is full, so the reply could not be saved. It is kept in memory and shown in the"
             " chat; ssd-chat saves it as soon as space is freed.")
SAVED = "Space was freed: the reply that was kept in memory is saved now."
NOT_SENT = "The disk is full, so the message could not be saved and was not sent; it is still in the box."
NOT_CHANGED = "The disk is full, so the history could not be changed; free some space and try again."


@dataclass(frozen=True, slots=True)
class PendingReply:
    """The latest text of a reply that is not in the database yet."""

    content: str
    stats: dict[str, Any] | None
    runs: Runs | None
    complete: bool
    reasoning: str = ""


class SaveQueue(QObject):
    """Writes replies through :meth:`History.update_message`; what the disk refuses waits here.

    Signals:
        disk_full(str): a write found the disk full (once, until everything waiting is saved).
        drained(str): everything that waited is saved now.
    """

    disk_full = Signal(str)
    drained = Signal(str)

    def __init__(self, history: History, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.history = history
        self.pending: dict[int, PendingReply] = {}
        self._told = False
        self._retry = QTimer(self)
        self._retry.setObjectName("save-retry")
        self._retry.setInterval(RETRY_MS)
        self._retry.timeout.connect(self.flush)

    def write(self, message_id: int, content: str, *, stats: dict[str, Any] | None, runs: Runs | None,
              complete: bool, reasoning: str = "") -> bool:
        """Save a reply's text (and its thinking) now if the disk allows, else keep it; True when it is in the
        database."""
        self.pending[message_id] = PendingReply(content, stats, runs, complete, reasoning)
        return self.flush() and message_id not in self.pending

    def flush(self) -> bool:
        """Try to save everything waiting; True when nothing waits any more."""
        for message_id, reply in list(self.pending.items()):
            try:
                self.history.update_message(message_id, reply.content, stats=reply.stats, runs=reply.runs,
                                            complete=reply.complete, reasoning=reply.reasoning)
            except DiskFullError as exc:
                log.warning("reply %d kept in memory: %s", message_id, exc)
                self._retry.start()
                if not self._told:
                    self._told = True
                    self.disk_full.emit(DISK_FULL)
                return False
            del self.pending[message_id]
        self._retry.stop()
        if self._told:
            self._told = False
            self.drained.emit(SAVED)
        return True

    def close(self) -> None:
        """Stop retrying (the history is closing); what still waits is lost, and logged as such."""
        self._retry.stop()
        if self.pending:
            log.error("the disk is full: %d replies could not be saved before closing", len(self.pending))

    def forget(self, message_id: int) -> None:
        """Drop whatever waits for a message that is being deleted."""
        self.pending.pop(message_id, None)
        if not self.pending:
            self._retry.stop()
            self._told = False

    def overlay(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` with the text that waits in memory in place of what the database has."""
        out = []
        for m in messages:
            reply = self.pending.get(m.id)
            out.append(m if reply is None else replace(m, content=reply.content, stats=reply.stats,
                                                      runs=reply.runs, complete=reply.complete, unsaved=True,
                                                      reasoning=reply.reasoning))
        return out

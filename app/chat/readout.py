"""The readout under the conversation: the shown conversation's reply, live while it streams, else its last one."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtWidgets import QLabel

from app.chat.stats_text import message_status, stats_html
from app.history.store import Message

NO_REPLY = "No reply yet"


class Readout:
    """Writes the readout label; it describes the conversation on screen and nothing else.

    While that conversation's reply streams it shows the engine's live stats; otherwise the stats of
    its last reply as saved (so a restart or a switch shows what that reply did), or :data:`NO_REPLY`.
    """

    def __init__(self, label: QLabel) -> None:
        self.label = label

    def show_waiting(self, mode: str) -> None:
        """A reply was requested; nothing has come back yet."""
        self.label.setText(f"<b>{html.escape(mode)}</b> · waiting for the first token…")

    def show_live(self, stats: Mapping[str, Any]) -> None:
        """The engine's running stats for the reply on screen."""
        self.label.setText(stats_html(stats))

    def show_messages(self, messages: Sequence[Message]) -> None:
        """The last reply among ``messages`` (saved or kept in memory), or :data:`NO_REPLY`."""
        last = next((m for m in reversed(messages) if m.role == "assistant"), None)
        if last is None:
            self.label.setText(NO_REPLY)
        elif last.stats:
            self.label.setText(stats_html(last.stats) + _status_tail(last))
        else:
            self.label.setText(html.escape(message_status(None, complete=last.complete, unsaved=last.unsaved))
                               or NO_REPLY)


def _status_tail(m: Message) -> str:
    """What the stats line leaves out of a reply's state: cut short, not yet saved."""
    extra = message_status(None, complete=m.complete, unsaved=m.unsaved)
    return f" · {html.escape(extra)}" if extra else ""

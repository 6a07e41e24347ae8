"""The reply lifecycle between the engine host and the history: send, stream, partial saves, stop,
regenerate, edit, errors, and the crash marker that lets the next start say a reply died in llama.cpp."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from engine import GenerationParams

from . import crash
from .chat_pane import ChatPane
from .engine_host import EngineHost
from .engine_worker import FinishedReply
from .history import History
from .stats_text import CRASHED, stats_html, stats_text

log = logging.getLogger(__name__)

SAVE_INTERVAL_MS = 1000
NEW_TITLE = "New chat"

# Generation parameters for a reply; the argument varies the seed so that Regenerate differs.
ParamsFor = Callable[[int], GenerationParams]


class ReplySession(QObject):
    """Runs one reply at a time in a conversation and keeps the history in step with what is shown.

    The reply is a placeholder message (``complete=False``) from its start; what the view has shown
    is saved every second, when it fails and when the app closes, and the engine's final text and
    stats replace it when it ends.

    Signals:
        reply_saved(int): a reply was saved as finished (payload: its message id).
        history_changed(): messages were added, replaced or removed.
    """

    reply_saved = Signal(int)
    history_changed = Signal()

    def __init__(self, host: EngineHost, history: History, pane: ChatPane, params_for: ParamsFor,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.history = history
        self.pane = pane
        self.params_for = params_for
        self.reply_id: int | None = None
        self.conversation_id: int | None = None
        self.editing_id: int | None = None
        self._last_stats: dict[str, Any] | None = None
        self._save_pending = False
        self._regenerations = 0
        self._save_timer = QTimer(self)
        self._save_timer.setObjectName("partial-reply-save")
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(self._on_save_timeout)
        host.token_generated.connect(self._on_token_generated)
        host.stats_changed.connect(self._on_stats_changed)
        host.generation_finished.connect(self._on_generation_finished)
        host.failed.connect(self._on_failed)

    # -- what the user does -----------------------------------------------------------------------
    def send(self, conversation_id: int, text: str) -> None:
        """Add ``text`` as a user message (replacing the message being edited and all after it), then reply."""
        if self.editing_id is not None:
            self.history.delete_from(conversation_id, self.editing_id)
            self.cancel_edit()
        if self.history.conversation(conversation_id).title == NEW_TITLE:
            self.history.rename(conversation_id, text.splitlines()[0][:60])
        self.history.add_message(conversation_id, "user", text)
        self._start(conversation_id)

    def regenerate(self, conversation_id: int) -> None:
        """Replace the conversation's last reply with a new one (another seed)."""
        messages = self.history.messages(conversation_id)
        if not messages or messages[-1].role != "assistant":
            return
        self.history.delete_from(conversation_id, messages[-1].id)
        self._regenerations += 1
        self._start(conversation_id)

    def stop(self) -> None:
        """Stop the reply within one round (a direct call that sets the worker's Event)."""
        self.host.request_stop()

    def begin_edit(self, message_id: int) -> None:
        """Put an earlier user message into the input box; sending replaces it and what follows."""
        if self.reply_id is not None:
            return
        self.editing_id = message_id
        self.pane.prompt_edit.setPlainText(self.history.message(message_id).content)
        self.pane.edit_note.setText("Editing an earlier message: sending replaces it and everything after it"
                                    " (Esc cancels).")
        self.pane.edit_note.show()
        self.pane.prompt_edit.setFocus()

    def cancel_edit(self) -> None:
        """Leave editing mode (the input box is cleared)."""
        if self.editing_id is not None:
            self.editing_id = None
            self.pane.prompt_edit.clear()
        self.pane.edit_note.hide()

    def shutdown(self) -> None:
        """Save what was shown of a reply in flight; the app is closing."""
        if self.reply_id is not None:
            self._save_partial("app closed")
            crash.reply_ended()
        self._save_timer.stop()

    def mark_crashed(self, note: crash.CrashNote) -> None:
        """Mark the reply the previous run died in (it stays, cut short, with the reason under it)."""
        if note.message_id is None or note.fault is None:
            return
        try:
            message = self.history.message(note.message_id)
        except KeyError:
            return
        stats = {**(message.stats or {}), "finish_reason": CRASHED}
        self.history.update_message(message.id, message.content, stats=stats, runs=message.runs, complete=False)

    # -- the reply in flight ----------------------------------------------------------------------
    def _start(self, conversation_id: int) -> None:
        conv = self.history.conversation(conversation_id)
        system = conv.system_prompt.strip()
        chat = [("system", system)] if system else []
        chat += [(m.role, m.content) for m in self.history.messages(conversation_id)]
        params = self.params_for(self._regenerations)
        placeholder = self.history.add_message(conversation_id, "assistant", "", complete=False)
        crash.reply_started(conversation_id, placeholder.id)
        self.conversation_id = conversation_id
        self.reply_id = placeholder.id
        self._last_stats = None
        self.history_changed.emit()
        self.pane.chat_view.begin_stream()
        self.pane.readout.setText(f"<b>{params.mode}</b> · waiting for the first token…")
        self._save_timer.start()
        self.host.generate(chat, params)

    def _save_partial(self, reason: str) -> None:
        """Save what the view has shown of the streaming reply (complete=False)."""
        text = self.pane.chat_view.live_text()
        if self.reply_id is None or text is None:
            return
        stats = {**self._last_stats, "finish_reason": reason} if self._last_stats is not None else None
        self.history.update_message(self.reply_id, text, stats=stats, runs=self.pane.chat_view.live_runs(),
                                    complete=False)
        self._save_pending = False

    def _end(self) -> None:
        crash.reply_ended()
        self._save_timer.stop()
        self.reply_id = None
        self.pane.chat_view.end_stream()
        self.history_changed.emit()

    def _on_token_generated(self, text: str, from_draft: bool) -> None:
        self.pane.chat_view.append_token(text, from_draft)
        self._save_pending = True

    def _on_stats_changed(self, stats: dict[str, Any]) -> None:
        if self.reply_id is None:
            return
        self._last_stats = stats
        self.pane.readout.setText(stats_html(stats))
        self.pane.chat_view.set_live_status(stats_text(stats))

    def _on_generation_finished(self, reply: FinishedReply) -> None:
        if self.reply_id is None:
            return
        reply_id = self.reply_id
        self.history.update_message(reply_id, reply.text, stats=reply.stats, runs=list(reply.runs))
        self._end()
        self.reply_saved.emit(reply_id)

    def _on_failed(self, _message: str) -> None:
        if self.reply_id is None or self.conversation_id is None:
            return
        if self.pane.chat_view.live_text():
            self._save_partial("error")
        else:
            self.history.delete_from(self.conversation_id, self.reply_id)
        self._end()

    def _on_save_timeout(self) -> None:
        if self._save_pending:
            self._save_partial("streaming")

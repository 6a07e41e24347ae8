"""The reply lifecycle between the engine host and the history: send, stream, partial saves, stop,
regenerate (kept as versions), edit, errors, the conversation on screen while a reply streams
elsewhere, and the crash marker that lets the next start say a reply died in llama.cpp."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.chat.conversations import short_title
from app.chat.editing import Editing
from app.chat.live_reply import LiveReply
from app.chat.pane import ChatPane
from app.chat.readout import Readout
from app.chat.stats_text import stats_text
from app.history.records import Message
from app.history.save_queue import DISK_FULL, NOT_CHANGED, NOT_SENT, SaveQueue
from app.history.store import DiskFullError, History
from app.history.tool_rows import rewind_tool_rounds
from app.startup import crash
from app.worker.chat_setup import ChatChoice, Turn
from app.worker.engine_worker import FinishedReply
from app.worker.host import EngineHost
from app.worker.restart_banner import RestartBanner
from engine import ENGINE_STOPPED, GenerationParams

log = logging.getLogger(__name__)

SAVE_INTERVAL_MS = 1000
NEW_TITLE = "New chat"

# Generation parameters for a reply; the argument varies the seed so that Regenerate differs.
ParamsFor = Callable[[int], GenerationParams]


class ReplySession(QObject):
    """Runs one reply at a time and keeps the history in step with what is shown.

    The reply is a placeholder message (``complete=False``) from its start; what the view has shown
    is saved every second, when it fails and when the app closes, and the engine's final text and
    stats replace it when it ends. Regenerate keeps the earlier text as another version of the reply.
    The reply streams into its own conversation while the user looks at another one; the readout
    always describes the conversation on screen. Writes go through a :class:`SaveQueue`, so a full
    disk keeps the reply in memory instead of losing it.

    Signals:
        reply_saved(int): a reply finished and was saved (or is kept in memory until the disk has room).
        history_changed(): messages were added, replaced or removed.
        problem(str): something the user should read (the disk is full…).
    """

    reply_saved = Signal(int)
    history_changed = Signal()
    problem = Signal(str)
    last_calls: tuple[Any, ...] = ()  # the tool calls of the reply saved last (ToolCall; app.chat.tool_turns runs them)

    def __init__(self, host: EngineHost, history: History, pane: ChatPane, params_for: ParamsFor,
                 overflow_for: Callable[[], str], parent: QObject | None = None,
                 chat_for: Callable[[], ChatChoice] = ChatChoice) -> None:
        super().__init__(parent)
        self.chat_for = chat_for  # the thinking switch, and the template picked for the loaded model
        self.host = host
        self.history = history
        self.pane = pane
        self.params_for = params_for
        self.overflow_for = overflow_for
        self.readout = Readout(pane.readout)
        self.saves = SaveQueue(history, self)
        self.saves.disk_full.connect(self.problem)
        self.saves.drained.connect(self._on_saves_drained)
        self.live = LiveReply(pane, self.saves)
        self.reply_id: int | None = None
        self.conversation_id: int | None = None  # the conversation the reply streams into
        self.shown_id: int | None = None  # the conversation on screen
        self.editing = Editing(pane)
        self._request_id = 0
        self._regenerating = False
        self.stopping = False  # Stop was clicked and the reply has not ended yet
        self._regenerations = 0
        self._save_timer = QTimer(self)
        self._save_timer.setObjectName("partial-reply-save")
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(self._on_save_timeout)
        host.context_fitted.connect(self._on_context_fitted)
        host.token_generated.connect(self.live.token)
        host.thinking_generated.connect(self.live.thinking)
        host.stats_changed.connect(self._on_stats_changed)
        host.generation_finished.connect(self._on_generation_finished)
        host.failed.connect(self._on_failed)
        self.restart_banner = RestartBanner(host, pane)

    # -- what is on screen ------------------------------------------------------------------------
    def show(self, conversation_id: int | None) -> None:
        """Show a conversation and its readout; a reply streaming into another one goes on unseen."""
        self.shown_id = conversation_id
        messages = self.messages(conversation_id)
        view = self.pane.chat_view
        view.set_messages([m for m in messages if m.id != self.reply_id])
        view.set_live_visible(self._streaming_shown())
        if not self._streaming_shown():
            self.readout.show_messages(messages)
        elif self.live.last_stats is not None:
            self.readout.show_live(self.live.with_fit(self.live.last_stats), stopping=self.stopping)
        else:
            self.readout.show_waiting(self.live.mode)

    def messages(self, conversation_id: int | None) -> list[Message]:
        """A conversation's messages as the user should see them (text waiting for disk space included)."""
        return self.saves.overlay(self.history.messages(conversation_id)) if conversation_id is not None else []

    # -- what the user does -----------------------------------------------------------------------
    def send(self, conversation_id: int, text: str) -> bool:
        """Add ``text`` as a user message (replacing the message being edited and all after it), then reply.

        False when the disk is full: nothing was sent and the user has been told.
        """
        self.saves.flush()  # a reply kept in memory goes first, if there is room now
        try:
            if self.editing.message_id is not None:
                self.history.delete_from(conversation_id, self.editing.message_id)
            if self.history.conversation(conversation_id).title == NEW_TITLE:
                self.history.rename(conversation_id, short_title(text))
            placeholder = self.history.add_turn(conversation_id, text)
        except DiskFullError as exc:
            log.warning("not sent: %s", exc)
            self.problem.emit(NOT_SENT)
            return False
        self.cancel_edit()
        self._start(conversation_id, placeholder.id)
        return True

    def regenerate(self, conversation_id: int) -> None:
        """Write a new version of the conversation's last reply (another seed), from before any tool calls that led to
        it (:func:`rewind_tool_rounds`); the earlier ones are kept."""
        messages = self.history.messages(conversation_id)
        if not messages or messages[-1].role != "assistant":
            return
        try:
            self._flush_or_raise()
            reply_id = rewind_tool_rounds(self.history, conversation_id)
            self.history.begin_version(reply_id)
        except DiskFullError:
            self.problem.emit(NOT_CHANGED)
            return
        self._regenerations += 1
        self._regenerating = True
        self._start(conversation_id, reply_id)

    def switch_version(self, message_id: int, step: int) -> None:
        """Show another version of a reply (``step`` -1: the one before, 1: the one after)."""
        if message_id == self.reply_id:
            return
        try:
            self._flush_or_raise()
            changed = self.history.show_version(message_id, step)
        except DiskFullError:
            self.problem.emit(NOT_CHANGED)
            return
        if changed:
            self.pane.chat_view.pin_header(message_id)  # the switcher stays under the pointer
            self.history_changed.emit()

    def discard(self, conversation_id: int) -> None:
        """The conversation is about to be deleted: stop its reply first; nothing more is saved for it."""
        for m in self.history.messages(conversation_id):
            self.saves.forget(m.id)
        if self.reply_id is not None and self.conversation_id == conversation_id:
            self.host.request_stop()
            self._end(notify=False)

    def stop(self) -> None:
        """Stop the reply within one round (a direct call that sets the worker's Event); say so at once."""
        self.host.request_stop()
        if self.reply_id is not None:
            self.stopping = True
            if self._streaming_shown():
                self.readout.show_stopping()

    def begin_edit(self, message_id: int) -> None:
        """Put an earlier user message into the input box; sending replaces it and what follows."""
        if self.reply_id is None:
            self.editing.begin(message_id, self.history.message(message_id).content)

    def cancel_edit(self) -> None:
        """Leave editing mode (the input box is cleared)."""
        self.editing.cancel()

    def shutdown(self) -> None:
        """Save what was shown of a reply in flight; the app is closing."""
        if self.reply_id is not None:
            self.live.save(self.reply_id, "app closed")
            crash.reply_ended()
        self._save_timer.stop()
        self.saves.flush()
        self.saves.close()

    def answer(self, conversation_id: int | None) -> bool:
        """Reply to the conversation's last message where it is the user's and unanswered (a reply refused for want
        of a chat template, once one is picked) or a tool's result; whether a reply started."""
        messages = self.history.messages(conversation_id) if conversation_id is not None else []
        if (self.reply_id is not None or conversation_id is None or not messages
                or messages[-1].role not in ("user", "tool")):
            return False
        try:
            placeholder = self.history.add_message(conversation_id, "assistant", "", complete=False)
        except DiskFullError:
            self.problem.emit(NOT_SENT)
            return False
        self._start(conversation_id, placeholder.id)
        return True

    # -- the reply in flight ----------------------------------------------------------------------
    def _start(self, conversation_id: int, reply_id: int) -> None:
        system = self.history.conversation(conversation_id).system_prompt.strip()
        chat: list[Turn] = [("system", system)] if system else []
        chat += [m.turn() for m in self.messages(conversation_id) if m.id != reply_id]
        params = self.params_for(self._regenerations)
        crash.reply_started(conversation_id, reply_id)
        self.conversation_id, self.reply_id, self.stopping = conversation_id, reply_id, False
        self.live.begin(params.mode)
        self.history_changed.emit()
        self._save_timer.start()
        self._request_id = self.host.generate(chat, params, self.overflow_for(), self.chat_for())

    def _streaming_shown(self) -> bool:
        return self.reply_id is not None and self.shown_id == self.conversation_id

    def _flush_or_raise(self) -> None:
        if not self.saves.flush():
            raise DiskFullError("replies are waiting to be saved")

    def _end(self, *, notify: bool = True) -> None:
        crash.reply_ended()
        self._save_timer.stop()
        self.reply_id = None
        self._regenerating = False
        self.stopping = False
        self.pane.chat_view.end_stream()
        if notify:
            self.history_changed.emit()

    def _on_context_fitted(self, request_id: int, dropped: int) -> None:
        if self.reply_id is not None and request_id == self._request_id:
            self.live.dropped = dropped

    def _on_stats_changed(self, stats: dict[str, Any]) -> None:
        if self.reply_id is None:
            return
        self.live.last_stats = stats
        if self._streaming_shown():  # the stats come with every token's text: both follow it
            self.readout.show_live(self.live.with_fit(stats), stopping=self.stopping)
        self.pane.chat_view.set_live_status(stats_text(self.live.with_fit(stats)))  # painted with the text it counts

    def _on_generation_finished(self, reply: FinishedReply) -> None:
        if self.reply_id is None or reply.request_id != self._request_id:
            return
        reply_id, self.last_calls = self.reply_id, reply.calls
        self.saves.write(reply_id, reply.text, stats=self.live.with_fit(reply.stats), runs=list(reply.runs),
                         complete=True, reasoning=reply.reasoning)
        self._end()
        self.reply_saved.emit(reply_id)

    def _on_failed(self, message: str) -> None:
        if self.reply_id is None or self.conversation_id is None:
            return
        try:
            if self.pane.chat_view.live_text() or self.pane.chat_view.live_thinking()[0]:  # cut off where it was
                if ENGINE_STOPPED in message:
                    live = self.live
                    live.last_stats = live.last_stats or {"mode": live.mode}  # died before its first stats
                    live.save(self.reply_id, message[message.find(ENGINE_STOPPED):])
                else:
                    self.live.save(self.reply_id, "error")
            elif self._regenerating:
                self.history.drop_version(self.reply_id)  # the earlier version shows again
            else:
                self.history.delete_from(self.conversation_id, self.reply_id)
        except DiskFullError as exc:  # the empty placeholder stays, marked interrupted
            log.warning("could not remove the failed reply: %s", exc)
        self._end()

    def _on_save_timeout(self) -> None:
        if self.live.pending:
            self.live.save(self.reply_id, "streaming")

    def _on_saves_drained(self, message: str) -> None:
        log.info("%s", message)
        if self.pane.error_banner.text() in (DISK_FULL, NOT_SENT, NOT_CHANGED):
            self.pane.error_banner.hide()
        self.history_changed.emit()

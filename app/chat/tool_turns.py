"""A reply's tool calls, run with the user's consent: each waits on its card until Allow once, Always allow for
this tool, or Deny (nothing runs unasked, unless the user always allows that tool); each result goes back to the
model as a ``tool`` message, and once every call of the reply has one the model continues, for at most
:data:`MAX_TOOL_ROUNDS` rounds. A call the model already made since the user's message (same tool, same arguments)
is not run again: it gets the earlier result, and when every call of a reply is such a repeat the model is asked
without tools, so that it answers in text. Stop ends a running call and the calls still waiting."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenuBar, QPushButton

from app.chat.reply_session import ReplySession
from app.chat.tool_cards import DENIED, ERROR_PREFIX, PENDING, RUNNING
from app.chat.view import ChatView
from app.history.store import DiskFullError, History
from app.history.tool_rows import add_tool_result, set_tool_calls
from app.settings.tools_page import add_tools_menu
from app.tools.results import ToolOutcome
from app.tools.toolbox import STOPPED, ToolBox
from app.worker.chat_setup import ChatChoice, ToolCall
from app.worker.host import EngineHost

MAX_TOOL_ROUNDS = 8  # tool rounds in a row; then the model is asked without tools, so that it answers in text
CAPPED = f"The model called tools {MAX_TOOL_ROUNDS} times in a row; it was asked to answer without them."


@dataclass(slots=True)
class _Call:
    conversation_id: int
    name: str
    arguments: str
    done: bool = False


class ToolWindow(Protocol):
    """What of the main window the tool turns use."""

    history: History
    replies: ReplySession
    chat_view: ChatView
    host: EngineHost
    stop_button: QPushButton
    settings_action: QAction

    def show_error(self, message: str) -> None: ...
    def installEventFilter(self, watcher: QObject, /) -> None: ...
    def menuBar(self) -> QMenuBar: ...


class ToolTurns(QObject):
    """Between a reply's calls and the next round.

    Signals:
        call_saved(int): a call's result was saved (payload: the tool message's id).
    """

    call_saved = Signal(int)

    def __init__(self, window: ToolWindow, toolbox: ToolBox) -> None:
        super().__init__()  # the window keeps it
        self.window = window
        self.toolbox = toolbox
        self.view = window.chat_view
        self.calls: dict[str, _Call] = {}
        self.rounds = 0
        self._continuing = False
        self._stopped = False
        self._answered: dict[tuple[str, str], str] = {}  # (tool, arguments) -> its result, since the user's message
        self._repeating = False  # every call of the last reply was a repeat: the next round offers no tools
        base = window.replies.chat_for
        window.replies.chat_for = lambda: self.choice(base())
        window.replies.reply_saved.connect(self._on_reply_saved)
        window.host.state_changed.connect(self._on_state_changed)  # after the window's own: runs after it
        window.replies.history_changed.connect(self._on_state_changed)
        window.stop_button.clicked.connect(self.stop)
        self.view.tool_action_requested.connect(self.act)
        toolbox.call_finished.connect(self._on_call_finished)
        toolbox.problem.connect(window.show_error)

    def choice(self, base: ChatChoice) -> ChatChoice:
        """The chat's choice with the tools offered (none past the cap); a reply the user asked for starts the
        count again and ends calls still waiting."""
        if not self._continuing:
            self.rounds, self._stopped = 0, False
            self._answered.clear()
            self._end_waiting(None)
        self._continuing = False
        repeating, self._repeating = self._repeating, False
        if not self.toolbox.enabled() or repeating:
            return base
        if self.rounds >= MAX_TOOL_ROUNDS:
            self.window.show_error(CAPPED)
            return base
        return replace(base, tools=self.toolbox)

    def act(self, action: str, call_id: str) -> None:
        """The user's answer on a card: ``allow``, ``always`` (this tool from now on) or ``deny``."""
        call = self.calls.get(call_id)
        if call is None or self.view.tools.state.get(call_id) != PENDING:
            return
        if action == "deny":
            self._finish(call_id, ToolOutcome(DENIED))
            return
        if action == "always":
            self.toolbox.allow_always(call.name)
        self._run(call_id)

    def stop(self) -> None:
        """Stop: a running call ends, and calls still waiting are not run; the model does not continue."""
        if any(not c.done for c in self.calls.values()):
            self._stopped = True
            self.toolbox.stop_calls()
            self._end_waiting(STOPPED)

    # -- helpers ----------------------------------------------------------------------------------
    def _on_reply_saved(self, reply_id: int) -> None:
        calls, self.window.replies.last_calls = self.window.replies.last_calls, ()
        if calls:
            self.offer(reply_id, calls)

    def offer(self, reply_id: int, calls: Sequence[ToolCall]) -> None:
        """A saved reply's calls: recorded with it, each on a card waiting for the user (or run, if always allowed)."""
        m = self.window.history.message(reply_id)
        records: list[dict[str, Any]] = [{"id": c.id, "type": "function",
                                          "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
        try:
            set_tool_calls(self.window.history, reply_id, records)
        except DiskFullError as exc:
            self.window.show_error(f"The tool calls could not be saved: {exc}")
            return
        for c in calls:
            self.calls[c.id] = _Call(m.conversation_id, c.name, c.arguments)
            self.view.tools.state[c.id] = PENDING
        earlier = {c.id: text for c in calls if (text := self._answered.get(_key(c.name, c.arguments))) is not None}
        self._repeating = len(earlier) == len(calls)
        for c in calls:
            if c.id not in earlier and self.toolbox.always_allowed(c.name):
                self._run(c.id)
        self.window.replies.history_changed.emit()
        if earlier:  # after the reply's save has reached every listener
            QTimer.singleShot(0, lambda: self._repeat(earlier))

    def _repeat(self, earlier: dict[str, str]) -> None:
        """Repeated calls get their earlier results as they were (a line saying so, the real 1.5B echoed instead of
        answering); nothing is run again."""
        for call_id, text in earlier.items():
            if call_id in self.calls and not self.calls[call_id].done:
                self._finish(call_id, ToolOutcome(text))

    def _run(self, call_id: str) -> None:
        call = self.calls[call_id]
        self.view.tools.state[call_id] = RUNNING
        self.toolbox.run(call_id, call.name, call.arguments)
        self.window.replies.history_changed.emit()

    def _on_call_finished(self, call_id: str, outcome: ToolOutcome) -> None:
        if call_id in self.calls and not self.calls[call_id].done:
            if outcome.error and outcome.text != STOPPED:
                self.window.show_error(outcome.text)
            self._finish(call_id, outcome)

    def _finish(self, call_id: str, outcome: ToolOutcome) -> None:
        call = self.calls[call_id]
        call.done = True
        self.view.tools.state.pop(call_id, None)
        text = ERROR_PREFIX + outcome.text if outcome.error and outcome.text not in (STOPPED, DENIED) else outcome.text
        try:
            saved = add_tool_result(self.window.history, call.conversation_id, call_id, text)
        except DiskFullError as exc:
            self.window.show_error(f"The tool's result could not be saved: {exc}")
            return
        self.call_saved.emit(saved.id)
        if outcome.text != STOPPED:
            self._answered.setdefault(_key(call.name, call.arguments), text)  # the first result stays the one
        waiting = [c for c in self.calls.values() if c.conversation_id == call.conversation_id and not c.done]
        self.window.replies.history_changed.emit()
        if not waiting and not self._stopped:
            self.calls = {k: c for k, c in self.calls.items() if not c.done}
            self.rounds += 1
            self._continuing = True
            if not self.window.replies.answer(call.conversation_id):
                self._continuing = False

    def _end_waiting(self, result: str | None) -> None:
        """Calls still waiting end: with ``result`` saved (Stop), or forgotten with any running call stopped (None: a
        new message was sent or a reply regenerated, which asks the model again from before them)."""
        ending = (PENDING,) if result is not None else (PENDING, RUNNING)
        if result is None:
            self.toolbox.stop_calls()  # the stopped calls' results find no call waiting for them: dropped
        for call_id, call in list(self.calls.items()):
            if not call.done and self.view.tools.state.get(call_id) in ending:
                if result is None:
                    call.done = True
                    self.view.tools.state.pop(call_id, None)
                else:
                    self._finish(call_id, ToolOutcome(result))
        if result is None:
            self.calls = {k: c for k, c in self.calls.items() if not c.done}

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """The window closes (this filter watches it alone): its tool servers stop."""
        if event.type() == QEvent.Type.Close:
            self.toolbox.close()
        return False

    def _on_state_changed(self, _state: object = None) -> None:
        if self.toolbox.running():
            self.window.stop_button.setEnabled(True)


def _key(name: str, arguments: str) -> tuple[str, str]:
    """A call as compared with earlier ones: its tool and its arguments with the keys in order, or as written."""
    try:
        return name, json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return name, arguments


def add_tools(window: ToolWindow) -> ToolTurns:
    """Tools in ``window``'s chats: the servers (stopped when it closes), the cards, Settings > Tools."""
    toolbox = ToolBox()
    turns = ToolTurns(window, toolbox)
    toolbox.setParent(turns)
    window.installEventFilter(turns)
    add_tools_menu(window.menuBar(), window.settings_action, toolbox)
    return turns

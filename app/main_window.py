"""The main window: conversation list, chat view, input, live readout, menus; no decoding logic."""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import QMainWindow, QSplitter

from app.chat.conversations import ConversationPanel, ask_export_path, export_texts
from app.chat.pane import ChatPane, StatusLine
from app.chat.readout import STOPPING
from app.chat.reply_session import ReplySession
from app.chat.template_offer import ChatFormats
from app.chat.tool_turns import add_tools
from app.exactness.dialog import ExactnessCheck
from app.history.records import Message
from app.history.store import History
from app.models.pair_loader import PairLoader
from app.server.menu import add_server_panel
from app.settings.dialog import SettingsDialog
from app.settings.remote_apply import add_remote_apply
from app.settings.store import SettingsStore
from app.settings.values import Settings, effective_mode, load_fields
from app.startup.notes import StartupNotes
from app.startup.restore import SessionRestore
from app.worker.engine_worker import EngineState
from app.worker.host import EngineHost
from engine import GenerationParams

from .narrow import never_widen

log = logging.getLogger(__name__)


class MainWindow(QMainWindow):
    """The chat window. All engine work goes through an :class:`EngineHost` (a worker on a QThread).

    Signals:
        reply_saved(int): a reply was saved as finished (payload: message id).
        error_shown(str): a readable error was shown in the banner.
    """

    reply_saved = Signal(int)
    error_shown = Signal(str)

    def __init__(self, store: SettingsStore | None = None, history: History | None = None) -> None:
        super().__init__()
        self.setWindowTitle("ssd-chat")
        self.store = store or SettingsStore()
        self.history = history or History()
        self.settings: Settings = self.store.load()
        self.state = EngineState.IDLE
        self.conversation_id: int | None = None
        self._closed = False

        self.host = EngineHost(self)
        self.host.state_changed.connect(self._on_state_changed)
        self.host.generation_started.connect(lambda _request_id: self.error_banner.hide())
        self.host.failed.connect(self.show_error)
        self._build_ui()
        self.formats = ChatFormats(self.host, self.store, lambda: self.pairs.pair, lambda: self.settings,
                                   self.pane.template_offer, self)  # a model without a chat template
        self.replies = ReplySession(self.host, self.history, self.pane, self._generation_params,
                                    lambda: self.settings.context_overflow, self, self.formats.choice)
        self.formats.chosen.connect(lambda: self.replies.answer(self.conversation_id))
        self.replies.reply_saved.connect(self.reply_saved)
        self.replies.history_changed.connect(self._on_history_changed)
        self.replies.problem.connect(self.show_error)
        self.chat_view.version_requested.connect(self.replies.switch_version)
        self.chat_view.edit_requested.connect(self.replies.begin_edit)
        self.prompt_edit.cancelled.connect(self.replies.cancel_edit)
        self.exactness = ExactnessCheck(self.host, self.readout, self)
        self.pairs = PairLoader(self.host, self.store, lambda: self.settings, self.model_label, self)
        self.pairs.error.connect(self.show_error)
        self.remote_apply = add_remote_apply(self)  # new remote machines are asked before the pair is let go
        self.host.model_loaded.connect(self.error_banner.hide)
        self._build_menus()
        self.server_panel = add_server_panel(self, self.host, self.store, lambda: self._generation_params(0))
        self.tools = add_tools(self)  # MCP servers, the cards of their calls, Settings > Tools
        self.refresh_conversations()
        self._apply_state()
        self.notes = StartupNotes(self.history, self.replies, self.show_error, self)  # crash, damaged history
        self.crash_note = self.notes.crash_note
        self.session = SessionRestore(self)  # the geometry, the conversation and the server switch as they were

    # -- construction -----------------------------------------------------------------------------
    def _build_ui(self) -> None:
        self.panel = ConversationPanel()
        self.panel.selected.connect(self.open_conversation)
        self.panel.new_requested.connect(lambda: self.new_conversation())
        self.panel.rename_requested.connect(self.rename_conversation)
        self.panel.delete_requested.connect(self.delete_conversation)
        self.panel.search_changed.connect(self.refresh_conversations)
        self.conversation_list = self.panel.list
        self.search_edit = self.panel.search_edit
        self.pane = p = ChatPane()
        self.system_edit, self.error_banner, self.chat_view = p.system_edit, p.error_banner, p.chat_view
        self.readout, self.edit_note, self.prompt_edit = p.readout, p.edit_note, p.prompt_edit
        self.send_button, self.stop_button, self.regen_button = p.send_button, p.stop_button, p.regen_button
        p.system_edit.editingFinished.connect(self._on_system_edited)
        p.chat_view.regenerate_requested.connect(self.regenerate)
        p.prompt_edit.submitted.connect(self.send)
        p.send_button.clicked.connect(self.send)
        p.stop_button.clicked.connect(self.stop)
        p.regen_button.clicked.connect(self.regenerate)

        self.splitter = QSplitter()
        self.splitter.addWidget(self.panel)
        self.splitter.addWidget(p)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([260, 1000])
        self.setCentralWidget(self.splitter)

        status = StatusLine(self.statusBar(), self.state.value)
        self.model_label, self.state_label = status.model_label, status.state_label
        self.progress, self.tint_button = status.progress, status.tint_button
        self.tint_button.setChecked(self.settings.tint_drafts)
        self.tint_button.toggled.connect(self.set_tint)
        self.chat_view.set_tint(self.settings.tint_drafts)
        never_widen(self.error_banner, self.edit_note)  # no message widens the window
        never_widen(self.model_label, max_lines=1)

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.new_action = self._action(file_menu, "&New chat", lambda: self.new_conversation(),
                                       QKeySequence.StandardKey.New)
        self.export_md_action = self._action(file_menu, "Export as &Markdown…", lambda: self._export(".md"))
        self.export_json_action = self._action(file_menu, "Export as &JSON…", lambda: self._export(".json"))
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        model_menu = self.menuBar().addMenu("&Model")
        self.manager_action = self._action(model_menu, "Model &manager…", self.pairs.open_manager)
        self.verify_action = self._action(model_menu, "&Verify exactness", self.verify_exactness)
        self.settings_action = self._action(self.menuBar().addMenu("&Settings"), "&Settings…",
                                            lambda: self.open_settings(), QKeySequence.StandardKey.Preferences)
        view_menu = self.menuBar().addMenu("&View")
        self.tint_action = view_menu.addAction("&Tint tokens from accepted drafts")
        self.tint_action.setCheckable(True)
        self.tint_action.setChecked(self.settings.tint_drafts)
        self.tint_action.toggled.connect(self.set_tint)

    def _action(self, menu: Any, text: str, slot: Any, shortcut: Any = None) -> QAction:
        action: QAction = menu.addAction(text)
        action.triggered.connect(slot)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        return action

    # -- models and settings ----------------------------------------------------------------------
    def open_settings(self, shown: Settings | None = None) -> None:
        """Show the settings dialog (``shown``: values not applied yet); load-time changes reload the model."""
        dialog = SettingsDialog(shown or self.settings, self, rates=self.pairs.measured_rates(),
                                thinking_switch=self.formats.thinking_switch(), cache=self.pairs.cache_use)
        dialog.accepted.connect(lambda: self.apply_settings(dialog.settings(), reload=dialog.cpu_kernels.apply()))
        dialog.open()
        self.settings_dialog = dialog

    def apply_settings(self, settings: Settings, *, reload: bool = False) -> None:
        """Persist ``settings``; reload the model when a load-time setting changed (or ``reload``)."""
        if self.remote_apply.holds(self.settings, settings, reload):  # new remote machines are asked first
            return
        old, self.settings = self.settings, settings
        self.store.save(settings)
        reload = reload or any(getattr(old, f) != getattr(settings, f) for f in load_fields())
        if reload and self.pairs.pair is not None and self.state in (EngineState.READY, EngineState.FAILED):
            self.pairs.load()
        self._apply_state()  # the title names the mode

    def set_tint(self, on: bool) -> None:
        """Tint text from accepted drafts (persisted)."""
        for widget in (self.tint_button, self.tint_action):
            widget.blockSignals(True)
            widget.setChecked(on)
            widget.blockSignals(False)
        self.settings = self.settings.with_values(tint_drafts=on)
        self.store.save(self.settings)
        self.chat_view.set_tint(on)

    # -- conversations ----------------------------------------------------------------------------
    def refresh_conversations(self) -> None:
        """Reload the list (filtered by the search box), keeping the selection."""
        self.panel.show_conversations(self.history.conversations(self.panel.search_text()), self.conversation_id)

    def new_conversation(self, system_prompt: str = "") -> int:
        """Create and open an empty conversation."""
        conv = self.history.create_conversation(system_prompt=system_prompt)
        self.open_conversation(conv.id)
        self.refresh_conversations()
        self.prompt_edit.setFocus()
        return conv.id

    def open_conversation(self, conversation_id: int | None) -> None:
        """Show a conversation (None: nothing)."""
        self.conversation_id = conversation_id
        self.replies.cancel_edit()
        conv = self.history.conversation(conversation_id) if conversation_id is not None else None
        self.system_edit.setText(conv.system_prompt if conv is not None else "")
        self.replies.show(conversation_id)
        self._apply_state()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        """Rename a conversation."""
        if title.strip():
            self.history.rename(conversation_id, title.strip())
            self.refresh_conversations()

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation (a reply streaming into it is stopped first)."""
        self.replies.discard(conversation_id)
        self.history.delete(conversation_id)
        if conversation_id == self.conversation_id:
            self.open_conversation(None)
        self.refresh_conversations()

    def _messages(self) -> list[Message]:
        return self.replies.messages(self.conversation_id)

    # -- chatting ---------------------------------------------------------------------------------
    def send(self) -> None:
        """Send the input box's text (or resend an edited message)."""
        text = self.prompt_edit.toPlainText().strip()
        if not text or self.state != EngineState.READY:
            return
        if self.conversation_id is None:
            self.new_conversation(self.system_edit.text())
        assert self.conversation_id is not None
        self._on_system_edited()
        if self.replies.send(self.conversation_id, text):
            self.prompt_edit.clear()

    def regenerate(self) -> None:
        """Replace the last reply with a new one."""
        if self.state == EngineState.READY and self.conversation_id is not None:
            self.replies.regenerate(self.conversation_id)

    def stop(self) -> None:
        """Stop the reply within one round; say "stopping…" until it has ended."""
        self.replies.stop()
        self._apply_state()

    def verify_exactness(self) -> None:
        """Run the current prompt greedily with ``ar`` and the speculative mode; report any difference."""
        if self.state != EngineState.READY:
            return
        problem = self.exactness.start(
            self.settings, has_draft=self.pairs.has_draft, system=self.system_edit.text(),
            typed=self.prompt_edit.toPlainText(), history=[(m.role, m.content) for m in self._messages()])
        if problem is not None:
            self.show_error(problem)

    def _generation_params(self, seed_offset: int) -> GenerationParams:
        return self.settings.generation_params(has_draft=self.pairs.has_draft, seed_offset=seed_offset)

    # -- signals ----------------------------------------------------------------------------------
    def _on_history_changed(self) -> None:
        self.replies.show(self.conversation_id)
        self.refresh_conversations()
        self._apply_state()

    def _on_state_changed(self, state: EngineState) -> None:
        self.state = state
        self._apply_state()

    def show_error(self, message: str) -> None:
        """Show a readable error above the chat (non-modal) and in the log."""
        log.warning("shown to the user: %s", message)
        self.error_banner.setText(message)
        self.error_banner.show()
        self.error_shown.emit(message)

    # -- UI state ---------------------------------------------------------------------------------
    def _apply_state(self) -> None:
        s = self.state
        ready = s == EngineState.READY
        generating = s == EngineState.GENERATING
        stopping = generating and self.replies.stopping
        self.state_label.setText(STOPPING if stopping else s.value)
        self.progress.setVisible(s == EngineState.LOADING)
        messages = self._messages()
        self.send_button.setEnabled(ready)
        self.stop_button.setEnabled(generating and not stopping)
        self.regen_button.setEnabled(ready and bool(messages) and messages[-1].role == "assistant")
        self.verify_action.setEnabled(ready and self.pairs.has_draft)
        self.manager_action.setEnabled(not generating and s != EngineState.LOADING)
        if ready and self.pairs.pair is not None:
            mode = effective_mode(self.settings.mode, has_draft=self.pairs.has_draft)
            self.setWindowTitle(f"ssd-chat — {self.pairs.pair.name} — {mode}")

    # -- slots for widgets ------------------------------------------------------------------------
    def _on_system_edited(self) -> None:
        if self.conversation_id is not None:
            self.history.set_system_prompt(self.conversation_id, self.system_edit.text())

    def _export(self, suffix: str) -> None:
        if self.conversation_id is not None:
            path = ask_export_path(self, export_texts(self.history, self.conversation_id), suffix)
            if path is not None:
                self.history.export_file(self.conversation_id, path)

    # -- lifetime ---------------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:
        """Save any partly shown reply, stop the worker, close the database."""
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Save what was shown, stop the engine thread and close the history (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.replies.shutdown()
        self.store.set_window_state(bytes(self.saveGeometry().data()),
                                    bytes(self.splitter.saveState().data()))
        self.pairs.close_manager()
        self.host.blockSignals(True)  # replies still queued would find the database closed
        self.host.shutdown()
        self.history.close()

"""The main window: conversation list, chat view, input, live readout, menus; no decoding logic."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from .chat_view import ChatView
from .conversation_panel import ConversationPanel
from .engine_worker import EngineHost, EngineState, LiveStats, Reply, Verification
from .history import History, Message
from .prompt_edit import PromptEdit
from .settings import Settings, effective_mode
from .settings_dialog import SettingsDialog
from .settings_store import ActivePair, SettingsStore

log = logging.getLogger(__name__)

SAVE_INTERVAL_MS = 1000
VERIFY_MAX_TOKENS = 128
ENGINE_FIELDS = ("n_ctx", "threads", "draft_threads", "gpu_layers", "draft_gpu_layers")


def readout_text(stats: LiveStats) -> str:
    """The live readout line: mode, speed, TTFT, tokens, acceptance and (ssd) hit rate."""
    bits = [f"<b>{stats.mode}</b>", f"{stats.tokens_per_second:.1f} tok/s"]
    if stats.ttft_s is not None:
        bits.append(f"TTFT {stats.ttft_s:.2f} s")
    bits.append(f"{stats.new_tokens} tokens")
    if stats.acceptance_rate is not None:
        bits.append(f"acceptance {100 * stats.acceptance_rate:.0f}%")
    if stats.hit_rate is not None:
        bits.append(f"hit rate {100 * stats.hit_rate:.0f}%")
    return " · ".join(bits)


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
        self.pair: ActivePair | None = None
        self.state = EngineState.IDLE
        self.conversation_id: int | None = None
        self.last_verification: Verification | None = None
        self._reply_id: int | None = None
        self._editing_id: int | None = None
        self._last_stats: LiveStats | None = None
        self._save_pending = False
        self._closed = False
        self._regenerations = 0

        self.host = EngineHost(self)
        w = self.host
        w.state_changed.connect(self._on_state_changed)
        w.model_loaded.connect(self._on_model_loaded)
        w.generation_started.connect(self._on_generation_started)
        w.token_generated.connect(self._on_token_generated)
        w.stats_changed.connect(self._on_stats_changed)
        w.generation_finished.connect(self._on_generation_finished)
        w.verification_finished.connect(self._on_verification_finished)
        w.failed.connect(self._on_failed)

        self._save_timer = QTimer(self)
        self._save_timer.setObjectName("partial-reply-save")
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(self._on_save_timeout)

        self._build_ui()
        self._build_menus()
        self.refresh_conversations()
        geometry, splitter = self.store.window_state()
        if geometry:
            self.restoreGeometry(geometry)
        else:
            self.resize(1280, 820)
        if splitter:
            self.splitter.restoreState(splitter)
        self._apply_state()

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

        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(6, 6, 6, 6)
        self.system_edit = QLineEdit()
        self.system_edit.setPlaceholderText("System prompt for this conversation (optional)")
        self.system_edit.editingFinished.connect(self._on_system_edited)
        self.error_banner = QLabel()
        self.error_banner.setObjectName("error-banner")
        self.error_banner.setWordWrap(True)
        self.error_banner.setStyleSheet(
            "background:#ffebe9; color:#82071e; border:1px solid #ff8182; padding:6px; border-radius:4px;")
        self.error_banner.hide()
        self.chat_view = ChatView()
        self.chat_view.edit_requested.connect(self._on_edit_requested)
        self.chat_view.regenerate_requested.connect(self.regenerate)
        self.readout = QLabel("No reply yet")
        self.readout.setObjectName("readout")
        self.readout.setTextFormat(Qt.TextFormat.RichText)
        self.readout.setStyleSheet("color:#24292f; padding:2px 4px;")
        self.edit_note = QLabel()
        self.edit_note.setStyleSheet("color:#9a6700;")
        self.edit_note.hide()
        self.prompt_edit = PromptEdit()
        self.prompt_edit.setFixedHeight(90)
        self.prompt_edit.submitted.connect(self.send)
        self.prompt_edit.cancelled.connect(self._cancel_edit)
        buttons = QVBoxLayout()
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)
        self.regen_button = QPushButton("Regenerate")
        self.regen_button.clicked.connect(self.regenerate)
        for b in (self.send_button, self.stop_button, self.regen_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        bottom = QHBoxLayout()
        bottom.addWidget(self.prompt_edit, 1)
        bottom.addLayout(buttons)
        rv.addWidget(self.system_edit)
        rv.addWidget(self.error_banner)
        rv.addWidget(self.chat_view, 1)
        rv.addWidget(self.readout)
        rv.addWidget(self.edit_note)
        rv.addLayout(bottom)

        self.splitter = QSplitter()
        self.splitter.addWidget(self.panel)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([260, 1000])
        self.setCentralWidget(self.splitter)

        self.model_label = QLabel("No model")
        self.state_label = QLabel(self.state.value)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(180)
        self.progress.setRange(0, 0)
        self.progress.hide()
        self.tint_button = QToolButton()
        self.tint_button.setText("Tint drafts")
        self.tint_button.setCheckable(True)
        self.tint_button.setChecked(self.settings.tint_drafts)
        self.tint_button.toggled.connect(self.set_tint)
        self.chat_view.set_tint(self.settings.tint_drafts)
        sb = self.statusBar()
        sb.addWidget(self.model_label)
        sb.addWidget(self.progress)
        sb.addPermanentWidget(self.tint_button)
        sb.addPermanentWidget(self.state_label)

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.new_action = self._action(file_menu, "&New chat", lambda: self.new_conversation(),
                                       QKeySequence.StandardKey.New)
        self.export_md_action = self._action(file_menu, "Export as &Markdown…", self._on_export_md_triggered)
        self.export_json_action = self._action(file_menu, "Export as &JSON…", self._on_export_json_triggered)
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        model_menu = self.menuBar().addMenu("&Model")
        self.manager_action = self._action(model_menu, "Model &manager…", self.open_model_manager)
        self.verify_action = self._action(model_menu, "&Verify exactness", self.verify_exactness)
        self.settings_action = self._action(self.menuBar().addMenu("&Settings"), "&Settings…",
                                            self.open_settings, QKeySequence.StandardKey.Preferences)
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

    # -- models -----------------------------------------------------------------------------------
    def activate_pair(self, pair: ActivePair) -> None:
        """Remember ``pair`` as the active pair and load it on the worker thread."""
        self.store.set_active_pair(pair)
        self.pair = pair
        self.load_model()

    def start_models(self) -> None:
        """First run and later starts: load the last pair, set up the offline pair, or open the manager."""
        from .first_run import FirstRun

        self.first_run = FirstRun(self)
        self.first_run.pair_ready.connect(self.activate_pair)
        self.first_run.manager_needed.connect(self.open_model_manager)
        self.first_run.failed.connect(self.show_error)
        self.first_run.start(self.store.active_pair())

    def load_model(self) -> None:
        """(Re)load the active pair with the current settings."""
        if self.pair is None:
            return
        self.model_label.setText(f"Loading {self.pair.name}…")
        try:
            config = self.settings.engine_config(self.pair.target, self.pair.draft)
        except Exception as exc:  # EngineConfig validates; show, never crash
            self.show_error(str(exc))
            return
        self.host.load(config, self.pair.name)

    def open_model_manager(self) -> None:
        """Show the model manager; picking a pair there loads it."""
        from .model_manager import ModelManagerDialog

        dialog = ModelManagerDialog(self, active=self.pair)
        dialog.pair_activated.connect(self.activate_pair)
        dialog.open()
        self.model_manager = dialog

    def open_settings(self) -> None:
        """Show the settings dialog; engine-level changes reload the model."""
        dialog = SettingsDialog(self.settings, self)
        dialog.accepted.connect(lambda: self.apply_settings(dialog.settings()))
        dialog.open()
        self.settings_dialog = dialog

    def apply_settings(self, settings: Settings) -> None:
        """Persist ``settings``; reload the model when a load-time setting changed."""
        old = self.settings
        self.settings = settings
        self.store.save(settings)
        if any(getattr(old, f) != getattr(settings, f) for f in ENGINE_FIELDS) and self.pair is not None \
                and self.state in (EngineState.READY, EngineState.FAILED):
            self.load_model()

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
        self._cancel_edit()
        if conversation_id is None:
            self.system_edit.setText("")
            self.chat_view.set_messages([])
        else:
            self.system_edit.setText(self.history.conversation(conversation_id).system_prompt)
            self._show_messages()
        self._apply_state()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        """Rename a conversation."""
        if title.strip():
            self.history.rename(conversation_id, title.strip())
            self.refresh_conversations()

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation (not while it is streaming)."""
        self.history.delete(conversation_id)
        if conversation_id == self.conversation_id:
            self.open_conversation(None)
        self.refresh_conversations()

    def export_conversation(self, path: Path) -> None:
        """Write the open conversation as Markdown (``.md``) or JSON (anything else)."""
        if self.conversation_id is None:
            return
        if path.suffix.lower() == ".md":
            path.write_text(self.history.export_markdown(self.conversation_id), encoding="utf-8")
        else:
            data = self.history.export_json(self.conversation_id)
            path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")

    def _show_messages(self) -> None:
        if self.conversation_id is None:
            return
        messages = self.history.messages(self.conversation_id)
        if self._reply_id is not None:
            messages = [m for m in messages if m.id != self._reply_id]
        self.chat_view.set_messages(messages)

    def _messages(self) -> list[Message]:
        return self.history.messages(self.conversation_id) if self.conversation_id is not None else []

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
        if self._editing_id is not None:
            self.history.delete_from(self.conversation_id, self._editing_id)
            self._cancel_edit()
        conv = self.history.conversation(self.conversation_id)
        if conv.title == "New chat":
            self.history.rename(conv.id, text.splitlines()[0][:60])
        self.history.add_message(self.conversation_id, "user", text)
        self.prompt_edit.clear()
        self.refresh_conversations()
        self._start_reply()

    def regenerate(self) -> None:
        """Replace the last reply with a new one."""
        if self.state != EngineState.READY or self.conversation_id is None:
            return
        messages = self._messages()
        if not messages or messages[-1].role != "assistant":
            return
        self.history.delete_from(self.conversation_id, messages[-1].id)
        self._regenerations += 1
        self._start_reply()

    def stop(self) -> None:
        """Stop the reply within one round (a direct call that sets the worker's Event)."""
        self.host.request_stop()

    def verify_exactness(self) -> None:
        """Run the current prompt greedily with ``ar`` and the speculative mode; report any difference."""
        if self.state != EngineState.READY:
            return
        chat = self._chat_for_verify()
        if chat is None:
            self.show_error("Nothing to verify: type a prompt or open a conversation with a message.")
            return
        mode = self.settings.mode if self.settings.mode != "ar" else "ssd"
        params = self.settings.generation_params(
            has_draft=self._has_draft(), greedy=True, mode=mode,
            max_tokens=min(self.settings.max_tokens, VERIFY_MAX_TOKENS))
        if params.mode == "ar":
            self.show_error("Verify exactness needs a draft model (the active pair has none).")
            return
        self.readout.setText(f"Verifying <b>{params.mode}</b> against <b>ar</b> (greedy)…")
        self.host.verify(chat, params)

    def _chat_for_verify(self) -> list[tuple[str, str]] | None:
        system = self.system_edit.text().strip()
        head = [("system", system)] if system else []
        typed = self.prompt_edit.toPlainText().strip()
        history = [(m.role, m.content) for m in self._messages()]
        if typed:
            return [*head, *history_until_user(history), ("user", typed)]
        trimmed = history_until_user(history, include_last_user=True)
        return [*head, *trimmed] if trimmed else None

    def _has_draft(self) -> bool:
        return self.pair is not None and self.pair.draft is not None

    def _start_reply(self) -> None:
        assert self.conversation_id is not None
        system = self.history.conversation(self.conversation_id).system_prompt.strip()
        chat = ([("system", system)] if system else []) + [(m.role, m.content) for m in self._messages()]
        params = self.settings.generation_params(has_draft=self._has_draft(), seed_offset=self._regenerations)
        placeholder = self.history.add_message(self.conversation_id, "assistant", "", complete=False)
        self._reply_id = placeholder.id
        self._last_stats = None
        self._show_messages()
        self.chat_view.begin_stream()
        self.readout.setText(f"<b>{params.mode}</b> · waiting for the first token…")
        self._save_timer.start()
        self.host.generate(chat, params)

    def _save_partial(self, reason: str) -> None:
        """Save what the view has shown of the streaming reply (complete=False)."""
        text = self.chat_view.live_text()
        if self._reply_id is None or text is None:
            return
        stats: dict[str, Any] | None = None
        if self._last_stats is not None:
            s = self._last_stats
            stats = {"mode": s.mode, "new_tokens": s.new_tokens, "tokens_per_second": s.tokens_per_second,
                     "ttft_s": s.ttft_s, "acceptance_rate": s.acceptance_rate, "hit_rate": s.hit_rate,
                     "finish_reason": reason}
        self.history.update_message(self._reply_id, text, stats=stats, runs=self.chat_view.live_runs(),
                                    complete=False)
        self._save_pending = False

    def _end_reply(self) -> None:
        self._save_timer.stop()
        self._reply_id = None
        self.chat_view.end_stream()
        self._show_messages()
        self.refresh_conversations()

    # -- worker signals ---------------------------------------------------------------------------
    def _on_state_changed(self, state: EngineState) -> None:
        self.state = state
        self._apply_state()

    def _on_model_loaded(self, label: str) -> None:
        draft = "" if self._has_draft() else " (no draft: ar only)"
        self.model_label.setText(f"Model: {label}{draft}")
        self.error_banner.hide()

    def _on_generation_started(self, _request_id: int) -> None:
        self.error_banner.hide()

    def _on_token_generated(self, text: str, from_draft: bool) -> None:
        self.chat_view.append_token(text, from_draft)
        self._save_pending = True

    def _on_stats_changed(self, stats: LiveStats) -> None:
        self._last_stats = stats
        line = readout_text(stats)
        self.readout.setText(line)
        self.chat_view.set_live_status(line.replace("<b>", "").replace("</b>", ""))

    def _on_generation_finished(self, reply: Reply) -> None:
        if self._reply_id is None:
            return
        reply_id = self._reply_id
        self.history.update_message(reply_id, reply.text, stats=reply.stats, runs=list(reply.runs))
        self._end_reply()
        self.reply_saved.emit(reply_id)

    def _on_verification_finished(self, result: Verification) -> None:
        self.last_verification = result
        if result.identical:
            text = (f"Identical: greedy {result.mode} produced the same {result.ar_tokens} tokens as ar.")
        else:
            text = (f"Different: greedy {result.mode} and ar first differ at token {result.first_difference}"
                    f" (ar: {result.ar_text!r}; {result.mode}: {result.spec_text!r}).")
        if result.stopped:
            text += " (stopped early)"
        self.readout.setText(text)
        box = QMessageBox(QMessageBox.Icon.Information, "Verify exactness", text, parent=self)
        box.open()
        self.verify_box = box

    def _on_failed(self, message: str) -> None:
        if self._reply_id is not None:
            if self.chat_view.live_text():
                self._save_partial("error")
            else:
                assert self.conversation_id is not None
                self.history.delete_from(self.conversation_id, self._reply_id)
            self._end_reply()
        if self.state in (EngineState.LOADING, EngineState.FAILED) or self.pair is None:
            self.model_label.setText("No model loaded")
        self.show_error(message)

    def _on_save_timeout(self) -> None:
        if self._save_pending:
            self._save_partial("streaming")

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
        self.state_label.setText(s.value)
        self.progress.setVisible(s == EngineState.LOADING)
        messages = self._messages()
        self.send_button.setEnabled(ready)
        self.stop_button.setEnabled(generating)
        self.regen_button.setEnabled(ready and bool(messages) and messages[-1].role == "assistant")
        self.verify_action.setEnabled(ready and self._has_draft())
        for widget in (self.panel, self.system_edit, self.new_action):
            widget.setEnabled(not generating)
        self.manager_action.setEnabled(not generating and s != EngineState.LOADING)
        if ready and self.pair is not None:
            mode = effective_mode(self.settings.mode, has_draft=self._has_draft())
            self.setWindowTitle(f"ssd-chat — {self.pair.name} — {mode}")

    # -- slots for widgets ------------------------------------------------------------------------
    def _on_system_edited(self) -> None:
        if self.conversation_id is not None:
            self.history.set_system_prompt(self.conversation_id, self.system_edit.text())

    def _on_edit_requested(self, message_id: int) -> None:
        if self.state == EngineState.GENERATING:
            return
        self._editing_id = message_id
        self.prompt_edit.setPlainText(self.history.message(message_id).content)
        self.edit_note.setText("Editing an earlier message: sending replaces it and everything after it"
                               " (Esc cancels).")
        self.edit_note.show()
        self.prompt_edit.setFocus()

    def _cancel_edit(self) -> None:
        if self._editing_id is not None:
            self._editing_id = None
            self.prompt_edit.clear()
        self.edit_note.hide()

    def _on_export_md_triggered(self) -> None:
        self._export("Markdown (*.md)", ".md")

    def _on_export_json_triggered(self) -> None:
        self._export("JSON (*.json)", ".json")

    def _export(self, filter_: str, suffix: str) -> None:
        if self.conversation_id is None:
            return
        title = self.history.conversation(self.conversation_id).title
        name, _ = QFileDialog.getSaveFileName(self, "Export chat", f"{_safe_name(title)}{suffix}", filter_)
        if name:
            self.export_conversation(Path(name))

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
        if self._reply_id is not None:
            self._save_partial("app closed")
        self._save_timer.stop()
        self.store.set_window_state(bytes(self.saveGeometry().data()),
                                    bytes(self.splitter.saveState().data()))
        for name in ("model_manager",):
            dialog = getattr(self, name, None)
            if dialog is not None:
                dialog.close()
        self.host.blockSignals(True)  # replies still queued would find the database closed
        self.host.shutdown()
        self.history.close()


def history_until_user(history: list[tuple[str, str]], *,
                       include_last_user: bool = False) -> list[tuple[str, str]]:
    """The chat up to (and optionally including) its last user message."""
    last = max((i for i, (role, _) in enumerate(history) if role == "user"), default=None)
    if last is None:
        return [] if include_last_user else list(history)
    return history[:last + 1] if include_last_user else history[:last]


def _safe_name(title: str) -> str:
    return "".join(c if c.isalnum() or c in " -_" else "_" for c in title).strip() or "chat"


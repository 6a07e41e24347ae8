"""New remote machines are asked before the working pair is let go: a machine that does not answer leaves the pair
as it was, and the window says why the setting was not applied, with Try again and Settings… as the way back.

Settings › OK with remote machines that cannot be reached used to reload the pair with them, which unloaded the
working pair and left none. Now, while a pair works (the engine is ready), a changed Remote machines field is first
asked off the GUI thread (as Settings' Test does); the other settings are applied at once. If every machine answers,
the pair reloads with them; if the load then fails all the same (a machine that answered the probe but not the
load), the pair loads again with the machines it had. Either way the notice says what happened.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.settings.values import Settings, load_fields
from app.worker.engine_worker import EngineState
from app.worker.host import EngineHost
from engine import ask_remote_machines

STYLE = "background:#fff8c5; color:#4d2d00; border:1px solid #d4a72c; padding:6px; border-radius:4px;"
ASKING = "Asking the remote machines {machines}… the model pair stays loaded until they answer."
NOT_APPLIED = ("Remote machines not applied: {why}. The model pair stays loaded as it was ({where}); fix the list in "
               "Settings, or Try again once the machines are up.")
LOAD_FAILED = ("Remote machines not applied: loading the pair with them failed ({why}). The pair is loaded again as "
               "it was ({where}); fix the list in Settings, or Try again.")

Apply = Callable[[Settings, bool], None]  # the window's apply_settings(settings, reload)
Open = Callable[[Settings], None]  # open Settings showing these values


def where(rpc: str) -> str:
    """Where the pair's layers ran before the change, in words."""
    return f"with {rpc.strip()}" if rpc.strip() else "on this machine only"


class RemoteNotice(QWidget):
    """The line under the error banner: asking, or why remote machines were not applied, with the way back."""

    def __init__(self, pane: QWidget) -> None:
        super().__init__(pane)
        self.setObjectName("remote-notice")
        self.label = QLabel()
        self.label.setObjectName("remote-notice-text")
        self.label.setWordWrap(True)
        self.retry_button = QPushButton("Try again")
        self.retry_button.setObjectName("remote-retry")
        self.settings_button = QPushButton("Settings…")
        self.settings_button.setObjectName("remote-settings")
        self.dismiss_button = QPushButton("Dismiss")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label, 1)
        for button in (self.retry_button, self.settings_button, self.dismiss_button):
            row.addWidget(button)
        self.setStyleSheet(f"QLabel {{{STYLE}}}")
        self.dismiss_button.clicked.connect(self.hide)
        self.hide()
        layout = pane.layout()
        if isinstance(layout, QVBoxLayout):  # under the error banner, above the conversation
            layout.insertWidget(2, self)

    def say(self, text: str, *, buttons: bool) -> None:
        self.label.setText(text)
        for button in (self.retry_button, self.settings_button, self.dismiss_button):
            button.setVisible(buttons)
        self.show()


class RemoteApply(QObject):
    """Holds a change of remote machines back until they answer (see the module's docstring).

    Signals:
        answered(int, str, bool): a check ended (its number, what the machines said, whether all can be used).
        refused(str): the change was not applied (the notice's text).
    """

    answered = Signal(int, str, bool)
    refused = Signal(str)

    def __init__(self, host: EngineHost, pane: QWidget, ready: Callable[[], bool], apply: Apply, open_settings: Open,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.notice = RemoteNotice(pane)
        self._ready = ready
        self._apply = apply
        self._open = open_settings
        self._checks = 0
        self._pending: tuple[Settings, Settings, bool] | None = None  # (applied before, asked for, reload)
        self._passing: Settings | None = None  # the settings being applied after their check (not held again)
        self._answer: tuple[str, bool] | None = None  # what the machines said, kept while a reply runs
        self._watch: tuple[Settings, Settings] | None = None  # a load with new machines: (before, with them)
        self._revert: tuple[Settings, str] | None = None  # that load failed: the settings to load again, and why
        self.attempted: Settings | None = None  # the last settings not applied, for Try again and Settings…
        self.answered.connect(self._on_answered)
        host.model_loaded.connect(self._on_loaded)
        host.state_changed.connect(self._on_state)
        host.failed.connect(self._on_failed)
        self.notice.retry_button.clicked.connect(self.retry)
        self.notice.settings_button.clicked.connect(self._open_settings)

    def holds(self, old: Settings, new: Settings, reload: bool) -> bool:
        """Whether ``new`` waits for its remote machines (the caller applies it now when not)."""
        if new is self._passing:
            return False
        if new.rpc == old.rpc or not new.rpc.strip() or not self._ready():
            return False  # unchanged, this machine only, or no working pair to keep
        self._checks += 1
        number, text = self._checks, new.rpc
        self._pending = (old, new, reload)
        self._answer = None
        # the rest now; what the model loads with (the machines, and any other load setting) once they answer
        self._apply(new.with_values(**{name: getattr(old, name) for name in load_fields()}), False)
        self.notice.say(ASKING.format(machines=text.strip()), buttons=False)

        def ask() -> None:  # a machine that is off takes the connect timeout: never on the GUI thread
            lines, ok = ask_remote_machines(text)
            try:
                self.answered.emit(number, "; ".join(lines), ok)
            except RuntimeError:  # the window closed meanwhile
                pass

        threading.Thread(target=ask, name="remote-apply", daemon=True).start()
        return True

    def retry(self) -> None:
        """Try again: apply the settings that were not applied (asking their machines again)."""
        if self.attempted is not None:
            self._apply(self.attempted, False)

    def _open_settings(self) -> None:
        if self.attempted is not None:
            self._open(self.attempted)

    def _on_answered(self, number: int, said: str, ok: bool) -> None:
        if number == self._checks and self._pending is not None:  # else a newer change was asked for since
            self._answer = (said, ok)
            self._settle()

    def _settle(self) -> None:
        """Apply or refuse the change the machines answered for, once the engine is free (not mid-reply)."""
        if self._pending is None or self._answer is None or not self._ready():
            return
        (old, new, reload), (said, ok) = self._pending, self._answer
        self._pending = self._answer = None
        if not ok:
            self.attempted = new
            self._pass(new.with_values(rpc=old.rpc), reload)  # any other load setting changed: read now
            text = NOT_APPLIED.format(why=said.rstrip("."), where=where(old.rpc))
            self.notice.say(text, buttons=True)
            self.refused.emit(text)
            return
        self.notice.hide()
        self._watch = (old, new)
        self._pass(new, reload)

    def _pass(self, settings: Settings, reload: bool) -> None:
        """Apply ``settings`` without holding them again."""
        self._passing = settings
        try:
            self._apply(settings, reload)
        finally:
            self._passing = None

    def _on_loaded(self, _label: str) -> None:
        if self._watch is not None:
            self._watch = None
            self.attempted = None

    def _on_failed(self, message: str) -> None:
        if self._watch is None:
            return
        old, new = self._watch
        self._watch = None
        self.attempted = new
        self._revert = (new.with_values(rpc=old.rpc), LOAD_FAILED.format(why=message.rstrip("."), where=where(old.rpc)))

    def _on_state(self, state: EngineState) -> None:
        if self._revert is not None and state in (EngineState.FAILED, EngineState.READY):  # the failed load is over
            back, text = self._revert
            self._revert = None
            self._pass(back, True)  # the pair again, with the machines it had
            self.notice.say(text, buttons=True)
            self.refused.emit(text)
        self._settle()


def add_remote_apply(window: Any) -> RemoteApply:
    """The window's :class:`RemoteApply` (a MainWindow: its host, pane, state, pair, apply_settings, open_settings)."""
    def ready() -> bool:
        return bool(window.state == EngineState.READY and window.pairs.pair is not None)

    return RemoteApply(window.host, window.pane, ready,
                       lambda settings, reload: window.apply_settings(settings, reload=reload), window.open_settings,
                       window)

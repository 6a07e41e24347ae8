"""The window as the user left it: its geometry, the conversation it showed and the local server's switch.

What the window shows and whether the server is on are written as the window closes (before it shuts the
server down); at the next start the conversation opens again, and the server starts again once the pair has
loaded. A conversation deleted since, or a pair that does not load, leaves things as a fresh start has them.
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QSplitter

from app.history.store import History
from app.server.panel import ServerPanel
from app.settings.store import SettingsStore
from app.worker.engine_worker import EngineState
from app.worker.host import EngineHost

FIRST_SIZE = (1280, 820)  # the window's size at its first start


class RestoredWindow(Protocol):
    """What of the main window the restore reads and writes."""

    store: SettingsStore
    history: History
    host: EngineHost
    splitter: QSplitter
    server_panel: ServerPanel
    conversation_id: int | None

    def restoreGeometry(self, geometry: bytes, /) -> bool: ...
    def resize(self, width: int, height: int, /) -> None: ...
    def open_conversation(self, conversation_id: int | None) -> None: ...
    def refresh_conversations(self) -> None: ...
    def installEventFilter(self, watcher: QObject, /) -> None: ...


class SessionRestore(QObject):
    """Reopens what the last run showed, and watches the window's close to remember it (the window keeps it)."""

    def __init__(self, window: RestoredWindow) -> None:
        super().__init__()
        self.window = window
        geometry, splitter = window.store.window_state()
        if geometry:
            window.restoreGeometry(geometry)
        else:
            window.resize(*FIRST_SIZE)
        if splitter:
            window.splitter.restoreState(splitter)
        conversation, self.serve = window.store.left_open()
        if conversation is not None and any(c.id == conversation for c in window.history.conversations("")):
            window.open_conversation(conversation)
            window.refresh_conversations()
        if self.serve:
            window.host.state_changed.connect(self._on_state_changed)
        self._kept = False
        window.installEventFilter(self)

    def _on_state_changed(self, state: EngineState) -> None:
        if state == EngineState.READY and self.serve:  # the pair has loaded: switch the server on, once
            self.serve = False
            self.window.host.state_changed.disconnect(self._on_state_changed)
            self.window.server_panel.set_serving(True)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Close and not self._kept:  # this filter watches the window alone
            self._kept = True  # the first close only: after it the window has shut the server down
            self.window.store.set_left_open(self.window.conversation_id, self.window.server_panel.listening)
        return False

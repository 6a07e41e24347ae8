"""The window as the user left it: its geometry, the conversation it showed and the local server's switch.

What the window shows and whether the server is on are written as the window closes (before it shuts the
server down); at the next start the conversation opens again, and the server starts again once the pair has
loaded. A conversation deleted since, or a pair that does not load, leaves things as a fresh start has them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject

from app.worker.engine_worker import EngineState

if TYPE_CHECKING:
    from app.main_window import MainWindow

FIRST_SIZE = (1280, 820)  # the window's size at its first start


class SessionRestore(QObject):
    """Reopens what the last run showed, and watches the window's close to remember it."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
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
        if watched is self.window and event.type() == QEvent.Type.Close and not self._kept:
            self._kept = True  # the first close only: after it the window has shut the server down
            self.window.store.set_left_open(self.window.conversation_id, self.window.server_panel.listening)
        return False

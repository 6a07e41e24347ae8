"""Server ▸ Local server, the switch (it starts serving or says why not), and Server ▸ Server details, the panel.

The switch's check mark follows the server, not the click: it is on while the server listens, and a start
that fails (no pair loaded, a port in use) leaves it off and opens the panel, where the reason is shown.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QMainWindow

from app.narrow import never_widen
from app.server.panel import ServerPanel
from app.settings.store import SettingsStore
from app.worker.host import EngineHost
from engine import GenerationParams


class ServerMenu(QObject):
    """The Server menu: the switch and the details panel's dock."""

    def __init__(self, window: QMainWindow, panel: ServerPanel, dock: QDockWidget) -> None:
        super().__init__(window)
        self.panel = panel
        self.dock = dock
        menu = window.menuBar().addMenu("&Server")
        self.switch = QAction("&Local server", window)
        self.switch.setCheckable(True)
        self.switch.setStatusTip("Serve the loaded pair over an OpenAI-compatible API on 127.0.0.1")
        self.switch.triggered.connect(self._on_triggered)
        menu.addAction(self.switch)
        self.details = dock.toggleViewAction()
        self.details.setText("Server &details")
        menu.addAction(self.details)
        panel.listening_changed.connect(self._show_state)
        panel.problem.connect(self._on_problem)

    def _on_triggered(self, on: bool) -> None:
        self._show_state(self.panel.listening)  # until the server says it listens (or has stopped)
        self.panel.set_serving(on)

    def _show_state(self, listening: bool) -> None:
        self.switch.setChecked(listening)
        port = self.panel.server.port if listening and self.panel.server is not None else None
        self.switch.setText(f"&Local server (port {port})" if port else "&Local server")

    def _on_problem(self, _message: str) -> None:
        self.dock.show()  # the reason is in the panel
        self.dock.raise_()


def add_server_panel(window: QMainWindow, host: EngineHost, store: SettingsStore,
                     generation: Callable[[], GenerationParams]) -> ServerPanel:
    """The panel in a dock on the right (hidden until Server ▸ Server details, or a problem, shows it) and the
    Server menu (a child of ``window``, which keeps it)."""
    panel = ServerPanel(host, store, generation)
    dock = QDockWidget("Local server", window)
    dock.setObjectName("server-dock")
    dock.setWidget(panel)
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
    dock.hide()
    window.statusBar().addPermanentWidget(panel.indicator)
    never_widen(panel.indicator, max_lines=1)
    panel.dock = dock
    ServerMenu(window, panel, dock)
    return panel

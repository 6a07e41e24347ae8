"""The local server's panel: serve the loaded pair over an OpenAI-compatible API on 127.0.0.1.

The panel sits in a dock (Server ▸ Server details; the switch itself is Server ▸ Local server, see
:mod:`app.server.menu`); it shows the URL clients use, the requests served and the one running, read
from the server's thread-safe status twice a second. Problems (no pair loaded, a port that is taken)
are shown in the panel, never as a traceback. Loading another pair stops the server.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDockWidget,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.chat.stats_text import plural
from app.narrow import never_widen
from app.server.slot import ServerEvent, ServerRequest
from app.settings.store import SettingsStore
from app.worker.engine_worker import EngineState
from app.worker.host import EngineHost
from engine import GenerationParams, server

POLL_MS = 500
ERROR_STYLE = "color:#cf222e;"
NOTE_STYLE = "color:#57606a;"
SERVING = (EngineState.READY, EngineState.GENERATING)  # states with a loaded pair
NO_PAIR = "Load a model pair first: the local server serves the pair the app has loaded."
WHAT = {"chat.completions": "a chat reply", "completions": "a completion"}  # the Now line's words per endpoint
PORT_HINT = " Choose another port above and switch it on again."  # after "cannot listen on …: in use"


class ServerPanel(QWidget):
    """The switch, its port, and what the server is doing; it asks the engine host to start or stop it.

    Signals:
        listening_changed(bool): the server started listening, or stopped.
        problem(str): it could not start, or cannot (why, in the panel's words).
    """

    listening_changed = Signal(bool)
    problem = Signal(str)

    def __init__(self, host: EngineHost, store: SettingsStore, generation: Callable[[], GenerationParams],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("server-panel")
        self.host = host
        self.store = store
        self.generation = generation
        self.server: server.LocalServer | None = None
        self.state = EngineState.IDLE
        self.switch = QCheckBox("Serve the loaded pair (OpenAI-compatible API)")
        self.switch.toggled.connect(self._on_switch_toggled)
        self.port_edit = QSpinBox()
        self.port_edit.setRange(1, 65535)
        self.port_edit.setValue(store.server_port())
        self.url_label = QLabel()
        self.url_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.served_label = QLabel()
        self.running_label = QLabel()
        self.message = QLabel()
        self.message.setObjectName("server-message")
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.indicator = QLabel()  # in the status bar: the server is on, whether or not the dock is shown
        self.indicator.setObjectName("server-indicator")
        self.indicator.hide()
        self.dock: QDockWidget | None = None
        self.note = QLabel("Listens on 127.0.0.1 only, with the mode and speculation settings of Settings when it "
                           "starts. Loading another pair stops it. Examples for curl and the openai client: "
                           "docs/server.md.")
        self.note.setStyleSheet(NOTE_STYLE)
        self.supports = QLabel(server.SUPPORTS)  # what clients can count on (engine.server.fields)
        self.supports.setObjectName("server-supports")
        self.supports.setWordWrap(True)  # every line of it: no cap on its height, and never wider than the dock
        self.supports.setMinimumWidth(1)
        never_widen(self.url_label, self.served_label, self.running_label, self.message, self.note)
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # long text under its label, full width
        form.addRow("Port", self.port_edit)
        form.addRow("URL", self.url_label)
        form.addRow("Served", self.served_label)
        form.addRow("Now", self.running_label)
        form.addRow("Supports", self.supports)
        layout = QVBoxLayout(self)
        layout.addWidget(self.switch)
        layout.addLayout(form)
        layout.addWidget(self.message)
        layout.addWidget(self.note)
        layout.addStretch(1)
        self._poll_timer = QTimer(self)
        self._poll_timer.setObjectName("server-status-poll")
        self._poll_timer.setInterval(POLL_MS)
        self._poll_timer.timeout.connect(self.refresh)
        host.server_changed.connect(self._on_server_changed)
        host.state_changed.connect(self._on_state_changed)
        self._show_off()

    @property
    def listening(self) -> bool:
        return self.server is not None

    def refresh(self) -> None:
        """Show the server's counters and its running request (read from any thread, safely)."""
        if self.server is None:
            return
        status = self.server.status()
        url, served, running = status_texts(status, self.server.model_id, time.time())
        self.url_label.setText(url)
        self.served_label.setText(served)
        self.running_label.setText(running)
        self.running_label.setToolTip(f"request {status.running.id}" if status.running is not None else "")
        where = status.url.removeprefix("http://").removesuffix("/v1")
        self.indicator.setText(f"Server: {where} · {status.served} served" if status.url else "Server: stopping")

    def why_not(self) -> str | None:
        """Why the server cannot start now (None: it can)."""
        return None if self.state in SERVING else NO_PAIR

    def set_serving(self, on: bool) -> None:
        """Start or stop serving, as the switch does; where it cannot start, say why (:attr:`problem`)."""
        problem = self.why_not() if on and self.server is None else None
        if problem is not None:
            self._say(problem, error=True)
            self.problem.emit(problem)
        elif on != self.switch.isChecked():
            self.switch.setChecked(on)

    def _on_switch_toggled(self, on: bool) -> None:
        if on and self.server is None:
            port = self.port_edit.value()
            self.store.set_server_port(port)
            self.port_edit.setEnabled(False)
            self._say(f"Starting on port {port}…")
            self.host.start_server(ServerRequest(port, self.generation()))
        elif not on and self.server is not None:
            self.switch.setEnabled(False)
            self._say("Stopping…")
            self.host.stop_server()

    def _on_server_changed(self, event: ServerEvent) -> None:
        if event.server is not None:
            self.server = event.server
            self._set_switch(True)
            self.port_edit.setEnabled(False)
            self.switch.setEnabled(self.state in SERVING)
            self._say(event.message)
            self.refresh()
            self.indicator.show()
            self._poll_timer.start()
            self.listening_changed.emit(True)
            return
        self.refresh()  # the last counts of a server that stopped
        self.server = None
        self._poll_timer.stop()
        self.indicator.hide()
        self._show_off()
        message = event.message + (PORT_HINT if event.error and "in use" in event.message else "")
        self._say(message, error=event.error)
        self.listening_changed.emit(False)
        if event.error:
            self.problem.emit(message)

    def _on_state_changed(self, state: EngineState) -> None:
        self.state = state
        self.switch.setEnabled(state in SERVING)

    def _show_off(self) -> None:
        self._set_switch(False)
        self.switch.setEnabled(self.state in SERVING)
        self.port_edit.setEnabled(True)
        self.url_label.setText("not listening")
        self.running_label.setText("—")
        if not self.served_label.text():
            self.served_label.setText("—")

    def _set_switch(self, on: bool) -> None:
        self.switch.blockSignals(True)
        self.switch.setChecked(on)
        self.switch.blockSignals(False)

    def _say(self, text: str, *, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(ERROR_STYLE if error else NOTE_STYLE)


def status_texts(status: server.ServerStatus, model_id: str, now: float) -> tuple[str, str, str]:
    """The URL line, the counts line and the "now" line for a status snapshot."""
    url = f"{status.url} · model {model_id}" if status.url else "not listening"
    served = f"{plural(status.served, 'request')} · {status.queued} waiting"
    if status.rejected:  # answered 429: the server's waiting line (ServerConfig.max_queue) had no room
        served += f" · {plural(status.rejected, 'request')} turned away: too many were already waiting"
    served += f" · {plural(status.failed, 'error')}"
    run = status.running
    if run is not None:  # its id is the line's tooltip
        how = "Streaming" if run.stream else "Writing"
        running = (f"{how} {WHAT.get(run.endpoint, run.endpoint)}: {plural(run.completion_tokens, 'token')} so far, "
                   f"from a prompt of {plural(run.prompt_tokens, 'token')}, for {max(0.0, now - run.started):.0f} s")
    else:
        running = "the app's own reply" if status.busy else "idle"
    return url, served, running

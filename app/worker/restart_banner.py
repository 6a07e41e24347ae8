"""The banner that appears when the engine process has stopped: what happened, and a Restart engine button.

It says the cause once: a reply the stop cut short fails with the same cause, and the error banner above it
then steps aside."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.worker.host import EngineHost
from engine import ENGINE_STOPPED

STYLE = "background:#fff8c5; color:#4d2d00; border:1px solid #d4a72c; padding:6px; border-radius:4px;"
TEXT = "The engine stopped: {cause}. The chat is kept; the next message starts it again with the same pair."


class RestartBanner(QWidget):
    """Shown under the error banner of ``pane`` while the engine process is down; hidden once a pair is loaded."""

    def __init__(self, host: EngineHost, pane: QWidget) -> None:
        super().__init__(pane)
        self.setObjectName("engine-stopped-banner")
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.button = QPushButton("Restart engine")
        self.button.setObjectName("restart-engine")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label, 1)
        row.addWidget(self.button)
        self.setStyleSheet(f"QLabel {{{STYLE}}}")
        self.hide()
        self.button.clicked.connect(self._restart)
        host.engine_stopped.connect(self.show_cause)
        host.failed.connect(lambda _message: self._say_once())  # after the window's own error banner showed it
        host.model_loaded.connect(self.hide)
        host.generation_started.connect(self.hide)  # the next message has started the engine again
        self._host = host
        self._errors: QLabel | None = getattr(pane, "error_banner", None)
        layout = pane.layout()
        if isinstance(layout, QVBoxLayout):  # under the error banner, above the conversation
            layout.insertWidget(2, self)

    def show_cause(self, cause: str) -> None:
        self.label.setText(TEXT.format(cause=cause))
        self.button.setEnabled(True)
        self.show()
        self._say_once()

    def _say_once(self) -> None:
        """Hide the error banner where it repeats this banner's cause (a reply the stop cut short)."""
        if not self.isHidden() and self._errors is not None and ENGINE_STOPPED in self._errors.text():
            self._errors.hide()

    def _restart(self) -> None:
        self.button.setEnabled(False)
        self._host.restart_engine()

"""Settings › Remote machines, a section of its own: the field naming llama.cpp RPC servers that run the target's
layers, a line on what they are, and its Test button, which asks each machine (off the GUI thread) whether it
answers, its protocol, devices and free memory. The field is read when the model loads, as the Hardware ones are."""

from __future__ import annotations

import threading

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from engine import EngineError, Option, ask_remote_machines, remote_endpoints

REMOTE = Option("rpc", str, "", "Remote machines",
                "Machines whose llama.cpp RPC server ('python -m engine rpc-server' there) runs the target's layers, "
                "as HOST:PORT, comma-separated; empty: this machine only. The draft stays here. The server has no "
                "authentication: reach it through an SSH tunnel or on a trusted network (docs/remote.md)", "remote",
                note="HOST:PORT, …; empty = none")
LINE = ("Other computers that run the target model's layers (the draft stays here). Start 'python -m engine rpc-server'"
        " on each; reach them through an SSH tunnel or a trusted network, as the server has no password. OK asks them"
        " first: the pair is kept as it is if one does not answer.")


def problem(text: str) -> str | None:
    """Why ``text`` is not a list of remote machines, or None."""
    try:
        remote_endpoints(text)
    except EngineError as exc:
        return str(exc)
    return None


class RemoteTest(QWidget):
    """The Test button and its result under the Remote machines field."""

    finished = Signal(str, bool)

    def __init__(self, edit: QLineEdit) -> None:
        super().__init__()
        self.edit = edit
        self.button = QPushButton("Test")
        self.button.setObjectName("remote-test")
        self.button.setToolTip("Ask each machine whether it answers, its protocol, devices and free memory")
        self.result = QLabel()
        self.result.setObjectName("remote-result")
        self.result.setWordWrap(True)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.button)
        row.addStretch(1)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addLayout(row)
        box.addWidget(self.result)
        self.button.clicked.connect(self.test)
        self.finished.connect(self._show)
        self.edit.textChanged.connect(lambda _t: self._sync())
        self._sync()

    def _sync(self) -> None:
        self.button.setEnabled(bool(self.edit.text().strip()))

    def test(self) -> None:
        text = self.edit.text()
        self.button.setEnabled(False)
        self.result.setText("asking…")

        def run() -> None:  # a machine that is off takes the connect timeout: never on the GUI thread
            lines, ok = ask_remote_machines(text)
            self.finished.emit("\n".join(lines), ok)

        threading.Thread(target=run, name="remote-test", daemon=True).start()

    def _show(self, text: str, ok: bool) -> None:
        self.result.setStyleSheet("" if ok else "color: #b00020;")
        self.result.setText(text)
        self._sync()

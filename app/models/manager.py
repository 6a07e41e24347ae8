"""The model manager dialog: installed pairs, Hub search with drafts, the catalog with fit labels, downloads, import."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QSize, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from app.models.catalog_box import CatalogBox
from app.models.import_flow import ImportFlow
from app.models.installed_box import InstalledBox
from app.models.pair_status import intact_text
from app.models.search_pane import SearchPane
from app.models.tables import fitted
from app.models.workers import DownloadWorker, as_active, start_thread, stop_thread
from app.settings.store import ActivePair
from engine import (
    DownloadProgress,
    EngineError,
    InstalledPair,
    ModelStore,
    PairSpec,
    format_bytes,
    hub_search,
    hubpair,
    installed_as,
    load_catalog,
    supports_gpu_offload,
    system_memory,
)

log = logging.getLogger(__name__)
SIZE = QSize(1280, 860)  # the size it opens at where the screen has room


class ModelManagerDialog(QDialog):
    """Pick, download, import and remove model pairs.

    Signals:
        pair_activated(ActivePair): the user chose the pair to chat with.
        download_requested(PairSpec): queued to the download worker.
        verify_requested(): queued to the download worker (checksums read every file).
    """

    pair_activated = Signal(object)
    download_requested = Signal(object)
    verify_requested = Signal()
    import_requested = Signal(object, object)

    def __init__(self, parent: QWidget | None = None, *, active: ActivePair | None = None,
                 store: ModelStore | None = None, catalog: list[PairSpec] | None = None,
                 memory: tuple[int, int | None] | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Model manager")
        self.setObjectName("model-manager")
        self.store = store or ModelStore()
        self.active = active
        self.catalog_error = ""
        try:
            self.catalog = catalog if catalog is not None else load_catalog()
        except EngineError as exc:
            self.catalog, self.catalog_error = [], str(exc)
        self.ram, self.vram = memory or system_memory()
        self.downloading: PairSpec | hubpair.HubPair | hubpair.DraftFor | None = None
        self.status: dict[str, str] = {}

        gpu = "GPU offload available" if supports_gpu_offload() else \
            "this llama.cpp build has no GPU offload (CPU only)"
        vram = f"{format_bytes(self.vram)} VRAM free" if self.vram is not None else "no GPU memory detected"
        self.machine_label = QLabel(f"This machine: {format_bytes(self.ram)} RAM free · {vram} · {gpu}")
        self.message = QLabel()
        self.message.setObjectName("manager-message")
        self.message.setWordWrap(True)
        self.message.hide()

        installed_box = self.installed_box = InstalledBox()
        self.installed_table = installed_box.table
        self.use_button, self.import_button = installed_box.use_button, installed_box.import_button
        self.remove_button, self.verify_button = installed_box.remove_button, installed_box.verify_button
        self.drafts_button = installed_box.drafts_button
        self.use_button.clicked.connect(self._on_use_clicked)
        self.imports = ImportFlow(self)
        self.imports.chosen.connect(self.import_files)
        self.imports.said.connect(self.show_message)
        self.import_button.clicked.connect(self.imports.start)
        self.drafts_button.clicked.connect(self._on_drafts_clicked)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        self.verify_button.clicked.connect(self._on_verify_clicked)

        catalog_box = self.catalog_box = CatalogBox()
        self.catalog_table = catalog_box.table
        self.download_button, self.cancel_button = catalog_box.download_button, catalog_box.cancel_button
        self.progress_label, self.progress_bar = catalog_box.progress_label, catalog_box.progress_bar
        self.download_button.clicked.connect(self._on_download_clicked)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.search = SearchPane(self.store, (self.ram, self.vram))
        self.search.download_pair.connect(self.start_download)
        self.search.pair_local.connect(self._on_pair_local)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.machine_label)
        layout.addWidget(self.message)
        layout.addWidget(installed_box, 1)
        layout.addWidget(self.search, 3)
        layout.addWidget(catalog_box, 2)
        layout.addWidget(buttons)
        screen = self.screen()
        self.resize(fitted(SIZE, screen.availableGeometry().size()) if screen is not None else SIZE)

        self.worker = DownloadWorker(self.store)
        self.worker.progressed.connect(self._on_progressed)
        self.worker.downloaded.connect(self._on_downloaded)
        self.worker.cancelled.connect(self._on_cancelled)
        self.worker.failed.connect(self._on_download_failed)
        self.worker.verified.connect(self._on_verified)
        self.worker.imported.connect(self._on_imported)
        self.worker.import_failed.connect(self._on_import_failed)
        self.import_requested.connect(self.worker.import_files)
        self.download_requested.connect(self.worker.download)
        self.verify_requested.connect(self.worker.verify)
        self.verifying = False
        self.download_thread = start_thread(self.worker, "downloads")
        self.installed_table.itemSelectionChanged.connect(self._update_buttons)
        self.catalog_table.itemSelectionChanged.connect(self._update_buttons)
        self.refresh()

    # -- tables -----------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Reload both tables."""
        try:
            self.installed = self.store.installed()
        except EngineError as exc:
            self.installed = []
            self.show_message(str(exc), error=True)
        self.installed_box.show_pairs(self.installed, self.active)
        self.catalog_box.show_specs(self.catalog, self.installed, self.status, self.ram, self.vram)
        if self.catalog_error:
            self.show_message(self.catalog_error, error=True)
        self._update_buttons()

    def selected_installed(self) -> InstalledPair | None:
        """The selected installed pair."""
        return self.installed_box.selected()

    def selected_spec(self) -> PairSpec | None:
        """The selected catalog pair."""
        row = self.catalog_box.selected_row()
        return self.catalog[row] if row is not None else None

    def show_message(self, text: str, *, error: bool = False) -> None:
        """A line above the tables (red for errors such as an incompatible import)."""
        self.message.setText(text)
        self.message.setStyleSheet("color:#cf222e;" if error else "color:#1a7f37;")
        self.message.show()

    # -- actions ----------------------------------------------------------------------------------
    def activate(self, pair: InstalledPair) -> None:
        """Make ``pair`` the active pair."""
        self.active = ActivePair(*as_active(pair))
        self.pair_activated.emit(self.active)
        self.show_message(f"Using {pair.name}.")
        self.refresh()

    def import_files(self, target: Path, draft: Path | None = None) -> None:
        """Import local GGUF files (a target, with its draft or alone) on the worker thread; an incompatible pair
        or a file as its own draft is refused with the reason."""
        what = f"{target.name} + {draft.name}" if draft else f"{target.name} without a draft"
        self.show_message(f"Importing {what} (reading {'them' if draft else 'it'} for checksums)…")
        self.import_requested.emit(target, draft)

    def _on_imported(self, pair: InstalledPair) -> None:
        self.show_message(f"Imported {pair.name}." + ("" if pair.draft_path else
                          " It runs with lookup and ar; select it and press Find a draft to look for one."))
        self.refresh()

    def _on_import_failed(self, message: str) -> None:
        self.show_message(message, error=True)

    def start_download(self, spec: PairSpec | hubpair.HubPair | hubpair.DraftFor) -> None:
        """Download (or resume) a catalog pair or a Hub pair on the download thread."""
        if self.downloading is not None:
            return
        self.downloading = spec
        self.status[spec.id] = "downloading…"
        self.catalog_box.begin(spec.name)
        self.refresh()
        self.download_requested.emit(spec)

    def _on_use_clicked(self) -> None:
        pair = self.selected_installed()
        if pair is not None:
            self.activate(pair)

    def _on_drafts_clicked(self) -> None:
        pair = self.selected_installed()
        if pair is not None:
            self.search.find_drafts_for_file(pair.target_path)

    def _on_pair_local(self, target: Path, draft: Path | hub_search.GgufModel) -> None:
        """A draft found for a file of the user's own: one on disk is imported with it, one on the Hub first
        downloads (with progress and Cancel)."""
        if isinstance(draft, Path):
            self.import_files(target, draft)
        else:
            self.start_download(hubpair.DraftFor(target, draft))

    def _on_remove_clicked(self) -> None:
        pair = self.selected_installed()
        if pair is None:
            return
        try:
            self.store.remove(pair.id)
        except EngineError as exc:
            self.show_message(str(exc), error=True)
            return
        self.show_message(f"Removed {pair.name}.")
        self.refresh()

    def _on_verify_clicked(self) -> None:
        self.verifying = True
        self.show_message("Checking sizes, checksums and vocabularies…")
        self._update_buttons()
        self.verify_requested.emit()

    def _on_verified(self, results: list[tuple[str, bool, str]]) -> None:
        self.verifying = False
        self._update_buttons()
        bad = [f"{pid}: {msg}" for pid, ok, msg in results if not ok]
        if bad:
            self.show_message("Problems: " + "; ".join(bad), error=True)
        else:
            self.show_message(intact_text(len(results)))

    def _on_download_clicked(self) -> None:
        spec = self.selected_spec()
        if spec is not None:
            self.start_download(spec)

    def _on_cancel_clicked(self) -> None:
        self.worker.request_cancel()

    # -- download signals -------------------------------------------------------------------------
    def _on_progressed(self, p: DownloadProgress) -> None:
        self.catalog_box.progressed(p)

    def _on_downloaded(self, pair: InstalledPair) -> None:
        self.downloading = None
        self.catalog_box.installed(pair.name)
        self.refresh()

    def _on_cancelled(self, pair_id: str) -> None:
        self.downloading = None
        self.status[pair_id] = "cancelled: Download resumes"
        self.progress_label.setText("Download cancelled; the partial files are kept, Download resumes.")
        self.refresh()

    def _on_download_failed(self, message: str) -> None:
        if self.downloading is not None:
            self.status[self.downloading.id] = "failed"
        self.downloading = None
        self.verifying = False
        self.show_message(message, error=True)
        self.refresh()

    def _update_buttons(self) -> None:
        for button in (self.use_button, self.remove_button, self.drafts_button):
            button.setEnabled(self.selected_installed() is not None)
        spec = self.selected_spec()
        installed = spec is not None and installed_as(spec, self.installed) is not None
        self.download_button.setEnabled(spec is not None and self.downloading is None and not installed)
        self.cancel_button.setEnabled(self.downloading is not None)
        self.verify_button.setEnabled(self.downloading is None and not self.verifying)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Cancel a running download and join the download thread."""
        self.worker.request_cancel()
        stop_thread(self.download_thread)
        self.search.shutdown()
        super().closeEvent(event)


"""The model manager's recommended pairs: the catalog with each pair's fit on this machine, Download and Cancel, and
the download's progress."""

from __future__ import annotations

from PySide6.QtWidgets import QGroupBox, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from app.models.pair_status import installed_status, progress_text
from app.models.search_pane import FIT_COLOURS
from app.models.tables import button_row, new_table, set_cell
from engine import DownloadProgress, InstalledPair, PairSpec, fit_label, format_bytes


class CatalogBox(QGroupBox):
    """The catalog's pairs, with Download, Cancel download and a progress bar under them."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Recommended", parent)
        self.table = new_table(["Pair", "Quant", "Download", "Needs", "Fit", "Why", "Status"], stretch="Why")
        self.download_button = QPushButton("Download")
        self.cancel_button = QPushButton("Cancel download")
        self.progress_label = QLabel()
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1000)
        self.progress_bar.hide()
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addLayout(button_row(self.download_button, self.cancel_button))
        layout.addWidget(self.progress_bar)
        layout.addWidget(self.progress_label)

    def show_specs(self, catalog: list[PairSpec], installed: list[InstalledPair], status: dict[str, str],
                   ram: int, vram: int | None) -> None:
        """Fill the table: each pair's files, what it needs, its fit in ``ram`` and ``vram`` and whether it is
        installed (or ``status``'s word for it: downloading, cancelled, failed)."""
        c = self.table
        c.setRowCount(len(catalog))
        for r, spec in enumerate(catalog):
            label, reason = fit_label(spec, ram, vram)
            set_cell(c, r, 0, spec.name, tip=spec.notes)
            set_cell(c, r, 1, f"{spec.target.quant} + {spec.draft.quant}")
            set_cell(c, r, 2, format_bytes(spec.target.size + spec.draft.size))
            set_cell(c, r, 3, format_bytes(spec.ram_bytes))
            set_cell(c, r, 4, label, colour=FIT_COLOURS.get(label))
            set_cell(c, r, 5, reason, tip=reason)
            text, tip = installed_status(spec, installed, status.get(spec.id, ""))
            set_cell(c, r, 6, text, tip=tip, bold=text.startswith("installed"))

    def selected_row(self) -> int | None:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].row() if rows else None

    def begin(self, name: str) -> None:
        """A download of ``name`` starts."""
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat(f"{name}: %p%")
        self.progress_bar.show()
        self.progress_label.setText(f"Starting {name}…")

    def progressed(self, p: DownloadProgress) -> None:
        self.progress_bar.setValue(int(1000 * p.done / max(p.total, 1)))
        self.progress_label.setText(progress_text(p))

    def installed(self, name: str) -> None:
        self.progress_bar.setValue(1000)
        self.progress_label.setText(f"Installed {name}.")

"""The model manager's installed pairs: the table (with each pair's architectures) and its buttons."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QGroupBox, QPushButton, QVBoxLayout, QWidget

from app.models.tables import button_row, new_table, set_cell
from app.settings.store import ActivePair
from engine import InstalledPair, format_bytes, model_archs

NO_DRAFT = "no draft: lookup and ar"


def arch_text(pair: InstalledPair, archs: dict[Path, model_archs.ArchInfo]) -> tuple[str, str]:
    """The Architecture cell and its tooltip: the target's (and the draft's) architecture, and what speculation
    costs on them; ``archs`` caches what the files' headers said."""
    def of(path: Path) -> model_archs.ArchInfo:
        if path not in archs:
            archs[path] = model_archs.of_file(path)
        return archs[path]

    t = of(pair.target_path)
    if pair.draft_path is None:
        return t.label, f"{t.label}: {t.cost}"
    d = of(pair.draft_path)
    text = t.label if d.arch == t.arch else f"{t.label} + {d.label}"
    return text, model_archs.pair_note(t, d) or f"{t.label}: {t.cost}"


class InstalledBox(QGroupBox):
    """Installed pairs, the active one marked, with Use, Import, Find a draft, Remove and Verify."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Installed pairs", parent)
        self.table = new_table(["", "Pair", "Source", "Architecture", "Size", "Files"])
        self.use_button = QPushButton("Use this pair")
        self.import_button = QPushButton("Import local files…")
        self.drafts_button = QPushButton("Find a draft")
        self.drafts_button.setToolTip("Drafts for the selected pair's target, from the model store and the Hub")
        self.remove_button = QPushButton("Remove")
        self.verify_button = QPushButton("Verify files")
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addLayout(button_row(self.use_button, self.import_button, self.drafts_button, self.remove_button,
                                    self.verify_button))
        self.pairs: list[InstalledPair] = []
        self.archs: dict[Path, model_archs.ArchInfo] = {}

    def show_pairs(self, pairs: list[InstalledPair], active: ActivePair | None) -> None:
        """Fill the table."""
        self.pairs = pairs
        t = self.table
        t.setRowCount(len(pairs))
        for r, p in enumerate(pairs):
            is_active = active is not None and Path(active.target) == p.target_path and (
                (active.draft or None) == (str(p.draft_path) if p.draft_path else None))
            set_cell(t, r, 0, "●" if is_active else "")
            set_cell(t, r, 1, p.name, bold=is_active)
            set_cell(t, r, 2, p.source)
            arch, why = arch_text(p, self.archs)
            set_cell(t, r, 3, arch, tip=why)
            set_cell(t, r, 4, format_bytes(p.target_size + p.draft_size))
            files = f"{p.target_path.name} + {p.draft_path.name}" if p.draft_path else f"{p.target_path.name} alone"
            set_cell(t, r, 5, files, tip=f"{p.target_path}\n{p.draft_path or NO_DRAFT}")

    def selected(self) -> InstalledPair | None:
        """The selected pair."""
        rows = self.table.selectionModel().selectedRows()
        return self.pairs[rows[0].row()] if rows else None

"""The model manager at 1400 × 900: the catalog's Why and Status cells show their whole text (Why wraps instead of
being cut, Status keeps its width and stays in view)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QStyle, QTableWidget
from pytestqt.qtbot import QtBot

from app.models.manager import ModelManagerDialog
from tests.app_helpers import QT_STRICT

pytestmark = QT_STRICT

GB = 1_000_000_000


def whole(t: QTableWidget, row: int, col: int) -> bool:
    """Whether the cell shows all of its text: it fits the column (wrapped where the table wraps), and the
    column is inside the table's viewport."""
    header = t.horizontalHeader()
    left, width = header.sectionViewportPosition(col), header.sectionSize(col)
    if left < 0 or left + width > t.viewport().width():
        return False
    text = t.item(row, col).text()
    pad = 2 * (t.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, t) + 1)  # as the delegate
    flags = Qt.TextFlag.TextWordWrap if t.wordWrap() else Qt.TextFlag.TextSingleLine
    need = t.fontMetrics().boundingRect(QRect(0, 0, width - pad, 10_000), flags, text)
    return need.width() <= width - pad and need.height() <= t.rowHeight(row)


def test_why_and_status_show_whole_at_1400_px(qtbot: QtBot, data_dir: Path) -> None:
    dialog = ModelManagerDialog(memory=(8 * GB, 2 * GB))
    qtbot.addWidget(dialog)
    spec = dialog.catalog[0]
    dialog.status[spec.id] = "paused at 2.1 GB of 5.2 GB: the connection dropped; Download resumes it"
    dialog.refresh()
    dialog.resize(1400, 900)
    dialog.show()
    qtbot.waitExposed(dialog)
    t = dialog.catalog_table
    why, status = 5, 6
    assert max(len(t.item(r, why).text()) for r in range(t.rowCount())) > 60
    assert t.item(0, status).text().startswith("paused")
    for row in range(t.rowCount()):
        assert whole(t, row, why), (row, t.item(row, why).text())
        assert whole(t, row, status), (row, t.item(row, status).text())
    dialog.close()  # stops its download thread

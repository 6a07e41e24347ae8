"""Small table and layout helpers for the model manager's tables, and its size on a small screen."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

FRAME_PX = 40  # the window manager's title bar and frame around a dialog


def fitted(size: QSize, room: QSize) -> QSize:
    """``size`` cut to the screen's free ``room`` (on a 1280x720 screen the manager's buttons stay on it)."""
    return QSize(min(size.width(), room.width()), min(size.height(), room.height() - FRAME_PX))


def new_table(headers: list[str], *, stretch: str | None = None) -> QTableWidget:
    """A read-only table that selects one whole row at a time.

    Columns fit their contents; ``stretch`` names the one column that takes the width left and wraps its
    text over as many lines as it needs (rows grow to fit), so no column is pushed out of sight and no
    text is cut. Without it the last column stretches.
    """
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.verticalHeader().hide()
    header = t.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    if stretch is None:
        header.setStretchLastSection(True)
    else:
        header.setSectionResizeMode(headers.index(stretch), QHeaderView.ResizeMode.Stretch)
        t.setWordWrap(True)
        t.setTextElideMode(Qt.TextElideMode.ElideNone)
        t.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    return t


def set_cell(t: QTableWidget, row: int, col: int, text: str, *, tip: str = "", bold: bool = False,
             colour: str | None = None) -> None:
    """Put ``text`` in a cell, with an optional tooltip, bold face or colour."""
    item = QTableWidgetItem(text)
    if tip:
        item.setToolTip(tip)
    if bold:
        font = item.font()
        font.setBold(True)
        item.setFont(font)
    if colour:
        item.setForeground(QColor(colour))
    t.setItem(row, col, item)


def button_row(*widgets: QWidget) -> QHBoxLayout:
    """Widgets side by side, pushed to the left."""
    row = QHBoxLayout()
    for w in widgets:
        row.addWidget(w)
    row.addStretch(1)
    return row

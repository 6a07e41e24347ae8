"""The conversation list: new, search, rename and delete; it shows the history, the window owns it."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import QStandardPaths, Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.history.records import Conversation
from app.history.store import History

RENAME_MIN_PX = 480  # the Rename dialog's width for short titles (Qt's default, 200 px, cuts most titles)
RENAME_MAX_PX = 900  # ... and its widest, for titles up to the 60 characters a first message gives
RENAME_PAD_PX = 80  # the dialog's margins and the line edit's frame around the title's text
TITLE_CHARS = 60  # a new chat's title: its first line up to this many characters, cut between words
ELLIPSIS = "…"
UNSAFE = '<>:"/\\|?*'  # characters Windows (and, for "/", every system) refuses in a file name
NAME_CHARS = 100  # an exported chat's file name at most: whole phrases of its first message up to this many
PHRASE_END = re.compile(r"[.?!;:,](?=\s|$)|\s[-–—]\s")  # where a phrase ends: punctuation, or a dash between words


class ConversationPanel(QWidget):
    """The left-hand list of conversations with a search box.

    Signals:
        selected(object): the current conversation changed (its id, or None).
        new_requested(): "New chat" was clicked.
        rename_requested(int, str): the user confirmed a new title.
        delete_requested(int): the user confirmed a deletion.
        search_changed(str): the search text changed.
    """

    selected = Signal(object)
    new_requested = Signal()
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)
    search_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.new_button = QPushButton("New chat")
        self.new_button.clicked.connect(self.new_requested)
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("Search conversations")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.textChanged.connect(self.search_changed)
        self.list = QListWidget()
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.currentItemChanged.connect(self._on_current_item_changed)
        self.rename_button = QPushButton("Rename")
        self.rename_button.clicked.connect(self._on_rename_clicked)
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self._on_delete_clicked)
        row = QHBoxLayout()
        row.addWidget(self.rename_button)
        row.addWidget(self.delete_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search_edit)
        layout.addWidget(self.list, 1)
        layout.addLayout(row)

    def search_text(self) -> str:
        """The search box's text, stripped."""
        return self.search_edit.text().strip()

    def show_conversations(self, conversations: list[Conversation], current: int | None) -> None:
        """Fill the list and select ``current`` without emitting :attr:`selected`; where a search leaves ``current``
        out, select the first match (or nothing) and emit :attr:`selected`."""
        self.list.blockSignals(True)
        self.list.clear()
        for conv in conversations:
            item = QListWidgetItem(conv.title)
            item.setData(Qt.ItemDataRole.UserRole, conv.id)
            item.setToolTip(conv.title)
            self.list.addItem(item)
            if conv.id == current:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)
        if current is not None and self.list.currentItem() is None and self.search_text():
            # the search left the open chat out: the first match takes its place (none: nothing stays open)
            if self.list.count():
                self.list.setCurrentRow(0)
            else:
                self.selected.emit(None)

    def current_id(self) -> int | None:
        """The selected conversation's id."""
        item = self.list.currentItem()
        return int(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None

    def _on_current_item_changed(self, item: QListWidgetItem | None, _prev: QListWidgetItem | None) -> None:
        self.selected.emit(int(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None)

    def _on_rename_clicked(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        dialog = self.rename_dialog(item.text())
        title = dialog.textValue().strip() if dialog.exec() == QDialog.DialogCode.Accepted else ""
        if title:
            self.rename_requested.emit(int(item.data(Qt.ItemDataRole.UserRole)), title)

    def rename_dialog(self, title: str) -> QInputDialog:
        """The Rename dialog for ``title``: wide enough to show a long title whole (up to a limit)."""
        dialog = QInputDialog(self)
        dialog.setWindowTitle("Rename chat")
        dialog.setLabelText("Title")
        dialog.setTextValue(title)
        text_px = dialog.fontMetrics().horizontalAdvance(title) + RENAME_PAD_PX
        dialog.resize(min(max(RENAME_MIN_PX, text_px), RENAME_MAX_PX), dialog.sizeHint().height())
        return dialog

    def _on_delete_clicked(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        answer = QMessageBox.question(self, "Delete chat", f"Delete “{item.text()}” and all its messages?")
        if answer == QMessageBox.StandardButton.Yes:
            self.delete_requested.emit(int(item.data(Qt.ItemDataRole.UserRole)))


EXPORT_FILTERS = {".md": "Markdown (*.md)", ".json": "JSON (*.json)"}


def short_title(text: str, most: int = TITLE_CHARS) -> str:
    """A chat's title from its first message: the first line, cut between words with "…" when it is long."""
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    if len(line) <= most:
        return line
    cut = line[: most - len(ELLIPSIS) + 1]
    head = cut.rsplit(" ", 1)[0] if " " in cut else cut[:-1]
    return head.rstrip(" ,.;:-") + ELLIPSIS


def export_folder() -> Path:
    """Where the export dialog opens: the user's Documents folder where there is one, else the home folder."""
    docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return Path(docs) if docs and Path(docs).is_dir() else Path.home()


def first_phrases(text: str, most: int = NAME_CHARS) -> str:
    """The first line of ``text``, cut where a phrase ends when it is longer than ``most`` (between words where no
    phrase ends in reach)."""
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    if len(line) <= most:
        return line
    ends = [m.start() for m in PHRASE_END.finditer(line) if 0 < m.start() <= most]
    return line[: ends[-1]] if ends else line[: most + 1].rsplit(" ", 1)[0]


def export_name(title: str, suffix: str, first: str = "") -> str:
    """A file name for a chat titled ``title``: its words kept whole, characters a file system refuses dropped.

    A title cut from the chat's ``first`` message (it ends in "…") gives way to that message's first phrases, so
    the name ends where a phrase does; a title the user gave is kept."""
    if title.endswith(ELLIPSIS) and " ".join(first.split()).startswith(title[: -len(ELLIPSIS)].rstrip()):
        title = first_phrases(first)
    words = "".join(" " if c in UNSAFE or not c.isprintable() else c for c in title.replace(ELLIPSIS, " ")).split()
    return (" ".join(words).strip(" .,;:") or "chat") + suffix


def export_texts(history: History, conversation_id: int) -> tuple[str, str]:
    """A conversation's title and its first user message: what :func:`export_name` names its file after."""
    first = next((m.content for m in history.messages(conversation_id) if m.role == "user"), "")
    return history.conversation(conversation_id).title, first


def export_dialog(parent: QWidget, title: str, suffix: str, first: str = "") -> QFileDialog:
    """The save dialog for a chat titled ``title``: in :func:`export_folder`, the name from :func:`export_name`."""
    dialog = QFileDialog(parent, "Export chat", str(export_folder()), EXPORT_FILTERS[suffix])
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    dialog.setDefaultSuffix(suffix.lstrip("."))
    dialog.selectFile(export_name(title, suffix, first))
    return dialog


def ask_export_path(parent: QWidget, texts: tuple[str, str], suffix: str) -> Path | None:
    """Ask where to export a conversation (its title and first message: :func:`export_texts`) as ``suffix``
    (``.md`` or ``.json``)."""
    dialog = export_dialog(parent, texts[0], suffix, texts[1])
    files = dialog.selectedFiles() if dialog.exec() == QDialog.DialogCode.Accepted else []
    return Path(files[0]) if files else None

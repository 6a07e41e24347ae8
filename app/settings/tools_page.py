"""Settings > Tools: the MCP servers (add, edit, remove, import an mcp.json), each server's tools with their
descriptions, a switch per server and per tool, and the tools always allowed (revocable). Changes apply and are
saved at once."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QMenuBar,
    QPlainTextEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.tools import config
from app.tools.config import ConfigError, ServerSpec
from app.tools.hub import Listing

if TYPE_CHECKING:
    from app.tools.toolbox import ToolBox

NAME, DESCRIPTION, ALWAYS = 0, 1, 2  # the tree's columns
ERROR_STYLE = "color: #cf222e;"
KEPT = "(kept)"  # an edited server's header value as the form shows it: the secret stays as it was unless retyped


def pairs(text: str, sep: str) -> tuple[tuple[str, str], ...]:
    """``KEY=value`` (or ``Name: value``) lines as pairs; blank lines are skipped."""
    out = []
    for line in text.splitlines():
        key, found, value = line.partition(sep)
        if found and key.strip():
            out.append((key.strip(), value.strip()))
    return tuple(out)


class ServerForm(QDialog):
    """Add a server, or edit ``editing``: a name, and a command line (stdio) or a URL (HTTP), with env or headers
    (an edited server's header values show as :data:`KEPT`). Its switches and always-allowed tools stay."""

    def __init__(self, taken: set[str], parent: QWidget | None = None, editing: ServerSpec | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Edit a tool server" if editing else "Add a tool server")
        self.taken = taken
        self.editing = editing
        self.name_edit = QLineEdit()
        self.kind = QComboBox()
        self.kind.addItems(["stdio: a local program", "HTTP: a URL"])
        self.target = QLineEdit()
        self.target.setPlaceholderText("npx -y @modelcontextprotocol/server-filesystem /home/me/notes")
        self.extra = QPlainTextEdit()
        self.extra.setPlaceholderText("KEY=value, one a line")
        self.extra.setFixedHeight(70)
        self.kind.currentIndexChanged.connect(self._on_kind)
        self.problem = QLabel()
        self.problem.setStyleSheet(ERROR_STYLE)
        form = QFormLayout(self)
        form.addRow("Name", self.name_edit)
        form.addRow("Kind", self.kind)
        form.addRow("Command / URL", self.target)
        self.extra_label = QLabel("Environment")
        form.addRow(self.extra_label, self.extra)
        form.addRow(self.problem)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._on_ok)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.spec: ServerSpec | None = None
        if editing is not None:
            self.name_edit.setText(editing.name)
            self.kind.setCurrentIndex(1 if editing.url else 0)
            self.target.setText(editing.url or shlex.join((editing.command, *editing.args)))
            lines = ([f"{k}: {KEPT}" for k, _ in editing.headers] if editing.url
                     else [f"{k}={v}" for k, v in editing.env])
            self.extra.setPlainText("\n".join(lines))

    def _on_kind(self, index: int) -> None:
        http = index == 1
        self.target.setPlaceholderText("http://127.0.0.1:8000/mcp" if http else "npx -y @modelcontextprotocol/...")
        self.extra_label.setText("Headers (kept as secrets)" if http else "Environment")
        self.extra.setPlaceholderText("Authorization: Bearer …, one a line" if http else "KEY=value, one a line")

    def _on_ok(self) -> None:
        name, target = self.name_edit.text().strip(), self.target.text().strip()
        if not name or name in self.taken:
            self.problem.setText("Give the server a name no other server has.")
            return
        try:
            words = shlex.split(target) if self.kind.currentIndex() == 0 else [target]
        except ValueError as exc:
            words = []
            self.problem.setText(f"The command line cannot be read: {exc}.")
        if not words or not words[0]:
            self.problem.setText(self.problem.text() or "Give a command or a URL.")
            return
        if self.kind.currentIndex() == 1:
            kept = dict(self.editing.headers) if self.editing is not None else {}
            headers = tuple((k, kept.get(k, "") if v == KEPT else v) for k, v in pairs(self.extra.toPlainText(), ":"))
            spec = ServerSpec(name, url=words[0], headers=headers)
        else:
            spec = ServerSpec(name, words[0], tuple(words[1:]), pairs(self.extra.toPlainText(), "="))
        if self.editing is not None:
            e = self.editing
            spec = replace(spec, enabled=e.enabled, disabled_tools=e.disabled_tools, always_allow=e.always_allow)
        self.spec = spec
        self.accept()


class ToolsDialog(QDialog):
    """The servers and their tools; every switch applies at once (``toolbox.set_specs`` saves)."""

    def __init__(self, toolbox: ToolBox, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Tools")
        self.resize(760, 480)
        self.toolbox = toolbox
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Server / tool", "Description", "Always allowed"])
        self.tree.setColumnWidth(NAME, 220)
        self.tree.setColumnWidth(DESCRIPTION, 360)
        self.tree.itemChanged.connect(self._on_item_changed)
        self.note = QLabel("Tools run only when you allow each call, unless you always allow that tool.")
        self.note.setWordWrap(True)
        self.problem = QLabel()
        self.problem.setStyleSheet(ERROR_STYLE)
        self.problem.setWordWrap(True)
        self.add_button = QPushButton("Add…")
        self.import_button = QPushButton("Import mcp.json…")
        self.edit_button = QPushButton("Edit…")
        self.remove_button = QPushButton("Remove")
        self.refresh_button = QPushButton("List tools")
        self.add_button.clicked.connect(self.add)
        self.import_button.clicked.connect(lambda: self.import_file())
        self.edit_button.clicked.connect(lambda: self.edit_selected())
        self.tree.itemDoubleClicked.connect(self._on_double_clicked)
        self.remove_button.clicked.connect(self.remove_selected)
        self.refresh_button.clicked.connect(self.refresh)
        row = QHBoxLayout()
        for b in (self.add_button, self.edit_button, self.import_button, self.remove_button, self.refresh_button):
            row.addWidget(b)
        row.addStretch(1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        for w in (self.note, self.tree, self.problem):
            layout.addWidget(w)
        layout.addLayout(row)
        layout.addWidget(close)
        toolbox.listed.connect(self._on_listed)
        self.rebuild()
        self.refresh()

    # -- what the user does -----------------------------------------------------------------------
    def add(self) -> None:
        form = ServerForm({s.name for s in self.toolbox.specs}, self)
        if form.exec() == QDialog.DialogCode.Accepted and form.spec is not None:
            self.add_specs([form.spec])

    def add_specs(self, specs: list[ServerSpec]) -> None:
        """Add servers (one named as an existing server replaces it) and list their tools."""
        names = {s.name for s in specs}
        self.toolbox.set_specs([s for s in self.toolbox.specs if s.name not in names] + specs)
        self.rebuild()
        for s in specs:
            self.toolbox.refresh(s)

    def import_file(self, path: Path | None = None) -> None:
        """Add the servers of an mcp.json (Claude Desktop's, LM Studio's...)."""
        if path is None:
            chosen, _ = QFileDialog.getOpenFileName(self, "Import mcp.json", "", "MCP config (*.json)")
            if not chosen:
                return
            path = Path(chosen)
        try:
            self.add_specs(config.read_file(path))
        except ConfigError as exc:
            self.problem.setText(f"{path.name} could not be imported: {exc}.")

    def edit_selected(self) -> None:
        """Edit the selected server in a form; a changed command, URL, environment or header restarts it."""
        item = self.tree.currentItem()
        server = (item.parent() or item).text(NAME) if item is not None else None
        old = next((s for s in self.toolbox.specs if s.name == server), None)
        if old is None:
            return
        form = ServerForm({s.name for s in self.toolbox.specs} - {old.name}, self, old)
        if form.exec() == QDialog.DialogCode.Accepted and form.spec is not None:
            new = form.spec
            self.toolbox.set_specs([new if s.name == old.name else s for s in self.toolbox.specs])
            self.rebuild()
            self.toolbox.refresh(new)

    def remove_selected(self) -> None:
        item = self.tree.currentItem()
        if item is not None:
            server = (item.parent() or item).text(NAME)
            self.toolbox.set_specs([s for s in self.toolbox.specs if s.name != server])
            self.rebuild()

    def refresh(self) -> None:
        """List the tools of every enabled server (each starts if it is not running)."""
        for s in self.toolbox.specs:
            if s.enabled:
                self.toolbox.refresh(s)

    # -- the tree ---------------------------------------------------------------------------------
    def rebuild(self) -> None:
        self.tree.blockSignals(True)
        self.tree.clear()
        for s in self.toolbox.specs:
            top = QTreeWidgetItem([s.name, s.describe(), ""])
            top.setFlags(top.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            top.setCheckState(NAME, Qt.CheckState.Checked if s.enabled else Qt.CheckState.Unchecked)
            for t in self.toolbox.tools_of(s.name):
                child = QTreeWidgetItem([t.name, t.description.strip().split("\n")[0], ""])
                child.setToolTip(DESCRIPTION, t.description)
                child.setFlags(child.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                child.setCheckState(NAME, Qt.CheckState.Unchecked if t.name in s.disabled_tools
                                    else Qt.CheckState.Checked)
                child.setCheckState(ALWAYS, Qt.CheckState.Checked if t.name in s.always_allow
                                    else Qt.CheckState.Unchecked)
                top.addChild(child)
            self.tree.addTopLevelItem(top)
            top.setExpanded(True)
        self.tree.blockSignals(False)

    def _on_listed(self, listing: Listing) -> None:
        if listing.error is not None:
            self.problem.setText(listing.error)
        self.rebuild()

    def _on_double_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        if item.parent() is None:  # a server's row (a tool's row holds its switches)
            self.edit_selected()

    def _on_item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        on = item.checkState(column) == Qt.CheckState.Checked
        parent = item.parent()
        server = (parent or item).text(NAME)
        specs = []
        for s in self.toolbox.specs:
            if s.name == server and parent is None:
                s = replace(s, enabled=on)
            elif s.name == server and column == ALWAYS:
                s = replace(s, always_allow=s.always_allow | {item.text(NAME)} if on
                            else s.always_allow - {item.text(NAME)})
            elif s.name == server:
                s = replace(s, disabled_tools=s.disabled_tools - {item.text(NAME)} if on
                            else s.disabled_tools | {item.text(NAME)})
            specs.append(s)
        self.toolbox.set_specs(specs)


def add_tools_menu(menu_bar: QMenuBar, settings_action: QAction, toolbox: ToolBox) -> None:
    """Settings > Tools… in the window's ``menu_bar``, in the menu of ``settings_action``."""
    menus = [m for a in menu_bar.actions() if isinstance(m := a.menu(), QMenu)]
    menu = next(m for m in menus if settings_action in m.actions())
    action = menu.addAction("&Tools…")
    action.setObjectName("tools-settings")
    action.triggered.connect(lambda: open_tools(menu_bar.window(), toolbox))


def open_tools(window: QWidget, toolbox: ToolBox) -> ToolsDialog:
    """Show Settings > Tools (non-modal)."""
    dialog = ToolsDialog(toolbox, window)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    return dialog

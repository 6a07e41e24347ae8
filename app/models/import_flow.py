"""Import local files: the target, then its draft as an optional second step (Choose a draft…, Skip, Cancel).

A model of the user's own often has no draft at hand: Skip imports the target alone (it runs with lookup and
ar, and Find a draft looks for one later); Cancel, at either step, says that nothing was imported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QAbstractButton, QFileDialog, QMessageBox, QWidget

GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"
TARGET_TITLE = "Target model (the large one)"
DRAFT_TITLE = "Draft model (small, same tokenizer)"
NO_TARGET = "Import cancelled: no file was chosen; nothing was imported."


def pick_gguf(parent: QWidget, title: str) -> str:
    """A GGUF file the user picks ("" when the dialog is cancelled)."""
    return QFileDialog.getOpenFileName(parent, title, "", GGUF_FILTER)[0]


def step_text(target: Path) -> str:
    """What the draft step asks."""
    return (f"{target.name} is the target. A draft (a smaller model of the same family, with the same tokenizer) "
            "lets sd, ssd and auto speculate; without one the model runs with lookup and ar, and Find a draft "
            "looks for one later. Choose its draft now, or Skip.")


def cancelled(target: Path) -> str:
    return f"Import cancelled: {target.name} was not imported (Skip imports it without a draft)."


class ImportFlow(QObject):
    """The two steps, without a nested event loop: the draft step is a window-modal box opened with ``open()``.

    Signals:
        chosen(Path, Path | None): import this target with this draft (None: none).
        said(str): the flow ended without an import (why, in a line).
    """

    chosen = Signal(object, object)
    said = Signal(str)

    def __init__(self, parent: QWidget, pick: Callable[[QWidget, str], str] = pick_gguf) -> None:
        super().__init__(parent)
        self.window = parent
        self.pick = pick
        self.target: Path | None = None
        self.step: QMessageBox | None = None

    def start(self) -> None:
        """Ask for the target, then open the draft step."""
        target = self.pick(self.window, TARGET_TITLE)
        if not target:
            self.said.emit(NO_TARGET)
            return
        self.target = Path(target)
        box = QMessageBox(QMessageBox.Icon.Question, "Import: the draft (optional)", step_text(self.target),
                          QMessageBox.StandardButton.NoButton, self.window)
        box.setObjectName("import-draft-step")
        self.choose = box.addButton("Choose a draft…", QMessageBox.ButtonRole.AcceptRole)
        self.skip = box.addButton("Skip: no draft", QMessageBox.ButtonRole.DestructiveRole)
        self.cancel = box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(self.choose)
        box.buttonClicked.connect(self._on_step)
        self.step = box
        box.open()

    def _on_step(self, button: QAbstractButton) -> None:
        assert self.target is not None
        target, self.step = self.target, None
        if button is self.skip:
            self.chosen.emit(target, None)
        elif button is self.choose and (draft := self.pick(self.window, DRAFT_TITLE)):
            self.chosen.emit(target, Path(draft))
        else:  # Cancel, Escape, or no draft file chosen
            self.said.emit(cancelled(target))

"""The model manager with a model of the user's own (issue 62 items 9 and 13, issue 58 item 5): Import local
files with the draft as an optional second step, Find a draft for an installed target against the stand-in Hub
(a Hub draft downloaded and paired with it, one on disk paired at once), each pair's architecture, and a
1280x720 screen."""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtCore import QPoint, QSize
from PySide6.QtWidgets import QDialogButtonBox, QWidget
from pytestqt.qtbot import QtBot

from app.models import import_flow
from app.models.manager import SIZE, ModelManagerDialog
from app.models.search_pane import LOCAL_PAIR
from app.models.tables import fitted
from engine import ModelStore, TinyPair
from engine.tiny.recurrent import write_lfm2
from tests.app_helpers import QT_STRICT, TIMEOUT_MS
from tests.hub_models import DRAFT_FILE, DRAFT_REPO, hub, hub_models
from tests.hub_server import HubState

__all__ = ["hub", "hub_models"]  # fixtures
pytestmark = QT_STRICT
GB = 1_000_000_000
HYBRID = {"n_layer": 3, "n_embd": 384, "n_ff": 768}  # 30 MB: 12 times the stand-in Hub's draft


def manager(qtbot: QtBot, picks: list[str]) -> ModelManagerDialog:
    """The manager, its file dialogs answering ``picks`` in turn ("" is Cancel)."""
    dialog = ModelManagerDialog(memory=(16 * GB, None))
    qtbot.addWidget(dialog)
    dialog.imports.pick = lambda _parent, _title: picks.pop(0)
    dialog.show()
    return dialog


def cells(dialog: ModelManagerDialog, col: int) -> list[str]:
    t = dialog.installed_table
    return [t.item(r, col).text() for r in range(t.rowCount())]


def step_button(dialog: ModelManagerDialog, text: str) -> None:
    step = dialog.imports.step
    assert step is not None and step.isVisible() and step.objectName() == "import-draft-step"
    [button] = [b for b in step.buttons() if b.text() == text]
    button.click()


def test_import_asks_for_the_draft_as_an_optional_step(qtbot: QtBot, data_dir: Path, tiny: TinyPair) -> None:
    target = str(tiny.target)
    dialog = manager(qtbot, ["", target, target, "", target, target, target, target, str(tiny.draft_related)])
    dialog.import_button.click()  # no target chosen
    assert dialog.message.text() == import_flow.NO_TARGET and dialog.imports.step is None
    dialog.import_button.click()
    assert dialog.imports.step is not None and "target.gguf is the target" in dialog.imports.step.text()
    step_button(dialog, "Cancel")
    assert dialog.message.text() == import_flow.cancelled(tiny.target) and ModelStore().installed() == []
    dialog.import_button.click()
    step_button(dialog, "Choose a draft…")  # ... and its file dialog cancelled
    assert dialog.message.text() == import_flow.cancelled(tiny.target)

    dialog.import_button.click()
    step_button(dialog, "Skip: no draft")
    qtbot.waitUntil(lambda: dialog.message.text().startswith("Imported"), timeout=TIMEOUT_MS)
    assert dialog.message.text() == ("Imported target. It runs with lookup and ar; select it and press Find a draft "
                                     "to look for one.")
    assert cells(dialog, 5) == ["target.gguf alone"] and cells(dialog, 3) == ["llama"]
    assert dialog.installed_table.item(0, 3).toolTip() == "llama: a rejected draft costs nothing to undo"

    dialog.import_button.click()
    step_button(dialog, "Choose a draft…")  # the target's own file as its draft
    qtbot.waitUntil(lambda: dialog.message.text().startswith("Cannot import"), timeout=TIMEOUT_MS)
    assert "target.gguf cannot be its own draft" in dialog.message.text()
    dialog.import_button.click()
    step_button(dialog, "Choose a draft…")
    qtbot.waitUntil(lambda: dialog.message.text().startswith("Imported target + draft_related"), timeout=TIMEOUT_MS)
    assert cells(dialog, 5) == ["target.gguf alone", "target.gguf + draft_related.gguf"]

    dialog.installed_table.selectRow(0)  # the target alone loads without a draft
    with qtbot.waitSignal(dialog.pair_activated, timeout=TIMEOUT_MS) as used:
        dialog.use_button.click()
    assert used.args[0].draft is None and cells(dialog, 0) == ["●", ""]  # type: ignore[index]
    dialog.close()


def test_find_a_draft_for_an_installed_file_and_pair_it(
    qtbot: QtBot, hub: HubState, data_dir: Path, tmp_path: Path, tiny: TinyPair
) -> None:
    mine = write_lfm2(tmp_path / "qwen2.5-7b-instruct-lfm2.gguf", seed=5, **HYBRID)
    on_disk = tmp_path / "draft_related.gguf"
    shutil.copy(tiny.draft_related, on_disk)
    ModelStore().import_pair(tiny.target, on_disk)  # its files are the store's: on-disk candidates
    dialog = manager(qtbot, [str(mine)])
    dialog.import_button.click()
    step_button(dialog, "Skip: no draft")
    qtbot.waitUntil(lambda: dialog.installed_table.rowCount() == 2, timeout=TIMEOUT_MS)
    assert cells(dialog, 3)[1] == "lfm2 (hybrid)"
    assert "rolls its state back" in dialog.installed_table.item(1, 3).toolTip()
    assert not dialog.drafts_button.isEnabled()
    dialog.installed_table.selectRow(1)
    dialog.drafts_button.click()
    pane = dialog.search
    qtbot.waitUntil(lambda: "compatible of" in pane.note.text(), timeout=TIMEOUT_MS)
    assert pane.download_button.text() == LOCAL_PAIR and pane.target is not None and pane.target.repo == ""
    where = [pane.drafts_table.item(r, 1).text() for r in range(pane.drafts_table.rowCount())]
    assert f"on disk: {on_disk}" in where and str(mine) not in " ".join(where)
    hub_row = where.index(f"{DRAFT_REPO}/{DRAFT_FILE}")
    assert "target lfm2 (hybrid)" in pane.drafts_table.item(hub_row, 3).text()

    pane.drafts_table.selectRow(hub_row)  # on the Hub: downloaded, then paired with the file
    pane.download_button.click()
    qtbot.waitUntil(lambda: dialog.installed_table.rowCount() == 3, timeout=TIMEOUT_MS)
    assert dialog.progress_label.text() == "Installed qwen2.5-7b-instruct-lfm2 + qwen2.5-0.5b-instruct-q8_0."
    pair = ModelStore().installed()[2]
    assert pair.target_path == mine.resolve() and pair.draft_path is not None
    assert pair.draft_path.read_bytes() == hub.files[DRAFT_REPO, DRAFT_FILE]
    assert cells(dialog, 3)[2] == "lfm2 (hybrid) + llama"

    pane.drafts_table.selectRow(where.index(f"on disk: {on_disk}"))  # on disk: paired at once
    pane.download_button.click()
    qtbot.waitUntil(lambda: dialog.installed_table.rowCount() == 4, timeout=TIMEOUT_MS)
    assert cells(dialog, 5)[3] == f"{mine.name} + draft_related.gguf"
    dialog.close()


def test_the_manager_fits_a_1280x720_screen(qtbot: QtBot, data_dir: Path) -> None:
    room = QSize(1280, 720)
    size = fitted(SIZE, room)
    assert size.width() <= 1280 and size.height() <= 720 - 40 and fitted(SIZE, QSize(1920, 1080)) == SIZE
    dialog = manager(qtbot, [])
    assert dialog.minimumSizeHint().height() <= size.height()
    dialog.resize(size)
    qtbot.waitUntil(lambda: dialog.size() == size, timeout=TIMEOUT_MS)
    close = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Close)
    for w in (dialog.download_button, dialog.cancel_button, close, dialog.import_button, dialog.drafts_button,
              dialog.search.download_button, dialog.search.search_button):
        assert isinstance(w, QWidget) and w.isVisible()
        corner = w.mapTo(dialog, QPoint(w.width(), w.height()))
        assert dialog.rect().contains(corner), (w.text(), corner, dialog.size())
    dialog.close()

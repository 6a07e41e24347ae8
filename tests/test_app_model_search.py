"""The model manager's Hub search pane against the stand-in Hub: typing, results, fit, drafts, download."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from app.models.manager import ModelManagerDialog
from tests.app_helpers import QT_STRICT, TIMEOUT_MS
from tests.hub_models import (
    DRAFT_FILE,
    DRAFT_REPO,
    NO_GGUF_REPO,
    TARGET_FILE,
    TARGET_REPO,
    TOKEN_REPO,
    hub,
    hub_models,
)
from tests.hub_server import HubState

__all__ = ["hub", "hub_models"]  # fixtures
pytestmark = QT_STRICT
GB = 1_000_000_000
SHOTS_ENV = "SSD_CHAT_SCREENSHOTS"  # a folder: the pane is saved there at 1400x900 (the docs' pictures)


def manager(qtbot: QtBot) -> ModelManagerDialog:
    dialog = ModelManagerDialog(memory=(16 * GB, None))
    qtbot.addWidget(dialog)
    dialog.resize(1400, 900)
    dialog.show()
    return dialog


def cells(table: object, col: int) -> list[str]:
    return [table.item(r, col).text() for r in range(table.rowCount())]  # type: ignore[attr-defined]


def shot(dialog: ModelManagerDialog, name: str) -> None:
    folder = os.environ.get(SHOTS_ENV)
    if folder:
        assert dialog.grab().save(str(Path(folder) / name))


def search_for(qtbot: QtBot, dialog: ModelManagerDialog, text: str) -> None:
    pane = dialog.search
    pane.search_box.clear()
    qtbot.keyClicks(pane.search_box, text)
    pane.search_box.returnPressed.emit()


def test_search_files_drafts_and_download_while_the_window_answers(
    qtbot: QtBot, hub: HubState, data_dir: Path
) -> None:
    dialog = manager(qtbot)
    pane = dialog.search
    hub.api_slow_s = 0.5  # every API answer takes a while: the window must keep handling events meanwhile
    ticks: list[int] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(len(cells(pane.repos_table, 0))))
    timer.start(20)
    search_for(qtbot, dialog, "qwen2.5 instruct")
    assert pane.repos_table.rowCount() == 0 and pane.note.text().startswith("Searching the Hub for “qwen2.5 instruct”")
    qtbot.waitUntil(lambda: pane.repos_table.rowCount() > 0, timeout=TIMEOUT_MS)
    timer.stop()
    assert ticks.count(0) >= 3  # the event loop ran many times while the Hub was answering
    assert cells(pane.repos_table, 0)[:3] == [TARGET_REPO, DRAFT_REPO, TOKEN_REPO]
    assert NO_GGUF_REPO not in cells(pane.repos_table, 0)
    hub.api_slow_s = 0.0

    pane.repos_table.selectRow(0)
    qtbot.waitUntil(lambda: pane.models_table.rowCount() == 2, timeout=TIMEOUT_MS)
    assert cells(pane.models_table, 0) == ["Q8_0", "F16"] and cells(pane.models_table, 1) == ["30.4 MB", "30.4 MB"]
    assert cells(pane.models_table, 2) == ["fits", "fits"] and "of 16.0 GB free RAM" in cells(pane.models_table, 3)[0]
    assert cells(pane.models_table, 4)[1].endswith("(+1 parts)")
    assert not pane.draft_button.isEnabled()
    pane.models_table.selectRow(0)
    assert pane.draft_button.isEnabled()
    pane.draft_button.click()
    qtbot.waitUntil(lambda: "best first" in pane.note.text(), timeout=TIMEOUT_MS)
    verdicts = cells(pane.drafts_table, 0)
    assert verdicts[0] == "compatible" and cells(pane.drafts_table, 1)[0] == f"{DRAFT_REPO}/{DRAFT_FILE}"
    assert "incompatible" in verdicts and "unchecked" in verdicts
    reasons = cells(pane.drafts_table, 3)
    assert any(r.startswith("vocabulary differs: token 1000 differs") for r in reasons)
    assert pane.drafts_table.item(0, 0).foreground().color().name() == "#1a7f37"
    shot(dialog, "model-search-drafts.png")

    pane.drafts_table.selectRow(verdicts.index("incompatible"))
    assert not pane.download_button.isEnabled()
    pane.drafts_table.selectRow(0)
    assert pane.download_button.isEnabled()
    hub.slow_s = 0.02  # 16 KiB pieces: the download lasts long enough to cancel it
    pane.download_button.click()
    qtbot.waitUntil(lambda: dialog.progress_bar.value() > 0, timeout=TIMEOUT_MS)
    assert dialog.cancel_button.isEnabled() and TARGET_FILE in dialog.progress_label.text()
    shot(dialog, "model-search-download.png")
    dialog.cancel_button.click()
    qtbot.waitUntil(lambda: "Download resumes" in dialog.progress_label.text(), timeout=TIMEOUT_MS)
    kept = list((data_dir / "models").rglob("*.incomplete"))
    assert len(kept) == 1 and kept[0].stat().st_size > 0
    kept_size = kept[0].stat().st_size
    hub.slow_s = 0.0
    pane.download_button.click()
    qtbot.waitUntil(lambda: dialog.progress_label.text().startswith("Installed"), timeout=TIMEOUT_MS)
    assert hub.gets(TARGET_FILE)[-1].range == f"bytes={kept_size}-"  # resumed where the cancel left it
    assert [p.id for p in dialog.installed] == ["hub-qwen2.5-7b-instruct-q8-0+qwen2.5-0.5b-instruct-q8-0"]
    assert not list((data_dir / "models").rglob("*.incomplete"))
    dialog.close()


def test_bad_input_in_the_pane_is_a_red_line(qtbot: QtBot, hub: HubState, data_dir: Path) -> None:
    dialog = manager(qtbot)
    pane = dialog.search
    search_for(qtbot, dialog, "   ")
    assert pane.note.text() == "Type a model's name to search for, e.g. qwen2.5 7b."
    assert "cf222e" in pane.note.styleSheet()
    search_for(qtbot, dialog, "no-such-model")
    qtbot.waitUntil(lambda: "No GGUF repositories match" in pane.note.text(), timeout=TIMEOUT_MS)
    pane.list_repo(NO_GGUF_REPO)
    qtbot.waitUntil(lambda: "has no GGUF files" in pane.note.text(), timeout=TIMEOUT_MS)
    assert pane.note.text().startswith(f"Cannot list {NO_GGUF_REPO}: ")
    hub.rate_limited = 2
    search_for(qtbot, dialog, "qwen")
    qtbot.waitUntil(lambda: "HTTP 429" in pane.note.text(), timeout=TIMEOUT_MS)
    assert pane.note.text().startswith("Search failed: the Hub is limiting requests (HTTP 429); try again in 1 s")
    assert pane.repos_table.rowCount() == 0
    dialog.close()


@pytest.mark.parametrize("query", ["qwen2.5 7b"])
def test_a_newer_search_wins_over_a_slower_older_one(qtbot: QtBot, hub: HubState, data_dir: Path, query: str) -> None:
    dialog = manager(qtbot)
    pane = dialog.search
    hub.api_slow_s = 0.3
    search_for(qtbot, dialog, "llama")
    search_for(qtbot, dialog, query)
    qtbot.waitUntil(lambda: "GGUF repositories for “qwen2.5 7b”" in pane.note.text(), timeout=TIMEOUT_MS)
    assert cells(pane.repos_table, 0) == [TARGET_REPO]
    dialog.close()


def test_more_results_pages_through_a_long_search(qtbot: QtBot, hub: HubState, data_dir: Path) -> None:
    for i in range(25):
        hub.add(f"acme/many-{i:02d}-GGUF", f"many-{i:02d}-Q4_0.gguf", b"GGUF")
        hub.repo_meta[f"acme/many-{i:02d}-GGUF"] = {"downloads": 1000 - i}
    dialog = manager(qtbot)
    pane = dialog.search
    search_for(qtbot, dialog, "acme many")
    qtbot.waitUntil(lambda: pane.repos_table.rowCount() == 20, timeout=TIMEOUT_MS)
    assert pane.more_button.isEnabled() and "(more available)" in pane.note.text()
    pane.more_button.click()
    qtbot.waitUntil(lambda: pane.repos_table.rowCount() == 25, timeout=TIMEOUT_MS)
    assert cells(pane.repos_table, 0) == [f"acme/many-{i:02d}-GGUF" for i in range(25)]
    assert not pane.more_button.isEnabled() and pane.note.text() == "25 GGUF repositories for “acme many”"
    dialog.close()

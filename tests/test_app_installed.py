"""Installed pairs are marked wherever a pair is listed: the model manager's catalog and ``models list``,
including a catalog entry whose files an installed pair under another id already has (the offline pair)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.models.manager import ModelManagerDialog
from app.models.pair_status import intact_text
from engine import ModelStore, TinyPair, installed_as, load_catalog
from engine.cli.main import main
from tests.app_helpers import QT_STRICT, TIMEOUT_MS

pytestmark = QT_STRICT

GB = 1_000_000_000


def _file(path: Path) -> dict[str, object]:
    return {"repo": f"acme/{path.stem}-GGUF", "filename": path.name, "size": path.stat().st_size, "sha256": None,
            "quant": "F32"}


@pytest.fixture
def catalog(tiny: TinyPair, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A catalog with the tiny pair's files under the id "tiny-hub", and a pair nobody has installed."""
    def entry(pair_id: str, target: Path, draft: Path) -> dict[str, object]:
        return {"id": pair_id, "name": f"Tiny {pair_id}", "target": _file(target), "draft": _file(draft),
                "context_length": 2048, "licence": "mit", "ram_bytes": 10_000_000, "vram_bytes": 12_000_000}

    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"pairs": [entry("tiny-hub", tiny.target, tiny.draft_related),
                                          entry("other", tiny.target, tiny.small_draft)]}))
    monkeypatch.setenv("SSD_CHAT_CATALOG", str(path))
    return path


def test_a_catalog_entry_with_the_files_of_an_installed_pair_is_installed(
    qtbot: QtBot, catalog: Path, tiny: TinyPair, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ModelStore()
    mine = store.import_pair(tiny.target, tiny.draft_related, "My tiny pair")  # another id, the same files
    specs = load_catalog()
    assert installed_as(specs[0], store.installed()) == mine
    assert installed_as(specs[1], store.installed()) is None  # another draft: not the same pair

    dialog = ModelManagerDialog(memory=(8 * GB, None))
    qtbot.addWidget(dialog)
    dialog.show()
    status, other = dialog.catalog_table.item(0, 6), dialog.catalog_table.item(1, 6)
    assert status is not None and other is not None
    assert status.text() == "installed as My tiny pair" and mine.id in status.toolTip()
    assert other.text() == ""
    dialog.catalog_table.selectRow(0)
    assert not dialog.download_button.isEnabled(), "no Download for a pair that is installed"
    dialog.catalog_table.selectRow(1)
    assert dialog.download_button.isEnabled()

    dialog.verify_button.click()
    qtbot.waitUntil(lambda: "intact" in dialog.message.text(), timeout=TIMEOUT_MS)
    assert dialog.message.text() == "The installed pair is intact."
    dialog.close()

    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "tiny-hub  Tiny tiny-hub  (F32 + F32, " in out and f"[installed as {mine.id}]" in out
    assert "other  Tiny other  (F32 + F32, " in out
    assert out.count("[installed") == 1


def test_intact_message_counts_properly() -> None:
    assert intact_text(0) == "No pairs are installed."
    assert intact_text(1) == "The installed pair is intact."
    assert intact_text(3) == "All 3 installed pairs are intact."

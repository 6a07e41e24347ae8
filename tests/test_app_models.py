"""The model manager (fit labels, import, activation, download with cancel and resume) and first run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.models.manager import ModelManagerDialog
from app.settings.store import ActivePair
from app.startup.first_run import FirstRun
from engine import (
    DownloadCancelled,
    DownloadProgress,
    InstalledPair,
    ModelStore,
    PairSpec,
    TinyPair,
    hub,
    load_catalog,
    offline,
)
from tests.app_helpers import QT_STRICT, TIMEOUT_MS

pytestmark = QT_STRICT

GB = 1_000_000_000


def manager(qtbot: QtBot, **kw: object) -> ModelManagerDialog:
    dialog = ModelManagerDialog(memory=(8 * GB, None), **kw)  # type: ignore[arg-type]
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def column(dialog: ModelManagerDialog, col: int) -> list[str]:
    t = dialog.catalog_table
    return [t.item(r, col).text() for r in range(t.rowCount())]


def test_catalog_fit_labels_and_reasons(qtbot: QtBot, data_dir: Path) -> None:
    dialog = manager(qtbot)
    assert dialog.catalog, "the bundled catalog is empty"
    labels = column(dialog, 4)
    assert set(labels) <= {"fits", "tight", "too large"}
    assert all(column(dialog, 5)), "every pair says why it fits or not"
    assert "RAM free" in dialog.machine_label.text()
    tiny_ram = ModelManagerDialog(memory=(1, None))
    qtbot.addWidget(tiny_ram)
    assert set(column(tiny_ram, 4)) == {"too large"}
    assert all("only" in reason for reason in column(tiny_ram, 5))
    tiny_ram.close()
    dialog.close()


def test_import_refuses_an_incompatible_pair_then_imports_and_activates(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair
) -> None:
    dialog = manager(qtbot)
    dialog.import_files(tiny.target, tiny.small_draft)  # on the worker thread: hashing reads every byte
    qtbot.waitUntil(lambda: dialog.message.text().startswith("Cannot import:"), timeout=TIMEOUT_MS)
    assert "cannot be the draft" in dialog.message.text()
    dialog.import_files(tiny.target, tiny.draft_related)
    qtbot.waitUntil(lambda: dialog.message.text().startswith("Imported"), timeout=TIMEOUT_MS)
    assert dialog.installed_table.rowCount() == 1
    dialog.installed_table.selectRow(0)
    assert dialog.use_button.isEnabled()
    with qtbot.waitSignal(dialog.pair_activated, timeout=TIMEOUT_MS) as blocker:
        dialog.use_button.click()
    active: ActivePair = blocker.args[0]  # type: ignore[index]
    assert Path(active.target) == tiny.target.resolve() and Path(str(active.draft)) == tiny.draft_related.resolve()
    assert dialog.installed_table.item(0, 0).text() == "●"
    dialog.verify_button.click()
    assert not dialog.verify_button.isEnabled()
    qtbot.waitUntil(lambda: "intact" in dialog.message.text(), timeout=TIMEOUT_MS)
    assert dialog.verify_button.isEnabled()
    dialog.close()


def test_download_progress_cancel_and_resume(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def fake_download(spec: PairSpec, store: ModelStore, *, progress: object, cancel: threading.Event) -> InstalledPair:
        calls.append(1)
        report = progress  # type: ignore[assignment]
        if len(calls) == 1:
            report(DownloadProgress(spec.target.filename, 100, 1000, 50.0, 18.0))  # type: ignore[operator]
            assert cancel.wait(10)
            raise DownloadCancelled("cancelled")
        report(DownloadProgress(spec.draft.filename, 1000, 1000, 50.0, 0.0))  # type: ignore[operator]
        return store.register(spec.id, spec.name, tiny.target, tiny.draft_related, "hub")

    monkeypatch.setattr(hub, "download_pair", fake_download)
    spec = load_catalog()[0]
    dialog = manager(qtbot, catalog=[spec])
    dialog.catalog_table.selectRow(0)
    assert dialog.download_button.isEnabled() and not dialog.cancel_button.isEnabled()
    dialog.download_button.click()
    qtbot.waitUntil(lambda: dialog.progress_bar.value() == 100, timeout=TIMEOUT_MS)
    assert dialog.cancel_button.isEnabled() and "left" in dialog.progress_label.text()
    dialog.cancel_button.click()
    qtbot.waitUntil(lambda: "resumes" in dialog.catalog_table.item(0, 6).text(), timeout=TIMEOUT_MS)
    dialog.catalog_table.selectRow(0)
    dialog.download_button.click()
    qtbot.waitUntil(lambda: dialog.catalog_table.item(0, 6).text() == "installed", timeout=TIMEOUT_MS)
    assert dialog.progress_bar.value() == 1000 and len(calls) == 2
    assert dialog.catalog_table.item(0, 6).text() == "installed"
    assert [p.id for p in dialog.installed] == [spec.id]
    dialog.close()


def test_download_errors_are_shown(qtbot: QtBot, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*_a: object, **_k: object) -> InstalledPair:
        raise hub.NotFoundError("repo x/y has no file z.gguf")

    monkeypatch.setattr(hub, "download_pair", failing)
    dialog = manager(qtbot, catalog=load_catalog()[:1])
    dialog.start_download(dialog.catalog[0])
    qtbot.waitUntil(lambda: "has no file z.gguf" in dialog.message.text(), timeout=TIMEOUT_MS)
    assert dialog.catalog_table.item(0, 6).text() == "failed"
    dialog.close()


def test_first_run_without_models_opens_the_manager(
    qtbot: QtBot, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offline, "extra_installed", lambda: False)
    parent = ModelManagerDialog(memory=(GB, None))
    qtbot.addWidget(parent)
    first = FirstRun(parent)
    with qtbot.waitSignal(first.manager_needed, timeout=TIMEOUT_MS):
        first.start(None)
    parent.close()


def test_first_run_sets_up_the_offline_pair_with_progress(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports: list[tuple[str, int, int]] = []

    def fake_ensure(dest: Path, progress: object) -> offline.OfflinePair:
        for role in ("target", "draft"):
            for done in (0, 50, 100):
                progress(role, done, 100)  # type: ignore[operator]
        return offline.OfflinePair(tiny.target, tiny.draft_related)

    pair = InstalledPair(offline.PAIR_ID, "Offline", tiny.target, tiny.draft_related, 1, 1, "offline")
    monkeypatch.setattr(offline, "extra_installed", lambda: True)
    monkeypatch.setattr(offline, "ensure_pair", fake_ensure)
    monkeypatch.setattr(ModelStore, "installed", lambda self: [])
    monkeypatch.setattr(ModelStore, "get", lambda self, pid: pair if pid == offline.PAIR_ID else None)
    parent = ModelManagerDialog(memory=(GB, None))
    qtbot.addWidget(parent)
    first = FirstRun(parent)
    first.destroyed.connect(lambda: None)
    with qtbot.waitSignal(first.pair_ready, timeout=TIMEOUT_MS) as blocker:
        first.start(None)
        assert first.progress is not None
        assert first._worker is not None
        first._worker.progressed.connect(lambda *a: reports.append(a))
    active: ActivePair = blocker.args[0]  # type: ignore[index]
    assert active.pair_id == offline.PAIR_ID and active.target == str(tiny.target)
    assert first.progress is None
    parent.close()


def test_first_run_prefers_the_last_active_pair(qtbot: QtBot, data_dir: Path, tiny: TinyPair) -> None:
    parent = ModelManagerDialog(memory=(GB, None))
    qtbot.addWidget(parent)
    first = FirstRun(parent)
    last = ActivePair("tiny", "Tiny", str(tiny.target), str(tiny.draft_related))
    with qtbot.waitSignal(first.pair_ready, timeout=TIMEOUT_MS, check_params_cb=lambda p: p == last):
        first.start(last)
    parent.close()

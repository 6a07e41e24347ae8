"""The first run's progress dialog while the offline pair is assembled: one figure, the bar's and the line's."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from app.settings.store import ActivePair
from app.startup.first_run import FirstRun
from engine import InstalledPair, ModelStore, TinyPair, offline
from tests.app_helpers import QT_STRICT, TIMEOUT_MS

pytestmark = QT_STRICT


def test_the_bar_and_the_line_show_the_same_figure(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def fake_ensure(dest: Path, progress: object) -> offline.OfflinePair:  # done once the test has looked
        release.wait(TIMEOUT_MS / 1000)
        return offline.OfflinePair(tiny.target, tiny.draft_related)

    pair = InstalledPair(offline.PAIR_ID, "Offline", tiny.target, tiny.draft_related, 1, 1, "offline")
    monkeypatch.setattr(offline, "extra_installed", lambda: True)
    monkeypatch.setattr(offline, "ensure_pair", fake_ensure)
    monkeypatch.setattr(ModelStore, "installed", lambda self: [])
    monkeypatch.setattr(ModelStore, "get", lambda self, pid: pair if pid == offline.PAIR_ID else None)
    parent = QWidget()
    qtbot.addWidget(parent)
    first = FirstRun(parent)
    with qtbot.waitSignal(first.pair_ready, timeout=TIMEOUT_MS) as blocker:
        first.start(None)
        dialog = first.progress
        assert dialog is not None
        seen: list[tuple[str, float, bool]] = []
        for role in ("target", "draft"):
            for done in (0, 780, 1000):  # bytes of 1000, as the worker reports them
                first._on_progressed(role, done, 1000)
                seen.append((dialog.labelText(), 100 * dialog.value() / dialog.maximum(), dialog.isVisible()))
        release.set()
    active: ActivePair = blocker.args[0]
    assert active.pair_id == offline.PAIR_ID
    assert seen[1][0] == "Setting up the offline model pair: target (1 of 2): 78 %"
    assert seen[4][0] == "Setting up the offline model pair: draft (2 of 2): 78 %"
    for line, bar, visible in seen:
        figure = re.search(r"(\d+) %$", line)
        assert figure is not None and float(figure.group(1)) == bar, (line, bar)  # one figure
        assert visible, "the target's 100 % does not close the dialog before the draft"

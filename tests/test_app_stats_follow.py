"""The line under a streaming reply counts the text it is painted with: the stats come with every token's text
(they came every 0.1 s, from the engine process every 0.1 s more, and lagged the text by several tokens)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from tests.app_helpers import QT_STRICT, REPLY_MS, SteppingEngine, closing, send, stepping_window

pytestmark = QT_STRICT

__all__ = ["closing"]

WORDS = 60
COUNT = re.compile(r"(\d+) tokens?\b")


def test_the_stats_line_follows_the_text(qtbot: QtBot, data_dir: Path, closing: list[MainWindow],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    engine = SteppingEngine(" ".join(f"w{i}" for i in range(WORDS)), step_s=0.02)  # 50 tokens a second
    w = stepping_window(qtbot, engine)
    closing.append(w)
    view = w.chat_view
    painted: list[tuple[int, int]] = []  # (words shown, tokens the line under them counts), at each repaint
    repaint = view._repaint

    def watched() -> None:
        live = view._live
        if live is not None and live.text:
            found = COUNT.search(live.status)
            painted.append((len(live.text.split()), int(found.group(1)) if found else 0))
        repaint()

    monkeypatch.setattr(view, "_repaint", watched)
    send(qtbot, w, "count", REPLY_MS)
    assert len(painted) >= 10
    # A token's text and its stats are two events in a row: a repaint may fall between them, never further behind.
    behind = [shown - counted for shown, counted in painted]
    assert max(behind) <= 1 and min(behind) >= 0, painted

"""Settings says so next to a fixed mode that auto measured as much slower on this machine."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.settings.dialog import SettingsDialog
from app.settings.mode_note import mode_note
from app.settings.store import SettingsStore
from engine import Engine, EngineConfig, GenerationParams, MeasuredRate, TinyPair
from tests.app_helpers import QT_STRICT, closing, fast_settings, open_window, send, tiny_pair

pytestmark = QT_STRICT

__all__ = ["closing"]

RATES = {"ar": MeasuredRate("ar", "ar", 6.2), "sd": MeasuredRate("sd", "sd(K=3)", 9.1),
         "ssd": MeasuredRate("ssd", "ssd(K=3, M=4)", 2.6)}


def test_the_engine_reports_the_rates_auto_measured(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024, threads=1,
                             draft_threads=1)) as eng:
        assert eng.measured_rates() == {}, "nothing is measured before auto runs"
        eng.generate(eng.chat_tokens("Hello"), GenerationParams(mode="ar", max_tokens=16)).run()
        assert set(eng.measured_rates()) == {"ar"}, "a fixed mode's rounds feed auto's cost model"
        eng.generate(eng.chat_tokens("Hello"), GenerationParams(mode="auto", max_tokens=48)).run()
        rates = eng.measured_rates()
    assert {"ar", "sd"} <= set(rates) and all(r.tokens_per_second > 0 for r in rates.values())
    assert rates["ar"].plan == "ar" and rates["sd"].plan.startswith("sd(K=")


def test_the_note_names_the_measured_rates() -> None:
    assert mode_note("ssd", RATES) == (
        "auto measured ssd on this machine at about 2.6 tok/s, against 9.1 tok/s with sd(K=3): ssd is much "
        "slower here (29% of it). auto picks the faster mode by itself.")
    assert mode_note("sd", RATES) == ""  # the fastest
    assert mode_note("ar", RATES) == ""  # 68 %: slower, not much slower
    assert mode_note("auto", RATES) == ""
    assert mode_note("ssd", {"ar": RATES["ar"]}) == ""  # auto has not run ssd here: nothing to say


def test_the_dialog_shows_the_note_beside_the_mode(qtbot: QtBot, data_dir: Path) -> None:
    dialog = SettingsDialog(fast_settings(mode="auto"), rates=RATES)
    qtbot.addWidget(dialog)
    dialog.show()
    assert not dialog.mode_note.isVisible()
    dialog.mode.setCurrentIndex(dialog.mode.findData("ssd"))
    assert dialog.mode_note.isVisible() and "2.6 tok/s" in dialog.mode_note.text()
    dialog.mode.setCurrentIndex(dialog.mode.findData("sd"))
    assert not dialog.mode_note.isVisible()


def test_auto_replies_feed_the_note_across_restarts(qtbot: QtBot, data_dir: Path, tiny: TinyPair,
                                                   closing: list[MainWindow]) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="auto", max_tokens=48))
    closing.append(w)
    assert w.pairs.measured_rates() == {}
    send(qtbot, w, "measure this machine")
    measured = w.pairs.measured_rates()
    assert {"ar", "sd"} <= set(measured)
    key = f"{w.pairs.pair.target}|{w.pairs.pair.draft}"  # type: ignore[union-attr]
    assert SettingsStore().measured_rates(key) == measured  # kept for the next start
    w.open_settings()
    assert w.settings_dialog.rates == measured
    w.settings_dialog.reject()

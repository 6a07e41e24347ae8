"""The app's seed and sampling scheme: a set seed gives its reply in every mode, seed 0 a fresh one per reply,
Regenerate another; Verify exactness checks a seeded sampled reply as it checks a greedy one."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.exactness.text import passed
from app.main_window import MainWindow
from app.settings.values import Settings
from app.worker.engine_worker import EngineState
from engine import TinyPair
from tests.app_helpers import QT_STRICT, TIMEOUT_MS, closing, fast_settings, open_window, tiny_pair

pytestmark = QT_STRICT

__all__ = ["closing"]


def test_a_set_seed_is_the_replys_and_regenerate_moves_it() -> None:
    s = Settings(temperature=0.8, seed=7)
    assert s.generation_params(has_draft=True).sampling.seed == 7
    assert s.generation_params(has_draft=True, seed_offset=2).sampling.seed == 9
    assert s.generation_params(has_draft=True).sampling.scheme == "coupled"
    assert Settings(scheme="rejection").generation_params(has_draft=True).sampling.scheme == "rejection"


def test_seed_zero_draws_a_fresh_seed_for_every_reply() -> None:
    s = Settings(temperature=0.8, seed=0)
    seeds = {s.generation_params(has_draft=True, seed_offset=0).sampling.seed for _ in range(8)}
    assert len(seeds) > 1
    assert "Sampling scheme" in Settings(scheme="fast").problems()["scheme"].capitalize()


def _verify(qtbot: QtBot, w: MainWindow) -> None:
    w.prompt_edit.setPlainText("check me")
    with qtbot.waitSignal(w.host.verification_finished, timeout=TIMEOUT_MS):
        w.verify_action.trigger()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)


def test_verify_exactness_checks_a_seeded_sampled_reply(qtbot: QtBot, data_dir: Path, tiny: TinyPair,
                                                        closing: list[MainWindow]) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(temperature=0.9, top_k=20, seed=7, max_tokens=24))
    closing.append(w)
    _verify(qtbot, w)
    result = w.exactness.last
    assert result is not None and result.setting == "sampled (seed 7)" and passed(result), w.readout.text()
    assert w.readout.text().startswith("Identical") and "sampled (seed 7) ssd" in w.readout.text()


def test_under_rejection_sampling_the_check_stays_greedy(qtbot: QtBot, data_dir: Path, tiny: TinyPair,
                                                         closing: list[MainWindow]) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(temperature=0.9, seed=7, scheme="rejection"))
    closing.append(w)
    _verify(qtbot, w)
    assert w.readout.text() == "Identical: greedy ssd produced the same 24 tokens as ar."

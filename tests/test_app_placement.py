"""The app says where the layers went (the model line after a load) and warns where a fixed drafting mode
cannot pay (the readout), from the engine's own placement and warning."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.chat.readout import readout_html
from app.worker.engine_worker import EngineWorker, LoadRequest
from engine import EngineConfig, TinyPair


def test_the_readout_shows_the_engines_warning() -> None:
    stats = {"mode": "ssd", "tokens_per_second": 11.0, "new_tokens": 64, "decode_s": 5.8, "finish_reason": "length",
             "warning": "ssd cannot pay here: the draft runs on the CPU; mode auto picks what pays"}
    text = readout_html(stats)
    assert "⚠ ssd cannot pay here" in text and "auto picks what pays" in text
    assert "⚠" not in readout_html({**stats, "warning": None})


def test_a_loaded_pair_names_where_its_layers_went(qtbot: QtBot, tiny: TinyPair) -> None:
    worker = EngineWorker()
    cfg = EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=256)
    with qtbot.waitSignal(worker.model_loaded, timeout=60_000) as loaded:
        worker.load(LoadRequest(cfg, "tiny pair"))
    assert loaded.args == ["tiny pair (CPU build: both models on the CPU)"]
    worker.close_engine()

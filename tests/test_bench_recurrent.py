"""``bench --scenarios H`` (issue 58 item 6): tiny recurrent and hybrid pairs, speculation against ar, with the
checkpoint's cost per round in the table and the JSON file; and what Settings says of these architectures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from engine.bench import recurrent
from engine.cli.main import main
from engine.errors import EngineError
from engine.models import archs


def test_the_bench_reports_the_checkpoint_cost_per_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--scenarios", "H", "--modes", "ar,sd", "--max-tokens", "24", "--prompts", "1",
            "--model-dir", str(tmp_path / "models"), "--out", str(tmp_path / "out" / "bench.json")]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["pair", "mode", "tok/s", "vs", "ar", "accept", "verify", "ms", "restore", "ms", "of",
                              "verify", "exact"]
    data = json.loads((tmp_path / "out" / "bench_recurrent.json").read_text())
    rows = {(r["pair"], r["mode"]): r for r in data["rows"]}
    assert set(rows) == {(p, m) for p in recurrent.PAIRS for m in ("ar", "sd")}
    assert all(r["exact_vs_ar"] == "1/1" for r in rows.values())  # greedy: ar's reply in every mode
    assert all(rows[p, "ar"]["speedup_vs_ar"] == 1.0 for p in recurrent.PAIRS)
    mamba = rows["mamba+mamba", "sd"]  # a checkpoint goes back: its cost is part of the verify
    assert mamba["rounds"] > 0 and 0 < mamba["mean_restore_ms"] < mamba["mean_verify_ms"]
    assert mamba["restore_share"] == pytest.approx(mamba["mean_restore_ms"] / mamba["mean_verify_ms"])
    assert rows["lfm2+lfm2", "sd"]["mean_restore_ms"] is None  # llama.cpp rolls lfm2 back: no checkpoint
    assert rows["lfm2+llama", "sd"]["acceptance_rate"] is not None  # the attention-only draft ran
    line = next(x for x in out if x.startswith("mamba+mamba  sd"))
    assert f"{mamba['mean_restore_ms']:.3f}" in line and f"{mamba['restore_share']:.0%}" in line
    assert next(x for x in out if x.startswith("lfm2+lfm2    sd")).split()[6:8] == ["-", "-"]

    # the models are written once: a second run reuses them
    written = {p: p.stat().st_mtime_ns for p in (tmp_path / "models").iterdir()}
    assert len(written) == 5  # two targets, two related drafts, one llama draft
    assert main([*argv[:4], "ar", *argv[5:]]) == 0
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "models").iterdir()} == written
    capsys.readouterr()
    assert main([*argv[:4], "ar,fast", *argv[5:]]) == 2
    assert capsys.readouterr().err.strip() == f"error: {EngineError(recurrent.unknown_mode('fast'))}"


def test_settings_say_which_architectures_speculate_and_at_what_cost(qtbot: QtBot) -> None:
    from PySide6.QtWidgets import QLabel

    from app.settings.dialog import SettingsDialog
    from app.settings.values import Settings

    dialog = SettingsDialog(Settings(), gpu_offload=True)
    qtbot.addWidget(dialog)
    note = dialog.findChild(QLabel, "arch-note")
    assert note is not None and note.text() == archs.SPECULATION_NOTE
    for words in ("Qwen3.5", "LFM2", "roll their state back", "Mamba", "Granite 4.0-H", "checkpoint", "ar faster"):
        assert words in note.text()
    assert all(archs.arch_info(a).undo == archs.ROLLBACK for a in ("qwen35", "nemotron_h", "lfm2"))
    assert all(archs.arch_info(a).undo == archs.CHECKPOINT for a in ("mamba", "granitehybrid", "jamba", "falcon-h1"))

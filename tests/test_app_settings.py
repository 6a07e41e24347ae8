"""Settings: validation without I/O, the dialog's inline validation, persistence through QSettings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialogButtonBox
from pytestqt.qtbot import QtBot

from app.settings.cpu_kernels import CpuKernelsBox
from app.settings.dialog import SettingsDialog
from app.settings.store import ActivePair, SettingsStore
from app.settings.values import Settings, effective_mode, load_fields, setting_options
from engine import OPTIONS, CpuCheckStatus, CpuCheckVerdict, EngineConfig, ParameterError, cpu_check_status
from tests.app_helpers import QT_STRICT

pytestmark = QT_STRICT


def test_defaults_are_valid_and_bad_values_are_named() -> None:
    assert Settings().problems() == {}
    bad = Settings(
        mode="fast",
        k=0,
        fanout=99,
        temperature=-1.0,
        top_p=0.0,
        n_ctx=10,
        max_tokens=0,
        threads=-1,
        gpu_layers=-5,
    )
    assert set(bad.problems()) == {
        "mode",
        "k",
        "fanout",
        "temperature",
        "top_p",
        "n_ctx",
        "max_tokens",
        "threads",
        "gpu_layers",
    }
    assert "between 1 and 16" in bad.problems()["k"]


def test_bounds_and_defaults_are_the_engines() -> None:
    for name, option in setting_options().items():
        if name in OPTIONS:
            assert option is OPTIONS[name]
            assert getattr(Settings(), name) == option.app_default
    lowest, highest = OPTIONS["n_ctx"].minimum, OPTIONS["n_ctx"].maximum
    for n_ctx in (lowest, highest):  # what the engine accepts, the settings accept
        assert "n_ctx" not in Settings(n_ctx=n_ctx).problems()
        EngineConfig("t.gguf", n_ctx=n_ctx)
    message = Settings(n_ctx=lowest - 1).problems()["n_ctx"]
    try:
        EngineConfig("t.gguf", n_ctx=lowest - 1)
    except ParameterError as exc:
        assert str(exc) == message
    else:
        raise AssertionError("EngineConfig accepted a context below its minimum")
    assert load_fields() == ["n_ctx", "threads", "draft_threads", "gpu_layers", "draft_gpu_layers", "parallel",
                             "prompt_cache_mb", "rpc"]


def test_generation_params_follow_the_settings() -> None:
    s = Settings(mode="sd", k=6, temperature=0.3, seed=7)
    p = s.generation_params(has_draft=True)
    assert (p.mode, p.k, p.sampling.temperature, p.sampling.seed) == ("sd", 6, 0.3, 7)
    assert s.generation_params(has_draft=False).mode == "ar"
    assert s.generation_params(has_draft=True, greedy=True).sampling.temperature == 0.0
    assert Settings(mode="auto", adaptive=False).generation_params(has_draft=True).adaptive is False
    assert effective_mode("auto", has_draft=True) == "auto"
    assert effective_mode("auto", has_draft=False) == "auto"  # ar, and lookup when the pool pays


def test_store_round_trip_and_bad_values_fall_back(data_dir: Path) -> None:
    store = SettingsStore()
    assert store.path.parent == data_dir
    s = Settings(
        mode="ssd",
        k=7,
        adaptive=False,
        fanout=3,
        geometric=True,
        temperature=0.2,
        top_p=0.9,
        seed=42,
        n_ctx=2048,
        max_tokens=300,
        threads=1,
        draft_threads=1,
        tint_drafts=True,
    )
    store.save(s)
    store.set_active_pair(ActivePair("p", "Pair", "/m/t.gguf", "/m/d.gguf"))
    again = SettingsStore()
    assert again.load() == s
    assert again.active_pair() == ActivePair("p", "Pair", "/m/t.gguf", "/m/d.gguf")
    text = store.path.read_text().replace("k=7", "k=banana").replace("fanout=3", "fanout=500")
    store.path.write_text(text)
    loaded = SettingsStore().load()
    assert (loaded.k, loaded.fanout, loaded.seed) == (Settings().k, Settings().fanout, 42)


def test_dialog_validates_inline_and_blocks_ok(qtbot: QtBot, data_dir: Path) -> None:
    dialog = SettingsDialog(Settings(), gpu_offload=False, cpu_kernels=CpuKernelsBox(SAFE))
    qtbot.addWidget(dialog)
    dialog.show()
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert ok.isEnabled()
    dialog.edits["k"].setText("0")
    assert not ok.isEnabled()
    assert dialog.errors["k"].isVisible() and "between 1 and 16" in dialog.errors["k"].text()
    dialog.edits["k"].setText("abc")
    assert "enter a whole number" in dialog.errors["k"].text()
    dialog.edits["k"].setText("8")
    dialog.edits["temperature"].setText("0.25")
    dialog.edits["max_tokens"].setText("99999")
    assert not ok.isEnabled() and "context length" in dialog.errors["max_tokens"].text()
    dialog.edits["max_tokens"].setText("512")
    assert ok.isEnabled() and not dialog.errors["k"].isVisible()
    assert "no GPU offload" in dialog.gpu_note.text()
    assert not dialog.edits["gpu_layers"].isEnabled()
    dialog.mode.setCurrentIndex(dialog.mode.findData("ar"))
    assert not dialog.edits["k"].isEnabled() and not dialog.edits["fanout"].isEnabled()
    dialog.accept()
    got = dialog.settings()
    assert (got.k, got.temperature, got.max_tokens, got.mode) == (8, 0.25, 512, "ar")


def test_dialog_restore_defaults(qtbot: QtBot, data_dir: Path) -> None:
    dialog = SettingsDialog(Settings(k=9, seed=3), gpu_offload=True, cpu_kernels=CpuKernelsBox(SAFE))
    qtbot.addWidget(dialog)
    dialog.buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults).click()
    assert dialog.settings() == Settings()
    assert dialog.edits["gpu_layers"].isEnabled() and not dialog.gpu_note.isVisible()


SAFE = CpuCheckStatus(CpuCheckVerdict(True, "decoded a batch of 8 and 2 single tokens", "key", "now"), "auto", True)
FAULTED = CpuCheckStatus(
    CpuCheckVerdict(False, "killed by SIGILL: Fatal Python error: Illegal instruction", "key", "now"), "auto", False)


# What Settings says for each verdict the CPU check can reach; the signal is only in the tooltip (and the log).
VERDICT_TEXTS = {  # plain words: no buffer types, K-quants, kernels or what the check decoded (the tooltip has them)
    "safe": "Fast CPU code for quantized models — on: tested on this computer: it works",
    "amx-dropped": "Fast CPU code for quantized models (AMX) — on, without AMX: this CPU's AMX unit failed the test "
                   "on this computer, so ssd-chat uses the rest of the fast code",
    "faulting": "Fast CPU code for quantized models — off: it failed the test on this computer, so ssd-chat uses "
                "the plain CPU code (slower)",
}


@pytest.mark.parametrize("kind", list(VERDICT_TEXTS))
def test_cpu_kernels_say_what_each_verdict_means(qtbot: QtBot, cpu_verdict: Callable[[str], object],
                                                 kind: str) -> None:
    cpu_verdict(kind)
    box = CpuKernelsBox(amx=False)  # the engine's status, as the dialog reads it
    qtbot.addWidget(box)
    assert box.verdict.text() == VERDICT_TEXTS[kind]
    assert "Segmentation" not in box.verdict.text() and "SIG" not in box.verdict.text()
    for jargon in ("kernel", "repack", "K-quant", "buffer", "decoded"):
        assert jargon not in box.verdict.text()
    if kind != "safe":
        assert "killed by SIGSEGV" in box.verdict.toolTip()


def test_cpu_kernels_before_the_check_and_with_the_users_choice(qtbot: QtBot,
                                                               cpu_verdict: Callable[[str], object]) -> None:
    cpu_verdict("unchecked")
    box = CpuKernelsBox(amx=True)
    qtbot.addWidget(box)
    assert box.verdict.text() == ("Fast CPU code for quantized models (AMX) — on: not tested yet: ssd-chat tests "
                                  "it on this computer when a model first loads")
    box = CpuKernelsBox(FAULTED, amx=True)
    qtbot.addWidget(box)
    assert box.verdict.text().startswith("Fast CPU code for quantized models (AMX) — off: it failed the test")
    assert box.choice() == "auto" and not box.apply()
    box.set_choice("on")
    assert box.apply()
    assert cpu_check_status().override == "on"
    again = CpuKernelsBox(amx=False)
    qtbot.addWidget(again)
    assert again.choice() == "on" and again.verdict.text() == (
        "Fast CPU code for quantized models — on, as you chose; not tested yet: ssd-chat tests it on this computer "
        "when a model first loads")
    assert "— on: tested on this computer: it works" in CpuKernelsBox(SAFE).verdict.text()

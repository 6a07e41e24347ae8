"""Settings as a newcomer reads it: GPU layers in words, the mode list shown whole, one line on each speculation
setting and on "M", a problem under the field that caused it, and a reload said before OK."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QComboBox, QDialogButtonBox, QLabel, QStyle, QStyleOptionComboBox
from pytestqt.qtbot import QtBot

from app.settings.cpu_kernels import CpuKernelsBox
from app.settings.dialog import SettingsDialog
from app.settings.values import Settings
from engine import ALL_LAYERS, AUTO_LAYERS, CpuCheckStatus, CpuCheckVerdict, MeasuredRate
from tests.app_helpers import QT_STRICT

pytestmark = QT_STRICT

SAFE = CpuCheckStatus(CpuCheckVerdict(True, "decoded a batch of 8 and 2 single tokens", "key", "now"), "auto", True)


def dialog_for(qtbot: QtBot, settings: Settings | None = None,
               rates: dict[str, MeasuredRate] | None = None) -> SettingsDialog:
    dialog = SettingsDialog(settings or Settings(), gpu_offload=True, cpu_kernels=CpuKernelsBox(SAFE), rates=rates)
    qtbot.addWidget(dialog)
    dialog.resize(700, 800)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def text_room(combo: QComboBox) -> int:
    """The width the closed list gives its text."""
    opt = QStyleOptionComboBox()
    combo.initStyleOption(opt)
    return combo.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, opt,
                                        QStyle.SubControl.SC_ComboBoxEditField, combo).width()


def test_gpu_layers_read_as_on_the_command_line(qtbot: QtBot, data_dir: Path) -> None:
    dialog = dialog_for(qtbot, Settings(gpu_layers=AUTO_LAYERS, draft_gpu_layers=ALL_LAYERS))
    target, draft = dialog.edits["gpu_layers"], dialog.edits["draft_gpu_layers"]
    assert (target.text(), draft.text()) == ("auto", "all")
    labels = [w.text() for w in dialog.findChildren(QLabel)]
    assert "Target GPU layers (auto, all, none or a number)" in labels and not any("-2 =" in t for t in labels)
    for typed, value in (("none", 0), ("ALL", ALL_LAYERS), ("auto", AUTO_LAYERS), ("12", 12)):
        target.setText(typed)
        assert dialog.settings().gpu_layers == value
    target.setText("most")
    assert "enter auto, all, none or a number" in dialog.errors["gpu_layers"].text()
    target.setText("-5")
    assert dialog.errors["gpu_layers"].isVisible() and "-5" in dialog.errors["gpu_layers"].text()
    dialog.buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults).click()
    assert target.text() == "auto"


@pytest.mark.parametrize("mode", ["ar", "sd", "ssd", "lookup", "auto"])
def test_the_mode_list_shows_its_text_whole(qtbot: QtBot, data_dir: Path, mode: str) -> None:
    dialog = dialog_for(qtbot, Settings(mode=mode))
    combo = dialog.mode
    assert combo.currentText().startswith(f"{mode} — ")
    assert text_room(combo) >= combo.fontMetrics().horizontalAdvance(combo.currentText())
    line = dialog.findChild(QLabel, "mode-line")
    assert line is not None and line.isVisible() and line.text() == combo.itemData(combo.currentIndex(), 3)


def test_each_speculation_setting_and_m_is_explained_in_a_line(qtbot: QtBot, data_dir: Path) -> None:
    rates = {"ssd": MeasuredRate("ssd", "ssd(K=4, M=12)", 30.0), "sd": MeasuredRate("sd", "sd(K=4)", 10.0)}
    dialog = dialog_for(qtbot, Settings(mode="sd"), rates=rates)
    for name in ("fanout", "geometric", "adaptive"):
        line = dialog.findChild(QLabel, f"{name}-line")
        assert line is not None and line.isVisible() and line.text().endswith("."), name
    assert "M=12" in dialog.mode_note.text() and "M the branches of ssd's tree" in dialog.mode_note.text()


def test_a_problem_shows_under_the_field_that_caused_it(qtbot: QtBot, data_dir: Path) -> None:
    dialog = dialog_for(qtbot, Settings(max_tokens=1024, n_ctx=4096))
    dialog.edits["n_ctx"].setText("100")
    assert dialog.errors["n_ctx"].isVisible() and not dialog.errors["max_tokens"].isVisible()
    assert dialog.errors["n_ctx"].text() == "context length must be at least max tokens (1024), got 100"
    dialog.edits["gpu_layers"].setText("none")  # another field changed meanwhile: the error stays where it is
    assert dialog.errors["n_ctx"].isVisible() and not dialog.errors["max_tokens"].isVisible()
    dialog.edits["n_ctx"].setText("4096")
    dialog.edits["max_tokens"].setText("9000")  # now max tokens is the field changed last
    assert dialog.errors["max_tokens"].isVisible() and not dialog.errors["n_ctx"].isVisible()


def test_a_change_that_reloads_the_model_says_so_before_ok(qtbot: QtBot, data_dir: Path) -> None:
    dialog = dialog_for(qtbot)
    assert not dialog.reload_note.isVisible()
    dialog.edits["temperature"].setText("0.5")
    assert not dialog.reload_note.isVisible()  # read per reply: no reload
    dialog.edits["n_ctx"].setText("2048")
    assert dialog.reload_note.isVisible()
    assert dialog.reload_note.text() == "OK reloads the model pair: Context length changed (read when the model loads)."
    dialog.edits["gpu_layers"].setText("none")
    dialog.cpu_kernels.set_choice("off")
    assert "Context length, Target GPU layers and Fast CPU code changed" in dialog.reload_note.text()
    dialog.edits["n_ctx"].setText(str(Settings().n_ctx))
    dialog.edits["gpu_layers"].setText("auto")
    dialog.cpu_kernels.set_choice("auto")
    assert not dialog.reload_note.isVisible()

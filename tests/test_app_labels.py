"""Labels that say what is true: "(AMX)" only on a CPU with AMX, the title after Settings › OK, the model
manager's Status column, the Rename dialog's width, and inline code under the draft tint."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtGui import QTextDocument
from pytestqt.qtbot import QtBot

from app.chat.conversations import ConversationPanel
from app.chat.render import Renderer, mark_runs
from app.main_window import MainWindow
from app.models.tables import new_table, set_cell
from app.settings.cpu_kernels import CpuKernelsBox, cpu_has_amx, verdict_text
from app.settings.dialog import SettingsDialog
from app.settings.store import SettingsStore
from app.settings.values import Settings
from engine import CpuCheckStatus, CpuCheckVerdict, TinyPair
from tests.app_helpers import QT_STRICT, closing, fast_settings, open_window, tiny_pair

pytestmark = QT_STRICT

__all__ = ["closing"]

EPYC = "processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n"
SAPPHIRE = "processor\t: 0\nmodel name\t: Intel Xeon 8481C\nflags\t\t: fpu avx512f amx_bf16 amx_tile amx_int8\n"
SAFE = CpuCheckStatus(CpuCheckVerdict(True, "decoded 8+2 tokens", "key", "now"), "auto", True)
AMX_FAULTS = CpuCheckStatus(
    CpuCheckVerdict(True, "decoded 8+2 tokens", "key", "now", ("AMX",), "killed by SIGILL"), "auto", True, ("AMX",))


@pytest.mark.parametrize(("cpuinfo", "amx"), [(EPYC, False), (SAPPHIRE, True), (None, False)])
def test_amx_is_read_from_the_cpus_flags(tmp_path: Path, cpuinfo: str | None, amx: bool) -> None:
    path = tmp_path / "cpuinfo"
    if cpuinfo is not None:
        path.write_text(cpuinfo, encoding="utf-8")
    assert cpu_has_amx(path) is amx


def test_the_kernels_line_names_amx_only_where_the_cpu_has_it(qtbot: QtBot) -> None:
    assert verdict_text(SAFE, amx=False) == "Fast CPU code for quantized models — on: tested on this computer: it works"
    assert verdict_text(SAFE, amx=True).startswith("Fast CPU code for quantized models (AMX) — on: tested")
    assert verdict_text(AMX_FAULTS, amx=False).startswith(  # the check found AMX (faulting): it is named
        "Fast CPU code for quantized models (AMX) — on, without AMX: this CPU's AMX unit failed the test")
    box = CpuKernelsBox(SAFE, amx=False)
    qtbot.addWidget(box)
    assert "(AMX)" not in box.verdict.text()


def test_the_title_names_the_mode_right_after_settings_ok(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="ssd"))
    closing.append(w)
    assert w.windowTitle().endswith(" — ssd")
    w.open_settings()
    dialog = w.settings_dialog
    dialog.mode.setCurrentIndex(dialog.mode.findData("lookup"))
    dialog.accept()
    assert w.windowTitle().endswith(" — lookup")


def test_the_status_column_stays_in_view_beside_a_long_reason(qtbot: QtBot) -> None:
    headers = ["Pair", "Quant", "Download", "Needs", "Fit", "Why", "Status"]
    table = new_table(headers, stretch="Why")
    qtbot.addWidget(table)
    table.resize(900, 200)
    table.setRowCount(1)
    for col, text in enumerate(["Qwen2.5-Coder 7B + 0.5B", "Q4_K_M", "4.9 GB", "7.1 GB", "tight",
                                "needs more memory than this machine has free: " * 4, "installed, active"]):
        set_cell(table, 0, col, text)
    table.show()
    status = headers.index("Status")
    header = table.horizontalHeader()
    right = header.sectionViewportPosition(status) + header.sectionSize(status)
    assert right <= table.viewport().width()
    assert header.sectionSize(status) >= table.fontMetrics().horizontalAdvance("installed, active")


def test_the_rename_dialog_shows_a_long_title_whole(qtbot: QtBot) -> None:
    panel = ConversationPanel()
    qtbot.addWidget(panel)
    title = "Write a Python stack class with docstrings and a size method"
    dialog = panel.rename_dialog(title)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.width() > dialog.fontMetrics().horizontalAdvance(title)
    assert dialog.textValue() == title


def monospace_chars(body: str) -> int:
    """Characters Qt shows in a monospace font (inline code) in ``body``."""
    doc = QTextDocument()
    doc.setDefaultStyleSheet("code { font-family: 'DejaVu Sans Mono', monospace; }")
    doc.setHtml(body)
    count, block = 0, doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            count += len(fragment.text()) if fragment.charFormat().fontFamilies() else 0
            it += 1
        block = block.next()
    return count


@pytest.mark.parametrize("text", ["Call `stack.push(x)` to add.", "**Note:** `size()` returns `len(self.items)`.",
                                  "- `push(item)`: adds", "### The `Stack` class", "a ``b`c`` d"])
def test_the_tint_keeps_inline_code_wherever_a_draft_run_starts_or_ends(qtbot: QtBot, text: str) -> None:
    renderer = Renderer()
    plain = monospace_chars(renderer.markdown(text))
    assert plain > 0
    n = len(text)
    for start in range(n):
        for end in range(start + 1, n + 1):
            tinted = renderer.markdown(mark_runs(text, [(start, False), (end - start, True), (n - end, False)]))
            assert monospace_chars(tinted) == plain, (start, end)


def test_top_k_and_min_p_are_saved_and_reach_the_engine() -> None:
    settings = Settings(temperature=0.7, top_k=12, min_p=0.2)
    params = settings.generation_params(has_draft=True)
    assert (params.sampling.top_k, params.sampling.min_p, params.sampling.top_p) == (12, 0.2, settings.top_p)


def test_top_k_and_min_p_are_in_the_dialog_and_kept_across_restarts(qtbot: QtBot, data_dir: Path) -> None:
    dialog = SettingsDialog(Settings(), gpu_offload=False, cpu_kernels=CpuKernelsBox(SAFE, amx=False))
    qtbot.addWidget(dialog)
    dialog.edits["top_k"].setText("7")
    dialog.edits["min_p"].setText("0.1")
    chosen = dialog.settings()
    assert (chosen.top_k, chosen.min_p) == (7, 0.1)
    dialog.edits["min_p"].setText("1")
    assert "min_p" in dialog.values()[1] and dialog.errors["min_p"].isVisibleTo(dialog)
    SettingsStore().save(chosen)
    assert (SettingsStore().load().top_k, SettingsStore().load().min_p) == (7, 0.1)

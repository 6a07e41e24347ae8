"""Verify exactness: progress per pass with Cancel, the first difference shown readably with the target's top-2
margin there and what it means."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QPushButton
from pytestqt.qtbot import QtBot

from app.exactness.text import NEAR_TIE, PROMISE, details_html, pass_text, passed, summary
from app.main_window import MainWindow
from app.worker.engine_worker import EngineState
from engine import TinyPair, Verification, VerifyProgress
from tests.app_helpers import QT_STRICT, TIMEOUT_MS, closing, fast_settings, open_window, tiny_pair

pytestmark = QT_STRICT

__all__ = ["closing"]


def different(margin: float, **changes: object) -> Verification:
    values: dict[str, object] = {
        "mode": "ssd", "identical": False, "ar_tokens": 64, "spec_tokens": 64, "first_difference": 59,
        "ar_text": " the list\n", "spec_text": "\treverse", "stopped": False,
        "context": "def reverse(xs):\n    return xs[::-1]\n\nThis returns", "margin": margin}
    values.update(changes)
    return Verification(**values)  # type: ignore[arg-type]


def test_progress_per_pass_then_the_verdict(qtbot: QtBot, data_dir: Path, tiny: TinyPair,
                                            closing: list[MainWindow]) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(max_tokens=24))
    closing.append(w)
    w.prompt_edit.setPlainText("check me")
    seen: list[VerifyProgress] = []
    w.host.verification_progressed.connect(seen.append)
    with qtbot.waitSignal(w.host.verification_finished, timeout=TIMEOUT_MS):
        w.verify_action.trigger()
        assert w.exactness.progress is not None and w.exactness.progress.isVisible()
        assert w.exactness.progress.labelText() == "Pass 1 of 2 — ar (the reference): 0 of 24 tokens"
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    assert [p.pass_no for p in seen] == sorted(p.pass_no for p in seen) and {1, 2} <= {p.pass_no for p in seen}
    assert seen[-1] == VerifyProgress(2, "ssd", 24, 24)
    assert w.exactness.progress is None
    result = w.exactness.last
    assert result is not None and result.identical and not result.stopped and result.margin is None
    assert w.readout.text() == "Identical: greedy ssd produced the same 24 tokens as ar."
    assert w.exactness.box is not None and "Identical" in w.exactness.box.text()


def test_cancel_ends_the_check_without_a_verdict(qtbot: QtBot, data_dir: Path, tiny: TinyPair,
                                                 closing: list[MainWindow]) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(max_tokens=128))
    closing.append(w)
    w.prompt_edit.setPlainText("check me, then stop")
    hold, held = threading.Event(), threading.Event()

    def pause_at_first_report(_p: VerifyProgress) -> None:  # on the engine thread: the check waits here
        if not held.is_set():
            held.set()
            hold.wait(30)

    w.host.worker.verification_progressed.connect(pause_at_first_report, Qt.ConnectionType.DirectConnection)
    with qtbot.waitSignal(w.host.verification_finished, timeout=TIMEOUT_MS) as blocker:
        w.verify_action.trigger()
        assert held.wait(30)
        progress = w.exactness.progress
        assert progress is not None
        try:
            cancel = progress.findChild(QPushButton)
            assert cancel is not None and cancel.text() == "Cancel"
            cancel.click()
            assert progress.labelText() == "Cancelling…"
        finally:
            hold.set()
    assert blocker.args is not None
    result: Verification = blocker.args[0]
    assert result.stopped and not result.identical and result.first_difference is None
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    assert w.exactness.progress is None and w.exactness.box is None  # no verdict box
    assert w.readout.text().startswith("Verify exactness cancelled during pass ")
    assert w.readout.text().endswith(" of 2: no verdict.")


def test_the_first_difference_reads_plainly_with_its_margin_explained(
    qtbot: QtBot, data_dir: Path, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, None)
    closing.append(w)
    near = different(0.0085)
    w.host.verification_finished.emit(near)  # the worker's signal path, as a real check ends
    assert w.readout.text() == ("Different: greedy ssd and ar first differ at token 59 (the target's top-2 margin "
                                "there: 0.0085 logits, a near-tie; on the CPU).")
    box = w.exactness.box
    assert box is not None and box.textFormat() == Qt.TextFormat.RichText
    assert box.icon() == QMessageBox.Icon.Warning  # on the CPU a near-tie is no excuse: a failure
    text = box.text()
    assert "\\" not in text and repr(near.ar_text) not in text  # no repr() and no escapes like \\n
    assert "xs[::-1]↵<br>↵<br>This␣returns" not in text and "xs[::-1]↵<br>↵<br>This returns" in text
    assert "␣the␣list↵" in text and "→reverse" in text
    assert "0.0085 logits apart: a near-tie. On the CPU" in text and "this is a failure" in text
    assert PROMISE in text
    far = different(2.5, ar_text="", spec_text="x")
    assert "(the end)" in details_html(far) and "a clear choice that rounding does not explain" in details_html(far)
    assert summary(far).endswith("(the target's top-2 margin there: 2.5 logits, not a near-tie; on the CPU).")
    assert not passed(far) and not passed(near)
    far_gpu = different(2.5, device="GPU")
    assert not passed(far_gpu) and summary(far_gpu).startswith("Different: ")
    assert NEAR_TIE == 0.5
    assert pass_text(VerifyProgress(2, "ssd", 7, 128)) == "Pass 2 of 2 — ssd: 7 of 128 tokens"


def test_a_near_tie_on_a_gpu_is_identical_up_to_rounding_not_a_failure(
    qtbot: QtBot, data_dir: Path, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, None)
    closing.append(w)
    near = different(0.008, device="GPU")  # the margin a GPU run diverged at on two of three prompts
    assert passed(near)
    w.host.verification_finished.emit(near)
    assert w.readout.text() == ("Identical up to a floating-point near-tie: greedy ssd and ar first differ at token "
                                "59, where the target's top-2 margin is 0.008 logits (GPU).")
    box = w.exactness.box
    assert box is not None and box.icon() == QMessageBox.Icon.Information
    text = box.text()
    assert "0.008 logits apart: a near-tie. On a GPU" in text and "not a speculation error" in text
    assert ("there, and on a GPU, it is identical up to floating-point near-ties (a divergence is shown with its "
            "top-2 margin)") in text
    shot = os.environ.get("SSD_CHAT_SCREENSHOT")  # where to save the box (the docs' picture of a near-tie)
    if shot:
        qtbot.waitExposed(box)
        assert box.grab().save(shot)

"""The readout's "× plain decoding": measured against the planner's plain (ar) rate once enough ar rounds since the
pair loaded stand behind it, never against a figure left by an earlier session, and kept with each reply when it
ends, so later views of the reply show the same figure."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.chat.plain_baseline import KEY, MIN_ROUNDS
from app.main_window import MainWindow
from engine import MeasuredRate, TinyPair
from tests.app_helpers import QT_STRICT, REPLY_MS, closing, fast_settings, open_window, send, tiny_pair

pytestmark = QT_STRICT

__all__ = ["closing"]

GAIN = "× plain decoding"


def test_the_speed_up_needs_a_measured_plain_rate_and_is_kept_with_the_reply(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", max_tokens=24))
    closing.append(w)
    # A plain rate settings.ini kept from an earlier session (auto's first ar round there): not comparable.
    w.store.set_measured_rates(w.pairs._key(), {"ar": MeasuredRate("ar", "ar", 1.0)})
    send(qtbot, w, "a speculative reply before any plain rounds", REPLY_MS)
    assert GAIN not in w.readout.text() and "tok/s" in w.readout.text()
    assert "No speed-up shown" in w.readout.toolTip() and f"0 of the {MIN_ROUNDS} rounds" in w.readout.toolTip()

    w.apply_settings(fast_settings(mode="ar", max_tokens=2 * MIN_ROUNDS))
    send(qtbot, w, "plain rounds for the planner", REPLY_MS)
    assert w.replies.readout.baseline.rounds >= MIN_ROUNDS
    assert GAIN not in w.readout.text()  # no speed-up for plain decoding itself

    w.apply_settings(fast_settings(mode="auto", max_tokens=24))
    first = send(qtbot, w, "and now auto", REPLY_MS)
    kept = w.history.message(first).stats
    assert kept is not None and kept[KEY]["rounds"] >= MIN_ROUNDS
    assert kept[KEY]["tokens_per_second"] == w.pairs.measured_rates()["ar"].tokens_per_second  # the planner's
    shown, tip = w.readout.text(), w.readout.toolTip()
    expected = kept["tokens_per_second"] / kept[KEY]["tokens_per_second"]
    assert f"{expected:.1f}{GAIN}" in shown
    assert f"against {kept[KEY]['tokens_per_second']:.3g} tok/s" in tip and "when the reply ended" in tip
    first_conversation = w.conversation_id

    w.new_action.trigger()  # more plain rounds and another auto reply move the planner's figure on
    w.apply_settings(fast_settings(mode="ar", max_tokens=2 * MIN_ROUNDS))
    send(qtbot, w, "more plain rounds", REPLY_MS)
    w.apply_settings(fast_settings(mode="auto", max_tokens=24))
    send(qtbot, w, "auto again", REPLY_MS)
    later = w.replies.readout.baseline.current()
    assert later is not None and later.rounds > kept[KEY]["rounds"]

    w.open_conversation(first_conversation)  # the first reply reads as it did when it ended
    assert w.readout.text() == shown and w.readout.toolTip() == tip
    assert w.history.message(first).stats == kept


def test_a_reply_saved_without_a_baseline_shows_no_speed_up(
    qtbot: QtBot, data_dir: Path, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, None)
    closing.append(w)
    conv = w.history.create_conversation()
    w.history.add_turn(conv.id, "hello")
    reply = w.history.messages(conv.id)[-1]
    stats = {"mode": "ssd", "new_tokens": 64, "tokens_per_second": 30.0, "seconds": 2.2, "finish_reason": "stop",
             "plan_rates": {"ar": 5.0}}  # a prediction is no measurement
    w.history.update_message(reply.id, "an old reply", stats=stats, complete=True)
    w.open_conversation(conv.id)
    assert "30.0 tok/s" in w.readout.text() and GAIN not in w.readout.text()
    assert "saved without a plain-decoding rate" in w.readout.toolTip()

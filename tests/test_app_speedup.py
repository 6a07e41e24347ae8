"""The readout's "× plain decoding" tells the truth: it compares the reply's rounds with the reply's own plain (ar)
rounds, both timed alike over one window, or it says nothing and the tooltip says why. A reply decoded entirely in
ar rounds once read "0.3× plain decoding" (its own 4.2 tok/s, the prompt's reading in it, against the planner's
12.5 tok/s); the planner's figure, or a rate from another reply, is never the baseline now."""

from __future__ import annotations

import threading
from collections.abc import Generator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.chat.speedup import MIN_ROUNDS, gain
from app.main_window import MainWindow
from app.settings.store import ActivePair
from engine import GenerationParams, GenerationStats, MeasuredRate, TokenEvent
from engine.speculative.types import RoundResult
from engine.stats import DecodeTimes, StatsRecorder
from tests.app_helpers import QT_STRICT, REPLY_MS, SteppingEngine, closing, fast_settings, send, stepping_window

pytestmark = QT_STRICT

__all__ = ["closing"]

GAIN = "× plain decoding"
PROMPT_S = 5.0  # a long prompt read: in the reply's tok/s, in neither side of the speed-up
AR = (RoundResult([1], "ar"), 0.1)  # one token in 0.1 s: plain decoding at 10 tok/s
SD = (RoundResult([1, 2, 3], "sd", "jit", drafted=3, accepted=2), 0.15)  # three in 0.15 s: 20 tok/s


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScriptedEngine(SteppingEngine):
    """Rounds of a script through the engine's own recorder on a clock of its own: every figure is exact. Its
    planner says plain decoding runs at 12.5 tok/s, as the one in the issue did."""

    def __init__(self, script: list[tuple[RoundResult, float]]) -> None:
        super().__init__("unused")
        self.script = script

    def measured_rates(self) -> dict[str, MeasuredRate]:
        return {"ar": MeasuredRate("ar", "ar", 12.5), "sd": MeasuredRate("sd", "sd(K=3)", 9.0)}

    def _run(self, params: GenerationParams, stop: threading.Event, stats: GenerationStats,
             tokens: list[int]) -> Generator[TokenEvent, None, None]:
        clock = Clock()
        rec = StatsRecorder(stats, clock)
        clock.now += PROMPT_S
        rec.first_token(DecodeTimes())
        def hand_out(toks: list[int], n: int) -> Generator[TokenEvent, None, None]:
            for tok in toks:
                tokens.append(tok)
                rec.token()
                yield TokenEvent(tok, f"w{len(tokens)} ", False, n)

        pending = [0]  # the first token, from the prompt's read
        for n, (rr, took) in enumerate(self.script):
            yield from hand_out(pending, n)
            clock.now += took
            rec.round(rr)
            pending = list(rr.tokens)
        yield from hand_out(pending, len(self.script))
        stats.finish_reason = "stop"
        rec.finish(DecodeTimes(), DecodeTimes(), draft_on_this_thread=False)


def reply(qtbot: QtBot, script: list[tuple[RoundResult, float]], mode: str = "auto",
          window: MainWindow | None = None) -> MainWindow:
    w = window or stepping_window(qtbot, ScriptedEngine(script), fast_settings(mode=mode, max_tokens=1000))
    w.host.worker._engine = ScriptedEngine(script)  # type: ignore[assignment]
    w.apply_settings(fast_settings(mode=mode, max_tokens=1000))
    send(qtbot, w, "go", REPLY_MS)
    return w


def test_a_reply_is_compared_with_its_own_plain_rounds(qtbot: QtBot, data_dir: Path,
                                                       closing: list[MainWindow]) -> None:
    w = reply(qtbot, [AR] * 20 + [SD] * 10)
    closing.append(w)
    text, tip = w.readout.text(), w.readout.toolTip()
    # 51 tokens in 8.5 s shown as the reply's speed; the speed-up is its rounds' 50 in 3.5 s against its 20 plain
    # rounds' 20 in 2.0 s: 14.3 / 10 tok/s, not 6.0 / 12.5 (the planner's)
    assert "6.0 tok/s" in text and f"1.4{GAIN}" in text
    assert "this reply's rounds made 14.3 tok/s, its own 20 plain-decoding (ar) rounds 10 tok/s" in tip
    assert "12.5" not in tip
    assert w.conversation_id is not None
    stats = w.history.messages(w.conversation_id)[-1].stats
    got = gain(stats) if stats is not None else None
    assert got is not None and got.ratio == pytest.approx(50 / 3.5 / 10)
    conversation = w.conversation_id

    w.new_action.trigger()
    w.open_conversation(conversation)  # read from the reply's own stats: the same on every later view
    assert w.readout.text() == text and w.readout.toolTip() == tip


def test_a_reply_all_in_plain_rounds_claims_no_speed_up(qtbot: QtBot, data_dir: Path,
                                                        closing: list[MainWindow]) -> None:
    w = reply(qtbot, [AR] * 40)  # the reply: auto stayed on ar throughout
    closing.append(w)
    assert GAIN not in w.readout.text() and "0.3" not in w.readout.text()
    assert "every round of this reply was plain decoding (ar)" in w.readout.toolTip()


def test_no_rate_from_another_reply_or_the_planner_is_the_baseline(qtbot: QtBot, data_dir: Path,
                                                                    closing: list[MainWindow]) -> None:
    w = reply(qtbot, [AR] * 40, mode="ar")  # plain decoding measured, in a reply of its own
    closing.append(w)
    w.pairs.pair = ActivePair("scripted", "Scripted pair", "target.gguf", "draft.gguf")  # sd runs: it has a draft
    assert GAIN not in w.readout.text() and "No speed-up" not in w.readout.toolTip()  # ar itself: nothing to say
    reply(qtbot, [SD] * 30, mode="sd", window=w)
    assert GAIN not in w.readout.text()
    assert "ran no plain-decoding (ar) rounds to compare with" in w.readout.toolTip()
    reply(qtbot, [AR] * (MIN_ROUNDS - 1) + [SD] * 20, window=w)
    assert GAIN not in w.readout.text()
    assert f"ran {MIN_ROUNDS - 1} plain-decoding (ar) rounds, fewer than the {MIN_ROUNDS}" in w.readout.toolTip()


def test_a_reply_saved_without_its_rounds_times_shows_no_speed_up(
    qtbot: QtBot, data_dir: Path, closing: list[MainWindow]
) -> None:
    w = stepping_window(qtbot, ScriptedEngine([]))
    closing.append(w)
    conv = w.history.create_conversation()
    w.history.add_turn(conv.id, "hello")
    saved = w.history.messages(conv.id)[-1]
    stats = {"mode": "auto", "new_tokens": 64, "tokens_per_second": 30.0, "seconds": 2.2, "finish_reason": "stop",
             "rounds_by_mode": {"ar": 20, "sd": 10}, "plan_rates": {"ar": 5.0},
             "plain_baseline": {"tokens_per_second": 12.5, "rounds": 24}}  # an earlier version's figure
    w.history.update_message(saved.id, "an old reply", stats=stats, complete=True)
    w.open_conversation(conv.id)
    assert "30.0 tok/s" in w.readout.text() and GAIN not in w.readout.text()
    assert "saved before replies kept the times of their own rounds" in w.readout.toolTip()


def test_the_figure_needs_speculation_and_enough_plain_rounds() -> None:
    def stats(rounds: dict[str, int], tokens: dict[str, int], seconds: dict[str, float]) -> dict[str, object]:
        return {"mode": "auto", "rounds_by_mode": rounds, "tokens_by_mode": tokens, "seconds_by_mode": seconds}

    assert gain(stats({"ar": 16, "sd": 1}, {"ar": 16, "sd": 4}, {"ar": 1.6, "sd": 0.2})) is not None
    assert gain(stats({"ar": 16}, {"ar": 16}, {"ar": 1.6})) is None  # no speculation: nothing to compare
    assert gain(stats({"ar": 15, "sd": 9}, {"ar": 15, "sd": 36}, {"ar": 1.5, "sd": 1.0})) is None
    assert gain(stats({"ar": 20, "sd": 9}, {"ar": 20, "sd": 36}, {"ar": 0.01, "sd": 1.0})) is None  # too brief
    assert gain({**stats({"ar": 20, "sd": 9}, {"ar": 20, "sd": 36}, {"ar": 2.0, "sd": 1.0}), "mode": "ar"}) is None
    assert gain({"mode": "auto", "rounds_by_mode": "junk", "seconds_by_mode": None}) is None  # a damaged entry

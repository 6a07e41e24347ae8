"""auto's "why" in the per-message stats, and the modes the app runs on a target alone."""

from __future__ import annotations

from app.chat.stats_text import stats_text
from app.settings.values import effective_mode
from engine import GenerationStats
from engine.speculative.types import RoundResult
from engine.stats import StatsRecorder


def test_a_finished_auto_reply_says_what_it_expected_of_each_mode_in_plain_words() -> None:
    # (it read "predicted ssd(K=4, M=1) 9.1, sd(K=3) 6.2, ar 5.0 tok/s")
    stats = GenerationStats(mode="auto")
    rec = StatsRecorder(stats)
    rec.round(RoundResult([5, 6], "ssd", rates=(("ssd(K=4, M=1)", 9.14), ("sd(K=3)", 6.2), ("ar", 5.0))))
    live = stats_text(stats.to_dict())
    assert "estimates" not in live  # the live readout stays short
    stats.finish_reason = "stop"
    line = stats_text(stats.to_dict())
    assert line.endswith("auto's estimates: ssd 9.1 tok/s, sd 6.2 tok/s, plain decoding 5.0 tok/s")
    assert "K=" not in line and "M=" not in line and "predicted" not in line


def test_a_reply_without_plans_shows_no_prediction() -> None:
    stats = GenerationStats(mode="ssd", finish_reason="stop", new_tokens=3)
    assert "estimates" not in stats_text(stats.to_dict())


def test_lookup_and_auto_run_without_a_draft_and_the_rest_fall_back_to_ar() -> None:
    assert effective_mode("lookup", has_draft=False) == "lookup"
    assert effective_mode("auto", has_draft=False) == "auto"
    assert effective_mode("ssd", has_draft=False) == "ar"
    assert effective_mode("sd", has_draft=False) == "ar"
    assert effective_mode("ssd", has_draft=True) == "ssd"

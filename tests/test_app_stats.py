"""The one stats formatter: the live readout, the line under a reply, and exports read the same dict."""

from __future__ import annotations

from app.chat.stats_text import message_status, mode_text, stats_html, stats_text
from engine import GenerationStats
from engine.speculative.types import RoundResult
from engine.stats import StatsRecorder

LIVE = {"mode": "auto", "current_mode": "ssd", "new_tokens": 12, "tokens_per_second": 9.04, "ttft_s": 0.25,
        "acceptance_rate": 0.8, "hit_rate": 0.5, "rounds_by_mode": {"ar": 1, "ssd": 3}, "finish_reason": ""}


def test_live_and_final_lines() -> None:
    assert stats_text(LIVE) == "auto → ssd · 12 tokens · 9.0 tok/s · TTFT 0.25 s · acceptance 80% · hit rate 50%"
    final = {**LIVE, "finish_reason": "length"}
    assert stats_text(final).startswith("auto (ssd 3, ar 1 rounds) · 12 tokens") and final_ends(final)
    assert stats_html(LIVE).startswith("<b>auto → ssd</b> · 12 tokens")
    assert stats_text({"mode": "ar", "new_tokens": 2, "finish_reason": "stopped"}) == "ar · 2 tokens · stopped"
    assert mode_text({"mode": "ssd", "current_mode": "sd"}) == "ssd"


def final_ends(stats: dict[str, object]) -> bool:
    return stats_text(stats).endswith("hit rate 50% · length limit")


def test_message_status_marks_cut_short_and_crashed_replies() -> None:
    assert message_status({"mode": "ar", "new_tokens": 2, "finish_reason": "stop"}, complete=True) == "ar · 2 tokens"
    assert message_status(None, complete=False) == "interrupted"
    assert message_status({"mode": "sd", "finish_reason": "app closed"}, complete=False) == (
        "sd · app closed · interrupted")
    assert message_status({"finish_reason": "crashed"}, complete=False) == "crashed inside llama.cpp"


def recorded(*rounds: RoundResult, finish: str = "") -> dict[str, object]:
    """Stats as the engine's own recorder computes them from these rounds (auto, live unless ``finish``)."""
    stats = GenerationStats(mode="auto")
    recorder = StatsRecorder(stats)
    for rr in rounds:
        recorder.round(rr)
        for _ in rr.tokens:
            recorder.token()
    stats.finish_reason = finish
    return stats.to_dict()


SD = RoundResult([1, 2, 3, 4, 5], "sd", "jit", drafted=4, accepted=4)
SSD = RoundResult([1, 2, 3], "ssd", "cache", drafted=4, accepted=2, hit=True)
AR = RoundResult([1], "ar")


def test_auto_shows_only_the_figures_of_the_step_it_runs_now() -> None:
    early = recorded(*[SD] * 8)
    assert "acceptance 100%" in stats_text(early) and stats_text(early).startswith("auto → sd")
    later = recorded(*[SD] * 8, *[AR] * 40)  # plain ar now: acceptance is from rounds long past
    assert stats_text(later).startswith("auto → ar · 80 tokens") and "acceptance" not in stats_text(later)
    in_ssd = recorded(*[SD] * 2, SSD)
    assert "acceptance" in stats_text(in_ssd) and "hit rate 100%" in stats_text(in_ssd)
    back_in_sd = recorded(SSD, SD)
    assert "acceptance" in stats_text(back_in_sd) and "hit rate" not in stats_text(back_in_sd)
    done = recorded(*[SD] * 2, *[AR] * 53, finish="length")
    assert stats_text(done).startswith("auto (ar 53, sd 2 rounds) · 63 tokens") and "→" not in stats_text(done)
    assert "acceptance 100%" in stats_text(done)  # beside the rounds by mode, the total is not misleading


def test_one_token_and_figures_that_do_not_apply_are_absent() -> None:
    assert stats_text({"mode": "ar", "new_tokens": 1, "finish_reason": "stop"}) == "ar · 1 token"
    ar = GenerationStats(mode="ar", current_mode="ar", new_tokens=3, finish_reason="length").to_dict()
    assert stats_text(ar) == "ar · 3 tokens · length limit"  # no acceptance 0%, no hit rate, no 0.0 tok/s
    assert "acceptance" not in stats_text(recorded(AR, AR)) and "rate" not in stats_text(recorded(AR))
    assert mode_text({"mode": "auto", "current_mode": "ar", "finish_reason": "stopped"}) == "auto"
    assert stats_text({"mode": "ar", "new_tokens": 5, "dropped_turns": 1}).endswith(
        "1 oldest turn left out to fit the context")
    assert message_status({"mode": "ar", "new_tokens": 2, "finish_reason": "stop"}, complete=True, unsaved=True) == (
        "ar · 2 tokens · not saved yet: the disk is full (kept in memory, saved when space is freed)")

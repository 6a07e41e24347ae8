"""The one stats formatter: the live readout, the line under a reply, and exports read the same dict."""

from __future__ import annotations

from app.stats_text import message_status, mode_text, stats_html, stats_text

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

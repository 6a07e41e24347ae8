"""The one formatter for generation stats: the live readout, the line under each reply, and exports.

It reads the engine's stats as a dict (``GenerationStats.to_dict()``, live or final, or the copy a
reply keeps in the history) and shows what the engine reports; it computes no rate itself.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from engine import Mode

CRASHED = "crashed"  # finish reason of a reply whose process died inside llama.cpp
HIDDEN_REASONS = ("", "stop", "streaming")
UNSAVED = "not saved yet: the disk is full (kept in memory, saved when space is freed)"
MODE_WORDS = {"ar": "plain decoding"}  # a mode as the line names it (sd, ssd and lookup are named in Settings)
REASON_TEXT = {CRASHED: "crashed inside llama.cpp", "context": "context full", "length": "length limit"}


def is_live(stats: Mapping[str, Any]) -> bool:
    """True for a reply still being written (the engine has not set a finish reason)."""
    return not stats.get("finish_reason")


def mode_text(stats: Mapping[str, Any]) -> str:
    """``ssd``; ``auto → ssd`` while auto runs ssd; ``auto (ssd 9, ar 2 rounds)`` once auto is done."""
    mode = str(stats.get("mode") or "")
    current = str(stats.get("current_mode") or "")
    by_mode: Mapping[str, int] = stats.get("rounds_by_mode") or {}
    if mode != Mode.AUTO:
        return mode
    if not is_live(stats):
        ranked = sorted(by_mode.items(), key=lambda kv: -kv[1])
        return "auto (" + ", ".join(f"{m} {n}" for m, n in ranked) + " rounds)" if ranked else "auto"
    return f"auto → {current}" if current and current != Mode.AUTO else "auto"


def applies(stats: Mapping[str, Any], figure: str) -> bool:
    """Whether ``figure`` (``acceptance_rate`` or ``hit_rate``) describes what the reply is doing.

    Both are totals over the reply's speculative rounds. While auto runs plain ar, neither describes
    the current step (the figures are from rounds long past), and hit rate is ssd's alone; so live
    they are shown for the step auto runs now. A finished reply shows them beside its rounds by mode.
    """
    if stats.get(figure) is None:
        return False
    if stats.get("mode") != Mode.AUTO or not is_live(stats):
        return True
    step = stats.get("current_mode")
    return step == Mode.SSD or (step == Mode.SD and figure == "acceptance_rate")


def stats_parts(stats: Mapping[str, Any]) -> list[str]:
    """The pieces of the stats line, mode first; a piece is left out when it does not apply or was not reported."""
    parts = [mode_text(stats)] if stats.get("mode") else []
    if stats.get("new_tokens") is not None:
        parts.append(plural(int(stats["new_tokens"]), "token"))
    if stats.get("tokens_per_second"):
        parts.append(f"{stats['tokens_per_second']:.1f} tok/s")
    if stats.get("ttft_s"):
        parts.append(f"TTFT {stats['ttft_s']:.2f} s")
    if applies(stats, "acceptance_rate"):
        parts.append(f"acceptance {100 * stats['acceptance_rate']:.0f}%")
    if applies(stats, "hit_rate"):
        parts.append(f"hit rate {100 * stats['hit_rate']:.0f}%")
    parts += reuse_parts(stats)
    if stats.get("link_received_per_round") is not None:  # a remote target: what a round cost on the link
        per_round = float(stats["link_sent_per_round"]) + float(stats["link_received_per_round"])
        parts.append(f"link {size_text(per_round)} a round")
    if stats.get("dropped_turns"):
        parts.append(f"{plural(int(stats['dropped_turns']), 'oldest turn')} left out to fit the context")
    rates: Mapping[str, float] = stats.get("plan_rates") or {}
    if rates and stats.get("finish_reason"):  # auto's why: what it expects of each mode here
        parts.append(estimates_text(rates))
    reason = str(stats.get("finish_reason") or "")
    if reason not in HIDDEN_REASONS:
        parts.append(REASON_TEXT.get(reason, reason))
    return parts


def reuse_parts(stats: Mapping[str, Any]) -> list[str]:
    """What the reply took from before it: the prompt's prefix the engine's cache held (only the rest was read, as
    after a tool's result), and the accepted tokens the n-gram pool drafted (text quoted from the prompt or a result).
    Each is left out where it is nothing."""
    parts = []
    total, cached = int(stats.get("prompt_tokens") or 0), int(stats.get("prompt_cached") or 0)
    if cached:
        parts.append(f"prompt: read {total - cached} of {plural(total, 'token')}, {cached} from the cache")
    accepted, pooled = int(stats.get("accepted") or 0), int(stats.get("accepted_lookup") or 0)
    if pooled:
        parts.append(f"lookup drafted {pooled} of {plural(accepted, 'accepted token')}")
    return parts


def estimates_text(rates: Mapping[str, float]) -> str:
    """auto's predicted rate of its best plan per mode (``{"ar": 12.2, "ssd(K=1, M=6)": 5.3}``, best first) in plain
    words: ``auto's estimates: plain decoding 12.2 tok/s, ssd 5.3 tok/s`` (a plan's draft length and branches are
    for the docs, not this line)."""
    shown = [f"{MODE_WORDS.get(mode, mode)} {rate:.1f} tok/s"
             for mode, rate in ((plan.split("(", 1)[0].strip(), rate) for plan, rate in rates.items())]
    return "auto's estimates: " + ", ".join(shown[:4])


def size_text(n: float) -> str:
    """``850 B``, ``3.2 KB``, ``1.4 MB`` (powers of 1000, as the link's rates are counted)."""
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def plural(n: int, noun: str) -> str:
    """``1 token``, ``2 tokens``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def stats_text(stats: Mapping[str, Any]) -> str:
    """The stats as one plain line: ``ssd · 24 tokens · 31.0 tok/s · TTFT 0.12 s · acceptance 80% · …``."""
    return " · ".join(stats_parts(stats))


def stats_html(stats: Mapping[str, Any]) -> str:
    """:func:`stats_text` for a rich-text label, the mode in bold."""
    parts = [html.escape(p) for p in stats_parts(stats)]
    if parts and stats.get("mode"):
        parts[0] = f"<b>{parts[0]}</b>"
    return " · ".join(parts)


def message_status(stats: Mapping[str, Any] | None, *, complete: bool, unsaved: bool = False) -> str:
    """The line under a reply: its stats, "interrupted" when it was cut short, and a note while it is unsaved."""
    pieces = [stats_text(stats)] if stats else []
    if not complete and (stats or {}).get("finish_reason") != CRASHED:
        pieces.append("interrupted")
    if unsaved:
        pieces.append(UNSAVED)
    return " · ".join(p for p in pieces if p)

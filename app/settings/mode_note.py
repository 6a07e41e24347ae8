"""The note beside the mode in Settings: a fixed mode that auto measured as much slower on this machine."""

from __future__ import annotations

from collections.abc import Mapping

from engine import MeasuredRate, Mode

SLOWER = 2 / 3  # "much slower": under two thirds of the best rate auto measured


def mode_note(mode: str, rates: Mapping[str, MeasuredRate]) -> str:
    """What auto's measurements say about choosing ``mode`` here ("" when they say nothing against it)."""
    if mode == Mode.AUTO or mode not in rates:
        return ""
    best = max(rates.values(), key=lambda r: r.tokens_per_second)
    mine = rates[mode]
    if best.mode == mode or mine.tokens_per_second >= SLOWER * best.tokens_per_second:
        return ""
    return (f"auto measured {mode} on this machine at about {mine.tokens_per_second:.1f} tok/s, against "
            f"{best.tokens_per_second:.1f} tok/s with {best.plan}: {mode} is much slower here "
            f"({mine.tokens_per_second / best.tokens_per_second:.0%} of it). auto picks the faster mode by itself.")

"""How much speculation helped a reply, measured inside the reply itself, or nothing.

The readout's "1.3× plain decoding" compares like with like over one window: the tokens per second of the reply's
rounds against those of its own plain-decoding (``ar``) rounds, both over the rounds' wall time as the engine
recorded it (``tokens_by_mode`` and ``seconds_by_mode``; the prompt's reading is in neither). A reply needs
:data:`MIN_ROUNDS` plain rounds and a speculative round for a figure; one that ran only plain rounds, or too few of
them, or was saved before replies kept their rounds' times, shows none, and its tooltip says why. A rate from
another reply, another load or the planner's prediction is never the baseline: the machine may have been busier or
idler then (a reply decoded entirely in ar once read "0.3× plain decoding" against such a figure). The figure is a
function of the reply's own stats, so every later view of a reply shows the same one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PLAIN = "ar"  # plain decoding: the target alone, the baseline speculation is measured against
# Plain rounds in the reply before their rate counts as a measurement (a stalled round or two among sixteen moves
# it little), and their least time in all (the clock's and the first round's noise).
MIN_ROUNDS = 16
MIN_PLAIN_S = 0.2


@dataclass(frozen=True, slots=True)
class Gain:
    """A reply's rounds' tokens per second against its own plain rounds'."""

    rate: float  # all its rounds
    plain: float  # its plain (ar) rounds
    plain_rounds: int

    @property
    def ratio(self) -> float:
        return self.rate / self.plain


def _by_mode(stats: Mapping[str, Any], key: str) -> dict[str, float]:
    value = stats.get(key)
    if not isinstance(value, Mapping):
        return {}
    return {str(m): float(v) for m, v in value.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def gain(stats: Mapping[str, Any]) -> Gain | None:
    """The reply's speed-up over its own plain rounds, or None where :func:`why_none` has the reason."""
    if stats.get("mode") == PLAIN:
        return None
    rounds, tokens, seconds = (_by_mode(stats, k) for k in ("rounds_by_mode", "tokens_by_mode", "seconds_by_mode"))
    plain_rounds = int(rounds.get(PLAIN, 0))
    spec = sum(n for m, n in rounds.items() if m != PLAIN)
    if not seconds or not spec or plain_rounds < MIN_ROUNDS or seconds.get(PLAIN, 0.0) < MIN_PLAIN_S:
        return None
    total_s = sum(seconds.values())
    if total_s <= 0 or not tokens.get(PLAIN):
        return None
    return Gain(sum(tokens.values()) / total_s, tokens[PLAIN] / seconds[PLAIN], plain_rounds)


def gain_text(stats: Mapping[str, Any]) -> str:
    """``1.3× plain decoding``, or "" where the reply has no fair figure."""
    g = gain(stats)
    return f"{g.ratio:.1f}× plain decoding" if g is not None else ""


def why_none(stats: Mapping[str, Any], *, live: bool) -> str:
    """Why a speculative reply shows no speed-up (its tooltip's last line)."""
    rounds = _by_mode(stats, "rounds_by_mode")
    plain = int(rounds.get(PLAIN, 0))
    runs = "has run" if live else "ran"
    if "seconds_by_mode" not in stats:
        return ("No speed-up shown: this reply was saved before replies kept the times of their own rounds, and a "
                "rate measured at another time is no fair comparison.")
    if rounds and not sum(n for m, n in rounds.items() if m != PLAIN):
        return f"No speed-up shown: every round of this reply {'has been' if live else 'was'} plain decoding (ar)."
    if not plain:
        return (f"No speed-up shown: this reply {runs} no plain-decoding (ar) rounds to compare with; a plain rate "
                "from another reply, at another time, would not be a fair comparison (auto runs both in one reply).")
    return (f"No speed-up shown: this reply {runs} {plain} plain-decoding (ar) rounds, fewer than the {MIN_ROUNDS} a "
            "fair comparison within the reply needs.")


def tooltip_line(stats: Mapping[str, Any], *, live: bool) -> str:
    """What the speed-up compares, or why none is shown."""
    g = gain(stats)
    if g is None:
        return why_none(stats, live=live)
    return (f"× plain decoding: this reply's rounds made {g.rate:.3g} tok/s, its own {g.plain_rounds} plain-decoding "
            f"(ar) rounds {g.plain:.3g} tok/s, both timed the same way (reading the prompt left out).")

"""The plain-decoding rate a reply's speed-up is measured against, and the figure each reply keeps.

The baseline is the planner's current ``ar`` figure for the loaded pair (``Engine.measured_rates()``, sent after
each auto reply), and only once enough plain rounds since the pair loaded stand behind it: a figure read back
from an earlier run of the app or drawn from a round or two is no measurement of this machine as it runs now. When a
reply ends, the baseline of that moment is stored in its stats (:data:`KEY`), so every later view of the reply
shows the same speed-up; a reply saved without one shows none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine import MeasuredRate

PLAIN = "ar"  # plain decoding: the target alone, the baseline speculation is measured against
KEY = "plain_baseline"  # the stats entry a finished reply keeps its baseline in
# Plain rounds since the load before the planner's ar figure counts as measured: its width-1 verify time is a
# moving average over about twenty verifies (engine knobs FIGURE_ALPHA), and a few stalled rounds among
# sixteen move it little.
MIN_ROUNDS = 16
LEARNING_MODES = ("ar", "auto")  # replies whose plain rounds feed the planner's ar figure (sd/ssd run none)


@dataclass(frozen=True, slots=True)
class Baseline:
    """Plain decoding's tokens per second and the plain rounds since the load behind the figure."""

    tokens_per_second: float
    rounds: int

    def to_dict(self) -> dict[str, Any]:
        return {"tokens_per_second": self.tokens_per_second, "rounds": self.rounds}


def kept(stats: Mapping[str, Any]) -> Baseline | None:
    """The baseline a finished reply was stored with (None: it ended without one, or before there were any)."""
    entry = stats.get(KEY)
    if not isinstance(entry, Mapping):
        return None
    rate, rounds = entry.get("tokens_per_second"), entry.get("rounds")
    if not isinstance(rate, int | float) or isinstance(rate, bool) or rate <= 0 or not isinstance(rounds, int):
        return None
    return Baseline(float(rate), rounds)


def kept_rounds(stats: Mapping[str, Any]) -> int | None:
    """The plain rounds measured when a finished reply ended (None: a reply saved before replies kept them)."""
    entry = stats.get(KEY)
    rounds = entry.get("rounds") if isinstance(entry, Mapping) else None
    return rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else None


def plain_rounds(stats: Mapping[str, Any]) -> int:
    """The plain rounds a finished reply ran that the planner learnt from."""
    if stats.get("mode") not in LEARNING_MODES:
        return 0
    by_mode: Mapping[str, int] = stats.get("rounds_by_mode") or {}
    return int(by_mode.get(PLAIN) or 0)


def tooltip_line(baseline: Baseline | None, rounds_so_far: int | None, *, frozen: bool) -> str:
    """What the speed-up is compared with, or why none is shown (``rounds_so_far`` None: not known)."""
    if baseline is None and rounds_so_far is None:
        return "No speed-up shown: this reply was saved without a plain-decoding rate to compare it with."
    if baseline is None:
        has = "had run" if frozen else "has run"
        return (f"No speed-up shown: plain decoding (ar) {has} {rounds_so_far} of the {MIN_ROUNDS} rounds since the "
                "pair loaded that make its rate a measurement here (auto runs it now and then; so does mode ar).")
    when = "when the reply ended" if frozen else "now"
    return (f"× plain decoding: against {baseline.tokens_per_second:.3g} tok/s, the planner's rate for plain "
            f"decoding (ar) of this pair on this machine {when}, measured over {baseline.rounds} ar rounds since "
            "the pair loaded.")


class PlainBaseline:
    """Follows the planner's ar figure and the plain rounds behind it, from the pair's load on."""

    def __init__(self) -> None:
        self.rounds = 0  # plain rounds the planner learnt from since the load
        self._rate: float | None = None
        self._rate_rounds = 0  # ... of them, those behind the figure in ``_rate``
        self._pending = False  # a figure arrived for the reply now ending (its rounds are counted at its end)

    def forget(self) -> None:
        """A pair loaded: nothing measured so far is its."""
        self.rounds = self._rate_rounds = 0
        self._rate, self._pending = None, False

    def note_rates(self, rates: Mapping[str, MeasuredRate]) -> None:
        """The planner's figures after an auto reply (sent before that reply's end)."""
        ar = rates.get(PLAIN)
        if ar is not None and ar.tokens_per_second > 0:
            self._rate, self._pending = ar.tokens_per_second, True

    def note_finished(self, stats: Mapping[str, Any]) -> None:
        """A reply ended: count its plain rounds (the figure sent for it includes them)."""
        self.rounds += plain_rounds(stats)
        if self._pending:
            self._rate_rounds, self._pending = self.rounds, False

    def current(self) -> Baseline | None:
        """The baseline now, where enough plain rounds stand behind the figure."""
        if self._rate is None or self._rate_rounds < MIN_ROUNDS:
            return None
        return Baseline(self._rate, self._rate_rounds)

    def freeze(self, stats: Mapping[str, Any]) -> dict[str, Any]:
        """A finished reply's stats with the baseline of this moment kept in them (where there is none, the plain
        rounds measured so far)."""
        baseline = self.current()
        return {**stats, KEY: baseline.to_dict() if baseline is not None else {"rounds": self.rounds}}

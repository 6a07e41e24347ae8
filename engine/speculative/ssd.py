"""The ssd mode: ssd rounds, with a fallback to sd rounds while the speculation cache keeps missing.

State machine: after ``miss_limit`` consecutive misses it rolls back to sd rounds (no tree), watching
whether the draft's top candidates would have predicted each outcome; it returns to ssd when two
predictions in a row would have hit, or after ``probe_after`` sd rounds. The first ssd round after a
return is a forced miss (no tree was built for it).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.mode import Mode

from .fanout import uniform
from .steps import Steps
from .types import JIT, RoundResult


@dataclass(frozen=True, slots=True)
class SSDOptions:
    k: int = 4
    fanout: int = 2  # candidates per outcome position (uniform); budget M = fanout * (K + 1)
    geometric: bool = False
    backup: str = JIT  # or NGRAM
    miss_limit: int = 3  # consecutive misses before rolling back to sd
    probe_after: int = 32  # sd rounds before trying ssd again regardless
    early_stop: bool = True  # serve a shallower branch rather than wait for the whole tree
    budget: int = 0  # tree branches per round; 0 = fanout * (K + 1)

    @property
    def tree_budget(self) -> int:
        return self.budget or self.fanout * (self.k + 1)


class SSDMode:
    """Runs ssd rounds (and sd rounds while rolled back) through :class:`Steps`; decides, runs nothing itself."""

    name = Mode.SSD

    def __init__(self, steps: Steps, opts: SSDOptions) -> None:
        self.steps = steps
        self.opts = opts
        self.last_accepted = -1  # drafts accepted last round; -1 forces a miss (no tree for this round)
        self.misses = 0
        self.fallback_rounds = 0  # > 0 while rolled back to sd
        self.would_hit_streak = 0
        self.acceptance = 0.8  # running per-token acceptance, for the geometric fan-out
        self._why = ""  # the reason for the switch the next round makes

    @property
    def rolled_back(self) -> bool:
        return self.fallback_rounds > 0

    def step(self) -> RoundResult:
        why, self._why = self._why, ""
        o = self.opts
        sd_round = self.rolled_back
        if sd_round:
            rr = self.steps.sd(o.k, accepted=self.last_accepted, concurrent=True, why=why)
        else:
            rr = self.steps.ssd(o.k, o.tree_budget, accepted=self.last_accepted, backup=o.backup,
                                geometric=o.geometric, acceptance=self.acceptance, early_stop=o.early_stop, why=why)
        if rr.drafted:
            self.acceptance = 0.9 * self.acceptance + 0.1 * rr.accepted / rr.drafted
        forced = self.last_accepted < 0
        self.last_accepted = rr.accepted
        if sd_round:
            self._track_fallback(rr)
        elif not forced:
            self.misses = 0 if rr.hit else self.misses + 1
            if self.misses >= o.miss_limit:
                self.fallback_rounds = 1
                self.would_hit_streak = 0
                self._why = f"{self.misses} misses in a row"
                self.misses = 0
        return rr

    def _track_fallback(self, rr: RoundResult) -> None:
        """After an sd round: would a tree of this budget have held the target's next token?"""
        d = rr.draft
        n = rr.accepted
        if d is not None and n < len(d.tokens) and n < len(d.top):
            share = uniform(len(d.tokens), self.opts.tree_budget)[n]
            cands = [int(t) for t in d.top[n] if int(t) != d.tokens[n]][:share]
            self.would_hit_streak = self.would_hit_streak + 1 if rr.next_token in cands else 0
        self.fallback_rounds += 1
        if self.would_hit_streak >= 2 or self.fallback_rounds > self.opts.probe_after:
            self._why = "predictions recovered" if self.would_hit_streak >= 2 else "probe"
            self.fallback_rounds = 0
            self.last_accepted = -1  # the next ssd round starts with a forced miss

    def close(self) -> None:
        self.steps.close()

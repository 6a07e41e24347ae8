"""The steps — ar, sd, ssd and lookup — and the plain modes built from them; each step runs exactly one round.

``ar`` is plain target decoding (the reference). ``sd`` asks its draft source for K tokens and has
the target verify K+1 positions in one batch. ``ssd`` is an sd round whose draft source (the draft
thread) then pre-speculates the next round while the target verifies this one, so the next draft
may come from the speculation cache. ``lookup`` verifies a draft from the n-gram pool (no model).
The ssd mode with its fallback (:mod:`engine.speculative.ssd`), the lookup mode (:mod:`engine.speculative.lookup`)
and auto (:mod:`engine.speculative.auto`) decide which step runs; the steps themselves decide nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from engine.core.mode import Mode

from .types import JIT, Draft, DraftRequest, DraftSource, PlanRates, RoundResult, Verifier


@dataclass(frozen=True, slots=True)
class Threads:
    """CPU threads for (target, draft) when they run one after the other and when they run at once.

    On a CPU-only pair whose thread counts add up to more than the cores, SSD's concurrent rounds use
    ``split`` so the two models do not fight over cores (OpenMP spin barriers collapse when oversubscribed).
    """

    target: int
    draft: int
    split: tuple[int, int] | None = None

    def concurrent(self) -> tuple[int, int]:
        return self.split or (self.target, self.draft)


class Steps:
    """ar, sd and ssd rounds over one target and one draft source.

    With ``threads``, every round first sets the target's threads and asks the draft side for its own:
    the sequential counts for ar and sd, the concurrent split for ssd (and for sd when ``concurrent``).
    """

    def __init__(self, target: Verifier, drafts: DraftSource | None, threads: Threads | None = None) -> None:
        self.target = target
        self.drafts = drafts
        self.threads = threads

    def ar(self, *, why: str = "", rates: PlanRates = ()) -> RoundResult:
        """One target token."""
        self._threads(concurrent=False)
        t0 = time.perf_counter()
        v = self.target.verify(Draft([], None))
        return RoundResult([v.next_token], Mode.AR, verify_s=time.perf_counter() - t0, why=why, rates=rates,
                           new_shape=self.target.new_shape)

    def sd(self, k: int, *, accepted: int = -1, concurrent: bool = False, why: str = "",
           rates: PlanRates = ()) -> RoundResult:
        """Draft ``k`` tokens (or take a cached branch for ``accepted``, if one is left), verify, build no tree."""
        draft_threads = self._threads(concurrent=concurrent)
        req = DraftRequest(tuple(self.target.committed), accepted, k, budget=0, backup=JIT,
                           draft_threads=draft_threads)
        return self._served(Mode.SD, req, why, rates)

    def ssd(self, k: int, budget: int, *, accepted: int, backup: str, geometric: bool, acceptance: float,
            early_stop: bool, why: str = "", rates: PlanRates = ()) -> RoundResult:
        """Serve the draft for ``accepted`` (a cache hit, or the backup on a miss), verify it, and have the
        draft side build a tree of ``budget`` branches for the next round meanwhile."""
        draft_threads = self._threads(concurrent=True)
        req = DraftRequest(tuple(self.target.committed), accepted, k, budget, backup, geometric, acceptance,
                           early_stop, draft_threads)
        return self._served(Mode.SSD, req, why, rates)

    def lookup(self, draft: Draft, *, why: str = "", rates: PlanRates = ()) -> RoundResult:
        """Verify a draft made without a model (the n-gram pool); an empty one makes this an ar step."""
        self._threads(concurrent=False)
        t0 = time.perf_counter()
        v = self.target.verify(draft)
        return RoundResult(v.tokens(draft.tokens), Mode.LOOKUP, draft.source if draft.tokens else None,
                           len(draft.tokens), v.accepted, verify_s=time.perf_counter() - t0, restore_s=v.restore_s,
                           wait_s=draft.serve_s,
                           why=why, rates=rates, draft=draft, new_shape=self.target.new_shape)

    def close(self) -> None:
        """Stop the draft side; give both models back their sequential threads."""
        if self.drafts is not None:
            self.drafts.close()
        if self.threads is not None:
            self.target.set_threads(self.threads.target)
            if self.drafts is not None:
                self.drafts.set_threads(self.threads.draft)

    def _threads(self, *, concurrent: bool) -> int:
        if self.threads is None:
            return 0
        t, d = self.threads.concurrent() if concurrent else (self.threads.target, self.threads.draft)
        self.target.set_threads(t)
        return d

    def _served(self, mode: Mode, req: DraftRequest, why: str, rates: PlanRates) -> RoundResult:
        assert self.drafts is not None, f"an {mode} round needs a draft model"
        t0 = time.perf_counter()
        self.drafts.request(req)
        d, trees = self.drafts.reply()
        t1 = time.perf_counter()
        v = self.target.verify(d)
        # A hit counts only where a tree was asked for: not in sd rounds, not after the forced first miss.
        hit = d.hit if mode == Mode.SSD and req.accepted >= 0 else None
        return RoundResult(v.tokens(d.tokens), mode, d.source, len(d.tokens), v.accepted, hit,
                           verify_s=time.perf_counter() - t1, restore_s=v.restore_s, wait_s=t1 - t0, trees=trees,
                           why=why, rates=rates, draft=d, new_shape=self.target.new_shape)


class Decoder(Protocol):
    """A decoding mode at work on one reply: one round per ``step()``."""

    name: Mode

    def step(self) -> RoundResult: ...

    def close(self) -> None: ...


class ARMode:
    name = Mode.AR

    def __init__(self, steps: Steps) -> None:
        self.steps = steps

    def step(self) -> RoundResult:
        return self.steps.ar()

    def close(self) -> None:
        self.steps.close()


class SDMode:
    """Speculative decoding: K draft tokens, then one target batch of K+1 positions, every round."""

    name = Mode.SD

    def __init__(self, steps: Steps, k: int) -> None:
        self.steps = steps
        self.k = k

    def step(self) -> RoundResult:
        return self.steps.sd(self.k)

    def close(self) -> None:
        self.steps.close()

"""Decoding strategies behind one interface: one round per ``step()``.

``ar`` is plain target decoding (the reference); ``sd`` drafts K tokens then verifies them in one
target batch; ``ssd`` serves drafts from a draft thread that pre-speculates the next round while
the target verifies this one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from engine.core.backend import Model
from engine.core.context import Context, KVTrack
from engine.core.errors import ContextFullError
from engine.core.sampling import SamplingParams

from .drafter import Draft, Drafter, TreeStats
from .fanout import uniform
from .verify import Verdict, verify_greedy, verify_sampled
from .worker import DraftWorker, Request


@dataclass(frozen=True, slots=True)
class RoundResult:
    """The one event a round reports: what it emitted, which step and speculator ran, and how it went."""

    tokens: list[int]
    mode: str  # the step that ran: "ar", "sd" or "ssd"
    speculator: str | None = None  # what drafted: "cache" (an ssd hit), "jit" (the draft model), "ngram"; ar: None
    drafted: int = 0
    accepted: int = 0
    hit: bool | None = None  # None: not an SSD round, or the forced first miss
    verify_s: float = 0.0
    wait_s: float = 0.0  # time the target spent waiting for the draft (sd: drafting itself)
    trees: tuple[TreeStats, ...] = ()  # speculation trees the draft thread finished since the previous round
    why: str = ""  # why this round's step was chosen, when it differs from the previous round's


def speculator(d: Draft) -> str:
    return "cache" if d.hit else (d.backup or "jit")


class Target:
    """The target side: committed tokens, prefill with prefix reuse, batched verification."""

    def __init__(self, model: Model, ctx: Context) -> None:
        self.model = model
        self.ctx = ctx
        self.kv = KVTrack(ctx)
        self.committed: list[int] = []
        self.params = SamplingParams()
        self.rng = np.random.default_rng(0)
        self._threads = ctx.params.n_threads

    def set_threads(self, n: int) -> None:
        if n != self._threads:
            self.ctx.set_threads(n, n)
            self._threads = n

    def start(self, prompt: Sequence[int], params: SamplingParams, rng: np.random.Generator) -> int:
        """Prefill ``prompt`` (reusing the cached prefix) and sample the first token."""
        if not prompt:
            raise ContextFullError("the prompt is empty")
        self.params = params
        self.rng = rng
        self.committed = list(prompt)
        row = self.kv.sync(self.committed)
        verdict = self._verdict(Draft([], None), row[None, :])
        self.committed.append(verdict.next_token)
        return verdict.next_token

    def verify(self, draft: Draft) -> Verdict:
        """Run [r, d_1..d_K] through the target in one batch, accept, trim the KV, commit."""
        p_r = len(self.committed) - 1
        self.kv.trim(p_r)
        if len(self.kv.tokens) != p_r:
            self.kv.sync(self.committed[:-1] or self.committed)
            self.kv.trim(p_r)
        batch = [self.committed[-1], *draft.tokens]
        if p_r + len(batch) > self.ctx.n_ctx:
            raise ContextFullError(f"the context of {self.ctx.n_ctx} tokens is full")
        rows = self.ctx.decode(batch, list(range(p_r, p_r + len(batch))), 0, list(range(len(batch))))
        self.kv.tokens.extend(batch)
        verdict = self._verdict(draft, rows)
        self.kv.trim(p_r + 1 + verdict.accepted)
        self.committed.extend(verdict.tokens(draft.tokens))
        return verdict

    def _verdict(self, draft: Draft, rows: npt.NDArray[np.float32]) -> Verdict:
        if self.params.greedy:
            return verify_greedy(draft.tokens, rows, self.model.is_eog)
        assert draft.q is not None or not draft.tokens
        return verify_sampled(draft.tokens, draft.q or [], rows, self.params, self.rng, self.model.is_eog)


@dataclass(frozen=True, slots=True)
class Served:
    """A round served by the draft thread: the draft, its verdict, timings and finished trees."""

    draft: Draft
    verdict: Verdict
    wait_s: float
    verify_s: float
    trees: tuple[TreeStats, ...]


def served_round(target: Target, worker: DraftWorker, req: Request) -> Served:
    """Ask the draft thread for this round's draft and verify it."""
    t0 = time.perf_counter()
    worker.request(req)
    d, trees = worker.reply()
    t1 = time.perf_counter()
    v = target.verify(d)
    return Served(d, v, t1 - t0, time.perf_counter() - t1, trees)


class Strategy(Protocol):
    name: str

    def step(self) -> RoundResult: ...

    def close(self) -> None: ...


class ARStrategy:
    """Plain decoding: one target token per round."""

    name = "ar"

    def __init__(self, target: Target) -> None:
        self.target = target

    def step(self) -> RoundResult:
        t0 = time.perf_counter()
        v = self.target.verify(Draft([], None))
        return RoundResult([v.next_token], "ar", verify_s=time.perf_counter() - t0)

    def close(self) -> None:
        pass


class SDStrategy:
    """Speculative decoding: the draft proposes K tokens, the target verifies K+1 positions at once."""

    name = "sd"

    def __init__(self, target: Target, drafter: Drafter, k: int) -> None:
        self.target = target
        self.drafter = drafter
        self.k = k

    def step(self) -> RoundResult:
        t0 = time.perf_counter()
        d = self.drafter.draft_sequential(self.target.committed, self.k)
        t1 = time.perf_counter()
        v = self.target.verify(d)
        t2 = time.perf_counter()
        return RoundResult(v.tokens(d.tokens), "sd", speculator(d), len(d.tokens), v.accepted, verify_s=t2 - t1,
                           wait_s=t1 - t0)

    def close(self) -> None:
        pass


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


@dataclass(slots=True)
class SSDOptions:
    k: int = 4
    fanout: int = 2  # candidates per outcome position (uniform); budget M = fanout * (K + 1)
    geometric: bool = False
    backup: str = "jit"  # or "ngram"
    miss_limit: int = 3  # consecutive misses before rolling back to sd
    probe_after: int = 32  # sd rounds before trying ssd again regardless
    early_stop: bool = True  # serve a shallower branch rather than wait for the whole tree
    budget: int = 0  # tree branches per round; 0 = fanout * (K + 1)
    threads: Threads | None = None


class SSDStrategy:
    """Speculative speculative decoding with a draft thread and a speculation cache.

    After ``miss_limit`` consecutive misses it rolls back to synchronous SD rounds (no tree),
    watching whether the draft's top candidates would have predicted each outcome; it returns to
    SSD when two predictions in a row would have hit, or after ``probe_after`` rounds.
    """

    name = "ssd"

    def __init__(self, target: Target, drafter: Drafter, opts: SSDOptions) -> None:
        self.target = target
        self.opts = opts
        self.worker = DraftWorker(drafter)
        self.last_accepted = -1
        self.misses = 0
        self.fallback_rounds = 0  # > 0 while rolled back to sd
        self.would_hit_streak = 0
        self.acceptance = 0.8
        self._why = ""  # the reason for the switch the next round makes

    @property
    def budget(self) -> int:
        return self.opts.budget or self.opts.fanout * (self.opts.k + 1)

    def step(self) -> RoundResult:
        sd_round = self.fallback_rounds > 0
        th = self.opts.threads
        t_threads, d_threads = (0, 0) if th is None else th.concurrent()
        if t_threads:
            self.target.set_threads(t_threads)
        req = Request(
            committed=tuple(self.target.committed),
            accepted=self.last_accepted,
            k=self.opts.k,
            budget=0 if sd_round else self.budget,
            geometric=self.opts.geometric,
            acceptance=self.acceptance,
            backup="jit" if sd_round else self.opts.backup,
            early_stop=self.opts.early_stop,
            draft_threads=d_threads,
        )
        served = served_round(self.target, self.worker, req)
        d, v = served.draft, served.verdict
        why, self._why = self._why, ""
        if d.tokens:
            rate = v.accepted / len(d.tokens)
            self.acceptance = 0.9 * self.acceptance + 0.1 * rate
        forced = self.last_accepted < 0
        self.last_accepted = v.accepted
        hit: bool | None = None
        if sd_round:
            self._track_fallback(d, v)
        elif not forced:
            hit = d.hit
            self.misses = 0 if d.hit else self.misses + 1
            if self.misses >= self.opts.miss_limit:
                self.fallback_rounds = 1
                self.would_hit_streak = 0
                self._why = f"{self.misses} misses in a row"
                self.misses = 0
        return RoundResult(
            v.tokens(d.tokens),
            "sd" if sd_round else "ssd",
            speculator(d),
            len(d.tokens),
            v.accepted,
            hit=hit,
            verify_s=served.verify_s,
            wait_s=served.wait_s,
            trees=served.trees,
            why=why,
        )

    def _track_fallback(self, d: Draft, v: Verdict) -> None:
        n = v.accepted
        if n < len(d.tokens) and n < len(d.top):
            share = uniform(len(d.tokens), self.budget)[n]
            cands = [int(t) for t in d.top[n] if int(t) != d.tokens[n]][:share]
            self.would_hit_streak = self.would_hit_streak + 1 if v.next_token in cands else 0
        self.fallback_rounds += 1
        if self.would_hit_streak >= 2 or self.fallback_rounds > self.opts.probe_after:
            self._why = "predictions recovered" if self.would_hit_streak >= 2 else "probe"
            self.fallback_rounds = 0
            self.last_accepted = -1  # the next ssd round starts with a forced miss

    def close(self) -> None:
        self.worker.close()
        if self.opts.threads is not None:
            self.target.set_threads(self.opts.threads.target)
            self.worker.drafter.set_threads(self.opts.threads.draft)

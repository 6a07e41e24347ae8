"""Simulated machines: deterministic rounds of ar, sd, ssd and lookup with no model and no clock.

A :class:`Machine` is a target verify time per batch width, a draft time per token and per tree level, the
slowdown the draft's concurrent work causes a verify, per-call noise and, on a CPU, ssd's split threads. A
:class:`Regime` is how a reply's drafts fare: per-position acceptance (which may drift within a reply), how often
the draft's alternatives are right (a tree's hits), and stretches the reply copies from its prompt (the n-gram
pool's case). :class:`SimSteps` runs the real steps' interface on them — the same :class:`AutoMode`,
:class:`AutoPlanner`, :class:`Lookup` and :class:`CostModel` the engine runs — on a virtual clock, from a seeded
generator, so a planner's rate on a machine is a reproducible number. The machines measured: profiles.py.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass

import numpy as np

from engine.core.mode import Mode
from engine.speculative.fanout import allocate
from engine.speculative.steps import Steps
from engine.speculative.types import CACHE, JIT, NGRAM, Draft, PlanRates, RoundResult, TreeStats, Verdict

from .regime import Regime
from .reply import Reply

_NO_ROW = np.zeros(0, dtype=np.int64)  # a row no planner reads (the draft token was right)
RNG_BLOCK = 4096  # random draws taken from the generator at a time
LOOKUP_HOST_S = 1e-4  # the pool's host work per lookup round (a search over the context)


@dataclass(frozen=True, slots=True)
class Machine:
    """One machine's timings (seconds); widths between the listed ones are interpolated."""

    name: str
    verify: tuple[tuple[int, float], ...]  # (width, seconds) of one target verify, narrowest first
    draft_token_s: float  # one sequential draft decode
    level_slope: float  # a tree level of w branches costs draft_token_s x (1 + level_slope x (w - 1))
    concurrent_slowdown: float = 1.0  # a verify's time while the draft builds a tree beside it (split CPU cores)
    tree_share: float = 0.0  # ... plus this share of the tree's time (a device the two models share)
    split: bool = False  # ssd's rounds run on split CPU threads (CostModel.split)
    split_draft_slowdown: float = 1.0  # a draft token's time on ssd's split threads
    catchup_share: float = 0.25  # a catch-up token (one batch) against a sequential draft token
    host_s: float = 0.0  # host work per speculative round (sampling, bookkeeping)
    noise: float = 0.05  # per-call log-normal sigma
    stall_p: float = 0.0  # chance that a call is slowed by another process ...
    stall: float = 1.0  # ... by this factor
    new_shape_s: float = 0.0  # a verify of a width the target's context has not run yet builds its graph first

    def t_verify(self, width: int) -> float:
        ws = [w for w, _ in self.verify]
        i = bisect.bisect_left(ws, width)
        if i < len(ws) and ws[i] == width:
            return self.verify[i][1]
        lo, hi = self.verify[max(i - 1, 0)], self.verify[min(i, len(ws) - 1)]
        if lo[0] == hi[0]:  # beyond the listed widths: the last segment's slope
            (w0, t0), (w1, t1) = self.verify[-2:] if width > ws[-1] else self.verify[:2]
            return max(1e-5, t1 + (t1 - t0) / (w1 - w0) * (width - w1))
        return lo[1] + (hi[1] - lo[1]) * (width - lo[0]) / (hi[0] - lo[0])

    def t_level(self, width: int) -> float:
        return self.draft_token_s * (1 + self.level_slope * (width - 1))


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    machine: Machine
    regime: Regime
    note: str = ""
    # Regimes the replies take in turn after the first one's (a user whose prompts differ: code, then chat)
    then: tuple[Regime, ...] = ()
    # Machines the replies run on in turn after the first one's (another program starts or stops between replies)
    then_on: tuple[Machine, ...] = ()

    def regime_at(self, reply: int) -> Regime:
        """The regime of reply ``reply`` (from 0): ``regime``, then ``then`` in turn, over and over."""
        cycle = (self.regime, *self.then)
        return cycle[reply % len(cycle)]

    def machine_at(self, reply: int) -> Machine:
        """The machine of reply ``reply`` (from 0): ``machine``, then ``then_on`` in turn, over and over."""
        cycle = (self.machine, *self.then_on)
        return cycle[reply % len(cycle)]


@functools.lru_cache(maxsize=4096)
def _allocate(k: int, budget: int, geometric: bool, acceptance: float) -> list[int]:
    return allocate(k, budget, geometric_on=geometric, acceptance=acceptance)


class SimTarget:
    """The target as :class:`Steps` sees it: greedy verification against the reply's truth."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.committed: list[int] = list(reply.prompt)
        self.new_shape = False  # (the rounds report theirs: SimSteps)

    @property
    def emitted(self) -> int:
        return len(self.committed) - len(self.reply.prompt)

    def truth(self, i: int) -> int:
        return self.reply.truth[min(i, len(self.reply.truth) - 1)]

    def verify(self, draft: Draft) -> Verdict:
        pos = self.emitted
        n = 0
        while n < len(draft.tokens) and draft.tokens[n] == self.truth(pos + n):
            n += 1
        verdict = Verdict(n, self.truth(pos + n))
        self.committed.extend(verdict.tokens(draft.tokens))
        return verdict

    def set_threads(self, n: int) -> None:
        pass


class SimSteps(Steps):
    """The steps on a simulated machine: what each round emits and reports, and the virtual seconds it takes."""

    def __init__(self, machine: Machine, regime: Regime, reply: Reply, rng: np.random.Generator,
                 length: int, shapes: set[int] | None = None) -> None:
        self.sim = SimTarget(reply)
        super().__init__(self.sim, None)
        self.machine, self.regime, self.rng, self.half = machine, regime, rng, length // 2
        self.clock = 0.0
        self.lag = 0  # tokens the draft model has not seen (emitted by ar and lookup rounds)
        self._tree: tuple[int, int, float, list[int]] | None = None  # the last ssd round's (k, budget, s, counts)
        self._last_verify = 0.0
        # the generator's draws, taken in blocks (a draw at a time costs more than the round it decides)
        self._u, self._ui = rng.random(RNG_BLOCK), 0
        self._z, self._zi = np.exp(rng.normal(0.0, machine.noise, RNG_BLOCK)), 0
        self._truth, self._copied = reply.truth, reply.copied
        self.shapes = set() if shapes is None else shapes  # the widths the target's context has run (over replies)
        self.new_shape = False

    def _shaped(self, width: int, seconds: float) -> float:
        """A verify's ``seconds`` at ``width``, with its graph's build where the width is new to the context (reported
        where a build costs, as the engine reports a remote target's)."""
        self.new_shape = self.machine.new_shape_s > 0 and width not in self.shapes
        self.shapes.add(width)
        return seconds + self.machine.new_shape_s if self.new_shape else seconds

    def _random(self) -> float:
        if self._ui == RNG_BLOCK:
            self._u, self._ui = self.rng.random(RNG_BLOCK), 0
        self._ui += 1
        return float(self._u[self._ui - 1])

    def _t(self, seconds: float) -> float:
        m = self.machine
        if self._zi == RNG_BLOCK:
            self._z, self._zi = np.exp(self.rng.normal(0.0, m.noise, RNG_BLOCK)), 0
        self._zi += 1
        x = seconds * float(self._z[self._zi - 1])
        return x * m.stall if m.stall_p and self._random() < m.stall_p else x

    def _accepts(self, pos: int) -> float:
        if self.regime.copies and self._copied[min(pos, len(self._copied) - 1)]:
            return self.regime.copy_accept
        hard = self.sim.reply.hard
        if hard is not None and hard[min(pos, len(hard) - 1)]:
            return self.regime.hard_accept
        return self.regime.acceptance(pos, self.half)

    def _model_draft(self, k: int, source: str) -> Draft:
        """K draft tokens: each right with its position's acceptance while the ones before it were; the row of
        the first wrong one keeps an alternative (right as often as the regime's top1)."""
        pos, r, truth = self.sim.emitted, self.regime, self._truth
        tokens: list[int] = []
        top: list[np.ndarray] = []
        right = True
        for j in range(k):
            true = truth[min(pos + j, len(truth) - 1)]
            if right and self._random() < self._accepts(pos + j) * r.depth_decay**j:
                tokens.append(true)
                top.append(_NO_ROW)
                continue
            if right:  # the first wrong token
                alt = true if self._random() < r.top1 else true + 2
                top.append(np.array([true + 1, alt], dtype=np.int64))
            else:
                top.append(_NO_ROW)
            right = False
            tokens.append(true + 1)
        return Draft(tokens, None, source, top=top)

    def _round(self, rr: RoundResult) -> RoundResult:
        self.clock += rr.wait_s + rr.verify_s
        self._last_verify = rr.verify_s
        return rr

    def _catchup(self, d: Draft) -> float:
        if self.lag <= 2:
            self.lag = 0
            return 0.0
        d.catchup_tokens = self.lag
        d.catchup_s, self.lag = self._t(self.lag * self.machine.catchup_share * self.machine.draft_token_s), 0
        return d.catchup_s

    def ar(self, *, why: str = "", rates: PlanRates = ()) -> RoundResult:
        self._tree = None
        v = self.sim.verify(Draft([], None))
        self.lag += 1
        verify = self._shaped(1, self._t(self.machine.t_verify(1)))
        return self._round(RoundResult([v.next_token], Mode.AR, verify_s=verify, why=why, rates=rates,
                                       new_shape=self.new_shape))

    def sd(self, k: int, *, accepted: int = -1, concurrent: bool = False, why: str = "",
           rates: PlanRates = ()) -> RoundResult:
        self._tree = None
        m = self.machine
        d = self._model_draft(k, JIT)
        d.serve_s = self._t(k * m.draft_token_s) + self._catchup(d)
        v = self.sim.verify(d)
        return self._round(RoundResult(v.tokens(d.tokens), Mode.SD, JIT, k, v.accepted,
                                       verify_s=self._shaped(k + 1, self._t(m.t_verify(k + 1)) + m.host_s),
                                       wait_s=d.serve_s, why=why, rates=rates, draft=d, new_shape=self.new_shape))

    def ssd(self, k: int, budget: int, *, accepted: int, backup: str, geometric: bool, acceptance: float,
            early_stop: bool, why: str = "", rates: PlanRates = ()) -> RoundResult:
        m, r = self.machine, self.regime
        tree, self._tree = self._tree, None
        hit, wait = False, 0.0
        if tree is not None and accepted >= 0 and tree[0] == k:
            f = tree[3][min(accepted, k)]
            covered = r.top1 if accepted < k else self._accepts(self.sim.emitted)
            hit = f > 0 and self._random() < 1 - (1 - covered) ** (f**r.branch_power)
            wait = max(0.0, tree[2] - self._last_verify)  # the tree still being built when the round starts
        d = self._model_draft(k, CACHE if hit else JIT)
        if not hit:
            wait = self._t(k * m.draft_token_s * (m.split_draft_slowdown if m.split else 1.0)) + self._catchup(d)
        d.serve_s = wait
        v = self.sim.verify(d)
        glue = self._t(m.draft_token_s)
        levels = self._t(k * m.t_level(budget))
        counts = _allocate(k, budget, geometric, round(acceptance, 2))
        self._tree = (k, budget, glue + levels, counts)
        ts = TreeStats(levels=k, branches=budget, seconds=glue + levels, glue_s=glue, level_s=levels)
        verify = self._t(m.t_verify(k + 1) * m.concurrent_slowdown + m.tree_share * (glue + levels)) + m.host_s
        return self._round(RoundResult(v.tokens(d.tokens), Mode.SSD, d.source, k, v.accepted,
                                       hit if accepted >= 0 else None, verify_s=self._shaped(k + 1, verify),
                                       wait_s=wait, trees=(ts,), why=why, rates=rates, draft=d,
                                       new_shape=self.new_shape))

    def lookup(self, draft: Draft, *, why: str = "", rates: PlanRates = ()) -> RoundResult:
        self._tree = None
        v = self.sim.verify(draft)
        self.lag += len(draft.tokens) + 1
        n = len(draft.tokens)
        return self._round(RoundResult(v.tokens(draft.tokens), Mode.LOOKUP, NGRAM if n else None, n, v.accepted,
                                       verify_s=self._shaped(n + 1, self._t(self.machine.t_verify(n + 1))),
                                       wait_s=LOOKUP_HOST_S, why=why, rates=rates, draft=draft,
                                       new_shape=self.new_shape))

    def close(self) -> None:
        pass


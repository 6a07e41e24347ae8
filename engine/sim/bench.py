"""``python -m engine bench --scenarios S``: every fixed plan and auto on every simulated machine.

Each profile (:data:`engine.sim.profiles.PROFILES`) runs REPLIES replies of LENGTH tokens with every fixed
plan — ar; sd K 1–8; ssd K 1–8 with each tree size auto may choose; lookup — and with auto, whose cost model
is kept from reply to reply as the engine keeps it (and round-tripped through the memory file's format). The
table gives, per profile, the best fixed plan over replies 2–10, its rate, auto's, their ratio, auto's ratio on
the first reply and its lowest on any one reply. Deterministic: the same command prints the same table.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.speculative import memory
from engine.speculative.auto import AutoMode
from engine.speculative.costmodel import CostModel
from engine.speculative.knobs import K_MAX
from engine.speculative.lookup import Lookup, LookupMode
from engine.speculative.plan import AR, LOOKUP, Plan, plan_space
from engine.speculative.planner import AutoPlanner
from engine.speculative.ssd import SSDOptions
from engine.speculative.types import JIT, NGRAM, RoundResult

from .machine import Profile, SimSteps
from .profiles import PROFILES
from .reply import Reply

REPLIES = 10  # replies per run: the first measures the machine, the other nine use what it learnt
LENGTH = 256  # tokens per reply
MAX_BRANCHES = 32  # the engine's default tree cap (auto's widest tree)
SCREEN = 4  # replies every fixed plan runs before the ones far behind the leader stop
SCREEN_SHARE = 0.85  # ... far behind: below this share of the leader's rate over those replies
BARS = (0.95, 0.85, 0.90)  # issue 34's bars for auto / the best fixed plan: replies 2-10, the first, any one reply
AR_FIRST_BAR = 0.95  # issue 63's bar for a first reply against ar's: never much slower than not speculating


@dataclass
class Run:
    """Rates of one plan (or auto) on one profile, reply by reply; auto's rounds by plan."""

    plan: str
    rates: list[float] = field(default_factory=list)
    plans: Counter[str] = field(default_factory=Counter)
    trace: list[str] = field(default_factory=list)  # auto's plan per round (first reply), for replay tests

    def later(self) -> float:
        """Replies 2 onwards: tokens over seconds, each reply the same length."""
        tail = self.rates[1:] or self.rates
        return len(tail) / sum(1 / r for r in tail)


def fixed_plans(k_max: int = K_MAX, most: int = MAX_BRANCHES) -> list[Plan]:
    """auto's plan space, each plan run fixed, and lookup."""
    return [*plan_space(range(1, k_max + 1), most), LOOKUP]


def _seed(profile: Profile, seed: int) -> int:
    return zlib.crc32(profile.name.encode()) + seed


def _steps(profile: Profile, i: int, length: int, seed: int, shapes: set[int] | None = None) -> SimSteps:
    """Reply ``i``'s steps; ``shapes``: the verify widths the target's context has run in the replies before."""
    seed = _seed(profile, seed)
    regime = profile.regime_at(i)
    reply = Reply.make(regime, np.random.default_rng([seed, i, 0]), length)
    return SimSteps(profile.machine_at(i), regime, reply, np.random.default_rng([seed, i, 1]), length, shapes)


def _finish(steps: SimSteps, step: Callable[[], RoundResult], length: int) -> float:
    while steps.sim.emitted < length:
        step()
    return length / steps.clock


class FixedSSD:
    """Every round an ssd round of one plan (no fallback to sd: a plan, not the ssd mode)."""

    def __init__(self, steps: SimSteps, plan: Plan, acceptance: float) -> None:
        self.steps, self.plan, self.acceptance, self.last = steps, plan, acceptance, -1

    def step(self) -> RoundResult:
        rr = self.steps.ssd(self.plan.k, self.plan.budget, accepted=self.last, backup=JIT, geometric=True,
                            acceptance=self.acceptance, early_stop=True)
        self.last = rr.accepted
        return rr


def run_fixed(profile: Profile, plan: Plan, replies: int = REPLIES, length: int = LENGTH, seed: int = 0) -> Run:
    run = Run(str(plan))
    lookup = Lookup(CostModel(split=profile.machine.split))
    shapes: set[int] = set()  # one target context over the replies
    for i in range(replies):
        steps = _steps(profile, i, length, seed, shapes)
        if plan.mode == "ar":
            run.rates.append(_finish(steps, steps.ar, length))
        elif plan.mode == "sd":
            run.rates.append(_finish(steps, functools.partial(steps.sd, plan.k), length))
        elif plan.mode == "lookup":
            lookup.start(steps.target.committed)
            run.rates.append(_finish(steps, LookupMode(steps, lookup, greedy=True).step, length))
        else:
            run.rates.append(_finish(steps, FixedSSD(steps, plan, steps.regime.accept).step, length))
    return run


def fixed_figures(profile: Profile, plan: Plan, replies: int = REPLIES, length: int = LENGTH,
                  seed: int = 0) -> tuple[float, float | None]:
    """The share of draft tokens accepted and the cache-hit rate (None: no round could hit) of an sd or ssd ``plan``
    run fixed on ``profile``'s replies (what a regime is fitted by)."""
    accepted = drafted = hits = rounds = 0
    for i in range(replies):
        steps = _steps(profile, i, length, seed)
        ssd = FixedSSD(steps, plan, steps.regime.accept) if plan.mode == "ssd" else None
        while steps.sim.emitted < length:
            rr = ssd.step() if ssd is not None else steps.sd(plan.k)
            accepted, drafted = accepted + rr.accepted, drafted + rr.drafted
            if rr.hit is not None:
                hits, rounds = hits + bool(rr.hit), rounds + 1
    return accepted / drafted, hits / rounds if rounds else None


def run_auto(profile: Profile, replies: int = REPLIES, length: int = LENGTH, model: CostModel | None = None,
             k: int = 4, seed: int = 0) -> Run:
    """auto on ``profile``: one cost model (``model``, else a fresh one) over the replies, kept on 'disk'
    between them (dumped and restored as the memory file keeps it)."""
    split = profile.machine.split
    model = model if model is not None else CostModel(split=split)
    run = Run("auto")
    shapes: set[int] = set()
    for i in range(replies):
        steps = _steps(profile, i, length, seed, shapes)
        lookup = Lookup(model)
        lookup.start(steps.target.committed)
        planner = AutoPlanner(model, k, max_branches=MAX_BRANCHES, remaining=length, prompt_read=not split)
        mode = AutoMode(steps, planner, SSDOptions(k=k, backup=NGRAM, early_stop=True), lookup, greedy=True)

        def step(mode: AutoMode = mode, first: bool = i == 0) -> RoundResult:
            rr = mode.step()
            plan = str(mode.planner.plan) if rr.mode not in ("lookup",) else "lookup"
            run.plans[rr.mode if rr.mode in ("ar", "lookup") else plan] += 1
            if first:
                run.trace.append(f"{rr.mode}:{rr.drafted}:{rr.accepted}")
            return rr

        run.rates.append(_finish(steps, step, length))
        model = memory.restore(memory.dump(model), split)  # what the next start would read back
        model.built = set(shapes)  # (the engine's process keeps its target context, and the model says what it ran)
    return run


@dataclass
class Row:
    profile: str
    best: Run
    auto: Run
    ar_first: float = 0.0  # ar's rate on the first reply (0: not run)

    @property
    def ratio(self) -> float:
        return self.auto.later() / self.best.later()

    @property
    def first(self) -> float:
        return self.auto.rates[0] / self.best.rates[0]

    @property
    def first_over_ar(self) -> float:
        """auto's first reply (fresh memory) against ar's on the same reply (0 where ar's was not run)."""
        return self.auto.rates[0] / self.ar_first if self.ar_first else 0.0

    @property
    def worst(self) -> float:
        return min(a / b for a, b in zip(self.auto.rates[1:], self.best.rates[1:], strict=True))


def best_fixed(profile: Profile, replies: int = REPLIES, length: int = LENGTH, seed: int = 0) -> Run:
    """The fixed plan with the highest rate over replies 2 onwards. Every plan runs the first SCREEN replies; only
    those within SCREEN_SHARE of the leader's rate there run the rest (each reply has its own seed, so a plan's
    replies are the same whether or not others ran)."""
    runs = [run_fixed(profile, p, min(replies, SCREEN), length, seed) for p in fixed_plans()]
    lead = max(r.later() for r in runs)
    runs = [run_fixed(profile, _plan(r.plan), replies, length, seed) for r in runs
            if r.later() >= SCREEN_SHARE * lead]
    return max(runs, key=Run.later)


def _plan(name: str) -> Plan:
    return next(p for p in fixed_plans() if str(p) == name)


def poisoned(model: CostModel, slow: dict[int, float]) -> CostModel:
    """``model`` as a file written while the machine was busy reads back: each width in ``slow`` that many times
    too slow (the others as measured), through the memory file's dump, load-time checks and ageing."""
    data = memory.dump(model)
    for width, factor in slow.items():
        figure = data["verify"].get(str(width))
        if figure is not None and figure[0] is not None:
            figure[0] *= factor
    return memory.age(memory.restore(data, model.split))


def bench_profile(profile: Profile, replies: int = REPLIES, length: int = LENGTH, seed: int = 0) -> Row:
    ar_first = run_fixed(profile, AR, 1, length, seed).rates[0]
    return Row(profile.name, best_fixed(profile, replies, length, seed), run_auto(profile, replies, length, seed=seed),
               ar_first)


def print_rows(rows: list[Row]) -> None:
    head = f"{'profile':22} {'best fixed':16} {'tok/s':>8} {'auto':>8} {'ratio':>6} {'reply 1':>7} {'1 / ar':>6} " \
           f"{'worst':>6}  auto's plans (rounds)"
    print(head)
    print("-" * len(head))
    for r in rows:
        top = ", ".join(f"{p} {n}" for p, n in r.auto.plans.most_common(3))
        print(f"{r.profile:22} {r.best.plan:16} {r.best.later():8.1f} {r.auto.later():8.1f} {r.ratio:6.2f} "
              f"{r.first:7.2f} {r.first_over_ar:6.2f} {r.worst:6.2f}  {top}")


def print_seeds(rows: dict[str, list[Row]]) -> None:
    """Each profile over several seeds (other replies, noise and acceptance draws): the bars' figures at their
    lowest and on average, and how many of the bars (three per seed) auto misses."""
    head = f"{'profile':22} {'replies 2-10':>13} {'first reply':>12} {'worst reply':>12} {'bars missed':>12}"
    print(head)
    print("-" * len(head))
    missed_all = bars_all = 0
    for name, rs in rows.items():
        figures = [(r.ratio, r.first, r.worst) for r in rs]
        missed = sum(x < bar for f in figures for x, bar in zip(f, BARS, strict=True))
        missed_all, bars_all = missed_all + missed, bars_all + len(BARS) * len(rs)
        cols = [f"{min(c):.2f} / {sum(c) / len(c):.2f}" for c in zip(*figures, strict=True)]
        print(f"{name:22} {cols[0]:>13} {cols[1]:>12} {cols[2]:>12} {missed:>5} of {len(BARS) * len(rs):<3}")
    print(f"lowest / mean over {len(next(iter(rows.values())))} seeds; bars missed in all: {missed_all} of {bars_all}")
    print_first_replies([r for rs in rows.values() for r in rs])


def print_first_replies(rows: list[Row]) -> None:
    """The first replies apart (each from fresh memory): how many miss the first-reply bar, how many fall below
    AR_FIRST_BAR of ar's own first reply; and every bar's figure as a geometric mean and its lowest."""
    first = [r.first for r in rows]
    over_ar = [r.first_over_ar for r in rows if r.ar_first]
    figures = [x for r in rows for x in (r.ratio, r.first, r.worst)]
    print(f"first replies (fresh memory): {sum(f < BARS[1] for f in first)} of {len(first)} below "
          f"{BARS[1]:.2f}x the best fixed plan's (geo-mean {_geomean(first):.3f}, lowest {min(first):.2f}); "
          f"{sum(f < AR_FIRST_BAR for f in over_ar)} of {len(over_ar)} below {AR_FIRST_BAR:.2f}x ar's")
    print(f"every bar's figure: geo-mean {_geomean(figures):.3f}, lowest {min(figures):.2f}")


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def cmd_simulated(names: Sequence[str] = (), seeds: int = 1) -> int:
    """Run and print the simulated bench (every profile, or those named), on one seed or over several."""
    if seeds <= 1:
        print_rows([bench_profile(PROFILES[n]) for n in (names or PROFILES)])
        return 0
    print_seeds({n: [bench_profile(PROFILES[n], seed=s) for s in range(seeds)] for n in (names or PROFILES)})
    return 0

"""``auto``: pick ar, sd or ssd, the draft length K and the fan-out for every round from live measurements.

A :class:`CostModel` keeps moving averages of what the machine really does — target verify time
by batch width, draft time per token, tree-level time by width, per-token acceptance, cache-hit
rate — and predicts tokens per second for every plan. The strategy runs the best plan, holds it
for a few rounds, and now and then probes the others so their figures stay current. Speculation
that does not pay loses to ``ar`` in the prediction and is dropped.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

from .drafter import Draft, Drafter
from .fanout import allocate
from .steps import RoundResult, Served, SSDOptions, Target, served_round, speculator
from .worker import DraftWorker, Request

log = logging.getLogger(__name__)

HOLD_ROUNDS = 4  # rounds a plan is kept before re-deciding
PROBE_EVERY = 64  # rounds between probes of the runner-up mode
SWITCH_GAIN = 1.05  # a new plan must promise this much more
PROBE_IF_WITHIN = 0.8  # re-measure another mode only if it is predicted within this share of the current
WINDOW_MARGIN = 0.85  # the tree must fit in this share of one target verify


class Ema:
    """Exponential moving average that remembers whether it has data."""

    def __init__(self, alpha: float = 0.25, init: float | None = None) -> None:
        self.alpha = alpha
        self.value = init
        self.n = 0

    def add(self, x: float) -> None:
        self.n += 1
        self.value = x if self.value is None else (1 - self.alpha) * self.value + self.alpha * x

    def get(self, default: float) -> float:
        return default if self.value is None else self.value


@dataclass(frozen=True, slots=True)
class Plan:
    mode: str  # "ar", "sd" or "ssd"
    k: int = 0
    budget: int = 0  # tree branches (ssd)

    def __str__(self) -> str:
        if self.mode == "ar":
            return "ar"
        return f"{self.mode}(K={self.k}" + (f", M={self.budget})" if self.mode == "ssd" else ")")


@dataclass
class CostModel:
    """Live timings and rates; predictions for any plan."""

    verify: dict[int, Ema] = field(default_factory=dict)  # seconds by batch width
    verify_split: dict[int, Ema] = field(default_factory=dict)  # the same with ssd's split threads
    draft_token: Ema = field(default_factory=Ema)  # seconds per sequential draft token
    level: dict[int, Ema] = field(default_factory=dict)  # seconds per tree level by width
    acceptance: Ema = field(default_factory=lambda: Ema(0.15))
    hit: Ema = field(default_factory=lambda: Ema(0.2))
    ssd_slowdown: Ema = field(default_factory=lambda: Ema(0.3))  # measured / predicted ssd round time
    split: bool = False  # ssd rounds run with split threads
    top1: Ema = field(default_factory=lambda: Ema(0.2))  # the draft's best candidate is the target's next token

    def add_verify(self, width: int, seconds: float, split: bool = False) -> None:
        (self.verify_split if split else self.verify).setdefault(width, Ema()).add(seconds)

    def add_level(self, width: int, seconds: float) -> None:
        self.level.setdefault(width, Ema()).add(seconds)

    def t_verify(self, width: int, split: bool = False) -> float:
        table = self.verify_split if split else self.verify
        known = sorted((w, e.get(0.0)) for w, e in table.items() if e.value is not None)
        if not known:
            if split and self.verify:  # not measured yet: assume fewer threads cost 50 % more
                return 1.5 * self.t_verify(width)
            return 0.05 * (1 + 0.3 * (width - 1))
        for w, t in known:
            if w == width:
                return t
        if len(known) == 1:
            w0, t0 = known[0]
            return t0 * (1 + 0.3 * (width - w0)) if width > w0 else t0 / (1 + 0.3 * (w0 - width))
        lo = max(((w, t) for w, t in known if w < width), default=known[0])
        hi = min(((w, t) for w, t in known if w > width), default=known[-1])
        if lo[0] == hi[0]:
            (w0, t0), (w1, t1) = known[-2], known[-1]
            slope = (t1 - t0) / (w1 - w0)
            return max(1e-6, t1 + slope * (width - w1))
        return lo[1] + (hi[1] - lo[1]) * (width - lo[0]) / (hi[0] - lo[0])

    def t_level(self, width: int) -> float:
        e = self.level.get(width)
        if e is not None and e.value is not None:
            return e.value
        td = self.draft_token.get(0.02)
        known = [(w, x.get(0.0)) for w, x in self.level.items() if x.value is not None]
        if known:
            w0, t0 = min(known, key=lambda wt: abs(wt[0] - width))
            per = max(0.0, (t0 - td) / max(1, w0 - 1)) if w0 > 1 else 0.3 * td
            return td + per * (width - 1)
        return td * (1 + 0.3 * (width - 1))

    def expected_tokens(self, k: int) -> float:
        a = min(max(self.acceptance.get(0.6), 0.0), 0.999)
        return (1 - a ** (k + 1)) / (1 - a)

    def tree_time(self, k: int, budget: int) -> float:
        return self.draft_token.get(0.02) + k * self.t_level(budget)

    def round_time(self, plan: Plan) -> float:
        if plan.mode == "ar":
            return self.t_verify(1)
        sd_time = plan.k * self.draft_token.get(0.02) + self.t_verify(plan.k + 1)
        if plan.mode == "sd":
            return sd_time
        p = self.hit_prob(plan.k, plan.budget)
        verify = self.t_verify(plan.k + 1, self.split)
        miss_time = plan.k * self.draft_token.get(0.02) + verify
        hit_time = max(verify, self.tree_time(plan.k, plan.budget))
        return (p * hit_time + (1 - p) * miss_time) * self.ssd_slowdown.get(1.0)

    def hit_prob(self, k: int, budget: int) -> float:
        """P(the next outcome has a branch): outcome k' has P ∝ a^k'(1-a) (a^K at K); a branch covers it
        when one of its F_k' candidates is the target's next token (top-1 accuracy ``top1``)."""
        a = min(max(self.acceptance.get(0.6), 0.0), 0.999)
        q = self.top1.get(0.6)
        counts = allocate(k, budget, geometric_on=True, acceptance=a)
        probs = [a**j * (1 - a) for j in range(k)] + [a**k]
        return sum(p * (1 - (1 - q) ** f) for p, f in zip(probs, counts, strict=True) if f > 0)

    def rate(self, plan: Plan) -> float:
        tokens = 1.0 if plan.mode == "ar" else self.expected_tokens(plan.k)
        return tokens / self.round_time(plan)

    def fits_window(self, k: int, budget: int) -> bool:
        return self.tree_time(k, budget) <= WINDOW_MARGIN * self.t_verify(k + 1, self.split)


class AutoStrategy:
    """Chooses a plan per round from the cost model; all draft work goes through one draft thread."""

    name = "auto"

    def __init__(self, target: Target, drafter: Drafter, opts: SSDOptions, *, adaptive: bool = True,
                 k_max: int = 8, model: CostModel | None = None) -> None:
        self.target = target
        self.opts = opts
        self.adaptive = adaptive
        self.k_max = max(opts.k, k_max) if adaptive else opts.k
        self.max_branches = drafter.max_branches
        self.worker = DraftWorker(drafter)
        self.threads = opts.threads
        # The machine's timings outlive one reply: the engine passes the same model to every generation.
        self.model = model or CostModel(split=bool(opts.threads and opts.threads.split))
        self.plan = Plan("ar")
        self.held = 0
        self.rounds = 0
        self.last_accepted = -1  # -1: the previous round was not an ssd round
        self.why = ""  # why the latest chosen plan was chosen (reported with the round)
        self._last_probe = 0
        self._covered = False  # did the tree built during the last round cover its outcome?
        self._probe: list[Plan] = self._first_probes()

    def _first_probes(self) -> list[Plan]:
        """What is still unmeasured: ar's verify, a few sd rounds; a narrow tree only if it could pay."""
        m = self.model
        probes: list[Plan] = []
        if 1 not in m.verify:
            probes.append(Plan("ar"))
        if m.draft_token.value is None:
            probes += [Plan("sd", self.opts.k)] * 2
        elif not m.level:
            best = max(self.candidates_without_ssd(), key=m.rate)
            hopeful = Plan("ssd", self.opts.k, 1)
            saved = m.hit.value
            m.hit.value = 1.0  # optimistic: would a tree that always hits beat the best known plan?
            promising = m.rate(hopeful) > SWITCH_GAIN * m.rate(best)
            m.hit.value = saved
            if promising:
                probes += [hopeful] * 2
        return probes

    def _ks(self) -> range | list[int]:
        return range(1, self.k_max + 1) if self.adaptive else [self.opts.k]

    def candidates_without_ssd(self) -> list[Plan]:
        return [Plan("ar"), *(Plan("sd", k) for k in self._ks())]

    # -- planning --------------------------------------------------------------------------------
    def candidates(self) -> list[Plan]:
        plans = self.candidates_without_ssd()
        for k in self._ks():
            for budget in sorted({1, 2, k + 1, 2 * (k + 1), 3 * (k + 1)}):
                budget = min(self.max_branches, budget)
                if self.model.fits_window(k, budget):
                    plans.append(Plan("ssd", k, budget))
        return plans

    def choose(self) -> Plan:
        if self._probe:
            plan = self._probe.pop(0)
            self.why = f"probe {plan}"
            if not self._probe:
                self._probe = self._first_probes() if self.rounds < 8 else []
                self.held = HOLD_ROUNDS  # decide right after the probes
            return plan
        self.why = f"plan {self.plan}"
        if self.held < HOLD_ROUNDS:
            return self.plan
        plans = self.candidates()
        best = max(plans, key=self.model.rate)
        current = self.model.rate(self.plan) if self.plan in plans else 0.0
        if best != self.plan and self.model.rate(best) > SWITCH_GAIN * current:
            self.why = f"plan {best}: predicted {current:.1f} -> {self.model.rate(best):.1f} tok/s"
            log.info("auto: %s -> %s", self.plan, self.why)
            self.plan = best
        self.held = 0
        if self.rounds - self._last_probe >= PROBE_EVERY:
            # Refresh the figures of the best plan of another mode.
            self._last_probe = self.rounds
            others = [p for p in plans if p.mode != self.plan.mode]
            if others:
                runner_up = max(others, key=self.model.rate)
                # Only when the decision is close: a probe of sd/ssd after many ar rounds also pays for
                # the draft catching up on every token since it last ran.
                if self.model.rate(runner_up) > PROBE_IF_WITHIN * self.model.rate(self.plan):
                    self._probe = [runner_up] * 2
        return self.plan

    # -- one round -------------------------------------------------------------------------------
    def step(self) -> RoundResult:
        plan = self.choose()
        self.held += 1
        self.rounds += 1
        t_threads, d_threads = 0, 0
        if self.threads is not None:
            if plan.mode == "ssd":
                t_threads, d_threads = self.threads.concurrent()
            else:
                t_threads, d_threads = self.threads.target, self.threads.draft
            self.target.set_threads(t_threads)
        if plan.mode == "ar":
            t0 = time.perf_counter()
            v = self.target.verify(Draft([], None))
            dt = time.perf_counter() - t0
            self.model.add_verify(1, dt)
            self.last_accepted = -1
            return RoundResult([v.next_token], "ar", verify_s=dt, why=self.why)
        ssd = plan.mode == "ssd"
        req = Request(
            committed=tuple(self.target.committed),
            accepted=self.last_accepted if ssd else -1,
            k=plan.k,
            budget=plan.budget if ssd else 0,
            geometric=True,  # the allocation hit_prob assumes
            acceptance=self.model.acceptance.get(0.6),
            backup=self.opts.backup if ssd else "jit",
            early_stop=self.opts.early_stop,
            draft_threads=d_threads,
        )
        served = served_round(self.target, self.worker, req)
        d, v = served.draft, served.verdict
        forced = self.last_accepted < 0
        self._learn(plan, served, forced)
        self.last_accepted = v.accepted if ssd else -1
        return RoundResult(
            v.tokens(d.tokens), plan.mode, speculator(d), len(d.tokens), v.accepted,
            hit=(d.hit if ssd and not forced else None), verify_s=served.verify_s, wait_s=served.wait_s,
            trees=served.trees, why=self.why,
        )

    def _learn(self, plan: Plan, served: Served, forced: bool) -> None:
        d, v, wait, verify = served.draft, served.verdict, served.wait_s, served.verify_s
        m = self.model
        n = len(d.tokens)
        split = m.split and plan.mode == "ssd"
        m.add_verify(n + 1, verify, split)
        if n:
            m.acceptance.add(v.accepted / n)
        if d.backup == "jit" and n and not split:
            m.draft_token.add(d.serve_s / n)
        for ts in served.trees:
            if ts.levels and ts.branches:
                m.add_level(ts.branches, ts.seconds / (ts.levels + 1))
        if plan.mode == "ssd":
            if not forced:
                m.hit.add(1.0 if d.hit else 0.0)
                if self._covered:  # the outcome had a branch: a hit means its best candidate was right
                    m.top1.add(1.0 if d.hit else 0.0)
                predicted = m.round_time(plan) / m.ssd_slowdown.get(1.0)
                if predicted > 0:
                    m.ssd_slowdown.add((wait + verify) / predicted)
            counts = allocate(n, plan.budget, geometric_on=True, acceptance=m.acceptance.get(0.6))
            self._covered = n > 0 and counts[min(v.accepted, n)] > 0
        elif n and v.accepted < n and v.accepted < len(d.top):
            # Would the draft's best candidate (after the rejected token) have been the target's token?
            cands = [int(t) for t in d.top[v.accepted] if int(t) != d.tokens[v.accepted]][:1]
            m.top1.add(1.0 if v.next_token in cands else 0.0)
        if not math.isfinite(m.round_time(plan)):
            raise AssertionError("cost model produced a non-finite estimate")

    def close(self) -> None:
        self.worker.close()
        if self.threads is not None:
            self.target.set_threads(self.threads.target)
            self.worker.drafter.set_threads(self.threads.draft)

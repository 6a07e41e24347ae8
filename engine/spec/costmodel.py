"""auto's cost model: live timings and rates of this machine, and the tokens per second they predict for a plan.

It keeps moving averages of what the machine really does — target verify time by batch width,
draft time per token, tree-level time by width, per-token acceptance, cache-hit rate, the draft's
top-1 accuracy — and predicts the rate of any :class:`Plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .fanout import allocate

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


@dataclass(frozen=True, slots=True)
class MeasuredRate:
    """auto's figure for one mode on this machine: its best plan there and the tokens per second predicted
    from what it measured (verify, draft and tree times, acceptance, hit rate)."""

    mode: str  # "ar", "sd" or "ssd"
    plan: str  # e.g. "sd(K=3)"
    tokens_per_second: float

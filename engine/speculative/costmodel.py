"""auto's cost model: live timings and rates of this machine, and the tokens per second they predict for a plan.

It keeps moving averages of what the machine really does — target verify time by batch width,
draft time per token, tree-level time by width, per-token acceptance, cache-hit rate, the draft's
top-1 accuracy — and predicts the rate of any :class:`Plan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.core.mode import Mode

from .fanout import allocate
from .figures import Acceptance, Ema, Tally, enough, level_figure
from .knobs import (
    ACCEPT_MAX,
    ACCEPT_PRIOR,
    CATCHUP_SHARE,
    DRAFT_TOKEN_PRIOR,
    EARLY_STOP_MARGIN,
    GUESS_ALPHA,
    HIT_ALPHA,
    LOOKUP_GAIN,
    TALLY_SHRINK_ROUNDS,
    TIMING_CLIP,
    TOP1_PRIOR,
    UNTRIED_CAP,
    WINDOW_MARGIN,
)
from .plan import AR, LOOKUP, Plan
from .poolfigures import PoolFigures
from .verifytimes import VerifyTimes


@dataclass
class CostModel(VerifyTimes, PoolFigures):
    """Live timings and rates; predictions for any plan (the target's verify times: :class:`VerifyTimes`; the
    pool's acceptance: :class:`PoolFigures`)."""

    draft_token: Ema = field(default_factory=lambda: Ema(clip=TIMING_CLIP))  # seconds per sequential draft token
    # ... on ssd's split threads (its misses' drafts where the machine splits its cores); until measured, as on sd's
    draft_token_split: Ema = field(default_factory=lambda: Ema(clip=TIMING_CLIP))
    catchup_token: Ema = field(default_factory=lambda: Ema(clip=TIMING_CLIP))  # per token the draft catches up on
    level: dict[int, Ema] = field(default_factory=dict)  # seconds per tree level by width (written via add_level)
    tree_glue: Ema = field(default_factory=lambda: Ema(clip=TIMING_CLIP))  # a tree's first row: one draft token
    acceptance: Acceptance = field(default_factory=Acceptance)  # per draft position (see Acceptance)
    hit: Ema = field(default_factory=lambda: Ema(HIT_ALPHA))
    # After a rejection, how often the draft's best alternative is right (top1); after a full acceptance, its
    # next-token guess (next_guess).
    top1: Ema = field(default_factory=lambda: Ema(GUESS_ALPHA))
    next_guess: Ema = field(default_factory=lambda: Ema(GUESS_ALPHA))
    tallies: dict[Plan, Tally] = field(default_factory=dict)  # measured against predicted, by plan
    mode_tallies: dict[str, Tally] = field(default_factory=dict)  # the same by mode (for plans not yet run)
    probe_gap: dict[str, int] = field(default_factory=dict)  # rounds between probes of a mode (grows on losses)
    rounds: int = 0  # auto rounds run with this model, over all replies
    last_run: dict[str, int] = field(default_factory=dict)  # the round each mode last ran
    stale: bool = False  # read back from disk (memory.age): auto re-measures ar before it trusts the figures

    # Derived figures a round's decisions ask for dozens of times, kept until what they derive from changes:
    # each mode's delivered rate (until observe), t_level by width (until add_level or add_verify, or the draft's
    # token or catch-up time moves), and a tree's hit probability by (K, budget) (until the ratios it is made of
    # move).
    _delivered: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    _level_at: dict[int, float] = field(default_factory=dict, repr=False, compare=False)
    _level_from: tuple[float | None, float | None] = field(default=(None, None), repr=False, compare=False)
    _hit_at: dict[tuple[int, int, bool], float] = field(default_factory=dict, repr=False, compare=False)
    _hit_from: tuple[float | None, ...] = field(default=(), repr=False, compare=False)

    def add_verify(self, width: int, seconds: float, split: bool = False, build: bool = False) -> None:
        super().add_verify(width, seconds, split, build)
        self._level_at.clear()  # the unmeasured level widths scale as the verify widths do

    def add_tree(self, branches: int, levels: int, glue_s: float, level_s: float) -> None:
        """One tree's build: its glue decode (one token, beside the target's verify) and ``levels`` levels of
        ``branches`` tokens each. Apart, because a level's width costs what one token does not (a CPU draft's
        wide level costs several glue decodes)."""
        if levels <= 0 or branches <= 0:
            return
        self.tree_glue.add(glue_s)
        self.add_level(branches, level_s / levels)

    def add_level(self, width: int, seconds: float) -> None:
        self.level.setdefault(width, level_figure()).add(seconds)
        self._level_at.clear()

    def t_level(self, width: int) -> float:
        source = (self.draft_token.value, self.catchup_token.value)  # what the unmeasured widths' estimates follow
        if source != self._level_from:
            self._level_at.clear()
            self._level_from = source
        t = self._level_at.get(width)
        if t is None:
            t = self._level_at[width] = self._estimate_level(width)
        return t

    def _estimate_level(self, width: int) -> float:
        """A level's seconds at ``width`` branches: measured; else on the line between the nearest measured widths
        below and above it (one branch: a draft token); above the widest, that width's scaled as the target's
        verify scales between the two widths on this machine (a CPU batches a few tokens at a few times one
        token's cost, an accelerator at about one token's); before any tree, at least a catch-up batch of
        ``width`` tokens."""
        e = self.level.get(width)
        if e is not None and e.value is not None:
            return e.value
        known = {w: x.get(0.0) for w, x in self.level.items() if x.value is not None}
        if not known:  # before any tree: one branch costs a draft token, more at least a batch of as many tokens
            # (the draft's catch-up: a CPU pays for every branch, however flat the target's verify is)
            td = self.draft_token.get(DRAFT_TOKEN_PRIOR)
            return max(td * self.t_verify(width) / self.t_verify(1), self.catchup_time(width))
        known.setdefault(1, self.draft_token.get(DRAFT_TOKEN_PRIOR))  # a level of one branch: one draft token
        below = max((w for w in known if w < width), default=None)
        above = min((w for w in known if w > width), default=None)
        if below is not None and above is not None:  # between two known widths: on the line between them
            t0, t1 = known[below], known[above]
            return t0 + (t1 - t0) * (width - below) / (above - below)
        w0 = below if below is not None else min(known)
        return known[w0] * self.t_verify(width) / self.t_verify(w0)

    def catchup_time(self, tokens: float) -> float:
        """Seconds the draft model takes to decode ``tokens`` it has not seen (the prompt, or what ar rounds
        emitted): the price of moving to a plan that drafts with it."""
        return tokens * self.catchup_token.get(CATCHUP_SHARE * self.draft_token.get(DRAFT_TOKEN_PRIOR))

    def expected_tokens(self, k: int) -> float:
        return sum(self.acceptance.reach(k))

    def tree_time(self, k: int, budget: int) -> float:
        """Seconds a tree of ``budget`` branches and ``k`` levels takes: its glue decode, then the levels."""
        return self.tree_glue.get(self.draft_token.get(DRAFT_TOKEN_PRIOR)) + k * self.t_level(budget)

    def round_time(self, plan: Plan) -> float:
        if plan.mode == Mode.AR:
            return self.t_verify(1)
        if plan.mode == Mode.SD:
            return plan.k * self.draft_token.get(DRAFT_TOKEN_PRIOR) + self.t_verify(plan.k + 1)
        p = self.calibrated_hit(plan)
        return p * self.outcome_time(plan, hit=True) + (1 - p) * self.outcome_time(plan, hit=False)

    def calibrated_hit(self, plan: Plan) -> float:
        """:meth:`hit_prob` corrected by the hits this ssd plan's rounds (else its mode's) really had: the figures
        count a tree's candidates as independent guesses, which flatters a wide tree whose draft errs one way."""
        t = self._corrector(plan, self.tallies.get(plan))
        p = self.hit_prob(plan.k, plan.budget)
        return p if t is None else min(1.0, p * t.hit_factor())

    def outcome_time(self, plan: Plan, *, hit: bool) -> float:
        """Seconds one ssd round takes with a given outcome: on a hit the verify (or the tree, where it is the
        longer), on a miss the draft's own tokens and then the verify. What this misses in practice, the plan's
        tally corrects."""
        verify = self.t_verify(plan.k + 1, True)
        if hit:
            return max(verify, self.tree_time(plan.k, plan.budget))
        return plan.k * self.ssd_draft_token() + verify

    def ssd_draft_token(self) -> float:
        """Seconds per token of ssd's own drafts (its misses): on its split threads where it has them."""
        sd = self.draft_token.get(DRAFT_TOKEN_PRIOR)
        return self.draft_token_split.get(sd) if self.split else sd

    def hit_prob(self, k: int, budget: int, geometric: bool = True) -> float:
        """P(the next outcome has a branch): outcome k' has P ∝ a^k'(1-a) (a^K at K); a branch covers it
        when one of its F_k' candidates is the target's next token: after a rejection the draft's best
        alternative must be the target's correction (``top1``); after a full acceptance its next-token guess
        (``next_guess``, before data as often right as a draft token is accepted). The branches are spread
        as auto spreads them (geometric), or evenly (fixed ssd's default fan-out)."""
        source = (self.acceptance.value, self.acceptance.n, self.top1.value, self.next_guess.value)
        if source != self._hit_from:
            self._hit_at.clear()
            self._hit_from = source
        p = self._hit_at.get((k, budget, geometric))
        if p is None:
            p = self._hit_at[(k, budget, geometric)] = self._estimate_hit(k, budget, geometric)
        return p

    def _estimate_hit(self, k: int, budget: int, geometric: bool) -> float:
        a = min(max(self.acceptance.get(ACCEPT_PRIOR), 0.0), ACCEPT_MAX)
        counts = allocate(k, budget, geometric_on=geometric, acceptance=a)
        reach = self.acceptance.reach(k)  # outcome j: the first j accepted, the next one rejected
        probs = [reach[j] * (1 - self.acceptance.at(j)) for j in range(k)] + [reach[k]]
        right = [self.top1.get(TOP1_PRIOR)] * k + [self.next_guess.get(a)]
        return sum(p * (1 - (1 - r) ** f) for p, r, f in zip(probs, right, counts, strict=True) if f > 0)

    def best_case(self, plan: Plan) -> float:
        """Tokens per second ``plan`` would reach with every draft token accepted (and, for ssd, every tree hit)."""
        if plan.mode == Mode.AR:
            return 1.0 / self.t_verify(1)
        return (plan.k + 1) / (self.outcome_time(plan, hit=True) if plan.mode == Mode.SSD else self.round_time(plan))

    def raw_rate(self, plan: Plan) -> float:
        """Tokens per second the component figures predict (no correction from measured rounds)."""
        tokens = 1.0 if plan.mode == Mode.AR else self.expected_tokens(plan.k)
        return tokens / self.round_time(plan)

    def measured(self, plan: Plan) -> bool:
        """Whether rounds of this very plan have been measured (enough to correct its prediction)."""
        return enough(self.tallies.get(plan))

    def mode_ran(self, mode: str) -> bool:
        """Whether a round of any plan of ``mode`` has been measured against its prediction on this machine."""
        return mode in self.mode_tallies

    def pool_token_time(self) -> float:
        """Seconds per token of the pool's rounds as measured (0 before any)."""
        t = self.mode_tallies.get(Mode.LOOKUP)
        return t.seconds / t.tokens if t is not None and t.tokens > 0 else 0.0

    def correction(self, plan: Plan) -> float:
        """How far this plan's (else its mode's) measured rounds ran from the prediction; 1 without data."""
        return self._correction(plan, self.tallies.get(plan))

    def _correction(self, plan: Plan, own: Tally | None) -> float:
        t = self._corrector(plan, own)
        if t is None:
            return 1.0
        # ssd's tokens per round also depend on how deep the served branches are (early stop), which only its
        # tally sees; sd's and lookup's follow from the acceptance figures alone.
        tokens = plan.mode == Mode.SSD
        f = t.factor(tokens=tokens)
        mode = self.mode_tallies.get(plan.mode)
        if t is own and enough(mode):  # a plan's few rounds are weighed against its mode's many (a stall's share)
            w = own.n / (own.n + TALLY_SHRINK_ROUNDS)
            f = f**w * mode.factor(tokens=tokens) ** (1 - w)
        return f

    def _corrector(self, plan: Plan, own: Tally | None) -> Tally | None:
        """The tally that corrects ``plan``'s prediction: its own (``own``) once it holds enough rounds, else its
        mode's once that does; None before either."""
        t = own if enough(own) else self.mode_tallies.get(plan.mode)
        return t if enough(t) else None

    def rate(self, plan: Plan) -> float:
        """Predicted tokens per second, corrected by what rounds of the plan really did on this machine; a plan
        not measured itself is predicted at most UNTRIED_CAP x the best rate a plan of its mode has delivered (for
        ssd without split threads, where a miss is an sd round, at least what sd delivered)."""
        own = self.tallies.get(plan)  # looked up once: a decision rates dozens of plans
        rate = self.raw_rate(plan) * self._correction(plan, own)
        if enough(own):  # measured(plan)
            return rate
        delivered = self.delivered(plan.mode)
        if plan.mode == Mode.SSD and not self.split:
            delivered = max(delivered, self.delivered(Mode.SD))
        return min(rate, UNTRIED_CAP * delivered) if delivered else rate

    def delivered(self, mode: str) -> float:
        """The best tokens per second the measured plans of ``mode`` ran at, by their tallies (ssd's count the
        tokens its drafts were expected to emit); 0 when none is measured."""
        rate = self._delivered.get(mode)
        if rate is None:
            rate = self._delivered[mode] = max((t.tokens / t.seconds for p, t in self.tallies.items()
                                                if p.mode == mode and enough(t) and t.seconds > 0),
                                               default=0.0)
        return rate

    def observe(self, plan: Plan, tokens: float, seconds: float, pred_tokens: float, pred_seconds: float,
                hit: bool | None = None, geometric: bool = True) -> None:
        """One round of ``plan``: what it took and emitted (ssd: expected), and what was predicted for it; for
        an ssd round that could hit, whether it did (against :meth:`hit_prob` for the tree's spread of branches,
        before this round teaches it: the tally keeps how far the figures are off, whatever the spread)."""
        tallies = (self.tallies.setdefault(plan, Tally()), self.mode_tallies.setdefault(plan.mode, Tally()))
        predicted = self.hit_prob(plan.k, plan.budget, geometric) if hit is not None else 0.0
        for t in tallies:
            t.add(tokens, seconds, pred_tokens, pred_seconds)
            if hit is not None:
                t.add_hit(hit, predicted)
        self._delivered.clear()

    def fits_window(self, k: int, budget: int, early_stop: bool = False) -> bool:
        margin = EARLY_STOP_MARGIN if early_stop else WINDOW_MARGIN
        return self.tree_time(k, budget) <= margin * self.t_verify(k + 1, True)

    def lookup_best(self, orders: Sequence[int]) -> tuple[int, float]:
        """The draft length with the most predicted tokens per second (0: a plain ar step), and that rate; a
        draft must promise LOOKUP_GAIN more than the plain step. Until lookup rounds are measured they are
        corrected as ar's are (the same verify calls, the same host work around them)."""
        return self.lookup_length(self.lookup_expected(orders))

    def lookup_length(self, expected: Sequence[float]) -> tuple[int, float]:
        """:meth:`lookup_best` from the draft's expected tokens by length (:meth:`lookup_expected`); a width the
        target's context has not run pays its graph's build in the round (over RPC, round trips)."""
        ar = self.correction(AR)
        lookup = self.correction(LOOKUP) if self.measured(LOOKUP) else ar
        t_verify = self.t_verify
        best, rate = 0, expected[0] / t_verify(1) * ar
        score = rate  # the first length with the highest rate, a draft's rate counted LOOKUP_GAIN lower
        for n in range(1, len(expected)):
            r = expected[n] / (t_verify(n + 1) + self.build_for(n + 1)) * lookup
            if r / LOOKUP_GAIN > score:
                best, rate, score = n, r, r / LOOKUP_GAIN
        return best, rate


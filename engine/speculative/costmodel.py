"""auto's cost model: live timings and rates of this machine, and the tokens per second they predict for a plan.

It keeps moving averages of what the machine really does — target verify time by batch width,
draft time per token, tree-level time by width, per-token acceptance, cache-hit rate, the draft's
top-1 accuracy — and predicts the rate of any :class:`Plan`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeGuard

from .fanout import allocate

WINDOW_MARGIN = 0.85  # the tree must fit in this share of one target verify (without early stop)
TIMING_CLIP = 1.5  # a timing sample moves its average by at most this factor's share (noisy machines)
# The target's verify time is its pace (how fast the machine runs now, PACE_ALPHA: two or three rounds of memory) times
# each width's own figure relative to that pace (FIGURE_ALPHA: about twenty): a machine-wide slow spell seen by the
# widths that run moves the widths that do not run with them.
# A pace that lasts is no spell: once it has stayed more than PACE_BAND from 1, on one side, for more than
# SPELL_VERIFIES verifies, each further verify hands PACE_HANDOVER of its distance from 1 to the figure of the width
# that ran, keeping that width's prediction (figure x pace), so a lone width's wrong figure stays its own.
PACE_ALPHA = 0.4
PACE_BAND = 0.05
SPELL_VERIFIES = 8
PACE_HANDOVER = 0.1
FIGURE_ALPHA = 0.05
PACE_AFTER = 3  # a width's samples before its verifies move the pace (its figure is their mean until then)
EARLY_STOP_MARGIN = 1.3  # with early stop a deeper tree is cut short and served shallower: allow more
LOOKUP_PRIOR = {1: 0.25, 2: 0.4, 3: 0.55, 4: 0.65}  # acceptance of a pool token by n-gram order, before data
LOOKUP_DEPTHS = 4  # a pool token's acceptance is learnt by its place in the chain: 0, 1, 2, and 3 or later
LOOKUP_GAIN = 1.05  # a pool draft must promise this much more than the step it replaces
TALLY_ROUNDS = 3  # rounds of a plan (or its mode) before their tally corrects its prediction
UNTRIED_CAP = 1.25  # an unmeasured plan is trusted at most this far above what its mode's plans delivered
CATCHUP_SHARE = 0.25  # a catch-up token (one batch) against a sequential draft token, before data
HIT_DECAY = 0.97  # an ssd plan's hits against its predicted hits: about thirty rounds of memory
HIT_PRIOR = 1.0  # ... starting from this many predicted hits seen
# per-position acceptance: about ten rounds of memory (a mode left for ar keeps the figure its last rounds left: a
# shorter memory leaves it on a few rounds' luck, and ar is then held on it)
ACCEPT_DECAY = 0.9
GUESS_ALPHA = 0.1  # the draft's top-1 and next-guess averages (a tree's hit probability): about ten rounds of memory


def lookup_prior(order: int) -> float:
    """A pool token's acceptance before data (orders past the table: as the longest listed)."""
    return LOOKUP_PRIOR.get(order, LOOKUP_PRIOR[max(LOOKUP_PRIOR)])


class Ema:
    """Exponential moving average that remembers whether it has data."""

    def __init__(self, alpha: float = 0.25, init: float | None = None, clip: float | None = None,
                 warm: bool = False) -> None:
        self.alpha = alpha
        self.value = init
        self.n = 0
        self.clip = clip  # timings: a sample counts as at most clip x (at least 1/clip x) the average
        self.warm = warm  # the mean of the first samples, until 1/n falls below alpha (a slow average's start)
        self._settled = 0 if init is not None else 2  # samples before the clip applies (an initial value is one)

    def add(self, x: float) -> None:
        self.n += 1
        if self.clip is not None and self.value is not None and self.n > self._settled:
            x = min(max(x, self.value / self.clip), self.value * self.clip)  # one stalled round moves it little
        alpha = max(self.alpha, 1.0 / self.n) if self.warm else self.alpha
        self.value = x if self.value is None else (1 - alpha) * self.value + alpha * x

    def get(self, default: float) -> float:
        return default if self.value is None else self.value


class Acceptance(Ema):
    """The per-position acceptance ``a`` that :meth:`CostModel.expected_tokens`' geometric model assumes: the
    probability a draft token is accepted when the ones before it were. Accepted tokens count as successes, a
    rejection as one failure, a fully accepted draft as none (decayed sums per round). The plain fraction
    accepted / drafted underestimates it: 91 % of K = 4 accepted is a ≈ 0.96."""

    SEED_TRIALS = 4.0  # the weight of a value restored from disk, in trials

    def __init__(self, decay: float = ACCEPT_DECAY) -> None:
        super().__init__()
        self.decay = decay
        self.hits = self.trials = 0.0

    def add_round(self, accepted: int, drafted: int) -> None:
        if self.trials == 0 and self.value is not None:  # restored: the kept value counts as a few trials
            self.hits, self.trials = self.value * self.SEED_TRIALS, self.SEED_TRIALS
        self.n += 1
        self.hits = self.decay * self.hits + accepted
        self.trials = self.decay * self.trials + accepted + (1 if accepted < drafted else 0)
        self.value = self.hits / self.trials


class Ratio:
    """A decayed success ratio with a prior worth ``weight`` observations (no data: the prior)."""

    def __init__(self, prior: float, weight: float = 2.0, decay: float = 0.97) -> None:
        self.prior, self.weight, self.decay = prior, weight, decay
        self.hits = 0.0
        self.seen = 0.0

    def add(self, hit: bool) -> None:
        self.hits = self.decay * self.hits + float(hit)
        self.seen = self.decay * self.seen + 1.0

    @property
    def value(self) -> float:
        return self.value_with(self.prior)

    def value_with(self, prior: float) -> float:
        """The ratio with another prior (one that follows a related ratio)."""
        return (self.hits + prior * self.weight) / (self.seen + self.weight)


class Tally:
    """What the rounds of one plan really took and emitted (for ssd: the tokens its drafts were expected to
    emit, see :func:`engine.speculative.auto._ssd_tally_figures`), against what the model predicted for them
    (decayed sums, so the figure follows the machine). Round times are clipped to 2.5x the prediction:
    one round slowed by another process does not condemn a plan. ssd's rounds also count their cache hits
    against the hits predicted, over a longer memory: a hit is luck that a few rounds cannot judge."""

    FIELDS = ("n", "tokens", "seconds", "pred_tokens", "pred_seconds", "hits", "pred_hits")  # what is kept on disk

    def __init__(self, decay: float = 0.9) -> None:
        self.decay = decay
        self.n = 0
        self.tokens = self.seconds = self.pred_tokens = self.pred_seconds = 0.0
        self.hits = self.pred_hits = 0.0

    def add(self, tokens: float, seconds: float, pred_tokens: float, pred_seconds: float) -> None:
        d = self.decay
        self.n += 1
        self.tokens = d * self.tokens + tokens
        self.seconds = d * self.seconds + min(seconds, 2.5 * pred_seconds)
        self.pred_tokens = d * self.pred_tokens + pred_tokens
        self.pred_seconds = d * self.pred_seconds + pred_seconds

    def add_hit(self, hit: bool, predicted: float) -> None:
        """One ssd round's outcome: whether it hit, and the probability the model gave it."""
        self.hits = HIT_DECAY * self.hits + float(hit)
        self.pred_hits = HIT_DECAY * self.pred_hits + predicted

    def factor(self, *, tokens: bool) -> float:
        """Measured rate / predicted rate, kept within [0.25, 4]; without ``tokens``, only the round times
        (predicted / measured seconds), for plans whose tokens per round the acceptance figures already
        follow: a tally of tokens would count again what they learnt since (a past prompt's lower acceptance)."""
        if self.seconds <= 0 or self.pred_tokens <= 0:
            return 1.0
        f = self.pred_seconds / self.seconds
        if tokens:
            f *= self.tokens / self.pred_tokens
        return min(4.0, max(0.25, f))

    def hit_factor(self) -> float:
        """Hits seen / hits predicted, with HIT_PRIOR predicted hits seen as a prior (1 without rounds)."""
        return (self.hits + HIT_PRIOR) / (self.pred_hits + HIT_PRIOR)


def verify_figure() -> Ema:
    """One verify width's figure: seconds at pace 1 (:attr:`CostModel.pace`)."""
    return Ema(FIGURE_ALPHA, clip=TIMING_CLIP, warm=True)


def level_figure() -> Ema:
    """One tree level width's figure: seconds per level."""
    return Ema(clip=TIMING_CLIP)


def _enough(t: Tally | None) -> TypeGuard[Tally]:
    """Whether a tally holds enough rounds to correct a prediction."""
    return t is not None and t.n >= TALLY_ROUNDS


class Plan(NamedTuple):
    """One round's plan; a tuple, so that the dozens of lookups by plan a decision makes hash in C."""

    mode: str  # "ar", "sd", "ssd" or "lookup" (the pool's draft, of variable length: no K)
    k: int = 0
    budget: int = 0  # tree branches (ssd)

    def __str__(self) -> str:
        if self.mode in ("ar", "lookup"):
            return self.mode
        return f"{self.mode}(K={self.k}" + (f", M={self.budget})" if self.mode == "ssd" else ")")


AR, LOOKUP = Plan("ar"), Plan("lookup")  # the two plans without a K


@dataclass
class CostModel:
    """Live timings and rates; predictions for any plan."""

    # A verify's seconds: the pace times its width's figure (written via add_verify: _verify_at)
    pace: Ema = field(default_factory=lambda: Ema(PACE_ALPHA, init=1.0, clip=TIMING_CLIP))
    verify: dict[int, Ema] = field(default_factory=dict)  # by width (verify_figure)
    verify_split: dict[int, Ema] = field(default_factory=dict)  # the same with ssd's split threads
    draft_token: Ema = field(default_factory=lambda: Ema(clip=TIMING_CLIP))  # seconds per sequential draft token
    # ... on ssd's split threads (its misses' drafts where the machine splits its cores); until measured, as on sd's
    draft_token_split: Ema = field(default_factory=lambda: Ema(clip=TIMING_CLIP))
    catchup_token: Ema = field(default_factory=lambda: Ema(clip=TIMING_CLIP))  # per token the draft catches up on
    level: dict[int, Ema] = field(default_factory=dict)  # seconds per tree level by width (written via add_level)
    tree_glue: Ema = field(default_factory=lambda: Ema(clip=TIMING_CLIP))  # a tree's first row: one draft token
    acceptance: Acceptance = field(default_factory=Acceptance)  # per draft position (see Acceptance)
    hit: Ema = field(default_factory=lambda: Ema(0.2))
    split: bool = False  # ssd rounds run with split threads
    # After a rejection, how often the draft's best alternative is right (top1); after a full acceptance, its
    # next-token guess (next_guess).
    top1: Ema = field(default_factory=lambda: Ema(GUESS_ALPHA))
    next_guess: Ema = field(default_factory=lambda: Ema(GUESS_ALPHA))
    lookup_accept: dict[tuple[int, int], Ratio] = field(default_factory=dict)  # pool tokens accepted, by (order, depth)
    tallies: dict[Plan, Tally] = field(default_factory=dict)  # measured against predicted, by plan
    mode_tallies: dict[str, Tally] = field(default_factory=dict)  # the same by mode (for plans not yet run)
    probe_gap: dict[str, int] = field(default_factory=dict)  # rounds between probes of a mode (grows on losses)
    rounds: int = 0  # auto rounds run with this model, over all replies
    last_run: dict[str, int] = field(default_factory=dict)  # the round each mode last ran
    stale: bool = False  # read back from disk (memory.age): auto re-measures ar before it trusts the figures

    # Derived figures a round's decisions ask for dozens of times, kept until what they derive from changes:
    # t_verify by (width, split) and the measured widths by table (until add_verify), each mode's delivered
    # rate (until observe), t_level by width (until add_level or add_verify, or the draft's token time moves), a
    # tree's hit probability by (K, budget) (until the ratios it is made of move), a pool token's acceptance by
    # (order, depth) (until learn_lookup).
    _verify_at: dict[tuple[int, bool], float] = field(default_factory=dict, repr=False, compare=False)
    _away: int = field(default=0, repr=False, compare=False)  # verifies the pace has stayed on one side of PACE_BAND
    _side: int = field(default=0, repr=False, compare=False)  # ... and which: 1 slow, -1 fast, 0 within the band
    _known: dict[bool, list[tuple[int, float]]] = field(default_factory=dict, repr=False, compare=False)
    _delivered: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    _level_at: dict[int, float] = field(default_factory=dict, repr=False, compare=False)
    _level_td: float | None = field(default=None, repr=False, compare=False)
    _hit_at: dict[tuple[int, int, bool], float] = field(default_factory=dict, repr=False, compare=False)
    _hit_from: tuple[float | None, ...] = field(default=(), repr=False, compare=False)
    _accept_at: dict[tuple[int, int], float] = field(default_factory=dict, repr=False, compare=False)

    def add_verify(self, width: int, seconds: float, split: bool = False) -> None:
        """One verify of ``width`` tokens: a width with a figure of PACE_AFTER samples moves the pace first (the
        pace it implies: its seconds over the figure), then the width's figure learns the seconds at that pace, and
        takes over a share of a pace that has lasted past a spell (:meth:`_hand_over`)."""
        e = (self.verify_split if split else self.verify).setdefault(width, verify_figure())
        new_width = e.value is None
        if e.value and e.n >= PACE_AFTER:
            self.pace.add(seconds / e.value)
        e.add(seconds / self.pace.get(1.0))
        self._hand_over(e)
        self._verify_at.clear()  # the split table's estimate may derive from the other one
        self._level_at.clear()  # the unmeasured level widths scale as the verify widths do
        known = self._known.get(split)
        if new_width or known is None:
            self._known.pop(split, None)
        else:  # the same widths: only this one's figure moves (a round's usual case)
            known[bisect.bisect_left(known, (width,))] = (width, e.get(0.0))

    def _hand_over(self, figure: Ema) -> None:
        """Once the pace has stayed away from 1 past a spell, move PACE_HANDOVER of its distance into ``figure``
        (the width that ran), their product kept."""
        pace = self.pace.get(1.0)
        side = 0 if abs(pace - 1.0) <= PACE_BAND else (1 if pace > 1.0 else -1)
        self._away = self._away + 1 if side and side == self._side else int(bool(side))
        self._side = side
        if self._away <= SPELL_VERIFIES or figure.value is None:
            return
        kept = 1.0 + (1.0 - PACE_HANDOVER) * (pace - 1.0)
        figure.value *= pace / kept
        self.pace.value = kept

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

    def t_verify(self, width: int, split: bool = False) -> float:
        """Seconds a verify of ``width`` tokens takes now (at the machine's pace)."""
        t = self._verify_at.get((width, split))
        if t is None:
            t = self._verify_at[(width, split)] = self._estimate_verify(width, split) * self.pace.get(1.0)
        return t

    def _known_verify(self, split: bool) -> list[tuple[int, float]]:
        """(width, seconds) of the measured widths, narrowest first."""
        known = self._known.get(split)
        if known is None:
            table = self.verify_split if split else self.verify
            known = self._known[split] = sorted((w, e.get(0.0)) for w, e in table.items() if e.value is not None)
        return known

    def _estimate_verify(self, width: int, split: bool) -> float:
        e = (self.verify_split if split else self.verify).get(width)
        if e is not None and e.value is not None:  # measured
            return e.value
        known = self._known_verify(split)
        if not known:
            if split and self.verify:  # not measured yet: assume fewer threads cost 50 % more
                return 1.5 * self._estimate_verify(width, False)
            return 0.05 * (1 + 0.3 * (width - 1))
        if len(known) == 1:
            w0, t0 = known[0]
            return t0 * (1 + 0.3 * (width - w0)) if width > w0 else t0 / (1 + 0.3 * (w0 - width))
        i = bisect.bisect_left(known, (width,))  # the first measured width above this one (it is not measured)
        lo, hi = known[max(i - 1, 0)], known[min(i, len(known) - 1)]
        if lo[0] == hi[0]:  # outside the measured widths: the slope over all of them, never falling
            (w0, t0), (w1, t1) = known[0], known[-1]
            slope = max(0.0, (t1 - t0) / (w1 - w0))
            return max(1e-6, t1 + slope * (width - w1)) if width > w1 else max(1e-6, t0 - slope * (w0 - width))
        return lo[1] + (hi[1] - lo[1]) * (width - lo[0]) / (hi[0] - lo[0])

    def t_level(self, width: int) -> float:
        if self._level_td != self.draft_token.value:  # the unmeasured widths' estimates follow the draft's time
            self._level_at.clear()
            self._level_td = self.draft_token.value
        t = self._level_at.get(width)
        if t is None:
            t = self._level_at[width] = self._estimate_level(width)
        return t

    def _estimate_level(self, width: int) -> float:
        """A level's seconds at ``width`` branches: measured, else the nearest measured width's (the draft's
        single token before any) scaled as the target's verify scales between the two widths on this machine. A
        CPU batches a few tokens at a few times one token's cost, an accelerator at about one token's."""
        e = self.level.get(width)
        if e is not None and e.value is not None:
            return e.value
        known = [(w, x.get(0.0)) for w, x in self.level.items() if x.value is not None]
        w0, t0 = min(known, key=lambda wt: abs(wt[0] - width)) if known else (1, self.draft_token.get(0.02))
        return t0 * self.t_verify(width) / self.t_verify(w0)

    def catchup_time(self, tokens: float) -> float:
        """Seconds the draft model takes to decode ``tokens`` it has not seen (the prompt, or what ar rounds
        emitted): the price of moving to a plan that drafts with it."""
        return tokens * self.catchup_token.get(CATCHUP_SHARE * self.draft_token.get(0.02))

    def expected_tokens(self, k: int) -> float:
        a = min(max(self.acceptance.get(0.6), 0.0), 0.999)
        return (1 - a ** (k + 1)) / (1 - a)

    def tree_time(self, k: int, budget: int) -> float:
        """Seconds a tree of ``budget`` branches and ``k`` levels takes: its glue decode, then the levels."""
        return self.tree_glue.get(self.draft_token.get(0.02)) + k * self.t_level(budget)

    def round_time(self, plan: Plan) -> float:
        if plan.mode == "ar":
            return self.t_verify(1)
        if plan.mode == "sd":
            return plan.k * self.draft_token.get(0.02) + self.t_verify(plan.k + 1)
        p = self.calibrated_hit(plan)
        return p * self.outcome_time(plan, hit=True) + (1 - p) * self.outcome_time(plan, hit=False)

    def calibrated_hit(self, plan: Plan) -> float:
        """:meth:`hit_prob` corrected by the hits this ssd plan's rounds (else its mode's) really had. The
        figures it is built from count a tree's candidates as independent guesses, which flatters a wide tree
        whose draft guesses the same wrong way (a 27-branch tree that never hit was predicted at 0.56)."""
        t = self._corrector(plan, self.tallies.get(plan))
        p = self.hit_prob(plan.k, plan.budget)
        return p if t is None else min(1.0, p * t.hit_factor())

    def outcome_time(self, plan: Plan, *, hit: bool) -> float:
        """Seconds one ssd round takes with a given outcome: on a hit the verify (or the tree, where it is the
        longer), on a miss the draft's own tokens and then the verify. What this misses in practice, the plan's
        tally corrects."""
        verify = self.t_verify(plan.k + 1, self.split)
        if hit:
            return max(verify, self.tree_time(plan.k, plan.budget))
        return plan.k * self.ssd_draft_token() + verify

    def ssd_draft_token(self) -> float:
        """Seconds per token of ssd's own drafts (its misses): on its split threads where it has them."""
        sd = self.draft_token.get(0.02)
        return self.draft_token_split.get(sd) if self.split else sd

    def hit_prob(self, k: int, budget: int, geometric: bool = True) -> float:
        """P(the next outcome has a branch): outcome k' has P ∝ a^k'(1-a) (a^K at K); a branch covers it
        when one of its F_k' candidates is the target's next token: after a rejection the draft's best
        alternative must be the target's correction (``top1``); after a full acceptance its next-token guess
        (``next_guess``, before data as often right as a draft token is accepted). The branches are spread
        as auto spreads them (geometric), or evenly (fixed ssd's default fan-out)."""
        source = (self.acceptance.value, self.top1.value, self.next_guess.value)
        if source != self._hit_from:
            self._hit_at.clear()
            self._hit_from = source
        p = self._hit_at.get((k, budget, geometric))
        if p is None:
            p = self._hit_at[(k, budget, geometric)] = self._estimate_hit(k, budget, geometric)
        return p

    def _estimate_hit(self, k: int, budget: int, geometric: bool) -> float:
        a = min(max(self.acceptance.get(0.6), 0.0), 0.999)
        counts = allocate(k, budget, geometric_on=geometric, acceptance=a)
        probs = [a**j * (1 - a) for j in range(k)] + [a**k]
        right = [self.top1.get(0.6)] * k + [self.next_guess.get(a)]
        return sum(p * (1 - (1 - r) ** f) for p, r, f in zip(probs, right, counts, strict=True) if f > 0)

    def raw_rate(self, plan: Plan) -> float:
        """Tokens per second the component figures predict (no correction from measured rounds)."""
        tokens = 1.0 if plan.mode == "ar" else self.expected_tokens(plan.k)
        return tokens / self.round_time(plan)

    def measured(self, plan: Plan) -> bool:
        """Whether rounds of this very plan have been measured (enough to correct its prediction)."""
        return _enough(self.tallies.get(plan))

    def mode_ran(self, mode: str) -> bool:
        """Whether a round of any plan of ``mode`` has been measured against its prediction on this machine."""
        return mode in self.mode_tallies

    def correction(self, plan: Plan) -> float:
        """How far this plan's (else its mode's) measured rounds ran from the prediction; 1 without data."""
        return self._correction(plan, self.tallies.get(plan))

    def _correction(self, plan: Plan, own: Tally | None) -> float:
        t = self._corrector(plan, own)
        # ssd's tokens per round also depend on how deep the served branches are (early stop), which only its
        # tally sees; sd's and lookup's follow from the acceptance figures alone.
        return 1.0 if t is None else t.factor(tokens=plan.mode == "ssd")

    def _corrector(self, plan: Plan, own: Tally | None) -> Tally | None:
        """The tally that corrects ``plan``'s prediction: its own (``own``) once it holds enough rounds, else its
        mode's once that does; None before either."""
        t = own if _enough(own) else self.mode_tallies.get(plan.mode)
        return t if _enough(t) else None

    def rate(self, plan: Plan) -> float:
        """Predicted tokens per second, corrected by what rounds of the plan really did on this machine; a plan
        not measured itself is predicted at most UNTRIED_CAP x the best rate a plan of its mode has delivered
        (for ssd where its verify runs as sd's does, a miss being an sd round, at least what sd delivered, and so
        from sd's first measured plan on, before any tree is: one tree too wide for this machine, run by a user's
        first ssd reply at 9 tok/s, held every other tree in B below sd's 13; with split threads, ssd's verify runs
        on fewer cores and a miss costs more than an sd round)."""
        own = self.tallies.get(plan)  # looked up once: a decision rates dozens of plans
        rate = self.raw_rate(plan) * self._correction(plan, own)
        if _enough(own):  # measured(plan)
            return rate
        delivered = self.delivered(plan.mode)
        if plan.mode == "ssd" and not self.split:
            delivered = max(delivered, self.delivered("sd"))
        return min(rate, UNTRIED_CAP * delivered) if delivered else rate

    def delivered(self, mode: str) -> float:
        """The best tokens per second the measured plans of ``mode`` ran at, by their tallies (ssd's count the
        tokens its drafts were expected to emit); 0 when none is measured."""
        rate = self._delivered.get(mode)
        if rate is None:
            rate = self._delivered[mode] = max((t.tokens / t.seconds for p, t in self.tallies.items()
                                                if p.mode == mode and _enough(t) and t.seconds > 0),
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
        return self.tree_time(k, budget) <= margin * self.t_verify(k + 1, self.split)

    # -- the n-gram pool (draft-free lookup) --------------------------------------------------------
    # A pool token's acceptance depends on its n-gram order and on its depth in the chain: the chain's first
    # token is a guess, a later one (the ones before it accepted) is most often a copy in progress. Each depth
    # starts from the acceptance one place shallower, so a few copies are enough to trust a long chain.
    def lookup_acceptance(self, order: int, depth: int = 0) -> float:
        """P(a pool token of this n-gram order at this depth of its chain is accepted | the ones before were)."""
        key = (order, min(depth, LOOKUP_DEPTHS - 1))
        p = self._accept_at.get(key)
        if p is None:
            p = lookup_prior(order)
            for d in range(key[1] + 1):
                r = self.lookup_accept.get((order, d))
                p = r.value_with(p) if r is not None else p
            self._accept_at[key] = p
        return p

    def learn_lookup(self, orders: Sequence[int], accepted: int, depth: int = 0) -> None:
        """A chain's outcome: its first ``accepted`` tokens accepted, the next one (if any) rejected; ``depth``
        is the chain place of its first token (a chain scored piece by piece)."""
        for i, order in enumerate(orders[: accepted + 1]):
            key = (order, min(depth + i, LOOKUP_DEPTHS - 1))
            self.lookup_accept.setdefault(key, Ratio(lookup_prior(order))).add(i < accepted)
        self._accept_at.clear()

    def lookup_expected(self, orders: Sequence[int]) -> list[float]:
        """Expected tokens of a round verifying the first L tokens of a pool draft, for L = 0..len."""
        out, reach = [1.0], 1.0
        for depth, order in enumerate(orders):
            reach *= self.lookup_acceptance(order, depth)
            out.append(out[-1] + reach)
        return out

    def lookup_best(self, orders: Sequence[int]) -> tuple[int, float]:
        """The draft length with the most predicted tokens per second (0: a plain ar step), and that rate; a
        draft must promise LOOKUP_GAIN more than the plain step. Until lookup rounds are measured they are
        corrected as ar's are (the same verify calls, the same host work around them)."""
        return self.lookup_length(self.lookup_expected(orders))

    def lookup_length(self, expected: Sequence[float]) -> tuple[int, float]:
        """:meth:`lookup_best` from the draft's expected tokens by length (:meth:`lookup_expected`)."""
        ar = self.correction(AR)
        lookup = self.correction(LOOKUP) if self.measured(LOOKUP) else ar
        t_verify = self.t_verify
        best, rate = 0, expected[0] / t_verify(1) * ar
        score = rate  # the first length with the highest rate, a draft's rate counted LOOKUP_GAIN lower
        for n in range(1, len(expected)):
            r = expected[n] / t_verify(n + 1) * lookup
            if r / LOOKUP_GAIN > score:
                best, rate, score = n, r, r / LOOKUP_GAIN
        return best, rate


@dataclass(frozen=True, slots=True)
class MeasuredRate:
    """auto's figure for one mode on this machine: its best plan there and the tokens per second predicted
    from what it measured (verify, draft and tree times, acceptance, hit rate)."""

    mode: str  # "ar", "sd" or "ssd"
    plan: str  # e.g. "sd(K=3)"
    tokens_per_second: float

"""The running figures auto's cost model is made of: moving averages of timings, acceptance and ratios, and the
tallies of what a plan's rounds really did against what was predicted for them."""

from __future__ import annotations

from typing import TypeGuard

from .knobs import (
    ACCEPT_DECAY,
    ACCEPT_MAX,
    ACCEPT_PRIOR,
    ACCEPT_PRIOR_TRIALS,
    ACCEPT_SEED_TRIALS,
    FACTOR_RANGE,
    FIGURE_ALPHA,
    HIT_DECAY,
    HIT_PRIOR,
    K_MAX,
    LOOKUP_PRIOR,
    RATIO_DECAY,
    RATIO_WEIGHT,
    TALLY_CLIP,
    TALLY_DECAY,
    TALLY_ROUNDS,
    TIMING_ALPHA,
    TIMING_CLIP,
)


def lookup_prior(order: int) -> float:
    """A pool token's acceptance before data (orders past the table: as the longest listed)."""
    return LOOKUP_PRIOR.get(order, LOOKUP_PRIOR[max(LOOKUP_PRIOR)])


class Ema:
    """Exponential moving average that remembers whether it has data."""

    def __init__(self, alpha: float = TIMING_ALPHA, init: float | None = None, clip: float | None = None,
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
    """Acceptance of draft tokens: ``value``, the per-position acceptance ``a`` over all positions (accepted tokens
    count as successes, a rejection as one failure, a fully accepted draft as none; the plain fraction accepted /
    drafted underestimates it: 91 % of K = 4 accepted is a ≈ 0.96), and :meth:`at`, the same by draft position: a
    draft's later tokens are accepted less often, so one ``a`` learnt from long drafts underrates short ones. Sums
    decay per trial; a position's estimate starts from the shallower one's, worth ACCEPT_PRIOR_TRIALS trials."""

    def __init__(self, decay: float = ACCEPT_DECAY) -> None:
        super().__init__()
        self.decay = decay
        self.hits = self.trials = 0.0
        self.pos_hits = [0.0] * K_MAX  # by draft position (the last one: it and any deeper)
        self.pos_trials = [0.0] * K_MAX
        self._at: list[float] | None = None  # at() by position, kept until the next round

    def add_round(self, accepted: int, drafted: int) -> None:
        if self.trials == 0:  # the first round here starts from a restored value, else from the prior
            restored = self.value is not None
            seed = self.value if self.value is not None else ACCEPT_PRIOR
            weight = ACCEPT_SEED_TRIALS if restored else ACCEPT_PRIOR_TRIALS
            self.hits, self.trials = seed * weight, weight
        self.n += 1
        trials = accepted + (1 if accepted < drafted else 0)
        fade = self.decay**trials  # a memory of trials, not rounds: a short draft's round says little
        self.hits = fade * self.hits + accepted
        self.trials = fade * self.trials + trials
        self.value = self.hits / self.trials if self.trials else self.value
        for j in range(trials):
            i = min(j, K_MAX - 1)
            self.pos_hits[i] = self.decay * self.pos_hits[i] + (1.0 if j < accepted else 0.0)
            self.pos_trials[i] = self.decay * self.pos_trials[i] + 1.0
        self._at = None

    def new_text(self) -> None:
        """A new reply: what earlier replies taught counts as at most ACCEPT_SEED_TRIALS trials, as a value read
        back from disk does (a chat reply after code replies has its own acceptance, learnt within a few rounds)."""
        if self.trials > ACCEPT_SEED_TRIALS:
            share = ACCEPT_SEED_TRIALS / self.trials
            self.hits, self.trials = self.hits * share, ACCEPT_SEED_TRIALS

    def at(self, position: int) -> float:
        """P(the draft token at ``position`` is accepted | the ones before it were), within [0, ACCEPT_MAX]."""
        if self._at is None:
            prior, out = self.get(ACCEPT_PRIOR), []
            for h, t in zip(self.pos_hits, self.pos_trials, strict=True):
                prior = (h + ACCEPT_PRIOR_TRIALS * prior) / (t + ACCEPT_PRIOR_TRIALS)
                out.append(min(max(prior, 0.0), ACCEPT_MAX))
            self._at = out
        return self._at[min(position, K_MAX - 1)]

    def reach(self, k: int) -> list[float]:
        """P(the first j draft tokens are all accepted), for j = 0..k."""
        out = [1.0]
        for j in range(k):
            out.append(out[-1] * self.at(j))
        return out


class Ratio:
    """A decayed success ratio with a prior worth ``weight`` observations (no data: the prior)."""

    def __init__(self, prior: float, weight: float = RATIO_WEIGHT, decay: float = RATIO_DECAY) -> None:
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
    emit, see :func:`engine.speculative.learning.ssd_tally_figures`), against what the model predicted for them
    (decayed sums, so the figure follows the machine). Round times are clipped to TALLY_CLIP x the prediction:
    one round slowed by another process does not condemn a plan. ssd's rounds also count their cache hits
    against the hits predicted, over a longer memory: a hit is luck that a few rounds cannot judge."""

    FIELDS = ("n", "tokens", "seconds", "pred_tokens", "pred_seconds", "hits", "pred_hits")  # what is kept on disk

    def __init__(self, decay: float = TALLY_DECAY) -> None:
        self.decay = decay
        self.n = 0
        self.tokens = self.seconds = self.pred_tokens = self.pred_seconds = 0.0
        self.hits = self.pred_hits = 0.0

    def add(self, tokens: float, seconds: float, pred_tokens: float, pred_seconds: float) -> None:
        d = self.decay
        self.n += 1
        self.tokens = d * self.tokens + tokens
        self.seconds = d * self.seconds + min(seconds, TALLY_CLIP * pred_seconds)
        self.pred_tokens = d * self.pred_tokens + pred_tokens
        self.pred_seconds = d * self.pred_seconds + pred_seconds

    def add_hit(self, hit: bool, predicted: float) -> None:
        """One ssd round's outcome: whether it hit, and the probability the model gave it."""
        self.hits = HIT_DECAY * self.hits + float(hit)
        self.pred_hits = HIT_DECAY * self.pred_hits + predicted

    def factor(self, *, tokens: bool) -> float:
        """Measured rate / predicted rate, kept within FACTOR_RANGE; without ``tokens``, only the round times
        (predicted / measured seconds), for plans whose tokens per round the acceptance figures already
        follow: a tally of tokens would count again what they learnt since (a past prompt's lower acceptance)."""
        if self.seconds <= 0 or self.pred_tokens <= 0:
            return 1.0
        f = self.pred_seconds / self.seconds
        if tokens:
            f *= self.tokens / self.pred_tokens
        return min(FACTOR_RANGE[1], max(FACTOR_RANGE[0], f))

    def hit_factor(self) -> float:
        """Hits seen / hits predicted, with HIT_PRIOR predicted hits seen as a prior (1 without rounds)."""
        return (self.hits + HIT_PRIOR) / (self.pred_hits + HIT_PRIOR)


def verify_figure(init: float | None = None) -> Ema:
    """One verify width's figure: seconds at pace 1 (:attr:`CostModel.pace`); ``init``: what is predicted for
    it before its first sample, which is then clipped against it (its mean replaces it)."""
    return Ema(FIGURE_ALPHA, init=init, clip=TIMING_CLIP, warm=True)


def level_figure() -> Ema:
    """One tree level width's figure: seconds per level."""
    return Ema(clip=TIMING_CLIP)


def enough(t: Tally | None) -> TypeGuard[Tally]:
    """Whether a tally holds enough rounds to correct a prediction."""
    return t is not None and t.n >= TALLY_ROUNDS

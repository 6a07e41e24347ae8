"""How auto learns from a round: its timings, acceptance, tree hits and its plan's tally, into the cost model.

The planner's own rounds and the fixed modes' rounds (:mod:`engine.speculative.observer`) teach the same
:class:`~engine.speculative.costmodel.CostModel` through :class:`RoundLearner`.
"""

from __future__ import annotations

import math

from engine.core.mode import Mode

from .costmodel import CostModel
from .fanout import allocate
from .figures import Ema
from .knobs import ACCEPT_PRIOR, TOP1_PRIOR
from .plan import Plan
from .types import JIT, NGRAM, RoundResult

REJECTED, ALL_ACCEPTED = "rejected", "all accepted"  # the kinds of outcome a tree's branch can cover


class RoundLearner:
    """Folds rounds into ``model``; it remembers which plan built the tree the next round is served from and
    which outcome that tree covered (a hit then says whether the draft's guess for that outcome was right)."""

    def __init__(self, model: CostModel, *, geometric: bool = True) -> None:
        self.model = model
        # How the trees of the ssd rounds it learns from spread their branches: auto's own geometrically; fixed
        # ssd's as its option says (evenly by default), so its hits are weighed against what such a tree hits.
        self.geometric = geometric
        self._covered: str | None = None  # the outcome the last round's tree covered (REJECTED, ALL_ACCEPTED)
        self._tree_of: Plan | None = None  # the ssd plan whose round built the tree the next round is served from

    def predicted(self, plan: Plan) -> tuple[float, float]:
        """(tokens, seconds) the component figures predict for one round of ``plan``."""
        m = self.model
        tokens = 1.0 if plan.mode == Mode.AR else m.expected_tokens(plan.k)
        return tokens, m.round_time(plan)

    def learn(self, plan: Plan, rr: RoundResult, *, timed: bool = True, split_threads: bool = False,
              gap_tokens: int | None = None) -> None:
        """Fold one round's timings and outcome into the cost model (not an ar round whose time is not to teach
        it: ``timed`` False). ``split_threads``: an sd round that ran on ssd's split threads (fixed ssd's, while
        its cache keeps missing): its times are ssd's, not the plan's. ``gap_tokens``: a drafting round between two of
        the n-gram pool's drafts, also tallied against its prediction plus its catch-up's, for the tokens it emitted
        before the pool could draft again (the rest were the pool's to emit: their time at its pace is not spent)."""
        m = self.model
        if gap_tokens is not None:  # before this round teaches the figures the prediction comes from
            expected, seconds = self.predicted(plan)
            caught = rr.draft.catchup_tokens if rr.draft is not None else 0
            seconds += m.catchup_time(caught) if caught else 0.0
            spent = rr.wait_s + rr.verify_s - (len(rr.tokens) - gap_tokens) * m.pool_token_time()
            m.gap_tally.add(gap_tokens, max(0.0, spent), expected, seconds)
        tree_of, self._tree_of = self._tree_of, plan if plan.mode == Mode.SSD else None
        if plan.mode == Mode.AR and not timed:
            return
        if plan.mode == Mode.AR:
            m.stale = False  # ar measured since the memory was read
        split = m.split and (plan.mode == Mode.SSD or split_threads)
        beside = plan.mode == Mode.SSD or split  # the verify ran beside a tree, or on ssd's split threads
        table = m.verify_split if beside else m.verify
        per_token, catchup = _draft_token_time(rr)
        measured = rr.drafted + 1 in table and (plan.mode == Mode.AR or m.draft_token.value is not None)
        # The verify first: the round is weighed against a prediction at the pace it showed (a slow spell of the
        # machine is not the plan's).
        m.add_verify(rr.drafted + 1, rr.verify_s, beside, build=rr.new_shape)
        if measured and not rr.new_shape and not split_threads:  # a graph build's time is not the plan's
            pred_tokens, pred_seconds = self.predicted(plan)  # from measured figures, not the defaults
            tokens: float = len(rr.tokens)
            hit = None
            if plan.mode == Mode.SSD:  # without the luck of the round's outcome (see _ssd_tally_figures)
                tokens, pred_seconds = ssd_tally_figures(m, plan, rr)
                # the plan's hits: not the first round after a change of plan (another plan's tree served it)
                hit = rr.hit if tree_of == plan else None
            m.observe(plan, tokens, rr.wait_s + rr.verify_s - catchup, pred_tokens, pred_seconds, hit, self.geometric)
        if plan.mode == Mode.AR:
            return
        d = rr.draft
        assert d is not None, "a speculative round reports its draft"
        n = rr.drafted
        if d.source == NGRAM:  # ssd's backup drafted from the pool: its figures, not the draft model's
            m.learn_lookup(d.orders, rr.accepted)
        elif n:
            m.acceptance.add_round(rr.accepted, n)
        if d.source == JIT and per_token is not None:
            (m.draft_token_split if split else m.draft_token).add(per_token)
        if d.catchup_tokens and not split:
            m.catchup_token.add(d.catchup_s / d.catchup_tokens)
        for ts in rr.trees:
            m.add_tree(ts.branches, ts.levels, ts.glue_s, ts.level_s)
        if plan.mode == Mode.SSD:
            if rr.hit is not None:  # not the forced first miss
                m.hit.add(1.0 if rr.hit else 0.0)
                if self._covered is not None:  # the outcome had a branch: a hit means its best candidate was right
                    # after a rejection the draft's best alternative; after a full acceptance its next-token guess
                    if self._covered == REJECTED:
                        _add_guess(m.top1, TOP1_PRIOR, bool(rr.hit))
                    else:
                        _add_guess(m.next_guess, m.acceptance.get(ACCEPT_PRIOR), bool(rr.hit))
            counts = allocate(n, plan.budget, geometric_on=self.geometric, acceptance=m.acceptance.get(ACCEPT_PRIOR))
            covered = n > 0 and counts[min(rr.accepted, n)] > 0
            self._covered = None if not covered else REJECTED if rr.accepted < n else ALL_ACCEPTED
        elif n and rr.accepted < n and rr.accepted < len(d.top):
            # Would the draft's best candidate (after the rejected token) have been the target's token? Only a row
            # that kept an alternative can tell: fixed sd keeps the drafted token alone (its rounds, folded in by the
            # observer, counted every rejection as the alternative being wrong).
            cands = [int(t) for t in d.top[rr.accepted] if int(t) != d.tokens[rr.accepted]][:1]
            if cands:
                _add_guess(m.top1, TOP1_PRIOR, rr.next_token in cands)
        if not math.isfinite(m.round_time(plan)):
            raise AssertionError("cost model produced a non-finite estimate")


def _add_guess(figure: Ema, prior: float, right: bool) -> None:
    """One guess of the draft's into ``figure``, which starts from ``prior``: the first guess moves it as any later
    one does (one wrong guess read as never right kept ssd's trees from ever being weighed again)."""
    if figure.value is None:
        figure.value = prior
    figure.add(1.0 if right else 0.0)


def ssd_tally_figures(model: CostModel, plan: Plan, rr: RoundResult) -> tuple[float, float]:
    """What an ssd round's tally compares: the tokens its draft was expected to emit (fewer where early stop
    served a shallower branch) and the seconds predicted for the outcome it had (hit or miss). Whether a round
    hits and how many of its tokens are accepted is luck that the acceptance figures and the plan's own count
    of hits (:meth:`CostModel.calibrated_hit`, over a longer memory) learn; in the round times, with a memory
    of ten rounds, it would swing the plan's figure by a fifth."""
    return model.expected_tokens(rr.drafted), model.outcome_time(plan, hit=bool(rr.hit))


def _draft_token_time(rr: RoundResult) -> tuple[float | None, float]:
    """A JIT draft's seconds per token (None when the round cannot tell) and the seconds its catch-up took
    beyond one token: the draft decoding what ar rounds emitted meanwhile is the cost of a switch, not of
    the plan. After a catch-up only the round's own sequential decodes say what a token costs."""
    d, n = rr.draft, rr.drafted
    if d is None or d.source != JIT or n == 0:
        return None, 0.0
    if not d.catchup_s:
        return d.serve_s / n, 0.0
    if n == 1:
        return None, d.catchup_s
    per_token = (d.serve_s - d.catchup_s) / (n - 1)
    return per_token, max(0.0, d.catchup_s - per_token)

"""The planner's turns with the n-gram pool: what a round off the plan costs the plan's next round, the tokens between
two of the pool's drafts, and whether a drafting plan pays before the pool's next one."""

from __future__ import annotations

from engine.core.mode import DRAFTING, Mode

from .costmodel import CostModel
from .figures import enough
from .plan import AR, Plan
from .types import ROUND_SYNC, RoundResult


class PoolTurns:
    """The part of :class:`~engine.speculative.planner.AutoPlanner` that weighs the pool's drafts against its plan."""

    model: CostModel
    remaining: int  # tokens the reply may still emit (0: not known)
    draft_lag: int  # tokens the draft model has not seen
    _since_pool: int | None  # tokens emitted since the pool's last draft ran (None: none yet)

    def catchup(self, plan: Plan) -> float:
        """Seconds ``plan``'s first round spends on the draft model catching up (0 for plans without it)."""
        if plan.mode not in DRAFTING or self.draft_lag <= ROUND_SYNC:
            return 0.0
        return self.model.catchup_time(self.draft_lag)

    def detour(self, plan: Plan, tokens: float, *, tree_pending: bool) -> float:
        """Seconds that a round off ``plan`` (a pool draft expected to emit ``tokens``) costs the plan's next
        round: its draft model catches up on those tokens, and an ssd tree being built for this round's
        outcome is lost (the next round misses where it would have hit: as the plan's own rounds are priced)."""
        if plan.mode not in DRAFTING:
            return 0.0
        m = self.model
        cost = m.catchup_time(max(0.0, tokens - ROUND_SYNC))  # a round syncs ROUND_SYNC tokens anyway (catchup())
        if plan.mode == Mode.SSD and tree_pending:
            lost = m.outcome_time(plan, hit=False) - m.outcome_time(plan, hit=True)
            cost += m.calibrated_hit(plan) * max(0.0, lost)
        return cost

    def note(self, rr: RoundResult, gap_tokens: int | None = None) -> None:
        """Any round (a lookup round too): how far behind the draft model now is, and the tokens between two of the
        pool's drafts (``gap_tokens``: a drafting round's, before the pool would have drafted: Lookup.takeover)."""
        self.remaining = max(0, self.remaining - len(rr.tokens))
        self.draft_lag = 0 if rr.mode in DRAFTING else self.draft_lag + len(rr.tokens)
        if rr.mode != Mode.LOOKUP and (gap_tokens is None or gap_tokens == len(rr.tokens)):
            self._since_pool = None if self._since_pool is None else self._since_pool + len(rr.tokens)
            return
        gap = (gap_tokens or 0) + self._since_pool if self._since_pool is not None else 0
        if gap:  # not the reply's start: its first stretch waits for the pool to match at all
            self.model.pool_gap.add(float(gap))
        self._since_pool = 0

    def _lags_too_far(self, plan: Plan) -> bool:
        """Whether ar beats ``plan`` until the pool's next draft is due, ``plan`` paying first for the draft model's
        catch-up on what the pool's rounds emitted (between the copies of a code edit a drafting plan never pays)."""
        gap, since = self.model.pool_gap.value, self._since_pool
        if since is None or (gap is None and not enough(self.model.gap_tally)):  # nothing to weigh drafting by
            return False
        gap = max(1.0, float(since)) if gap is None else gap  # none measured yet: the stretch so far is the guess
        n, rate = max(gap, float(since)), self.model.rate(plan)
        # what drafting between the pool's drafts delivered, fading as this stretch outgrows the usual gap
        factor = self.model.gap_factor() ** (gap / n)
        return n / (n / rate + self.catchup(plan)) * factor < self.model.rate(AR) if rate > 0 else True

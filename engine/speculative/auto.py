"""``auto``: each round, the pool's draft where it promises more, else the planner's plan.

:class:`AutoMode` runs each plan of the :class:`~engine.speculative.planner.AutoPlanner` with the same steps the
other modes use, and takes the n-gram pool's draft instead whenever the pool predicts a higher rate (a long match
in the context).
"""

from __future__ import annotations

from engine.core.mode import Mode

from .costmodel import CostModel
from .knobs import ACCEPT_PRIOR, LOOKUP_GAIN
from .lookup import Lookup
from .plan import MeasuredRate, Plan
from .planner import AutoPlanner
from .ssd import SSDOptions
from .steps import Steps
from .types import NGRAM, PlanRates, RoundResult
from .worker import SplitDrafts


def measured_rates(model: CostModel, k: int = 4, max_branches: int = 32) -> dict[str, MeasuredRate]:
    """auto's best plan per mode it has measured on this machine (``ar``, ``sd``, ``ssd``, ``lookup``) and its
    predicted rate (corrected by what the plan's rounds really did).

    A mode is measured once auto has run it: ar's single-token verify, sd's draft time per token,
    ssd's tree levels and cache hits, lookup's rounds. Modes auto has not run are absent (empty before auto ran).
    """
    measured = {Mode.AR: model.verify.get(1) is not None and model.verify[1].value is not None,
                Mode.SD: model.draft_token.value is not None and model.acceptance.value is not None,
                Mode.SSD: any(e.value is not None for e in model.level.values()) and model.hit.value is not None}
    best: dict[str, MeasuredRate] = {}
    for plan in AutoPlanner(model, k, max_branches=max_branches).candidates():
        if measured[plan.mode]:
            rate = model.rate(plan)
            if plan.mode not in best or rate > best[plan.mode].tokens_per_second:
                best[plan.mode] = MeasuredRate(plan.mode, str(plan), rate)
    lookup = model.mode_tallies.get(Mode.LOOKUP)
    if lookup is not None and lookup.seconds > 0:
        best[Mode.LOOKUP] = MeasuredRate(Mode.LOOKUP, Mode.LOOKUP, lookup.tokens / lookup.seconds)
    return best


class AutoMode:
    """Each round: the pool's draft if it promises more, else the planner's plan; the planner learns from it."""

    name = Mode.AUTO

    def __init__(self, steps: Steps, planner: AutoPlanner, opts: SSDOptions, lookup: Lookup | None = None,
                 greedy: bool = True) -> None:
        self.steps = steps
        self.planner = planner
        self.opts = opts
        self.lookup = lookup
        self.greedy = greedy
        self.last_accepted = -1  # -1: the previous round was not an ssd round (no tree to serve from)
        self._lookup_rate = 0.0

    def step(self) -> RoundResult:
        plan = self.planner.next_plan()
        why = self.planner.why
        rr = self._lookup_round(plan)
        if rr is not None:
            self.planner.note(rr)
            return rr
        rates = self._rates()
        if plan.mode == Mode.AR:
            self._idle_drafts()
            rr = self.steps.ar(why=why, rates=rates)
        elif plan.mode == Mode.SD:
            rr = self.steps.sd(plan.k, why=why, rates=rates)
        else:
            rr = self.steps.ssd(plan.k, plan.budget, accepted=self.last_accepted, backup=self.opts.backup,
                                geometric=True,  # the allocation the planner's hit probability assumes
                                acceptance=self.planner.model.acceptance.get(ACCEPT_PRIOR),
                                early_stop=self.opts.early_stop, why=why, rates=rates)
        gap = None
        if self.lookup is not None and plan.mode != Mode.AR:
            beat = LOOKUP_GAIN * self.planner.model.rate(plan)  # _lookup_round's bar for a pool draft (no detour)
            gap = self.lookup.takeover(self.steps.target.committed[: -len(rr.tokens)], rr.tokens, beat)
        self.planner.learn(plan, rr, gap)
        self.planner.note(rr, gap)
        if self.lookup is not None and rr.speculator == NGRAM:  # ssd's backup verified the pool's chain
            self.lookup.drop_shadows()
        self.last_accepted = rr.accepted if plan.mode == Mode.SSD else -1
        return rr

    def _lookup_round(self, plan: Plan) -> RoundResult | None:
        """A round on the pool's draft when it predicts LOOKUP_GAIN more than ``plan`` (during a probe: than the
        plan held; the probe then waits for a round without such a draft)."""
        if self.lookup is None:
            return None
        probe = self.planner.probing
        plan = self.planner.plan if probe else plan
        model = self.planner.model
        draft, rate = self.lookup.choose(self.steps.target.committed, greedy=self.greedy)
        if not draft.tokens:
            return None
        tokens = draft.expected
        detour = self.planner.detour(plan, tokens, tree_pending=self.last_accepted >= 0)
        rate = self._lookup_rate = tokens / (tokens / rate + detour)
        plan_rate = model.rate(plan)
        if rate <= LOOKUP_GAIN * plan_rate:
            return None
        if probe:
            self.planner.defer_probe()
        why = f"lookup: a {len(draft.tokens)}-token pool match, predicted {rate:.1f} > {plan_rate:.1f} tok/s"
        self._idle_drafts()
        rr = self.steps.lookup(draft, why=why, rates=self._rates())
        self.lookup.learn(rr, timed=self.planner.timed(rr.drafted + 1))
        self.last_accepted = -1  # the tree (if any) assumed the plan's draft
        return rr

    def _idle_drafts(self) -> None:
        """After an ssd round, the draft thread stops building its tree before a round that will not use it."""
        if self.last_accepted >= 0 and isinstance(self.steps.drafts, SplitDrafts):
            self.steps.drafts.idle()

    def _rates(self) -> PlanRates:
        """The round's readout: the planner's predicted rates, with the pool's latest, best first."""
        rates = dict(self.planner.rates)
        if self.lookup is not None and self._lookup_rate > 0:
            rates[Mode.LOOKUP] = self._lookup_rate
        return tuple(sorted(rates.items(), key=lambda kv: -kv[1]))

    def close(self) -> None:
        self.steps.close()

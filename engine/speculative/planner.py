"""auto's planner: picks ar, sd or ssd, the draft length K and the tree size for every round.

:class:`AutoPlanner` runs no round: it reads the :class:`~engine.speculative.costmodel.CostModel`, returns the next
:class:`~engine.speculative.plan.Plan`, and hands the round's outcome to its
:class:`~engine.speculative.learning.RoundLearner`. Every plan's predicted rate is corrected by what its rounds
really did; it holds a plan for a few rounds, and re-measures another mode only when that mode is predicted close and
not too soon: the gap doubles each time a probe loses, and lives in the cost model, so a later reply does not pay
again for what cannot pay. The numbers it decides by: :mod:`engine.speculative.knobs`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from engine.core.mode import DRAFTING, Mode

from . import memory
from .costmodel import CostModel
from .knobs import (
    BAIL_FACTOR,
    FAR_HOLD_ROUNDS,
    FIRST_PROBE_GAP,
    FIRST_PROBE_ROUNDS,
    HOLD_ROUNDS,
    HORIZON_TOKENS,
    K_MAX,
    MAX_PROBE_GAP,
    PROBE_CATCHUP_SHARE,
    PROBE_IF_WITHIN,
    PROBE_ROUNDS,
    REMOTE_PROBE_K,
    SWITCH_GAIN,
    UNTRIED_GAIN,
)
from .learning import RoundLearner
from .plan import AR, Plan, tree_budgets
from .poolturns import PoolTurns
from .types import RoundResult

log = logging.getLogger(__name__)


class AutoPlanner(PoolTurns):
    """Chooses a plan per round from the cost model and learns from what each round reports."""

    def __init__(self, model: CostModel, k: int, *, adaptive: bool = True, k_max: int = K_MAX,
                 max_branches: int = 32, draft: bool = True, early_stop: bool = True, draft_lag: int = 0,
                 remaining: int = 0, prompt_read: bool = False, draft_busy: Callable[[], bool] | None = None,
                 geometric: bool = True) -> None:
        self.model = model  # the machine's timings outlive one reply: the engine passes the same model each time
        self.k = k
        self.adaptive = adaptive
        self.k_max = max(k, k_max) if adaptive else k
        self.max_branches = max_branches
        self.draft = draft  # False: no draft model, only ar (AutoMode adds the pool's drafts)
        self.early_stop = early_stop
        self.learner = RoundLearner(model, geometric=geometric)
        self.why = ""  # why the latest plan was chosen (reported with its round)
        self.rates: dict[str, float] = {}  # predicted tok/s of the best plan per mode, at the latest decision
        self.held = 0
        self.hold = HOLD_ROUNDS  # rounds the current plan is held before the next decision
        self.rounds = 0
        self._probing: Plan | None = None
        self._trees: list[Plan] | None = None
        self.draft_lag = draft_lag  # tokens the draft model has not seen (it decodes them before it drafts)
        self.remaining = remaining  # tokens the reply may still emit (0: not known)
        self._since_pool: int | None = None  # tokens emitted since the pool's last draft ran (None: none yet)
        # The draft model reads every prompt on cores (or a device) of its own: each reply starts with it in step
        # (once its read is done), so a probe that is due runs at the reply's start, before a catch-up costs it.
        self.prompt_read = prompt_read
        # Whether the draft model is still reading this reply's prompt on its own thread: a round that would draft
        # runs ar meanwhile (the target would only wait), and the plan or probe runs once the read is done.
        self.draft_busy = draft_busy
        # Whether the latest plan was chosen while that read ran: the round shares the machine with it, so its time
        # is not what the plan costs.
        self.beside_read = False
        self._probe: list[Plan] = self._first_probes()
        self._remeasure = False  # the probes re-measure a mode (:meth:`_plan_probe`), not what the machine lacks
        self._shifts = model.shifts  # the pace shifts seen (:meth:`_plan_probe`)
        # A model that has measured this machine before starts on its best plan, not on ar.
        self.plan = Plan(Mode.AR)
        if 1 in model.verify and not self._probe:  # from the modes run here (others: later, by probe or gain)
            best_by_mode, rate = self._best_by_mode()
            best = max((p for p in rate if p.mode == Mode.AR or model.mode_ran(p.mode)), key=rate.__getitem__)
            self.plan = best if best == self.plan or self._worth(best, rate[self.plan]) else self.plan
            if prompt_read and self.draft:  # any probe due runs now (one of a drafting mode may have waited for this)
                self._plan_probe(best_by_mode, rate)

    def _first_probes(self) -> list[Plan]:
        """What is still unmeasured: ar's verify, a few sd rounds; a narrow tree only if it could pay."""
        m = self.model
        probes: list[Plan] = []
        if 1 not in m.verify or m.stale:  # unmeasured, or read back from disk (a busy hour's figure)
            probes.append(Plan(Mode.AR))
        if not self.draft or self._hopeless():
            return probes
        if m.draft_token.value is None:
            probes += [Plan(Mode.SD, self.k)] * PROBE_ROUNDS
        elif not m.level and m.hit.value is None:  # no ssd round yet (one whose trees were all cut short counts)
            best = max(self.candidates_without_ssd(), key=m.rate)
            hopeful = Plan(Mode.SSD, self.k, 1)  # would a one-branch tree, on the figures so far, beat the best plan?
            promising = m.raw_rate(hopeful) > SWITCH_GAIN * m.rate(best) and self._pays(hopeful, m.rate(best))
            if promising:
                probes += [hopeful] * PROBE_ROUNDS
        return probes

    def _ks(self) -> range | list[int]:
        return range(1, self.k_max + 1) if self.adaptive else [self.k]

    def candidates_without_ssd(self) -> list[Plan]:
        if not self.draft:
            return [Plan(Mode.AR)]
        return [Plan(Mode.AR), *(Plan(Mode.SD, k) for k in self._ks())]

    def _ssd_plans(self) -> list[Plan]:
        """Every tree auto weighs: per K, a few budgets (made once: a decision runs every few rounds)."""
        if self._trees is None:
            most = self.max_branches
            self._trees = [Plan(Mode.SSD, k, budget) for k in self._ks() for budget in tree_budgets(k, most)]
        return self._trees

    def candidates(self) -> list[Plan]:
        plans = self.candidates_without_ssd()
        if not self.draft:
            return plans
        fits = self.model.fits_window
        plans += [p for p in self._ssd_plans() if fits(p.k, p.budget, self.early_stop)]
        return plans

    def _worth(self, plan: Plan, current: float) -> bool:
        """Whether to move from the current plan (predicted ``current`` tok/s) to ``plan``: it must promise
        SWITCH_GAIN more (UNTRIED_GAIN to start drafting, or to enter a mode never run here, on figures
        alone) and pay for its catch-up."""
        m = self.model
        untried = not m.measured(plan) and (self.plan.mode not in DRAFTING or not m.mode_ran(plan.mode))
        risky = plan.mode in DRAFTING and untried
        gain = UNTRIED_GAIN if risky else SWITCH_GAIN
        return m.rate(plan) > gain * current and self._pays(plan, current)

    def first_cost(self, plan: Plan) -> float:
        """Seconds ``plan``'s first round adds: its catch-up, and its verify's graph build where the target's context
        has not run its width (over RPC, round trips)."""
        width = plan.k + 1 if plan.mode in DRAFTING else 1
        return self.catchup(plan) + self.model.build_for(width)

    def _pays(self, plan: Plan, current: float) -> bool:
        """Whether moving to ``plan`` saves more over the rest of the reply than its first round adds."""
        cost = self.first_cost(plan)
        if not cost or current <= 0:
            return True
        n = self.remaining or HORIZON_TOKENS
        return n / current - n / self.model.rate(plan) > cost

    def defer_probe(self) -> None:
        """The latest plan, if a probe, gives way to a pool draft (or to ar, where drafting does not pay before the
        pool's next one): a first probe (what the machine lacks) runs at the next round without one; a re-measure
        waits for its next turn (its draft would first catch up on the copy)."""
        probe, self._probing = self._probing, None
        if probe is not None and self.rounds < FIRST_PROBE_ROUNDS and not self._remeasure:
            self._probe.insert(0, probe)
        elif probe is not None:
            self._probe.clear()

    @property
    def probing(self) -> bool:
        """The latest plan is a probe (a pool draft that replaces its round defers it: :meth:`defer_probe`)."""
        return self._probing is not None

    def next_plan(self) -> Plan:
        """The plan for the next round (a probe, the held plan, or a better one; ar while the draft is busy)."""
        busy = self.beside_read = self.draft_busy is not None and self.draft_busy()
        if busy and self._probe and self._probe[0].mode in DRAFTING:
            plan = self._ar_while_reading(f"probe {self._probe[0]}")
        else:
            plan = self._choose()
            if busy and plan.mode in DRAFTING:
                plan = self._ar_while_reading(self.why)
            elif plan.mode in DRAFTING and self._lags_too_far(plan):
                self.why = (f"ar: {plan} would not pay before the pool's next draft (a catch-up of {self.draft_lag} "
                            f"tokens; drafting there ran at {self.model.gap_factor():.2f}x its prediction)")
                self.defer_probe()  # a probe too: it waits as for a pool draft
                plan = AR
            else:
                self.held += 1
                self.rounds += 1  # rounds of the reply's plans and probes
        self.model.rounds += 1
        self.model.last_run[plan.mode] = self.model.rounds
        return plan

    def _ar_while_reading(self, due: str) -> Plan:
        """ar for a round that would draft while the draft model still reads the prompt (the target would only
        wait); what is ``due`` (a probe, or the plan) stays due."""
        self._probing = None
        self.why = f"ar while the draft model reads the prompt ({due})"
        return AR

    def _choose(self) -> Plan:
        self._probing = None
        if self._probe and self._probe[0].mode in DRAFTING and not self._remeasure and self._hopeless():
            self._probe.clear()  # the probe's first round measured enough to know it cannot pay
            self.held = self.hold
        if self._probe:
            plan = self._sized(self._probe.pop(0))
            self._probing = plan
            self.why = f"probe {plan}"
            if not self._probe:
                refill = self._first_probes() if self.rounds < FIRST_PROBE_ROUNDS else []
                if refill:  # (else the flag stays the popped probe's)
                    self._probe, self._remeasure = refill, False
                self.held = self.hold  # decide right after the probes
            return plan
        self.why = f"plan {self.plan}"
        if self.held < self.hold:
            return self.plan
        m = self.model
        best_by_mode, rate = self._best_by_mode()
        self.rates = {str(p): rate[p] for p in best_by_mode.values()}
        best = max(best_by_mode.values(), key=rate.__getitem__)
        current = rate.get(self.plan, 0.0)
        if best != self.plan and self._worth(best, current):
            self.why = f"plan {best}: predicted {current:.1f} -> {rate[best]:.1f} tok/s"
            log.info("auto: %s -> %s", self.plan, self.why)
            if best.mode != self.plan.mode:
                m.probe_gap[best.mode] = FIRST_PROBE_GAP  # the mode won: probe it again soon if it loses
            self.plan = best
        self.held = 0
        self._plan_probe(best_by_mode, rate)
        self.hold = FAR_HOLD_ROUNDS if self._far_ahead(best_by_mode, rate) else HOLD_ROUNDS
        return self.plan

    def _sized(self, probe: Plan) -> Plan:
        """A first sd probe as it runs: over RPC (a verify built its graph over the link) at REMOTE_PROBE_K."""
        if probe.mode != Mode.SD or self._remeasure or not self.adaptive or not self.model.remote:
            return probe
        return Plan(Mode.SD, min(probe.k, REMOTE_PROBE_K))

    def _hopeless(self) -> bool:
        """Whether a draft token and a verify of several rows are timed and no drafting plan could beat ar even
        with every draft token accepted and every tree hit: a draft token and a row cost what an ar round does."""
        m = self.model
        if m.draft_token.value is None or sum(e.value is not None for e in m.verify.values()) < 2:
            return False
        ar = m.rate(AR)
        return all(m.best_case(p) <= ar for p in self.candidates() if p.mode in DRAFTING)

    def _far_ahead(self, best_by_mode: dict[str, Plan], rate: dict[Plan, float]) -> bool:
        """Whether the plan is ar, no probe is due, and every other mode is predicted below PROBE_IF_WITHIN of it."""
        if self.plan != AR or self._probe:
            return False
        current = rate[AR]
        return not any(_worth_probing(rate[p], current) for mode, p in best_by_mode.items() if mode != Mode.AR)

    def _best_by_mode(self) -> tuple[dict[str, Plan], dict[Plan, float]]:
        """Every candidate's predicted rate, and the best plan of each mode."""
        rate = {p: self.model.rate(p) for p in self.candidates()}  # once each: a decision weighs dozens of plans
        best_by_mode: dict[str, Plan] = {}
        for p, r in rate.items():
            if p.mode not in best_by_mode or r > rate[best_by_mode[p.mode]]:
                best_by_mode[p.mode] = p
        return best_by_mode, rate

    def _plan_probe(self, best_by_mode: dict[str, Plan], rate: dict[Plan, float]) -> None:
        """Re-measure the most promising other mode that is predicted close and whose gap has passed (each mode
        keeps its own gap: one that lost often does not keep another from being measured again); every other mode
        after a shift of the machine's pace."""
        m = self.model
        if m.shifts != self._shifts:  # the machine's pace changed for good: what the other modes measured is from
            self._shifts = m.shifts  # another pace, so each is measured again now, however far behind it reads,
            memory.age(m)  # and every figure is a prior that its next sample replaces, as after a restart
            others = [p for mode, p in best_by_mode.items() if mode != self.plan.mode]
            m.probe_gap.update((p.mode, FIRST_PROBE_GAP) for p in others)
            self._probe, self._remeasure = [p for p in others for _ in range(PROBE_ROUNDS)], True
            return
        current = rate[self.plan] if self.plan in rate else m.rate(self.plan)
        for mode, plan in sorted(best_by_mode.items(), key=lambda kv: -rate[kv[1]]):
            if mode == self.plan.mode or not _worth_probing(rate[plan], current):
                continue
            if self.first_cost(plan) > PROBE_CATCHUP_SHARE * (self.remaining or HORIZON_TOKENS) / current:
                continue  # its catch-up (and graph build) would cost more than the rest of the reply can pay back
            gap = m.probe_gap.get(mode, FIRST_PROBE_GAP)
            if m.rounds - m.last_run.get(mode, 0) >= gap:
                m.probe_gap[mode] = min(MAX_PROBE_GAP, 2 * gap)  # reset to the first gap only if it wins
                self._probe, self._remeasure = [plan] * PROBE_ROUNDS, True
                return

    def timed(self, width: int) -> bool:
        """Whether the latest round's verify time (``width`` tokens) is to teach the cost model: not beside the
        draft's prompt read, where the width has a figure already (a reply's pace would be read off the read)."""
        e = self.model.verify.get(width)
        return not self.beside_read or e is None or e.value is None

    def learn(self, plan: Plan, rr: RoundResult, gap_tokens: int | None = None) -> None:
        """Fold one round into the cost model (an ar round beside the draft's prompt read only where ar's time is
        not measured yet: :meth:`timed`); ``gap_tokens`` as for :meth:`note`."""
        between = plan.mode in DRAFTING and self._since_pool is not None  # between two of the pool's drafts
        gap = (len(rr.tokens) if gap_tokens is None else gap_tokens) if between else None
        before = self.model.round_time(plan) if plan == self.plan else 0.0
        self.learner.learn(plan, rr, timed=plan.mode != Mode.AR or self.timed(1), gap_tokens=gap)
        if before and self.model.round_time(plan) > BAIL_FACTOR * before:
            self.held = self.hold  # the round taught that the plan costs far more: decide again at once


def _worth_probing(rate: float, current: float) -> bool:
    """Whether another mode predicted at ``rate`` is close enough to the current plan's to be re-measured."""
    return rate > PROBE_IF_WITHIN * current


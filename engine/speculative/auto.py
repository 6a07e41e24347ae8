"""``auto``: a planner picks ar, sd or ssd, the draft length K and the tree size for every round.

:class:`AutoPlanner` runs no round: it reads the :class:`~engine.speculative.costmodel.CostModel`, returns
the next :class:`~engine.speculative.costmodel.Plan`, and learns from the round's event. Every plan's
predicted rate is corrected by what its rounds really did (so a plan the component figures flatter
is found out after a few rounds); it holds a plan for a few rounds, and re-measures another mode
only when that mode is predicted close and not too soon — the gap doubles each time a probe loses,
and lives in the cost model, so a later reply does not pay again for what cannot pay.
:class:`AutoMode` runs each plan with the same steps the other modes use, and takes the n-gram
pool's draft instead whenever the pool predicts a higher rate (a long match in the context).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from .costmodel import AR, LOOKUP_GAIN, CostModel, MeasuredRate, Plan
from .fanout import allocate
from .lookup import Lookup
from .ssd import SSDOptions
from .steps import Steps
from .types import JIT, NGRAM, ROUND_SYNC, PlanRates, RoundResult
from .worker import SplitDrafts

log = logging.getLogger(__name__)

K_MAX = 8  # the longest draft auto considers when it adapts K
HOLD_ROUNDS = 4  # rounds a plan is kept before re-deciding
# ... and ar, while every drafting mode is predicted below PROBE_IF_WITHIN of it: no probe or switch is then due, and
# ar's rounds move the others' figures only as they move its own (a decision weighs every plan: not every round)
FAR_HOLD_ROUNDS = 16
FIRST_PROBE_GAP = 32  # rounds before another mode is re-measured; doubles after each probe that loses
MAX_PROBE_GAP = 1024
SWITCH_GAIN = 1.05  # a new plan must promise this much more
UNTRIED_GAIN = 1.15  # ... and this much to start drafting on a plan its own rounds have not measured (figures only)
PROBE_IF_WITHIN = 0.8  # re-measure another mode only if it is predicted within this share of the current
DRAFT_MODES = ("sd", "ssd")  # the plans that draft with the draft model (it must first catch up on what it missed)
HORIZON_TOKENS = 128  # the tokens a switch is paid back over when the reply's length is not known
PROBE_CATCHUP_SHARE = 0.05  # a probe's catch-up may cost at most this share of the rest of the reply
REJECTED, ALL_ACCEPTED = "rejected", "all accepted"  # the kinds of outcome a tree's branch can cover


class AutoPlanner:
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
        # How the trees of the ssd rounds it learns from spread their branches: auto's own geometrically; fixed
        # ssd's as its option says (evenly by default), so its hits are weighed against what such a tree hits.
        self.geometric = geometric
        self.why = ""  # why the latest plan was chosen (reported with its round)
        self.rates: dict[str, float] = {}  # predicted tok/s of the best plan per mode, at the latest decision
        self.held = 0
        self.hold = HOLD_ROUNDS  # rounds the current plan is held before the next decision
        self.rounds = 0
        self._covered: str | None = None  # the outcome the last round's tree covered (REJECTED, ALL_ACCEPTED)
        self._tree_of: Plan | None = None  # the ssd plan whose round built the tree the next round is served from
        self._probing: Plan | None = None
        self._trees: list[Plan] | None = None
        self.draft_lag = draft_lag  # tokens the draft model has not seen (it decodes them before it drafts)
        self.remaining = remaining  # tokens the reply may still emit (0: not known)
        # The draft model reads every prompt on cores (or a device) of its own: each reply starts with it in step
        # (once its read is done), so a probe of a drafting mode that would first make it catch up waits for the
        # next reply's start.
        self.prompt_read = prompt_read
        # Whether the draft model is still reading this reply's prompt on its own thread: a round that would draft
        # runs ar meanwhile (the target would only wait), and the plan or probe runs once the read is done.
        self.draft_busy = draft_busy
        # Whether the latest plan was chosen while that read ran: the round shares the machine with it, so its time
        # is not what the plan costs.
        self.beside_read = False
        self._probe: list[Plan] = self._first_probes()
        # A model that has measured this machine before starts on its best plan, not on ar.
        self.plan = Plan("ar")
        if 1 in model.verify and not self._probe:  # from the modes run here (others: later, by probe or gain)
            best_by_mode, rate = self._best_by_mode()
            best = max((p for p in rate if p.mode == "ar" or model.mode_ran(p.mode)), key=rate.__getitem__)
            self.plan = best if best == self.plan or self._worth(best, rate[self.plan]) else self.plan
            if prompt_read and self.draft:  # any probe due runs now (one of a drafting mode may have waited for this)
                self._plan_probe(best_by_mode, rate)

    def _first_probes(self) -> list[Plan]:
        """What is still unmeasured: ar's verify, a few sd rounds; a narrow tree only if it could pay."""
        m = self.model
        probes: list[Plan] = []
        if 1 not in m.verify or m.stale:  # unmeasured, or read back from disk (a busy hour's figure)
            probes.append(Plan("ar"))
        if not self.draft:
            return probes
        if m.draft_token.value is None:
            probes += [Plan("sd", self.k)] * 2
        elif not m.level and m.hit.value is None:  # no ssd round yet (one whose trees were all cut short counts)
            best = max(self.candidates_without_ssd(), key=m.rate)
            hopeful = Plan("ssd", self.k, 1)  # would a one-branch tree, on the figures so far, beat the best plan?
            promising = m.raw_rate(hopeful) > SWITCH_GAIN * m.rate(best) and self._pays(hopeful, m.rate(best))
            if promising:
                probes += [hopeful] * 2
        return probes

    def _ks(self) -> range | list[int]:
        return range(1, self.k_max + 1) if self.adaptive else [self.k]

    def candidates_without_ssd(self) -> list[Plan]:
        if not self.draft:
            return [Plan("ar")]
        return [Plan("ar"), *(Plan("sd", k) for k in self._ks())]

    def _ssd_plans(self) -> list[Plan]:
        """Every tree auto weighs: per K, a few budgets (made once: a decision runs every few rounds)."""
        if self._trees is None:
            self._trees = [Plan("ssd", k, budget) for k in self._ks() for budget in tree_budgets(k, self.max_branches)]
        return self._trees

    def candidates(self) -> list[Plan]:
        plans = self.candidates_without_ssd()
        if not self.draft:
            return plans
        fits = self.model.fits_window
        plans += [p for p in self._ssd_plans() if fits(p.k, p.budget, self.early_stop)]
        return plans

    def catchup(self, plan: Plan) -> float:
        """Seconds ``plan``'s first round spends on the draft model catching up (0 for plans without it)."""
        if plan.mode not in DRAFT_MODES or self.draft_lag <= ROUND_SYNC:
            return 0.0
        return self.model.catchup_time(self.draft_lag)

    def _worth(self, plan: Plan, current: float) -> bool:
        """Whether to move from the current plan (predicted ``current`` tok/s) to ``plan``: it must promise
        SWITCH_GAIN more (UNTRIED_GAIN to start drafting, or to enter a mode never run here, on figures
        alone) and pay for its catch-up."""
        m = self.model
        untried = not m.measured(plan) and (self.plan.mode not in DRAFT_MODES or not m.mode_ran(plan.mode))
        risky = plan.mode in DRAFT_MODES and untried
        gain = UNTRIED_GAIN if risky else SWITCH_GAIN
        return m.rate(plan) > gain * current and self._pays(plan, current)

    def _pays(self, plan: Plan, current: float) -> bool:
        """Whether moving to ``plan`` saves more over the rest of the reply than its catch-up costs."""
        cost = self.catchup(plan)
        if not cost or current <= 0:
            return True
        n = self.remaining or HORIZON_TOKENS
        return n / current - n / self.model.rate(plan) > cost

    def detour(self, plan: Plan, tokens: float, *, tree_pending: bool) -> float:
        """Seconds that a round off ``plan`` (a pool draft expected to emit ``tokens``) costs the plan's next
        round: its draft model catches up on those tokens, and an ssd tree being built for this round's
        outcome is lost (the next round misses where it would have hit: as the plan's own rounds are priced)."""
        if plan.mode not in DRAFT_MODES:
            return 0.0
        m = self.model
        cost = m.catchup_time(max(0.0, tokens - ROUND_SYNC))  # a round syncs ROUND_SYNC tokens anyway (catchup())
        if plan.mode == "ssd" and tree_pending:
            lost = m.outcome_time(plan, hit=False) - m.outcome_time(plan, hit=True)
            cost += m.calibrated_hit(plan) * max(0.0, lost)
        return cost

    def note(self, rr: RoundResult) -> None:
        """Any round of the reply (a lookup round too): how far behind the draft model now is."""
        self.remaining = max(0, self.remaining - len(rr.tokens))
        self.draft_lag = 0 if rr.mode in DRAFT_MODES else self.draft_lag + len(rr.tokens)

    @property
    def probing(self) -> bool:
        """The latest plan is a probe (its round is for measuring, not to be replaced by a lookup)."""
        return self._probing is not None

    def next_plan(self) -> Plan:
        """The plan for the next round (a probe, the held plan, or a better one; ar while the draft is busy)."""
        busy = self.beside_read = self.draft_busy is not None and self.draft_busy()
        if busy and self._probe and self._probe[0].mode in DRAFT_MODES:
            plan = self._ar_while_reading(f"probe {self._probe[0]}")
        else:
            plan = self._choose()
            if busy and plan.mode in DRAFT_MODES:
                plan = self._ar_while_reading(self.why)
            else:
                self.held += 1
                self.rounds += 1  # rounds of the reply's plans and probes (the first probes end within 8 of them)
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
        if self._probe:
            plan = self._probe.pop(0)
            self._probing = plan
            self.why = f"probe {plan}"
            if not self._probe:
                self._probe = self._first_probes() if self.rounds < 8 else []
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

    def _far_ahead(self, best_by_mode: dict[str, Plan], rate: dict[Plan, float]) -> bool:
        """Whether the plan is ar, no probe is due, and every other mode is predicted below PROBE_IF_WITHIN of it."""
        if self.plan != AR or self._probe:
            return False
        current = rate[AR]
        return not any(_worth_probing(rate[p], current) for mode, p in best_by_mode.items() if mode != "ar")

    def _best_by_mode(self) -> tuple[dict[str, Plan], dict[Plan, float]]:
        """Every candidate's predicted rate, and the best plan of each mode."""
        rate = {p: self.model.rate(p) for p in self.candidates()}  # once each: a decision weighs dozens of plans
        best_by_mode: dict[str, Plan] = {}
        for p, r in rate.items():
            if p.mode not in best_by_mode or r > rate[best_by_mode[p.mode]]:
                best_by_mode[p.mode] = p
        return best_by_mode, rate

    def _plan_probe(self, best_by_mode: dict[str, Plan], rate: dict[Plan, float]) -> None:
        """Re-measure the most promising other mode when it is predicted close and its gap has passed (where the
        draft reads each prompt ahead, a probe with a catch-up waits for the next reply's start)."""
        m = self.model
        current = rate[self.plan] if self.plan in rate else m.rate(self.plan)
        for mode, plan in sorted(best_by_mode.items(), key=lambda kv: -rate[kv[1]]):
            if mode == self.plan.mode or not _worth_probing(rate[plan], current):
                continue
            catchup = self.catchup(plan)
            if catchup and self.prompt_read:
                continue  # the next reply starts with the draft model in step: probe then
            if catchup > PROBE_CATCHUP_SHARE * (self.remaining or HORIZON_TOKENS) / current:
                continue  # the draft model would first decode more than the rest of the reply can pay back
            gap = m.probe_gap.get(mode, FIRST_PROBE_GAP)
            if m.rounds - m.last_run.get(mode, 0) >= gap:
                m.probe_gap[mode] = min(MAX_PROBE_GAP, 2 * gap)  # reset to the first gap only if it wins
                self._probe = [plan] * 2
            return

    def timed(self, width: int) -> bool:
        """Whether the latest round's verify time (``width`` tokens) is to teach the cost model: not beside the
        draft's prompt read, where the width has a figure already (a reply's pace would be read off the read)."""
        e = self.model.verify.get(width)
        return not self.beside_read or e is None or e.value is None

    def predicted(self, plan: Plan) -> tuple[float, float]:
        """(tokens, seconds) the component figures predict for one round of ``plan``."""
        m = self.model
        tokens = 1.0 if plan.mode == "ar" else m.expected_tokens(plan.k)
        return tokens, m.round_time(plan)

    def learn(self, plan: Plan, rr: RoundResult, *, split_threads: bool = False) -> None:
        """Fold one round's timings and outcome into the cost model (an ar round beside the draft's prompt read
        only where ar's time is not measured yet: :meth:`timed`). ``split_threads``: an sd round that ran on ssd's
        split threads (fixed ssd's, while its cache keeps missing): its times are ssd's, not the plan's."""
        m = self.model
        tree_of, self._tree_of = self._tree_of, plan if plan.mode == "ssd" else None
        if plan.mode == "ar" and not self.timed(1):
            return
        if plan.mode == "ar":
            m.stale = False  # ar measured since the memory was read
        split = m.split and (plan.mode == "ssd" or split_threads)
        table = m.verify_split if split else m.verify
        per_token, catchup = _draft_token_time(rr)
        measured = rr.drafted + 1 in table and (plan.mode == "ar" or m.draft_token.value is not None)
        # The verify first: the round is weighed against a prediction at the pace it showed (a slow spell of the
        # machine is not the plan's).
        m.add_verify(rr.drafted + 1, rr.verify_s, split)
        if measured and not split_threads:
            pred_tokens, pred_seconds = self.predicted(plan)  # from measured figures, not the defaults
            tokens: float = len(rr.tokens)
            hit = None
            if plan.mode == "ssd":  # without the luck of the round's outcome (see _ssd_tally_figures)
                tokens, pred_seconds = _ssd_tally_figures(m, plan, rr)
                # the plan's hits: not the first round after a change of plan (another plan's tree served it)
                hit = rr.hit if tree_of == plan else None
            m.observe(plan, tokens, rr.wait_s + rr.verify_s - catchup, pred_tokens, pred_seconds, hit, self.geometric)
        if plan.mode == "ar":
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
        if plan.mode == "ssd":
            if rr.hit is not None:  # not the forced first miss
                m.hit.add(1.0 if rr.hit else 0.0)
                if self._covered is not None:  # the outcome had a branch: a hit means its best candidate was right
                    # after a rejection the draft's best alternative; after a full acceptance its next-token guess
                    (m.top1 if self._covered == REJECTED else m.next_guess).add(1.0 if rr.hit else 0.0)
            counts = allocate(n, plan.budget, geometric_on=self.geometric, acceptance=m.acceptance.get(0.6))
            covered = n > 0 and counts[min(rr.accepted, n)] > 0
            self._covered = None if not covered else REJECTED if rr.accepted < n else ALL_ACCEPTED
        elif n and rr.accepted < n and rr.accepted < len(d.top):
            # Would the draft's best candidate (after the rejected token) have been the target's token? Only a row
            # that kept an alternative can tell: fixed sd keeps the drafted token alone (its rounds, folded in by the
            # observer, counted every rejection as the alternative being wrong).
            cands = [int(t) for t in d.top[rr.accepted] if int(t) != d.tokens[rr.accepted]][:1]
            if cands:
                m.top1.add(1.0 if rr.next_token in cands else 0.0)
        if not math.isfinite(m.round_time(plan)):
            raise AssertionError("cost model produced a non-finite estimate")


def _worth_probing(rate: float, current: float) -> bool:
    """Whether another mode predicted at ``rate`` is close enough to the current plan's to be re-measured."""
    return rate > PROBE_IF_WITHIN * current


def tree_budgets(k: int, most: int) -> list[int]:
    """The tree sizes weighed for a draft of K tokens, at most ``most`` branches, smallest first."""
    return sorted({min(most, budget) for budget in (1, 2, k + 1, 2 * (k + 1), 3 * (k + 1))})


def fitted_budget(model: CostModel, k: int, most: int, *, early_stop: bool) -> int:
    """The tree for a fixed K on this machine: of the sizes up to ``most`` (:func:`tree_budgets`, and ``most``
    itself) whose tree fits one verify, the one with the best predicted rate; ``most`` while the machine has
    no measured draft and verify times, the smallest tree when none fits (a CPU draft pays for every branch)."""
    if most <= 1 or model.draft_token.value is None or 1 not in model.verify:
        return most
    sizes = sorted({*tree_budgets(k, most), most})
    fits = [b for b in sizes if model.fits_window(k, b, early_stop)] or sizes[:1]
    return max(fits, key=lambda b: (model.rate(Plan("ssd", k, b)), -b))


def _ssd_tally_figures(model: CostModel, plan: Plan, rr: RoundResult) -> tuple[float, float]:
    """What an ssd round's tally compares: the tokens its draft was expected to emit (fewer where early stop
    served a shallower branch) and the seconds predicted for the outcome it had (hit or miss). Whether a round
    hits and how many of its tokens are accepted is luck that the acceptance figures and the plan's own count
    of hits (:meth:`CostModel.calibrated_hit`, over a longer memory) learn; in the round times, with a memory
    of ten rounds, it swung the plan's figure by a fifth. Fixed ssd leaves its tree after three misses in a
    row, so the plan's tally always ended on them (B greedy code-csv: the plan corrected to 0.80 while its
    rounds ran above its raw prediction, and auto wandered off to sd and longer K)."""
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


def measured_rates(model: CostModel, k: int = 4, max_branches: int = 32) -> dict[str, MeasuredRate]:
    """auto's best plan per mode it has measured on this machine (``ar``, ``sd``, ``ssd``, ``lookup``) and its
    predicted rate (corrected by what the plan's rounds really did).

    A mode is measured once auto has run it: ar's single-token verify, sd's draft time per token,
    ssd's tree levels and cache hits, lookup's rounds. Modes auto has not run are absent (empty before auto ran).
    """
    measured = {"ar": model.verify.get(1) is not None and model.verify[1].value is not None,
                "sd": model.draft_token.value is not None and model.acceptance.value is not None,
                "ssd": any(e.value is not None for e in model.level.values()) and model.hit.value is not None}
    best: dict[str, MeasuredRate] = {}
    for plan in AutoPlanner(model, k, max_branches=max_branches).candidates():
        if measured[plan.mode]:
            rate = model.rate(plan)
            if plan.mode not in best or rate > best[plan.mode].tokens_per_second:
                best[plan.mode] = MeasuredRate(plan.mode, str(plan), rate)
    lookup = model.mode_tallies.get("lookup")
    if lookup is not None and lookup.seconds > 0:
        best["lookup"] = MeasuredRate("lookup", "lookup", lookup.tokens / lookup.seconds)
    return best


class AutoMode:
    """Each round: the pool's draft if it promises more, else the planner's plan; the planner learns from it."""

    name = "auto"

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
        if plan.mode == "ar":
            self._idle_drafts()
            rr = self.steps.ar(why=why, rates=rates)
        elif plan.mode == "sd":
            rr = self.steps.sd(plan.k, why=why, rates=rates)
        else:
            rr = self.steps.ssd(plan.k, plan.budget, accepted=self.last_accepted, backup=self.opts.backup,
                                geometric=True,  # the allocation the planner's hit probability assumes
                                acceptance=self.planner.model.acceptance.get(0.6),
                                early_stop=self.opts.early_stop, why=why, rates=rates)
        self.planner.learn(plan, rr)
        self.planner.note(rr)
        if self.lookup is not None and rr.speculator == NGRAM:  # ssd's backup verified the pool's chain
            self.lookup.drop_shadows()
        self.last_accepted = rr.accepted if plan.mode == "ssd" else -1
        return rr

    def _lookup_round(self, plan: Plan) -> RoundResult | None:
        """A round on the pool's draft when it predicts LOOKUP_GAIN more than ``plan`` (never during a probe)."""
        if self.lookup is None or self.planner.probing:
            return None
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
            rates["lookup"] = self._lookup_rate
        return tuple(sorted(rates.items(), key=lambda kv: -kv[1]))

    def close(self) -> None:
        self.steps.close()

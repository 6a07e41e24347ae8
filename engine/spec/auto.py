"""``auto``: a planner picks ar, sd or ssd, the draft length K and the tree size for every round.

:class:`AutoPlanner` runs no round: it reads the :class:`~engine.spec.costmodel.CostModel`, returns
the next :class:`~engine.spec.costmodel.Plan`, and learns from the round's event. It holds a plan
for a few rounds and now and then probes the others so their figures stay current; speculation
that does not pay loses to ``ar`` in the prediction and is dropped. :class:`AutoMode` runs each
plan with the same ar/sd/ssd steps the other modes use.
"""

from __future__ import annotations

import logging
import math

from .costmodel import CostModel, MeasuredRate, Plan
from .fanout import allocate
from .ssd import SSDOptions
from .steps import Steps
from .types import JIT, RoundResult

log = logging.getLogger(__name__)

K_MAX = 8  # the longest draft auto considers when it adapts K
HOLD_ROUNDS = 4  # rounds a plan is kept before re-deciding
PROBE_EVERY = 64  # rounds between probes of the runner-up mode
SWITCH_GAIN = 1.05  # a new plan must promise this much more
PROBE_IF_WITHIN = 0.8  # re-measure another mode only if it is predicted within this share of the current


class AutoPlanner:
    """Chooses a plan per round from the cost model and learns from what each round reports."""

    def __init__(self, model: CostModel, k: int, *, adaptive: bool = True, k_max: int = K_MAX,
                 max_branches: int = 32) -> None:
        self.model = model  # the machine's timings outlive one reply: the engine passes the same model each time
        self.k = k
        self.adaptive = adaptive
        self.k_max = max(k, k_max) if adaptive else k
        self.max_branches = max_branches
        self.plan = Plan("ar")
        self.why = ""  # why the latest plan was chosen (reported with its round)
        self.held = 0
        self.rounds = 0
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
            probes += [Plan("sd", self.k)] * 2
        elif not m.level:
            best = max(self.candidates_without_ssd(), key=m.rate)
            hopeful = Plan("ssd", self.k, 1)
            saved = m.hit.value
            m.hit.value = 1.0  # optimistic: would a tree that always hits beat the best known plan?
            promising = m.rate(hopeful) > SWITCH_GAIN * m.rate(best)
            m.hit.value = saved
            if promising:
                probes += [hopeful] * 2
        return probes

    def _ks(self) -> range | list[int]:
        return range(1, self.k_max + 1) if self.adaptive else [self.k]

    def candidates_without_ssd(self) -> list[Plan]:
        return [Plan("ar"), *(Plan("sd", k) for k in self._ks())]

    def candidates(self) -> list[Plan]:
        plans = self.candidates_without_ssd()
        for k in self._ks():
            for budget in sorted({1, 2, k + 1, 2 * (k + 1), 3 * (k + 1)}):
                budget = min(self.max_branches, budget)
                if self.model.fits_window(k, budget):
                    plans.append(Plan("ssd", k, budget))
        return plans

    def next_plan(self) -> Plan:
        """The plan for the next round (a probe, the held plan, or a better one)."""
        plan = self._choose()
        self.held += 1
        self.rounds += 1
        return plan

    def _choose(self) -> Plan:
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

    def learn(self, plan: Plan, rr: RoundResult) -> None:
        """Fold one round's timings and outcome into the cost model."""
        m = self.model
        if plan.mode == "ar":
            m.add_verify(1, rr.verify_s)
            return
        d = rr.draft
        assert d is not None, "a speculative round reports its draft"
        n = rr.drafted
        split = m.split and plan.mode == "ssd"
        m.add_verify(n + 1, rr.verify_s, split)
        if n:
            m.acceptance.add(rr.accepted / n)
        if d.source == JIT and n and not split:
            m.draft_token.add(d.serve_s / n)
        for ts in rr.trees:
            if ts.levels and ts.branches:
                m.add_level(ts.branches, ts.seconds / (ts.levels + 1))
        if plan.mode == "ssd":
            if rr.hit is not None:  # not the forced first miss
                m.hit.add(1.0 if rr.hit else 0.0)
                if self._covered:  # the outcome had a branch: a hit means its best candidate was right
                    m.top1.add(1.0 if rr.hit else 0.0)
                predicted = m.round_time(plan) / m.ssd_slowdown.get(1.0)
                if predicted > 0:
                    m.ssd_slowdown.add((rr.wait_s + rr.verify_s) / predicted)
            counts = allocate(n, plan.budget, geometric_on=True, acceptance=m.acceptance.get(0.6))
            self._covered = n > 0 and counts[min(rr.accepted, n)] > 0
        elif n and rr.accepted < n and rr.accepted < len(d.top):
            # Would the draft's best candidate (after the rejected token) have been the target's token?
            cands = [int(t) for t in d.top[rr.accepted] if int(t) != d.tokens[rr.accepted]][:1]
            m.top1.add(1.0 if rr.next_token in cands else 0.0)
        if not math.isfinite(m.round_time(plan)):
            raise AssertionError("cost model produced a non-finite estimate")


def measured_rates(model: CostModel, k: int = 4, max_branches: int = 32) -> dict[str, MeasuredRate]:
    """auto's best plan per mode it has measured on this machine (``ar``, ``sd``, ``ssd``) and its predicted rate.

    A mode is measured once auto has run it: ar's single-token verify, sd's draft time per token,
    ssd's tree levels and cache hits. Modes auto has not run are absent (empty before auto ran).
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
    return best


class AutoMode:
    """Each round: the planner's plan, run by the shared ar/sd/ssd steps, then the planner learns from it."""

    name = "auto"

    def __init__(self, steps: Steps, planner: AutoPlanner, opts: SSDOptions) -> None:
        self.steps = steps
        self.planner = planner
        self.opts = opts
        self.last_accepted = -1  # -1: the previous round was not an ssd round (no tree to serve from)

    def step(self) -> RoundResult:
        plan = self.planner.next_plan()
        why = self.planner.why
        if plan.mode == "ar":
            rr = self.steps.ar(why=why)
        elif plan.mode == "sd":
            rr = self.steps.sd(plan.k, why=why)
        else:
            rr = self.steps.ssd(plan.k, plan.budget, accepted=self.last_accepted, backup=self.opts.backup,
                                geometric=True,  # the allocation the planner's hit probability assumes
                                acceptance=self.planner.model.acceptance.get(0.6),
                                early_stop=self.opts.early_stop, why=why)
        self.planner.learn(plan, rr)
        self.last_accepted = rr.accepted if plan.mode == "ssd" else -1
        return rr

    def close(self) -> None:
        self.steps.close()

"""auto under a changing load: a spell of verifies whose mean pace lies beyond SHIFT_BAND is another load, and every
other mode is measured again; a 30 % swing per call is noise, and measures nothing again."""

from __future__ import annotations

import numpy as np

from engine.speculative.costmodel import CostModel
from engine.speculative.knobs import FIRST_PROBE_GAP, PROBE_ROUNDS, SPELL_VERIFIES
from engine.speculative.plan import Plan
from engine.speculative.planner import AutoPlanner
from engine.speculative.types import JIT, Draft, RoundResult


def settled(seconds: float = 0.1) -> CostModel:
    m = CostModel()
    for width in (1, 3):
        for _ in range(8):
            m.add_verify(width, seconds * (1 + 0.1 * (width - 1)))
    return m


def test_a_lasting_change_of_pace_counts_as_a_shift_and_noise_does_not() -> None:
    loaded, noisy = settled(), settled()
    for _ in range(SPELL_VERIFIES + 2):
        loaded.add_verify(3, 0.12 / 2.5)  # the other program stopped: verifies 2.5x faster
    assert loaded.shifts == 1
    rng = np.random.default_rng(0)
    for z in np.exp(rng.normal(0.0, 0.3, 400)):  # a 30 % swing per call
        noisy.add_verify(3, 0.12 * float(z))
    assert noisy.shifts == 0


def test_after_a_shift_every_other_mode_is_measured_again_at_once() -> None:
    m = settled()
    for _ in range(8):
        m.draft_token.add(0.01)
        m.acceptance.add_round(2, 2)
    planner = AutoPlanner(m, k=2, adaptive=False)
    plans = []
    for i in range(40):
        plan = planner.next_plan()
        plans.append(plan)
        loaded = i < 20
        width = plan.k + 1 if plan.mode == "sd" else 1
        seconds = (0.1 if loaded else 0.04) * (1 + 0.1 * (width - 1))
        if plan.mode == "ar":
            rr = RoundResult([1], "ar", verify_s=seconds)
        else:
            d = Draft([5, 5], None, JIT, serve_s=0.02)
            rr = RoundResult([5, 5, 9], "sd", JIT, 2, 2, verify_s=seconds, wait_s=0.02, draft=d)
        planner.learn(plan, rr)
    assert m.shifts >= 1
    after = plans[20:]
    running = after[0].mode
    other = "ar" if running == "sd" else "sd"
    assert sum(p.mode == other for p in after) >= PROBE_ROUNDS  # re-measured after the load went
    assert m.probe_gap.get(other, FIRST_PROBE_GAP) <= 2 * FIRST_PROBE_GAP
    assert Plan("ar") in plans and Plan("sd", 2) in plans

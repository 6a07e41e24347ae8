"""auto under a changing load: a spell of verifies whose mean pace lies beyond SHIFT_BAND (either way, as a ratio of
speeds) is another load: the figures become priors and every other mode is measured again; a 30 % swing per call is
noise, and measures nothing again."""

from __future__ import annotations

import numpy as np

from engine.speculative.costmodel import CostModel
from engine.speculative.knobs import FIRST_PROBE_GAP, HOLD_ROUNDS, PROBE_ROUNDS, SPELL_VERIFIES
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


def test_a_machine_that_runs_1_5x_faster_for_good_is_a_shift() -> None:
    """Speeds are ratios: a pace of 0.65 (1.54x faster: cpu-2core-A's ssd verify once the other program stops) lies
    as far beyond the band as a pace of 1.54 (it read as 0.35 from 1, inside a band of 0.4, before)."""
    faster, noisy = settled(), settled()
    for _ in range(SPELL_VERIFIES + 2):
        faster.add_verify(3, 0.11 * 0.65)
        noisy.add_verify(3, 0.11 * 0.8)  # a spell within the band: 1.25x faster
    assert faster.shifts == 1 and noisy.shifts == 0


def test_after_a_shift_what_the_other_load_taught_is_replaced_by_the_next_sample() -> None:
    """A figure learnt under load (sd's verify of three tokens, 2.5x slow) is a prior after a shift: the first quiet
    sample of it replaces it, where before a shift it moves it by FIGURE_ALPHA and the pace."""
    m = settled()
    for _ in range(8):
        m.draft_token.add(0.01)
        m.acceptance.add_round(2, 2)
    planner = AutoPlanner(m, k=2, adaptive=False)
    planner._probe.clear()  # (no first probe due: the decisions alone)
    for _ in range(SPELL_VERIFIES + 2):
        m.add_verify(1, 0.1 * 0.4)  # ar's verify, now quiet
    assert m.shifts == 1
    for _ in range(HOLD_ROUNDS + 1):  # up to the decision that sees the shift
        planner.next_plan()
    assert m.stale
    m.add_verify(3, 0.11 * 0.4)
    assert abs(m.t_verify(3) - 0.11 * 0.4) < 0.002


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

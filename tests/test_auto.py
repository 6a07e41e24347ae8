"""The auto strategy's cost model: predictions follow the measurements it is fed."""

from __future__ import annotations

import pytest

from engine.speculative.costmodel import CostModel
from engine.speculative.knobs import TIMING_CLIP
from engine.speculative.plan import Plan


def model_with(verify: dict[int, float], draft_token: float, acceptance: float, hit: float) -> CostModel:
    m = CostModel()
    for w, t in verify.items():
        for _ in range(20):
            m.add_verify(w, t)
    for _ in range(20):
        m.draft_token.add(draft_token)
        m.acceptance.add(acceptance)
        m.hit.add(hit)
    return m


def test_ar_wins_when_draft_is_slow_and_wrong() -> None:
    m = model_with({1: 0.1, 5: 0.4}, draft_token=0.08, acceptance=0.1, hit=0.1)
    plans = [Plan("ar"), Plan("sd", 4), Plan("sd", 2), Plan("sd", 1)]
    assert max(plans, key=m.rate) == Plan("ar")


def test_sd_wins_with_cheap_accurate_draft() -> None:
    m = model_with({1: 0.1, 2: 0.11, 3: 0.12, 4: 0.13, 5: 0.14}, draft_token=0.01, acceptance=0.8, hit=0.5)
    best = max([Plan("ar"), *(Plan("sd", k) for k in range(1, 5))], key=m.rate)
    assert best.mode == "sd" and best.k >= 3


def test_ssd_wins_when_tree_fits_and_hits() -> None:
    m = model_with({1: 0.2, 4: 0.25, 5: 0.26}, draft_token=0.03, acceptance=0.7, hit=0.9)
    for _ in range(10):
        m.add_level(8, 0.04)
    assert m.fits_window(3, 8)
    assert m.rate(Plan("ssd", 3, 8)) > m.rate(Plan("sd", 3)) > m.rate(Plan("ar"))


def test_window_rejects_a_tree_slower_than_verify() -> None:
    m = model_with({4: 0.1}, draft_token=0.05, acceptance=0.7, hit=0.9)
    for _ in range(10):
        m.add_level(8, 0.2)
    assert not m.fits_window(3, 8)


def test_verify_time_interpolates_between_widths() -> None:
    m = model_with({1: 0.1, 5: 0.5}, draft_token=0.01, acceptance=0.5, hit=0.5)
    assert abs(m.t_verify(3) - 0.3) < 1e-9
    assert m.t_verify(7) > m.t_verify(5)


def test_hit_probability_grows_with_budget_and_one_branch_covers_only_full_acceptance() -> None:
    m = model_with({1: 0.1}, draft_token=0.01, acceptance=0.8, hit=0.5)
    for _ in range(30):
        m.top1.add(0.9)
    p = [m.hit_prob(4, b) for b in (1, 2, 5, 10)]
    assert p == sorted(p) and p[-1] <= 1.0
    # one branch goes to the all-accepted outcome, whose next token the draft guesses as often as it is accepted
    assert abs(m.hit_prob(4, 1) - 0.8**4 * m.acceptance.get(0)) < 1e-9
    assert m.hit_prob(8, 1) < m.hit_prob(2, 1)


def test_verify_time_beyond_the_measured_widths_never_falls() -> None:
    m = model_with({1: 0.023, 2: 0.05, 3: 0.07, 5: 0.065}, draft_token=0.01, acceptance=0.5, hit=0.5)  # noisy 5
    assert m.t_verify(17) >= m.t_verify(5) > 0.05
    assert m.rate(Plan("sd", 16)) < 1000  # a wide lookup draft is not predicted to be free


def test_an_unmeasured_plan_is_not_trusted_far_above_what_its_mode_delivered() -> None:
    m = model_with({1: 0.1, 2: 0.11, 5: 0.14}, draft_token=0.01, acceptance=0.8, hit=0.9)
    tried, untried = Plan("ssd", 4, 1), Plan("ssd", 1, 4)
    assert m.rate(untried) > 15  # what the figures alone predict
    for _ in range(3):
        m.observe(tried, tokens=4, seconds=0.4, pred_tokens=4, pred_seconds=0.4)  # it ran at 10 tok/s
    assert m.delivered("ssd") == 10.0 and m.delivered("sd") == 0.0
    assert m.rate(untried) <= 12.5 + 1e-9
    assert m.rate(tried) == m.raw_rate(tried) * m.correction(tried)  # a measured plan keeps its own figure
    assert m.rate(Plan("sd", 4)) == m.raw_rate(Plan("sd", 4))  # no sd plan measured: nothing to cap by


def test_one_tree_too_wide_does_not_hold_every_other_tree_below_what_sd_delivered() -> None:
    """B, a user's first ssd reply: a 5-branch tree that did not fit ran at 9 tok/s, sd at 13; an untried tree
    of one branch (whose miss is an sd round where the draft has a core of its own) may still be trusted up to
    1.25x sd's rate."""
    m = model_with({1: 0.1, 2: 0.11, 5: 0.14}, draft_token=0.01, acceptance=0.8, hit=0.9)
    wide, narrow = Plan("ssd", 4, 5), Plan("ssd", 4, 1)
    for _ in range(3):
        m.observe(wide, tokens=4, seconds=0.8, pred_tokens=4, pred_seconds=0.8)  # 5 tok/s
        m.observe(Plan("sd", 4), tokens=4, seconds=0.4, pred_tokens=4, pred_seconds=0.4)  # 10 tok/s
    assert m.raw_rate(narrow) * m.correction(narrow) > 12.5
    assert m.rate(narrow) == pytest.approx(12.5)  # not 1.25 x the wide tree's 5
    m.split = True  # ssd's verify on fewer cores (A: ssd ran 0.43x ar, sd 0.62x): its own plans' rate caps it
    assert m.rate(narrow) == pytest.approx(6.25)


def test_acceptance_is_per_draft_position_so_expected_tokens_match_the_rounds() -> None:
    m = CostModel()
    rounds = [4, 4, 2] * 10  # K = 4: two drafts fully accepted, then one rejected at its third token
    for accepted in rounds:
        m.acceptance.add_round(accepted, 4)
    mean_tokens = sum(a + 1 for a in rounds) / len(rounds)  # accepted drafts plus the target's own token
    assert abs(m.acceptance.get(0.0) - 10 / 11) < 0.03  # 10 accepted for each rejection (recent rounds weigh more)
    error = abs(m.expected_tokens(4) - mean_tokens)
    assert error / mean_tokens < 0.08
    old = CostModel()
    old.acceptance.value = sum(rounds) / (4 * len(rounds))  # the plain fraction (0.83) predicts 3.6 tokens
    assert error < abs(old.expected_tokens(4) - mean_tokens) / 2


def test_verify_estimates_follow_every_new_measurement() -> None:
    m = model_with({1: 0.1, 3: 0.2}, draft_token=0.01, acceptance=0.5, hit=0.5)
    assert m.t_verify(2, split=True) == pytest.approx(0.15)  # ssd's: as sd's until measured, on a shared device
    m = model_with({1: 0.1, 3: 0.2}, draft_token=0.01, acceptance=0.5, hit=0.5)
    m.split = True  # ... and on split cores, SPLIT_VERIFY_COST more
    assert abs(m.t_verify(2) - 0.15) < 1e-9 and abs(m.t_verify(2, split=True) - 0.225) < 1e-9  # (kept for reuse)
    m.add_verify(2, 0.3)  # a new width measured: the kept estimates are redone
    assert m.t_verify(2) == 0.3 and abs(m.t_verify(2, split=True) - 0.45) < 1e-9
    m.add_verify(2, 0.2, split=True)  # ssd's first verify of a width: clipped against its estimate (0.45)
    assert m.t_verify(2, split=True) == pytest.approx(0.45 / TIMING_CLIP)
    m.add_verify(2, 0.2, split=True)
    assert m.t_verify(2, split=True) < 0.45 / TIMING_CLIP


def test_a_lone_width_whose_figure_is_wrong_does_not_slow_the_others_for_as_long_as_it_runs() -> None:
    # B-q4 (Zen 4): ssd(K=1)'s width 2 ran alone for 39 rounds; its verifies took longer than its figure said, the pace
    # took the difference, and ar's prediction read as slow as the error for the whole reply (results/pace-lock-in-*).
    m = model_with({1: 0.050, 2: 0.075}, draft_token=0.01, acceptance=0.7, hit=0.5)
    for _ in range(5):  # a spell's first rounds: the pace takes them, and ar reads slow with it
        m.add_verify(2, 0.100)
    assert m.t_verify(1) > 1.2 * 0.050
    for _ in range(35):  # it lasts: the width's own figure takes it over
        m.add_verify(2, 0.100)
    assert m.t_verify(2) == pytest.approx(0.100, rel=0.02)
    assert m.t_verify(1) == pytest.approx(0.050, rel=0.06)  # 0.065 before: the pace kept the error

"""Rules of auto's cost model and planner that the simulated machines (tests/test_simulated.py) showed are needed:
acceptance is remembered per trial (with a prior) and by draft position; ssd's verify, beside its tree, is kept
apart from sd's; a drafting plan (a probe too) gives way to ar between the pool's drafts when its catch-up, or what
drafting delivered there, cannot pay, and the tokens between those drafts outlive the reply; a probe gives way to
the pool's draft; a width read back slow from disk is never slower than the widths measured since; nothing one
unlucky sample says is kept for good: a plan's few rounds, a width's lone verify, the draft's first guess, a tree
level's width; each mode is probed on its own gap."""

from __future__ import annotations

import numpy as np
import pytest

from engine.speculative import memory
from engine.speculative.costmodel import CostModel
from engine.speculative.figures import Acceptance
from engine.speculative.knobs import ACCEPT_PRIOR, ACCEPT_SEED_TRIALS, FIRST_PROBE_ROUNDS, TIMING_CLIP, TOP1_PRIOR
from engine.speculative.lookup import Lookup
from engine.speculative.plan import AR, Plan
from engine.speculative.planner import AutoPlanner
from engine.speculative.types import JIT, Draft, RoundResult


def test_two_rejected_first_rounds_do_not_read_as_zero_acceptance() -> None:
    a = Acceptance()
    a.add_round(0, 4)
    a.add_round(0, 4)
    assert a.value is not None and 0.2 < a.value < ACCEPT_PRIOR


def test_acceptance_is_remembered_per_trial_so_short_drafts_do_not_swing_it() -> None:
    long_drafts, short_drafts = Acceptance(), Acceptance()
    for _ in range(200):
        long_drafts.add_round(4, 4)
        short_drafts.add_round(1, 1)
    for _ in range(4):  # four unlucky rounds after a long run of full acceptance
        long_drafts.add_round(0, 4)
        short_drafts.add_round(0, 1)
    assert long_drafts.value is not None and short_drafts.value is not None
    assert abs(long_drafts.value - short_drafts.value) < 0.02  # the same four trials failed
    assert short_drafts.value > 0.9  # four of a memory of about fifty trials


def test_a_restored_acceptance_outweighs_one_unlucky_round() -> None:
    a = Acceptance()
    a.value = 0.85  # as read back from the memory file
    a.add_round(0, 4)
    assert a.value is not None and a.value > 0.7


def test_a_new_replys_acceptance_follows_its_own_drafts_within_a_few_rounds() -> None:
    """Replies of code leave a long memory of near-certain drafts; a chat reply after them counts it as a value read
    back from disk counts (ACCEPT_SEED_TRIALS trials), so three rejected drafts already move it, as on a restart."""
    kept, restarted = Acceptance(), Acceptance()
    for _ in range(40):
        kept.add_round(4, 4)
    restarted.value = kept.value
    kept.new_text()
    assert kept.value == restarted.value and kept.trials == ACCEPT_SEED_TRIALS
    for a in (kept, restarted):
        for _ in range(3):
            a.add_round(0, 4)
    assert kept.value is not None and kept.value == pytest.approx(restarted.value)
    assert kept.value < 0.9


def sd_model() -> CostModel:
    """sd(K=4) predicted well above ar; a catch-up token costs 2 ms."""
    m = CostModel()
    for width in (1, 5):
        for _ in range(4):
            m.add_verify(width, 0.02 * (1 + 0.05 * (width - 1)))
    for _ in range(4):
        m.draft_token.add(0.002)
        m.catchup_token.add(0.002)
        m.acceptance.add_round(4, 4)
    return m


def test_between_the_pools_drafts_a_lagging_draft_plan_gives_way_to_ar() -> None:
    m = sd_model()
    planner = AutoPlanner(m, k=4, remaining=256)
    planner._probe, planner.plan, planner.held = [], Plan("sd", 4), 0
    assert planner.next_plan() == Plan("sd", 4)
    edit(planner)
    planner.note(RoundResult(list(range(40)), "lookup"))  # the draft model is 172 tokens behind
    assert planner.next_plan() == AR and "catch-up" in planner.why
    for _ in range(60):  # a long stretch without the pool: the catch-up pays again
        planner.note(RoundResult([1], "ar"))
    assert planner.next_plan() == Plan("sd", 4)


def edit(planner: AutoPlanner) -> None:
    """A code edit's rounds: 40 tokens copied by the pool, then 4 new ones, three times."""
    for _ in range(3):
        planner.note(RoundResult(list(range(40)), "lookup"))
        for _ in range(4):
            planner.note(RoundResult([1], "ar"))


def test_the_tokens_between_the_pools_drafts_outlive_the_reply() -> None:
    m = sd_model()
    edit(AutoPlanner(m, k=4, remaining=256))
    assert m.pool_gap.value == pytest.approx(4.0)
    restored = memory.restore(memory.dump(m), split=False)  # the next reply (or start) reads it back
    planner = AutoPlanner(restored, k=4, remaining=256)
    planner._probe, planner.plan, planner.held = [], Plan("sd", 4), 0
    planner.note(RoundResult(list(range(40)), "lookup"))  # the reply's first copy: the draft model is 40 behind
    assert planner.next_plan() == AR and "catch-up" in planner.why


def test_a_replys_first_stretch_is_no_gap_between_the_pools_drafts() -> None:
    m = sd_model()
    planner = AutoPlanner(m, k=4, remaining=256)
    for _ in range(30):  # the pool matches only once the reply has begun a copy
        planner.note(RoundResult([1], "ar"))
    planner.note(RoundResult(list(range(40)), "lookup"))
    assert m.pool_gap.value is None


def test_a_first_probe_gives_way_to_the_pools_draft_and_runs_after_it() -> None:
    planner = AutoPlanner(CostModel(), k=4, remaining=256)
    probe = planner.next_plan()
    assert planner.probing
    planner.defer_probe()  # the pool had a long match: AutoMode ran it instead
    assert not planner.probing
    assert planner.next_plan() == probe and planner.probing


def test_a_later_probe_given_way_to_the_pool_waits_for_its_next_turn() -> None:
    m = sd_model()
    planner = AutoPlanner(m, k=4, remaining=256)
    planner.plan, planner.rounds = Plan("sd", 4), FIRST_PROBE_ROUNDS
    planner._probe, planner.held = [Plan("ssd", 2, 6)] * 2, 0
    assert planner.next_plan() == Plan("ssd", 2, 6)
    planner.defer_probe()  # after the copy its draft would first catch up on it
    assert planner.next_plan() == Plan("sd", 4) and not planner.probing


def test_a_measuring_probe_given_way_to_the_pool_at_the_replys_start_waits_for_its_next_turn() -> None:
    m = sd_model()
    m.hit.value, m.rounds = 0.5, 64  # ssd has run too, long ago: a mode is due to be measured again
    planner = AutoPlanner(m, k=4, remaining=256, prompt_read=True)  # a probe due runs at the reply's start
    probe = planner.next_plan()
    assert planner.rounds < FIRST_PROBE_ROUNDS and planner.probing and probe != planner.plan
    planner.defer_probe()  # after the copy its draft would first catch up on it
    assert planner.next_plan() == planner.plan and not planner.probing


def test_between_the_pools_drafts_what_drafting_delivered_there_decides() -> None:
    m = sd_model()
    planner = AutoPlanner(m, k=4, remaining=256)
    planner._probe, planner.plan, planner.held = [], Plan("sd", 4), 0
    edit(planner)
    planner.note(RoundResult(list(range(40)), "lookup"))
    for _ in range(3):  # new text between the copies: each round's first draft token is rejected
        draft = Draft([1, 2, 3, 4], None, JIT, serve_s=0.008)
        rr = RoundResult([9], "sd", JIT, 4, 0, verify_s=0.021, draft=draft)
        planner.learn(Plan("sd", 4), rr)
        planner.note(rr)
    assert planner.draft_lag == 0 and m.gap_factor() < 0.5
    assert planner.next_plan() == AR and "0.3" in planner.why  # no catch-up due, yet ar pays more there
    planner._probe, planner._remeasure = [Plan("sd", 2)] * 2, True  # a re-measure falls due here
    assert planner.next_plan() == AR and not planner._probe  # it waits for its next turn, as for a pool draft
    restored = memory.restore(memory.dump(m), split=False)
    assert restored.gap_factor() == pytest.approx(m.gap_factor())  # a conversation that edits code goes on
    fresh = AutoPlanner(restored, k=4, remaining=256)
    fresh._probe, fresh.plan, fresh.held = [], Plan("sd", 4), 0
    assert fresh.next_plan() == Plan("sd", 4)  # a reply whose pool has not drafted yet is no gap between copies


def test_a_wide_verify_read_back_slow_is_never_slower_than_the_widths_measured_since_imply() -> None:
    m = CostModel()
    for width, seconds in ((1, 0.2), (3, 0.21), (5, 0.22)):
        for _ in range(4):
            m.add_verify(width, seconds)
    data = memory.dump(m)
    data["verify"]["5"][0] *= 3.5  # written while the machine was busy
    busy = memory.age(memory.restore(data, split=False))
    assert busy.t_verify(5) == pytest.approx(0.77)  # nothing measured since: the file's figure
    busy.add_verify(1, 0.2)  # ar re-measured: width 5 no longer reads as 3.5x the rest (no sd plan would run)
    assert busy.t_verify(5) < 0.2 * 2.5 and busy.t_verify(4) < busy.t_verify(5)
    busy.add_verify(5, 0.22)  # measured again: its own sample
    assert busy.t_verify(5) == pytest.approx(0.22)


def test_acceptance_is_learnt_by_position_so_long_drafts_do_not_underrate_short_ones() -> None:
    a = Acceptance()
    for _ in range(300):  # eight-token drafts: the first tokens right, the last ones mostly wrong
        a.add_round(5, 8)
    assert a.at(0) > 0.95 and a.at(5) < 0.1
    model = CostModel()
    model.acceptance = a
    assert model.expected_tokens(2) > 2.8  # three tokens a round for K = 2, as its positions say
    assert a.value is not None and a.value < 0.85  # the one figure over all positions would say far fewer


def test_ssds_verify_beside_its_tree_is_kept_apart_from_sds_on_a_shared_device() -> None:
    m = CostModel()  # a GPU: no split cores, the tree runs beside the verify on the same device
    for _ in range(6):
        m.add_verify(5, 0.0139)  # sd's verify of five tokens
        m.add_verify(5, 0.0175, True)  # ssd's, with a tree being built beside it
    assert m.t_verify(5) == pytest.approx(0.0139, rel=0.02)
    assert m.t_verify(5, True) == pytest.approx(0.0175, rel=0.02)


def test_one_stalled_first_ssd_verify_moves_its_figure_at_most_timing_clip() -> None:
    m = CostModel()
    for _ in range(4):
        m.add_verify(5, 0.014)
    m.add_verify(5, 0.07, True)  # another process stalled this round 5x
    assert m.t_verify(5, True) == pytest.approx(0.014 * TIMING_CLIP, rel=0.02)
def test_a_plans_few_rounds_are_weighed_against_its_modes_many() -> None:
    m = sd_model()
    few, many = Plan("sd", 3), Plan("sd", 4)
    for _ in range(40):  # the mode's rounds ran as predicted
        m.observe(many, 5.0, 0.1, 5.0, 0.1)
    for seconds in (0.1, 0.1, 0.1, 0.25):  # four rounds of another plan, one of them stalled
        m.observe(few, 4.0, seconds, 4.0, 0.1)
    own = m.tallies[few].factor(tokens=False)
    assert own < 0.8 < m.correction(few) < 1.0  # the stall's share is not pinned on the plan for good


def test_a_lone_stalled_width_does_not_set_the_slope_of_every_wider_one() -> None:
    m = CostModel()
    m.add_verify(1, 0.10)
    m.add_verify(5, 0.25)  # one verify of 5 tokens during a stall (its true time: 0.125)
    for _ in range(8):  # then only widths 1 and 3 run (the pool's short drafts)
        m.add_verify(1, 0.10)
        m.add_verify(3, 0.11)
    assert m.t_verify(5) == pytest.approx(0.25, rel=0.05)  # its own figure stands until it runs again ...
    assert m.t_verify(17) < 0.2  # ... but wider widths are read off the widths that ran often, so they get tried


def test_one_wrong_guess_does_not_read_as_a_draft_that_is_never_right() -> None:
    m = CostModel()
    planner = AutoPlanner(m, k=2)
    draft = Draft([5, 6], None, JIT, top=[np.array([5, 7]), np.array([6, 8])], serve_s=0.04)
    planner.learn(Plan("sd", 2), RoundResult([5, 9], "sd", JIT, 2, 1, verify_s=0.1, draft=draft))
    assert m.top1.value is not None and 0.5 < m.top1.value < TOP1_PRIOR  # the alternative 8 was wrong, once


def test_a_narrow_tree_level_is_estimated_between_one_draft_token_and_a_measured_wide_level() -> None:
    m = sd_model()  # a draft token: 2 ms; the target's verify nearly flat in width
    m.add_tree(18, 1, 0.002, 0.056)  # a level of 18 branches: 56 ms (a CPU draft pays for every branch)
    assert 0.002 < m.t_level(2) < 0.008  # not 56 ms because the target's verify barely grows with width


def test_before_any_tree_a_wide_level_costs_at_least_a_batch_of_as_many_draft_tokens() -> None:
    m = CostModel()
    for _ in range(4):  # a flat target verify (an F16 target on one thread) beside a CPU draft
        m.add_verify(1, 0.377)
        m.add_verify(5, 0.401)
        m.draft_token.add(0.072)
    assert m.t_level(18) >= m.catchup_time(18) > 4 * 0.072  # not 1.1 draft tokens, as the target's verify would say
    assert m.t_level(1) == pytest.approx(0.072)


def test_each_mode_keeps_its_own_probe_gap() -> None:
    planner = AutoPlanner(sd_model(), k=4, remaining=256)
    m, sd, ssd = planner.model, Plan("sd", 4), Plan("ssd", 2, 6)
    planner.plan, planner._probe = AR, []
    m.rounds, m.last_run, m.probe_gap = 100, {"sd": 90, "ssd": 0}, {"sd": 64, "ssd": 32}
    planner._plan_probe({"ar": AR, "sd": sd, "ssd": ssd}, {AR: 10.0, sd: 9.5, ssd: 9.0})
    assert planner._probe and planner._probe[0] == ssd  # sd, lost often, is not due; ssd is


def test_a_drafting_round_that_runs_into_a_copy_is_tallied_for_its_tokens_before_the_pool_could_draft() -> None:
    m = sd_model()
    lookup = Lookup(m)
    prompt = list(range(100, 160))  # the file being edited
    context = [*prompt, 7, 8]  # then new text
    lookup.start(context)
    assert lookup.takeover(context, [9, 10, 11], 0.0) == 3  # all new: the pool had nothing to draft
    assert lookup.takeover(context, [9, 110, 111, 112, 113], 0.0) == 2  # after 110 the pool would draft: a copy
    assert lookup.takeover(context, [9, 110, 111, 112, 113], 1e9) == 5  # ... unless the plan promised more
    distrusted = Lookup(sd_model())
    distrusted.start(context)
    for _ in range(30):  # the pool's chains have been wrong here: a right guess it would not have drafted
        for order in (1, 2, 3, 4):
            distrusted.model.learn_lookup([order], 0)
    assert distrusted.takeover(context, [9, 110, 111, 112, 113], 0.0) == 5
    planner = AutoPlanner(m, k=4, remaining=256)
    planner._probe, planner.plan, planner.held = [], Plan("sd", 4), 0
    edit(planner)
    planner.note(RoundResult(list(range(40)), "lookup"))
    rr = RoundResult([9, 110, 111, 112], "sd", JIT, 3, 3, verify_s=0.021, draft=Draft([9, 110, 111], None, JIT))
    planner.learn(Plan("sd", 4), rr, gap_tokens=2)
    planner.note(rr, gap_tokens=2)
    assert m.gap_tally.tokens == 2  # the copy's tokens were the pool's to emit
    assert m.pool_gap.value is not None and m.pool_gap.value < 4.0 and planner._since_pool == 0  # the gap ended


def test_before_any_gap_is_measured_the_stretch_so_far_is_its_guess_once_drafting_there_was_tallied() -> None:
    m = sd_model()
    planner = AutoPlanner(m, k=4, remaining=256)
    planner._probe, planner.plan, planner.held = [], Plan("sd", 4), 0
    planner.note(RoundResult(list(range(40)), "lookup"))  # the reply's first copy: the draft model is 40 behind
    assert m.pool_gap.value is None
    assert planner.next_plan() == Plan("sd", 4)  # nothing says yet how drafting fares between copies: it is tried
    for _ in range(3):  # ... and it delivered a third of its predictions there
        m.gap_tally.add(1.0, 0.03, 3.0, 0.03)
    assert planner.next_plan() == AR and "catch-up" in planner.why

"""The n-gram pool and the lookup speculator: what the pool predicts, its constant memory, and that the
speculator drafts only what pays (fake target, no model)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from engine.speculative.costmodel import CostModel
from engine.speculative.figures import Ratio
from engine.speculative.lookup import Lookup, LookupMode, NgramPool
from engine.speculative.plan import Plan
from engine.speculative.steps import Steps
from engine.speculative.types import NGRAM, RoundResult
from tests.spec_fakes import TRUTH, FakeTarget


def test_the_pool_predicts_what_followed_the_longest_known_ngram() -> None:
    pool = NgramPool(orders=(1, 2, 3))
    pool.feed([5, 6, 7, 8, 5, 6, 9])
    assert pool.predict([1, 5, 6]) == (9, 2)  # the bigram (5, 6) was last followed by 9
    assert pool.predict([7, 8, 5]) == (6, 3)  # the trigram (7, 8, 5) knows 6
    assert pool.predict([4, 4, 8]) == (5, 1)  # only the unigram 8 is known
    assert pool.predict([4, 4, 4]) is None


def test_a_draft_chains_predictions_until_the_pool_has_nothing() -> None:
    pool = NgramPool(orders=(2, 3))
    text = [10, 11, 12, 13, 14, 15, 16]
    pool.feed([1, 2, *text, 3])
    tokens, orders = pool.draft([9, 10, 11], max_len=16)
    assert tokens == [12, 13, 14, 15, 16, 3]  # variable length: it stops where the pool's knowledge ends
    assert orders == [2, 3, 3, 3, 3, 3]  # (9, 10, 11) is unknown: the bigram (10, 11) starts it
    assert pool.draft([9, 10, 11], max_len=2)[0] == [12, 13]
    assert pool.draft([40, 41], max_len=8) == ([], [])


def test_a_chain_ends_where_its_tokens_are_too_unlikely_to_all_be_accepted() -> None:
    pool = NgramPool(orders=(2,))
    pool.feed([1, 2, *range(10, 30), 3])
    tokens, _ = pool.draft([0, 10, 11], max_len=16, acceptance=lambda order, depth: 0.2)
    assert tokens == [12, 13, 14, 15, 16]  # 0.2 ** 5 = 3.2e-4 is the first reach below REACH_FLOOR (1e-3)
    assert len(pool.draft([0, 10, 11], max_len=16, acceptance=lambda order, depth: 0.9)[0]) == 16
    model = CostModel()
    for _ in range(30):
        model.learn_lookup([2, 2], 0)  # the pool's bigrams never accepted
    assert len(Lookup(model, pool).candidate([0, 10, 11])[0]) < 16


def test_vector_and_token_by_token_feeding_agree() -> None:
    rng = np.random.default_rng(3)
    seq = rng.integers(0, 50, size=400).tolist()
    a, b = NgramPool(bits=14), NgramPool(bits=14)
    a.feed(seq)  # long: vectorised
    for i in range(1, len(seq) + 1):
        b.feed(seq[:i], start=i - 1)  # one token at a time
    assert np.array_equal(a.next, b.next) and np.array_equal(a.print, b.print)
    assert a.used == b.used


def test_collisions_read_as_nothing_and_memory_stays_constant() -> None:
    pool = NgramPool(orders=(2,), bits=6)  # 64 entries: most n-grams collide
    rng = np.random.default_rng(0)
    seq = rng.integers(0, 1000, size=5000).tolist()
    pool.feed(seq)
    assert pool.next.shape == (64,) and pool.used * 2 <= pool.size  # cleared when half full
    last: dict[tuple[int, int], int] = {}
    for i in range(2, len(seq)):
        last[(seq[i - 2], seq[i - 1])] = seq[i]
    wrong = sum(1 for gram, nxt in last.items() if (hit := pool.predict(list(gram))) and hit[0] != nxt)
    assert wrong <= 2  # a 32-bit fingerprint lets through about one collision in 4 billion


def test_remembered_predictions_are_the_ones_the_pool_would_make_now() -> None:
    # A small vocabulary and a small table: tokens are overwritten, slots collide and the table is cleared, while
    # each draft reads predictions remembered from earlier ones (a write to any slot they read must drop them).
    rng = np.random.default_rng(11)
    seq = rng.integers(0, 12, size=3000).tolist()
    pool, fresh = NgramPool(bits=8), NgramPool(bits=8)
    for p in (pool, fresh):
        p.feed(seq[:40])
    worked, asked = 0, 0
    for end in range(41, len(seq)):
        for p in (pool, fresh):
            p.feed(seq[:end], start=end - 1)
        fresh._forget()  # every prediction worked out from the table as it is
        before = pool._worked
        assert pool.draft(seq[:end], max_len=16) == fresh.draft(seq[:end], max_len=16)
        worked += pool._worked - before if pool._worked >= before else pool._worked
        asked += fresh._worked
    assert worked < 0.8 * asked  # (without the memo every prediction asked is worked out)


def test_a_new_conversation_starts_the_pool_afresh_and_a_next_turn_extends_it() -> None:
    look = Lookup(CostModel())
    look.start([1, 2, 3, 4, 2, 3])
    assert look.pool.predict([2, 3]) == (4, 2)
    look.start([1, 2, 3, 4, 2, 3, 9, 9])  # the next turn: fed incrementally
    assert look.pool.predict([3, 9]) == (9, 2)
    look.start([1, 2, 7])  # another conversation: nothing of the first remains
    assert look.pool.predict([2, 3]) is None


def fed_lookup(model: CostModel) -> Lookup:
    look = Lookup(model, NgramPool(orders=(2, 3)))
    look.pool.feed(TRUTH[:2000])  # the pool knows the fake target's whole continuation
    return look


def test_lookup_mode_drafts_long_when_the_pool_knows_the_reply() -> None:
    model = CostModel()
    for _ in range(5):
        model.add_verify(1, 0.1)
        model.add_verify(17, 0.12)
    target = FakeTarget()
    target.committed = TRUTH[:3]
    mode = LookupMode(Steps(target, None), fed_lookup(model), greedy=True)
    rounds = [mode.step() for _ in range(10)]
    assert all(r.mode == "lookup" and r.speculator == NGRAM for r in rounds)
    # the first draft is cut where the prior acceptance stops paying (the fake's verify times then steer it)
    assert 0 < rounds[0].drafted < 16 and all(r.drafted > 1 for r in rounds)
    assert all(r.accepted == r.drafted for r in rounds)
    assert target.committed == TRUTH[: len(target.committed)]
    assert model.lookup_acceptance(3) > 0.9


def test_lookup_backs_off_to_plain_steps_when_drafts_do_not_pay() -> None:
    model = CostModel()
    for _ in range(5):
        model.add_verify(1, 0.1)
        model.add_verify(2, 0.15)  # verifying one more token costs 50 % more: only a likely draft pays
    look = Lookup(model, NgramPool(orders=(2,)))
    context = [7, 8, 1, 2, 3, 4, 5, 1, 2]
    draft, rate = look.choose(context)
    assert draft.tokens == [] and abs(rate - 10.0) < 1e-9  # a plain step: 1 token per 0.1 s
    for _ in range(50):
        model.learn_lookup([2], 1)  # bigram drafts always accepted
    draft, rate = look.choose(context)
    assert draft.tokens[:1] == [3] and rate > 10.0


def _costly_widths() -> CostModel:
    model = CostModel()
    for _ in range(5):
        model.add_verify(1, 0.1)
        model.add_verify(2, 0.15)  # one more token costs 50 %: only a likely draft pays
    return model


def test_a_pool_that_keeps_predicting_wrong_never_costs_a_verify() -> None:
    model = _costly_widths()
    look = Lookup(model, NgramPool(orders=(2,)))
    context = [1, 2, 3, 1, 2]
    drafted = 0
    for i in range(40):  # after "1 2" the target emits a new token every time: the pool is always wrong
        drafted += len(look.propose(context).tokens)
        context = [*context, 100 + i, 1, 2]
    assert drafted == 0
    assert model.lookup_acceptance(2) < 0.1  # scored for free against what the target emitted


def test_an_undrafted_chain_that_comes_true_starts_the_drafts() -> None:
    model = _costly_widths()
    look = Lookup(model, NgramPool(orders=(2,)))
    context = [5, 6, 1, 2, 3, 4, 8, 1, 2]  # after "1 2" the pool predicts 3 4 8 1 2 3 ...
    assert look.propose(context).tokens == []  # the prior alone does not pay for a wider verify
    before = model.lookup_acceptance(2)
    for _ in range(6):  # plain steps emit exactly the chain, a token at a time
        context = [*context, look.pool.predict(context[-2:])[0]]  # type: ignore[index]
        look.propose(context)
    assert model.lookup_acceptance(2) > before
    assert len(look.propose(context).tokens) >= 2  # now a draft pays


def test_sampled_lookup_drafts_carry_one_hot_q() -> None:
    look = Lookup(CostModel(), NgramPool(orders=(2,)))
    d = look.propose([1, 2, 3, 1, 2], greedy=False)
    assert d.tokens and d.q is not None and len(d.q) == len(d.tokens)
    assert all(q.prob(t) == 1.0 for q, t in zip(d.q, d.tokens, strict=True))


def test_lookup_rounds_teach_the_cost_model() -> None:
    model = CostModel()
    for width in range(1, 18):  # measured before: every round's prediction comes from measured figures
        model.add_verify(width, 0.1 + 0.001 * width)
    target = FakeTarget()
    target.committed = TRUTH[:3]
    mode = LookupMode(Steps(target, None), fed_lookup(model), greedy=True)
    rounds = [mode.step() for _ in range(6)]
    assert model.tallies[Plan("lookup")].n == 6
    assert all(rr.drafted for rr in rounds)
    assert all(model.verify[rr.drafted + 1].n > 1 for rr in rounds)  # each draft measured a verify of its width


def test_a_chains_first_token_is_learnt_apart_from_its_continuation() -> None:
    model = _costly_widths()
    model.add_verify(5, 0.2)  # verifying 5 tokens costs 2x one
    for _ in range(40):  # the chain's first token is right half the time; after it, the copy always is
        model.learn_lookup([4, 4, 4, 4], 4)
        model.learn_lookup([4, 4, 4, 4], 0)
    assert model.lookup_acceptance(4, 0) < 0.55 < 0.95 < model.lookup_acceptance(4, 3)
    assert model.lookup_best([4])[0] == 0  # one guessed token does not pay a 50 % wider verify
    assert model.lookup_best([4, 4, 4, 4])[0] == 4  # a copy in progress does


def test_a_deeper_place_starts_from_the_shallower_ones_acceptance() -> None:
    model = CostModel()
    for _ in range(20):
        model.learn_lookup([3], 1)  # only first places seen, all right
    assert model.lookup_acceptance(3, 2) > 0.9 > 0.55  # not the order's prior


def test_ar_steps_through_a_copy_teach_the_chains_later_places() -> None:
    model = _costly_widths()
    look = Lookup(model, NgramPool(orders=(2,)))
    context = [5, 6, *range(10, 30), 5, 6]  # the pool will predict 10 11 12 ... after "5 6"
    look.propose(context)
    for _ in range(8):  # plain steps emit the copied tokens one at a time
        context = [*context, look.pool.predict(context[-2:])[0]]  # type: ignore[index]
        look.propose(context)
    assert model.lookup_accept[(2, 3)].seen >= 4  # the oldest chain kept waiting and was scored at its depth
    assert model.lookup_accept[(2, 0)].seen > 7  # and every step's new chain at its first place (8, decayed)


def test_a_pool_draft_must_promise_a_margin_over_the_plain_step() -> None:
    def model_with(acceptance: float) -> CostModel:
        model = _costly_widths()  # ar 10 tok/s; one pool token: (1 + a) / 0.15 s
        model.lookup_accept[(2, 0)] = r = Ratio(0.4)
        r.hits, r.seen = acceptance * 100 - 0.8, 98.0
        return model

    assert model_with(0.53).lookup_best([2]) == (0, pytest.approx(10.0))  # 10.2 tok/s, 2 % over the plain step
    assert model_with(0.65).lookup_best([2])[0] == 1  # 11 tok/s


def test_unmeasured_lookup_rounds_are_corrected_as_ar_rounds_are() -> None:
    model = _costly_widths()
    for _ in range(5):  # ar rounds really take 0.12 s where their verify took 0.1 s (host work around it)
        model.observe(Plan("ar"), 1, 0.12, 1.0, 0.1)
    model.lookup_accept[(2, 0)] = r = Ratio(0.4)
    r.hits, r.seen = 0.56 * 100 - 0.8, 98.0  # one pool token: 10.4 tok/s before the correction, ar's 10
    length, rate = model.lookup_best([2])
    assert length == 0 and abs(rate - 10.0 / 1.2) < 1e-6  # 4 % over ar once both pay the same host work


def test_a_new_reply_does_not_score_the_previous_replys_chain() -> None:
    model = CostModel()
    look = Lookup(model, NgramPool(orders=(2,)))
    context = [1, 2, 3, 1, 2]  # after "1 2" the pool predicts 3 1 2 ...
    look.start(context)
    look.propose(context)
    turn = [*context, 9, 9, 9]  # the next turn's prompt: the user's text, which the target never emitted
    look.start(turn)
    look.propose(turn)
    assert (2, 0) not in model.lookup_accept


def test_a_draft_carries_the_tokens_its_round_is_expected_to_emit() -> None:
    model = _costly_widths()
    for width in range(3, 18):
        model.add_verify(width, 0.1 + 0.01 * width)
    look = fed_lookup(model)
    for n, right in [(3, 4), (40, 0), (90, 2)]:
        model.learn_lookup([3, 3, 3, 3], right)
        d, _ = look.choose(TRUTH[:n])
        assert d.tokens  # the pool knows the continuation: a draft is worth its verify
        assert d.expected == model.lookup_expected(d.orders)[-1] > 1.0  # what auto weighs against its plan
    empty, _ = Lookup(model).choose([5, 6, 7])  # an empty pool: an ar step, expected to emit its one token
    assert not empty.tokens and empty.expected == 1.0


def test_rounds_the_pool_cannot_draft_in_are_folded_at_the_replys_end_as_they_came() -> None:
    model = CostModel()
    for _ in range(3):
        model.add_verify(1, 0.1)
    reference = copy.deepcopy(model)
    target = FakeTarget()
    target.committed = TRUTH[:3]  # TRUTH never repeats: the pool has nothing to draft
    look = Lookup(model, NgramPool(orders=(2, 3)))
    look.start(target.committed)
    mode = LookupMode(Steps(target, None), look, greedy=True)
    rounds = [mode.step() for _ in range(12)]
    assert all(not r.drafted and r.draft is not None and r.draft.tokens == [] for r in rounds)
    assert model.verify[1].n == 3  # a plain step's round reads and writes no figure, as an ar round
    mode.close()
    for rr in rounds:  # each round as it would have been folded at once
        reference.add_verify(1, rr.verify_s)
        reference.observe(Plan("ar"), len(rr.tokens), rr.verify_s + rr.wait_s, 1.0, reference.t_verify(1))
    assert model.verify[1].n == reference.verify[1].n == 15
    assert model.verify[1].value == reference.verify[1].value
    assert model.pace.get(1.0) == reference.pace.get(1.0)
    assert model.tallies[Plan("ar")].n == reference.tallies[Plan("ar")].n == 12


def test_a_decision_reads_the_model_with_every_plain_step_folded_first() -> None:
    model = _costly_widths()
    look = Lookup(model, NgramPool(orders=(2,)))
    context = [50, 51, 52]
    for i in range(5):  # plain steps: the pool knows nothing after these
        assert look.propose(context).tokens == []
        look.learn(RoundResult([60 + i], "lookup", None, 0, 0, verify_s=0.1, draft=None))
        context = [*context, 60 + i]
    assert model.verify[1].n == 5  # kept for later
    look.choose([*context, 50, 51])  # "50 51" was followed by 52: a chain to weigh against a plain step
    assert model.verify[1].n == 10

"""Pure-function parts of the engine: sampling transforms, verification, fan-out, cache, n-gram."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.ranks import top_ids
from engine.core.sampling import Dist, SamplingParams, sample, to_dist
from engine.errors import ParameterError
from engine.speculative import fanout, ngram
from engine.speculative.speccache import Branch, SpecCache
from engine.speculative.verify import residual, verify_greedy, verify_sampled


def never_eog(_t: int) -> bool:
    return False


def rows_for(argmaxes: list[int], vocab: int = 8) -> np.ndarray:
    rows = np.zeros((len(argmaxes), vocab), dtype=np.float32)
    for i, a in enumerate(argmaxes):
        rows[i, a] = 5.0
    return rows


class TestSampling:
    def test_top_k_top_p_min_p(self) -> None:
        row = np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05], dtype=np.float32))
        d = to_dist(row, SamplingParams(temperature=1.0, top_k=3))
        assert d.ids.tolist() == [0, 1, 2]
        assert d.probs.sum() == pytest.approx(1.0)
        d = to_dist(row, SamplingParams(temperature=1.0, top_p=0.7))
        assert d.ids.tolist() == [0, 1]  # 0.5 + 0.2 reaches 0.7
        d = to_dist(row, SamplingParams(temperature=1.0, min_p=0.3))
        assert d.ids.tolist() == [0, 1]  # kept: p >= 0.3 * 0.5
        d = to_dist(row, SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0))
        assert np.allclose(d.dense(5), [0.5, 0.2, 0.15, 0.1, 0.05], atol=1e-6)

    def test_temperature_sharpens(self) -> None:
        row = np.array([1.0, 0.0], dtype=np.float32)
        hot = to_dist(row, SamplingParams(temperature=2.0, min_p=0.0)).prob(0)
        cold = to_dist(row, SamplingParams(temperature=0.5, min_p=0.0)).prob(0)
        assert cold > hot > 0.5

    def test_sample_follows_distribution(self) -> None:
        d = Dist(np.array([3, 7]), np.array([0.25, 0.75]))
        rng = np.random.default_rng(0)
        draws = [sample(d, rng) for _ in range(4000)]
        assert set(draws) == {3, 7}
        assert draws.count(7) / 4000 == pytest.approx(0.75, abs=0.03)

    def test_top_ids_ties_go_to_lowest_id(self) -> None:
        row = np.array([1.0, 3.0, 3.0, 2.0, 3.0] + [0.0] * 100, dtype=np.float32)
        assert top_ids(row, 4).tolist() == [1, 2, 4, 3]

    @pytest.mark.parametrize(
        "kwargs", [{"temperature": -1}, {"top_p": 0.0}, {"top_k": -2}, {"min_p": 1.0}, {"seed": -1}]
    )
    def test_bad_parameters(self, kwargs: dict[str, float]) -> None:
        with pytest.raises(ParameterError):
            SamplingParams(**kwargs)  # type: ignore[arg-type]


class TestVerify:
    def test_greedy_accepts_matching_prefix(self) -> None:
        v = verify_greedy([2, 3, 4], rows_for([2, 3, 5, 6]), never_eog)
        assert (v.accepted, v.next_token) == (2, 5)
        assert v.tokens([2, 3, 4]) == [2, 3, 5]

    def test_greedy_all_accepted_gives_bonus(self) -> None:
        v = verify_greedy([2, 3], rows_for([2, 3, 7]), never_eog)
        assert (v.accepted, v.next_token) == (2, 7)

    def test_greedy_stops_at_eog(self) -> None:
        v = verify_greedy([2, 0, 4], rows_for([2, 0, 4, 1]), lambda t: t == 0)
        assert v.tokens([2, 0, 4]) == [2, 0]

    def test_sampled_accepts_when_p_equals_q(self) -> None:
        rows = np.log(np.full((3, 4), 0.25, dtype=np.float32))
        params = SamplingParams(temperature=1.0)
        q = [to_dist(rows[0], params), to_dist(rows[1], params)]
        v = verify_sampled([1, 2], q, rows, params, np.random.default_rng(0), never_eog)
        assert v.accepted == 2

    def test_sampled_rejects_token_target_forbids(self) -> None:
        params = SamplingParams(temperature=1.0, top_k=1)
        rows = rows_for([3, 3])
        q = [Dist.one_hot(2)]
        v = verify_sampled([2], q, rows, params, np.random.default_rng(0), never_eog)
        assert (v.accepted, v.next_token) == (0, 3)

    def test_a_one_hot_draft_is_decided_by_the_targets_own_sample(self) -> None:
        """One random number per emitted token, as plain sampling draws: accepted drafts and the token after
        them are the plain samples of the same generator, whatever the draft proposed."""
        params = SamplingParams(temperature=1.0)
        rows = np.log(np.array([[0.5, 0.3, 0.2]] * 4, dtype=np.float32))
        for seed in range(200):
            plain = np.random.default_rng(seed)
            expect = [sample(to_dist(rows[0], params), plain) for _ in range(4)]
            draft = [expect[0], expect[1], (expect[2] + 1) % 3]  # two right, the third wrong
            v = verify_sampled(draft, [Dist.one_hot(d) for d in draft], rows, params,
                               np.random.default_rng(seed), never_eog)
            assert v.tokens(draft) == expect[:3]

    def test_residual(self) -> None:
        p = Dist(np.array([0, 1, 2]), np.array([0.5, 0.3, 0.2]))
        q = Dist(np.array([0, 2]), np.array([0.7, 0.3]))
        r = residual(p, q)
        assert r.ids.tolist() == [1]
        assert r.probs.tolist() == [1.0]

    def test_sampled_single_step_distribution_is_exact(self) -> None:
        """One-token speculative sampling reproduces p for an arbitrary q (checked by frequency)."""
        params = SamplingParams(temperature=1.0)
        p_row = np.log(np.array([0.6, 0.3, 0.1], dtype=np.float32))
        q_row = np.log(np.array([0.1, 0.2, 0.7], dtype=np.float32))
        q = to_dist(q_row, params)
        rng = np.random.default_rng(7)
        counts = np.zeros(3)
        n = 20000
        for _ in range(n):
            d = sample(q, rng)
            v = verify_sampled([d], [q], np.stack([p_row, p_row]), params, rng, never_eog)
            counts[v.tokens([d])[0]] += 1
        assert np.allclose(counts / n, [0.6, 0.3, 0.1], atol=0.015)


class TestFanout:
    def test_uniform_sums_to_budget(self) -> None:
        assert fanout.uniform(3, 8) == [2, 2, 2, 2]
        assert fanout.uniform(3, 6) == [2, 2, 1, 1]
        assert sum(fanout.uniform(5, 7)) == 7

    def test_geometric_shrinks_with_depth_and_bumps_at_k(self) -> None:
        f = fanout.geometric(4, 40, acceptance=0.6)
        assert sum(f) == 40
        assert f[0] >= f[1] >= f[2] >= f[3]
        assert f[4] > f[3]

    def test_geometric_weights_follow_formula(self) -> None:
        a, r, k = 0.7, 1.0, 3
        w = fanout.geometric_weights(k, a, r)
        assert w[1] / w[0] == pytest.approx(a ** 0.5)
        assert w[3] / w[2] == pytest.approx(a ** 0.5 * (1 - a) ** -0.5)

    def test_small_budget_goes_to_likely_outcomes(self) -> None:
        # fewer branches than outcome positions: the all-accepted bonus and k=0 come first
        assert fanout.allocate(3, 2, geometric_on=False, acceptance=0.8) == [1, 0, 0, 1]
        assert fanout.allocate(3, 1, geometric_on=False, acceptance=0.9) == [0, 0, 0, 1]
        assert fanout.allocate(3, 8, geometric_on=False, acceptance=0.8) == [2, 2, 2, 2]

    def test_low_acceptance_puts_budget_early(self) -> None:
        f = fanout.geometric(4, 10, acceptance=0.1)
        assert f[0] == max(f)


class TestSpecCache:
    def test_lookup_requires_matching_base_and_depth(self) -> None:
        cache = SpecCache()
        cache.reset(base_len=10)
        b = Branch(accepted=2, token=42, seq_id=1, pos0=12, tokens=[5, 6])
        cache.add(b)
        cache.add(Branch(accepted=0, token=9, seq_id=2, pos0=10))  # never drafted: depth 0
        assert cache.lookup(13, 2, 42) is b
        assert cache.lookup(13, 2, 43) is None
        assert cache.lookup(12, 2, 42) is None  # wrong committed length
        assert cache.lookup(11, 0, 9) is None  # depth 0 is a miss
        cache.reset()
        assert cache.lookup(13, 2, 42) is None
        assert len(cache) == 0


class TestNgram:
    def test_finds_continuation_of_latest_match(self) -> None:
        toks = [1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 2, 3]
        assert ngram.lookup(toks, max_ngram=2, num_pred=2) == [7, 8]

    def test_no_match(self) -> None:
        assert ngram.lookup([1, 2, 3, 4], num_pred=3) == []

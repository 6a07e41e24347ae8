"""Position-keyed Gumbel-max sampling (engine/core/gumbel.py) and verification by comparison, without a model.

Over many seeds the token drawn at a position follows p (chi-square), two positions are independent, the draw
depends on the candidates' ids and probabilities only (not on their order), and a coupled verdict emits the
target's own draws whatever the draft was.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy.stats import chisquare

from engine.core.gumbel import gumbel_order, gumbel_sample, uniforms
from engine.core.sampling import Dist, SamplingParams, to_dist
from engine.speculative.verify import LogitRows, verify_coupled

N = 20000
ALPHA = 1e-3
P = Dist(np.array([7, 3, 11, 0, 5, 9], dtype=np.int64), np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04]))


def _pvalue(draws: list[int], dist: Dist) -> float:
    counts = Counter(draws)
    assert set(counts) <= set(dist.ids.tolist())
    return float(chisquare([counts[int(t)] for t in dist.ids], dist.probs * len(draws)).pvalue)


def test_a_position_over_many_seeds_follows_p() -> None:
    assert _pvalue([gumbel_sample(P, seed, 40) for seed in range(N)], P) > ALPHA


def test_the_positions_of_one_seed_follow_p() -> None:
    assert _pvalue([gumbel_sample(P, 12345, pos) for pos in range(N)], P) > ALPHA


def test_the_test_has_power_another_distribution_fails_it() -> None:
    q = Dist(P.ids, np.array([0.35, 0.28, 0.15, 0.1, 0.07, 0.05]))
    assert _pvalue([gumbel_sample(q, seed, 40) for seed in range(N)], P) < ALPHA


def test_neighbouring_positions_are_independent() -> None:
    pairs = Counter((gumbel_sample(P, seed, 8), gumbel_sample(P, seed, 9)) for seed in range(N))
    ids = P.ids.tolist()
    observed = [pairs[(a, b)] for a in ids for b in ids]
    expected = np.outer(P.probs, P.probs).ravel() * N
    assert float(chisquare(observed, expected).pvalue) > ALPHA


def test_noise_belongs_to_the_token_not_its_place_in_the_list() -> None:
    order = np.array([3, 0, 5, 1, 4, 2])
    shuffled = Dist(P.ids[order], P.probs[order])
    for seed in range(200):
        assert gumbel_sample(shuffled, seed, 17) == gumbel_sample(P, seed, 17)
        assert gumbel_order(shuffled, seed, 17, 6).tolist() == gumbel_order(P, seed, 17, 6).tolist()
    u = uniforms(5, 17, P.ids)
    assert ((u > 0.0) & (u < 1.0)).all()
    assert u.tolist() == uniforms(5, 17, P.ids).tolist()  # keyed, not drawn: the same numbers again
    assert u.tolist() != uniforms(6, 17, P.ids).tolist() and u.tolist() != uniforms(5, 18, P.ids).tolist()


def test_the_order_starts_with_the_sample_and_keeps_every_candidate_once() -> None:
    for seed in range(100):
        order = gumbel_order(P, seed, 3, 6)
        assert int(order[0]) == gumbel_sample(P, seed, 3)
        assert sorted(order.tolist()) == sorted(P.ids.tolist())


@pytest.mark.parametrize("sampling", [SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=3),
                                      SamplingParams(temperature=0.7, top_k=5, top_p=0.9, seed=4)])
def test_a_coupled_verdict_is_the_targets_own_draws_whatever_the_draft(sampling: SamplingParams) -> None:
    rng = np.random.default_rng(0)
    for trial in range(200):
        rows = rng.normal(size=(5, 32)).astype(np.float32) * 2.0
        position = 50 + trial
        own = [gumbel_sample(to_dist(rows[i], sampling), sampling.seed, position + i) for i in range(5)]
        keep = int(rng.integers(0, 5))  # the draft agrees with the target's draws this far, then guesses
        draft = own[:keep] + rng.integers(0, 32, size=4 - keep).tolist()
        v = verify_coupled(draft, LogitRows(rows), sampling, position, lambda _t: False)
        assert v.tokens(draft) == own[: v.accepted + 1]
        assert v.accepted >= keep

"""min-p's head: the truncated distribution read off the few ids min-p keeps must be the general path's, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.ranks import Ranks
from engine.core.sampling import Dist, SamplingParams, dist_top, min_p_head, to_dist, truncate

VOCAB = 151_936  # the offline pair's row width


def general(row: np.ndarray, params: SamplingParams) -> Dist:
    """to_dist without the head: top-k's ids ranked, then truncate's walk."""
    ids, vals = Ranks(row, params.top_k).top(params.top_k)
    return truncate(ids, vals.astype(np.float64) / params.temperature, params)


def dense(row: np.ndarray, params: SamplingParams) -> tuple[list[int], np.ndarray]:
    """The settings applied by the book over a full sort: temperature, top-k, top-p, min-p."""
    order = np.lexsort((np.arange(len(row)), -row))[: params.top_k]
    z = row[order].astype(np.float64) / params.temperature
    w = np.exp(z - z[0])
    p = w / w.sum()
    keep = int(np.searchsorted(np.cumsum(p), params.top_p)) + 1 if params.top_p < 1.0 else len(p)
    keep = min(keep, int(np.sum(w >= params.min_p)))
    kept = w[:keep]
    return order[:keep].tolist(), kept / kept.sum()


def peaked_row(rng: np.random.Generator, n: int = VOCAB) -> np.ndarray:
    """A confident model's row: noise, and a few ids a few logits above it (sometimes tied)."""
    row = (rng.standard_normal(n) * 2.0).astype(np.float32)
    lead = rng.integers(0, n, size=int(rng.integers(1, 6)))
    row[lead] = row.max() + rng.choice([0.0, 0.5, 2.0, 6.0], size=len(lead)).astype(np.float32)
    return row


@pytest.mark.parametrize("temperature,top_p,min_p", [(0.8, 0.95, 0.05), (0.7, 0.9, 0.05), (1.0, 0.5, 0.2),
                                                     (1.5, 1.0, 0.01)])
def test_the_head_is_the_general_paths_distribution_bit_for_bit(temperature: float, top_p: float,
                                                                 min_p: float) -> None:
    params = SamplingParams(temperature=temperature, top_k=40, top_p=top_p, min_p=min_p)
    rng = np.random.default_rng(7)
    read_off = 0
    for _ in range(150):
        row = peaked_row(rng)
        head = min_p_head(Ranks(row, params.top_k), params)
        got, want = to_dist(row, params), general(row, params)
        assert got.ids.tolist() == want.ids.tolist()
        assert np.array_equal(got.probs, want.probs)
        assert got.ids.dtype == want.ids.dtype
        ids, probs = dense(row, params)
        assert got.ids.tolist() == ids and np.allclose(got.probs, probs, rtol=1e-12, atol=0)
        read_off += head is not None
    assert read_off >= 50  # the head decided most rows, so the comparison above is of the head


def test_dist_top_takes_its_best_ids_from_the_head_where_it_holds_enough() -> None:
    params = SamplingParams(temperature=0.8)
    rng = np.random.default_rng(3)
    for _ in range(100):
        row = peaked_row(rng)
        for count in (1, 2, 3, 8):
            d, top = dist_top(row, params, count)
            ids = Ranks(row, max(params.top_k, count)).top(max(params.top_k, count))[0]
            assert top.tolist() == ids[:count].tolist()
            assert np.array_equal(d.probs, general(row, params).probs)


def test_top_p_cutting_before_min_p_is_left_to_the_general_path() -> None:
    # Three ids carry nearly all the weight, evenly: min-p keeps all three, top-p 0.5 only two.
    row = np.zeros(VOCAB, dtype=np.float32)
    row[[10, 20, 30]] = 20.0
    params = SamplingParams(temperature=1.0, top_k=40, top_p=0.5, min_p=0.05)
    assert min_p_head(Ranks(row, 40), params) is None
    assert to_dist(row, params).ids.tolist() == [10, 20]


def test_more_ids_than_top_k_within_min_ps_bound_are_cut_by_top_k() -> None:
    row = np.zeros(VOCAB, dtype=np.float32)
    row[:100] = 5.0  # 100 tied ids, all kept by min-p
    params = SamplingParams(temperature=1.0, top_k=40, top_p=1.0, min_p=0.05)
    assert min_p_head(Ranks(row, 40), params) is None
    d = to_dist(row, params)
    assert d.ids.tolist() == list(range(40)) and np.allclose(d.probs, 1 / 40)


def test_an_id_just_past_min_ps_bound_is_dropped_as_the_general_path_drops_it() -> None:
    params = SamplingParams(temperature=1.0, top_k=40, top_p=1.0, min_p=0.05)
    below = np.float32(np.log(0.05))
    while np.exp(np.float64(below)) >= 0.05:
        below = np.nextafter(below, np.float32(-1))
    row = np.full(VOCAB, -30.0, dtype=np.float32)
    row[5] = 0.0
    row[6] = below  # the largest float32 whose weight is under min_p
    row[7] = np.nextafter(below, np.float32(1))  # the next one up: kept
    assert min_p_head(Ranks(row, 40), params) is not None
    got, want = to_dist(row, params), general(row, params)
    assert got.ids.tolist() == want.ids.tolist() == [5, 7]
    assert np.array_equal(got.probs, want.probs)

"""The two sampling paths agree: numpy on the logits rows in place, and llama.cpp's sampler chain.

Host-path selections are checked against plain full-row references; on a real tiny model the backend
chain's token, best ids and truncated distribution are checked against the host path's on the same
decode, and outputs read after the next decode are refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.backend import Model
from engine.core.context import Context, ContextParams
from engine.core.outputs import GREEDY, chain_spec
from engine.core.ranks import top_ids
from engine.core.sampling import Dist, SamplingParams, to_dist
from tests.tiny_models import TinyPair


def _ref_top(row: np.ndarray, count: int) -> list[int]:
    order = np.lexsort((np.arange(len(row)), -row))
    return order[:count].tolist()


def _ref_dist(row: np.ndarray, p: SamplingParams) -> Dist:
    z = row.astype(np.float64) / p.temperature
    order = np.lexsort((np.arange(len(z)), -z))
    if 0 < p.top_k < len(z):
        order = order[: p.top_k]
    w = np.exp(z[order] - z[order[0]])
    cum = np.cumsum(w) / w.sum()
    keep = min(int(np.searchsorted(cum, p.top_p, side="left")) + 1, len(order)) if p.top_p < 1.0 else len(order)
    ids, w = order[:keep], w[:keep]
    mask = w >= p.min_p * w[0]
    return Dist(ids[mask].astype(np.int64), w[mask] / w[mask].sum())


@pytest.mark.parametrize("count", [1, 2, 6, 40, 300])
def test_top_ids_matches_a_full_sort(count: int) -> None:
    rng = np.random.default_rng(count)
    for _ in range(20):
        row = rng.standard_normal(151_936).astype(np.float32)
        row[rng.integers(0, len(row), 50)] = row.max()  # ties at the top go to the lowest ids
        assert top_ids(row, count).tolist() == _ref_top(row, count)


@pytest.mark.parametrize("n", [151_936 + 37, 50_000, 9_000])
def test_top_ids_past_the_grid_and_on_odd_sizes(n: int) -> None:
    # Rows whose length is no multiple of the grid's rows: the ids past the grid are candidates too.
    rng = np.random.default_rng(n)
    for trial in range(10):
        row = np.round(3 * rng.standard_normal(n)).astype(np.float32)  # many ties
        if trial % 2:
            row[-5:] = row.max() + 1  # the best ids lie past the grid
        for count in (2, 6, 40):
            assert top_ids(row, count).tolist() == _ref_top(row, count)


def test_a_row_rewritten_in_place_is_read_afresh() -> None:
    # The next decode writes its logits over the same buffer: the grid kept for that row must see them.
    rng = np.random.default_rng(3)
    row = rng.standard_normal(151_936).astype(np.float32)
    for _ in range(3):
        assert top_ids(row, 40).tolist() == _ref_top(row, 40)
        row[:] = rng.standard_normal(len(row)).astype(np.float32)


@pytest.mark.parametrize("params", [
    SamplingParams(temperature=0.8),
    SamplingParams(temperature=0.7, top_k=0, top_p=0.9, min_p=0.05),
    SamplingParams(temperature=1.3, top_k=0, top_p=0.5, min_p=0.0),
    SamplingParams(temperature=0.5, top_k=3, top_p=1.0, min_p=0.0),
])
def test_to_dist_matches_a_full_sort(params: SamplingParams) -> None:
    rng = np.random.default_rng(5)
    for scale in (0.3, 1.0, 4.0):  # flat to peaked
        row = (scale * rng.standard_normal(20_000)).astype(np.float32)
        got, want = to_dist(row, params), _ref_dist(row, params)
        assert got.ids.tolist() == want.ids.tolist()
        assert np.allclose(got.probs, want.probs, rtol=1e-9, atol=0)


@pytest.fixture(scope="module")
def ctx(tiny: TinyPair) -> Context:
    m = Model(tiny.target)
    return Context(m, ContextParams(n_ctx=256, n_batch=64, n_seq_max=2, kv_unified=True))


def test_backend_chain_agrees_with_the_host_path(ctx: Context) -> None:
    prompt = list(range(5, 40))
    positions = range(len(prompt))
    outs = list(range(len(prompt) - 6, len(prompt)))
    sampled = SamplingParams(temperature=0.8)
    assert chain_spec(SamplingParams(), ctx.n_vocab, top_count=1).kind == GREEDY  # plain sd's draft: the id alone
    for params, top_count in ((SamplingParams(), 0), (SamplingParams(), 1), (SamplingParams(), 6), (sampled, 6)):
        ctx.set_sampling(None)
        ctx.clear()
        host = ctx.decode_out(prompt, positions, 0, outs)
        want = [(host.argmax(r), host.top(r, 6).tolist(), host.dist(r, sampled)) for r in range(len(outs))]
        ctx.set_sampling(chain_spec(params, ctx.n_vocab, top_count=top_count))
        ctx.clear()
        out = ctx.decode_out(prompt, positions, 0, outs)
        assert out.backend
        for r, (best, top, dist) in enumerate(want):
            assert out.argmax(r) == best
            if top_count == 1:  # a greedy chain: the best id alone
                assert out.top(r, 1).tolist() == top[:1]
                with pytest.raises(RuntimeError, match="best id alone"):
                    out.top(r, 6)
            elif top_count:
                assert out.top(r, 6).tolist() == top[: len(out.top(r, 6))]
            if not params.greedy:
                got = out.dist(r, sampled)
                assert sorted(got.ids.tolist()) == sorted(dist.ids.tolist())
                assert np.allclose(got.dense(ctx.n_vocab), dist.dense(ctx.n_vocab), atol=1e-5)
    ctx.set_sampling(None)


CHAINS = [(SamplingParams(), 6), (SamplingParams(temperature=1.5, top_k=20, top_p=1.0, min_p=0.1), 0),
          (SamplingParams(temperature=0.7, top_k=8, top_p=1.0, min_p=0.0), 0), (SamplingParams(temperature=0.8), 0)]


def _branch_rows(ctx: Context, params: SamplingParams, top_count: int, backend: bool) -> list[object]:
    """A prompt on sequence 0, then one token on sequence 1, on 0, on both (a tree's branch, the glue, a level)."""
    prompt = list(range(5, 20))
    n = len(prompt)
    ctx.set_sampling(chain_spec(params, ctx.n_vocab, top_count=top_count) if backend else None)
    ctx.clear()
    ctx.prefill_out(prompt, 0)
    ctx.seq_cp(0, 1, 0, n)
    rows: list[object] = []
    for seqs in ([1], [0], [0, 1]):
        out = ctx.decode_out([7 + s for s in seqs], [n] * len(seqs), seqs, range(len(seqs)))
        for r in range(len(seqs)):
            rows.append(out.top(r, top_count).tolist() if params.greedy else out.dist(r, params))
        for s in seqs:
            ctx.seq_rm(s, n, -1)
    ctx.set_sampling(None)
    return rows


@pytest.mark.parametrize(("params", "top_count"), CHAINS, ids=["top", "min-p", "temperature", "defaults"])
def test_backend_candidates_of_a_sequence_after_another(ctx: Context, params: SamplingParams, top_count: int) -> None:
    """Outputs on a sequence the previous decodes left without any: the chain's candidates are the host path's.
    (ggml reuses a graph's memory plan for a later graph of as many nodes; made while a sequence had no outputs, it
    put that sequence's top-k ids under later tensors, and the ids came back as the bits of min-p's logits.)"""
    host, backend = (_branch_rows(ctx, params, top_count, b) for b in (False, True))
    for want, got in zip(host, backend, strict=True):
        if isinstance(want, Dist) and isinstance(got, Dist):
            assert sorted(got.ids.tolist()) == sorted(want.ids.tolist())
            assert np.allclose(got.dense(ctx.n_vocab), want.dense(ctx.n_vocab), atol=1e-5)
        else:
            assert got == want


def test_outputs_are_refused_after_the_next_decode(ctx: Context) -> None:
    ctx.set_sampling(None)
    ctx.clear()
    first = ctx.decode_out([5, 6, 7], range(3))
    first.argmax(0)
    ctx.decode_out([8], [3])
    with pytest.raises(RuntimeError, match="decoded again"):
        first.argmax(0)


def test_decode_gives_real_logits_under_a_backend_chain(ctx: Context) -> None:
    ctx.set_sampling(None)
    ctx.clear()
    plain = ctx.decode([5, 6, 7], range(3))[0]
    ctx.set_sampling(chain_spec(SamplingParams(), ctx.n_vocab))
    ctx.clear()
    again = ctx.decode([5, 6, 7], range(3))[0]
    assert np.array_equal(plain, again)
    assert ctx.samplers.spec is not None  # put back after the call
    ctx.set_sampling(None)

"""Sampling transforms in numpy: greedy, temperature, top-k, top-p, min-p, with seeded generators.

A :class:`Dist` is a sparse next-token distribution (token ids and their probabilities, summing
to 1). The same :func:`to_dist` builds the target's p and the draft's q, so that verification
compares distributions made by identical transforms. Where llama.cpp samples in its graph (the
backend path, :mod:`engine.core.outputs`), :func:`dist_from_candidates` turns the candidates it
returns into the same :class:`Dist`.

The best ids of a row are found by :mod:`engine.core.ranks` without sorting the row; full-vocabulary work is left to
top-k 0, the one setting that asks for the whole vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from . import options as opt
from .ranks import FloatRow, IdRow, Ranks, top_ids

BACKEND_TOP_K = 256  # the largest top-k run by llama.cpp's sampler chain (more stays on the host path)


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Sampler settings, the one place they live. ``temperature == 0`` means greedy (argmax, ties to the lowest id)."""

    temperature: float = opt.TEMPERATURE.default
    top_k: int = opt.TOP_K.default
    top_p: float = opt.TOP_P.default
    min_p: float = opt.MIN_P.default
    seed: int = opt.SEED.default
    scheme: str = opt.SCHEME.default  # how sampled rounds draw and verify: coupled or rejection (engine.core.gumbel)
    # Constraints (engine.core.constraints), applied to the target's rows and mirrored on the draft's:
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, added logit); -100 bans, as in OpenAI's API
    presence_penalty: float = 0.0  # OpenAI's penalties, over the reply's own tokens
    frequency_penalty: float = 0.0
    grammar: str = ""  # GBNF the reply must follow; "" = free
    grammar_triggers: tuple[str, ...] = ()  # texts that engage the grammar (lazy: free until one is written)

    def __post_init__(self) -> None:
        opt.check_fields(self, ("temperature", "top_k", "top_p", "min_p", "seed", "scheme"))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def backend_ok(self) -> bool:
        """Whether llama.cpp's sampler chain can express these: not top-k 0 (all ids), nor a constraint (host rows)."""
        free = not (self.logit_bias or self.grammar or self.presence_penalty or self.frequency_penalty)
        return free and (self.greedy or 0 < self.top_k <= BACKEND_TOP_K)


@dataclass(frozen=True, slots=True)
class Dist:
    """A sparse distribution: ``ids`` (int64) and ``probs`` (float64, sum 1)."""

    ids: npt.NDArray[np.int64]
    probs: npt.NDArray[np.float64]

    def prob(self, token: int) -> float:
        hit = np.nonzero(self.ids == token)[0]
        return float(self.probs[hit[0]]) if len(hit) else 0.0

    def dense(self, n_vocab: int) -> npt.NDArray[np.float64]:
        out = np.zeros(n_vocab, dtype=np.float64)
        out[self.ids] = self.probs
        return out

    @staticmethod
    def one_hot(token: int) -> Dist:
        return Dist(np.array([token], dtype=np.int64), np.array([1.0]))


def argmax(row: FloatRow) -> int:
    return int(np.argmax(row))


_MIN_P_SLACK = 1e-3  # logits below min-p's bound that are still read: float rounding cannot reach past it
_MARGIN = 1.0 - 1e-9  # top-p's sums over all of top-k's ids and over the ids read differ by rounding (~1e-16) only


def min_p_head(ranks: Ranks, params: SamplingParams) -> tuple[Dist, IdRow] | None:
    """:func:`to_dist` read off the ids min-p can keep (and those ids, best first), where they decide it.

    min-p keeps an id only if its weight exp((v - v_best) / T) is at least ``min_p``: only ids whose logit is
    within T * ln(1 / min_p) of the row's best. They are the first ids of top-k's order, found by one
    comparison with a bound (a confident model's row has one to a few). The result is :func:`truncate`'s
    float for float, unless there are more of them than top-k keeps, or top-p could cut before min-p does:
    top-p's total runs over all of top-k's ids, and the ids read bound it from below only. Then: None.
    """
    if params.min_p <= 0.0:
        return None
    ids, vals = ranks.above(ranks.best() + params.temperature * math.log(params.min_p) - _MIN_P_SLACK)
    if len(ids) > params.top_k:
        return None
    order = (-vals).argsort(kind="stable")
    ids = ids[order]
    logits = vals[order].astype(np.float64) / params.temperature
    weights = np.exp(logits - logits[0])
    w = weights.tolist()
    keep = _min_p_cut(w, params.min_p, len(w))
    if params.top_p < 1.0 and keep > 1 and sum(w[: keep - 1]) >= params.top_p * float(weights.sum()) * _MARGIN:
        return None
    kept = weights[:keep]
    return Dist(ids[:keep].astype(np.int64), kept / kept.sum()), ids


def to_dist(row: FloatRow, params: SamplingParams) -> Dist:
    """Apply temperature, then top-k, top-p and min-p to a logits row (best-first candidates).

    With top-k (the common case) only the k best ids are touched, and where min-p decides, only the ids it keeps.
    Top-k 0 (the whole vocabulary) is exact too: min-p first narrows the set that top-p must order (the two keep
    prefixes of the same order, so the result is the same), and the top-p set grows by partial selection.
    """
    if 0 < params.top_k < len(row):
        ranks = Ranks(row, params.top_k)
        head = min_p_head(ranks, params)
        if head is not None:
            return head[0]
        ids, vals = ranks.top(params.top_k)
        return truncate(ids, vals.astype(np.float64) / params.temperature, params)
    return _whole_vocabulary(row, params)


def dist_top(row: FloatRow, params: SamplingParams, count: int) -> tuple[Dist, IdRow]:
    """:func:`to_dist` and :func:`top_ids` ``count`` from one selection where top-k allows."""
    if 0 < params.top_k < len(row):
        ranks = Ranks(row, max(params.top_k, count))
        head = min_p_head(ranks, params)
        if head is not None and count <= len(head[1]):
            return head[0], head[1][:count]
        ids, vals = ranks.top(max(params.top_k, count))
        k = params.top_k
        return truncate(ids[:k], vals[:k].astype(np.float64) / params.temperature, params), ids[:count]
    return _whole_vocabulary(row, params), top_ids(row, count)


def truncate(ids: IdRow, logits: npt.NDArray[np.float64], params: SamplingParams) -> Dist:
    """Top-p and min-p over candidates already ordered best first (ties to the lowest id), tempered.

    Both keep a prefix of that order (the weights do not increase along it), found by a walk over a
    few dozen floats; the arithmetic is numpy's (cumulative sum in order, pairwise totals).
    """
    weights = np.exp(logits - logits[0])  # weights[0] == 1
    keep = len(ids)
    if params.top_p < 1.0 or params.min_p > 0.0:
        w = weights.tolist()
        if params.top_p < 1.0:
            top_p, total, cum = params.top_p, float(weights.sum()), 0.0
            for i, x in enumerate(w):
                cum += x
                if cum / total >= top_p:
                    keep = i + 1
                    break
        if params.min_p > 0.0:
            keep = _min_p_cut(w, params.min_p, keep)
        weights = weights[:keep]
    return Dist(ids[:keep], weights / weights.sum())


def _min_p_cut(weights: list[float], min_p: float, keep: int) -> int:
    """The first place in 1..keep-1 whose weight (relative to the best's 1) is under ``min_p``, else ``keep``."""
    return next((i for i in range(1, keep) if weights[i] < min_p), keep)


def _whole_vocabulary(row: FloatRow, params: SamplingParams) -> Dist:
    logits = row.astype(np.float64) / params.temperature
    weights = np.exp(logits - logits.max())
    total = weights.sum()
    ids = np.flatnonzero(weights >= params.min_p) if params.min_p > 0.0 else np.arange(len(logits))
    sub = logits[ids]
    if params.top_p < 1.0:
        m = min(len(ids), 64)
        while True:
            part = np.argpartition(-sub, m - 1)[:m] if m < len(ids) else np.arange(len(ids))
            part = part[np.lexsort((ids[part], -sub[part]))]  # best first, ties to the lowest id
            cum = np.cumsum(weights[ids[part]]) / total
            if cum[-1] >= params.top_p or m >= len(ids):
                keep = min(int(np.searchsorted(cum, params.top_p, side="left")) + 1, len(part))
                ids = ids[part[:keep]]
                break
            m = min(len(ids), m * 8)
    kept = weights[ids]
    return Dist(ids.astype(np.int64), kept / kept.sum())


def dist_from_candidates(ids: npt.NDArray[np.integer[Any]], logits: FloatRow) -> Dist:
    """The distribution llama.cpp's chain left: candidates with finite (tempered, masked) logits."""
    live = np.isfinite(logits)
    z = logits[live].astype(np.float64)
    w = np.exp(z - z.max())
    return Dist(ids[live].astype(np.int64), w / w.sum())


def order_candidates(ids: npt.NDArray[np.integer[Any]], logits: FloatRow, count: int) -> IdRow:
    """The ``count`` best of llama.cpp's candidates, best first, ties to the lowest id."""
    order = np.lexsort((ids, -logits))[:count]
    return ids[order].astype(np.int64)


def sample(dist: Dist, rng: np.random.Generator) -> int:
    """Draw one token from ``dist`` by inverse CDF (the first id whose cumulative probability passes u)."""
    u = rng.random()
    probs = dist.probs.tolist()
    cum = 0.0
    for i, p in enumerate(probs):
        cum += p
        if u < cum:
            return int(dist.ids[i])
    return int(dist.ids[len(probs) - 1])

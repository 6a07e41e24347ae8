"""Sampling transforms in numpy: greedy, temperature, top-k, top-p, min-p, with seeded generators.

A :class:`Dist` is a sparse next-token distribution (token ids and their probabilities, summing
to 1). The same :func:`to_dist` builds the target's p and the draft's q, so that verification
compares distributions made by identical transforms. Where llama.cpp samples in its graph (the
backend path, :mod:`engine.core.outputs`), :func:`dist_from_candidates` turns the candidates it
returns into the same :class:`Dist`.

Nothing here copies or sorts a whole logits row: the best ids are found among the columns of the
row's grid whose maxima reach a threshold (exact: every id at or above it is examined), and
full-vocabulary work is left to top-k 0, the one setting that asks for the whole vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from . import options as opt

FloatRow = npt.NDArray[np.float32]
IdRow = npt.NDArray[np.int64]

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


def top_ids(row: FloatRow, count: int) -> IdRow:
    """The ``count`` highest-logit token ids, best first (raw logits; ties to the lowest id)."""
    return _top(row, count)[0]


def _layout(n: int, count: int) -> tuple[int, int]:
    """The grid :func:`_top` views a row of ``n`` logits as for ``count`` ids: R rows and G columns (at least
    4 * count of them; ``n % R`` ids left over)."""
    rows = 64
    while rows > 8 and n // rows < max(1024, 4 * count):
        rows //= 2
    return rows, n // rows


def _grid(row: FloatRow, rows: int, cols: int) -> FloatRow:
    """``row``'s first R x G logits as a grid view, kept for the few rows a context's outputs live at (their
    views are kept too, :func:`engine.core.outputs.row_view`): made afresh, it costs more than the reduction."""
    kept = _GRIDS.get((id(row), rows))
    if kept is not None and kept[0] is row:
        return kept[1]
    if len(_GRIDS) >= _GRIDS_KEPT:
        _GRIDS.clear()
    grid = row[: rows * cols].reshape(rows, cols)
    _GRIDS[id(row), rows] = (row, grid)
    return grid


_GRIDS: dict[tuple[int, int], tuple[FloatRow, FloatRow]] = {}  # (id of the row, R) -> the row and its grid
_GRIDS_KEPT = 8
_GRID_MIN = 8192  # shorter rows are ranked whole
_max_down = np.maximum.reduce  # the ufunc itself: ndarray.max adds a Python frame, every sampled row


def _top(row: FloatRow, count: int) -> tuple[IdRow, FloatRow]:
    """The ``count`` best ids, best first with ties to the lowest id, and their logits."""
    return _Ranks(row, count).top(count)


class _Ranks:
    """Selections of the best ids of one logits row for up to ``count`` ids: the best ``count`` ids, or every id at
    or above a value.

    The row is viewed as a grid of R rows by G columns (id = r * G + c), and its column maxima are taken once.
    The count-th largest of the G column maxima, t, is reached by ``count`` distinct ids, so every id of the top
    ``count`` is at or above t, and lies in a column whose maximum is at or above t: one max-reduction of the row
    and a few thousand candidates replace a sort of the vocabulary (~60 µs on 151,936 floats, against ~290 µs for
    an argpartition of the row). Candidates come in increasing id order, so a stable sort by logit leaves ties to
    the lowest id. Short rows, or most of one asked for, are read whole.
    """

    def __init__(self, row: FloatRow, count: int) -> None:
        n = len(row)
        self.row = row
        self.rows, self.cols = _layout(n, count) if n >= _GRID_MIN else (1, 0)
        self.whole = self.cols < 4 * min(count, n)
        if not self.whole:
            self.grid = _grid(row, self.rows, self.cols)
            self.col_max: FloatRow = _max_down(self.grid, 0)

    def best(self) -> float:
        """The row's largest logit."""
        if self.whole:
            return float(_max_down(self.row))
        cut = self.rows * self.cols
        best = float(_max_down(self.col_max))
        return max(best, float(_max_down(self.row[cut:]))) if cut < len(self.row) else best

    def above(self, t: float) -> tuple[IdRow, FloatRow]:
        """Every id whose logit is at least ``t``, in increasing id order, and their logits."""
        row = self.row
        if self.whole:
            ids: IdRow = (row >= t).nonzero()[0]
            return ids, row[ids]
        keep = (self.col_max >= t).nonzero()[0]
        block = self.grid[:, keep]
        r, c = (block >= t).nonzero()
        vals, ids = block[r, c], r * self.cols + keep[c]
        cut = self.rows * self.cols
        if cut < len(row):  # the ids past the grid: fewer than R, all above the grid's
            tail = (row[cut:] >= t).nonzero()[0] + cut
            ids, vals = np.concatenate((ids, tail)), np.concatenate((vals, row[tail]))
        return ids, vals

    def top(self, count: int) -> tuple[IdRow, FloatRow]:
        """The ``count`` best ids, best first with ties to the lowest id, and their logits."""
        row, n = self.row, len(self.row)
        count = min(count, n)
        if count <= 0:
            return np.empty(0, dtype=np.int64), row[:0]
        if count == 1:
            best = int(row.argmax())  # the first maximum: the lowest id
            return np.array([best], dtype=np.int64), row[best : best + 1]
        if self.whole:  # the ids at or above the count-th value
            ids, vals = self.above(float(np.partition(row, n - count)[n - count]))
        else:
            kth = self.col_max.copy()
            kth.partition(self.cols - count)
            ids, vals = self.above(float(kth[self.cols - count]))
        order = (-vals).argsort(kind="stable")[:count]
        return ids[order], vals[order]

    def min_p_head(self, params: SamplingParams) -> tuple[Dist, IdRow] | None:
        """:func:`to_dist` read off the ids min-p can keep (and those ids, best first), where they decide it.

        min-p keeps an id only if its weight exp((v - v_best) / T) is at least ``min_p``: only ids whose logit is
        within T * ln(1 / min_p) of the row's best. They are the first ids of top-k's order, found by one
        comparison with a bound (a confident model's row has one to a few). The result is :func:`truncate`'s
        float for float, unless there are more of them than top-k keeps, or top-p could cut before min-p does:
        top-p's total runs over all of top-k's ids, and the ids read bound it from below only. Then: None.
        """
        if params.min_p <= 0.0:
            return None
        ids, vals = self.above(self.best() + params.temperature * math.log(params.min_p) - _MIN_P_SLACK)
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


_MIN_P_SLACK = 1e-3  # logits below min-p's bound that are still read: float rounding cannot reach past it
_MARGIN = 1.0 - 1e-9  # top-p's sums over all of top-k's ids and over the ids read differ by rounding (~1e-16) only


def to_dist(row: FloatRow, params: SamplingParams) -> Dist:
    """Apply temperature, then top-k, top-p and min-p to a logits row (best-first candidates).

    With top-k (the common case) only the k best ids are touched, and where min-p decides, only the ids it keeps.
    Top-k 0 (the whole vocabulary) is exact too: min-p first narrows the set that top-p must order (the two keep
    prefixes of the same order, so the result is the same), and the top-p set grows by partial selection.
    """
    if 0 < params.top_k < len(row):
        ranks = _Ranks(row, params.top_k)
        head = ranks.min_p_head(params)
        if head is not None:
            return head[0]
        ids, vals = ranks.top(params.top_k)
        return truncate(ids, vals.astype(np.float64) / params.temperature, params)
    return _whole_vocabulary(row, params)


def dist_top(row: FloatRow, params: SamplingParams, count: int) -> tuple[Dist, IdRow]:
    """:func:`to_dist` and :func:`top_ids` ``count`` from one selection where top-k allows."""
    if 0 < params.top_k < len(row):
        ranks = _Ranks(row, max(params.top_k, count))
        head = ranks.min_p_head(params)
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

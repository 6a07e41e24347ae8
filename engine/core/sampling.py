"""Sampling transforms in numpy: greedy, temperature, top-k, top-p, min-p, with seeded generators.

A :class:`Dist` is a sparse next-token distribution (token ids and their probabilities, summing
to 1). The same :func:`to_dist` builds the target's p and the draft's q, so that verification
compares distributions made by identical transforms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from . import options as opt

FloatRow = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Sampler settings. ``temperature == 0`` means greedy (argmax, ties to the lowest id)."""

    temperature: float = opt.TEMPERATURE.default
    top_k: int = opt.TOP_K.default
    top_p: float = opt.TOP_P.default
    min_p: float = opt.MIN_P.default
    seed: int = opt.SEED.default

    def __post_init__(self) -> None:
        opt.check_fields(self, ("temperature", "top_k", "top_p", "min_p", "seed"))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


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


def to_dist(row: FloatRow, params: SamplingParams) -> Dist:
    """Apply temperature, then top-k, top-p and min-p to a logits row.

    Only top-p needs an order, and only over the few best tokens: they are found by partial
    selection, growing the candidate set until it holds the top-p mass (a full sort of a 150k
    vocabulary costs ~10 ms a row).
    """
    logits = row.astype(np.float64) / params.temperature
    n = len(logits)
    if 0 < params.top_k < n:
        ids = np.argpartition(-logits, params.top_k - 1)[: params.top_k]
    else:
        ids = np.arange(n)
    sub = logits[ids]
    weights = np.exp(sub - sub.max())
    total = weights.sum()
    if params.top_p < 1.0:
        m = min(len(ids), 64)
        while True:
            part = np.argpartition(-sub, m - 1)[:m] if m < len(ids) else np.arange(len(ids))
            part = part[np.lexsort((ids[part], -sub[part]))]  # best first, ties to the lowest id
            cum = np.cumsum(weights[part]) / total
            if cum[-1] >= params.top_p or m >= len(ids):
                keep = min(int(np.searchsorted(cum, params.top_p, side="left")) + 1, len(part))
                part = part[:keep]
                break
            m = min(len(ids), m * 8)
        ids, weights = ids[part], weights[part]
    if params.min_p > 0.0:
        mask = weights >= params.min_p * weights.max()
        ids, weights = ids[mask], weights[mask]
    return Dist(ids.astype(np.int64), weights / weights.sum())


def sample(dist: Dist, rng: np.random.Generator) -> int:
    """Draw one token from ``dist`` by inverse CDF."""
    u = rng.random()
    idx = int(np.searchsorted(np.cumsum(dist.probs), u, side="right"))
    return int(dist.ids[min(idx, len(dist.ids) - 1)])


def top_ids(row: FloatRow, count: int) -> npt.NDArray[np.int64]:
    """The ``count`` highest-logit token ids, best first (raw logits; ties to the lowest id)."""
    count = min(count, len(row))
    if count <= 0:
        return np.empty(0, dtype=np.int64)
    if count * 8 < len(row):
        part = np.argpartition(-row, count - 1)[:count]
    else:
        part = np.arange(len(row))
    order = np.lexsort((part, -row[part]))
    return part[order][:count].astype(np.int64)

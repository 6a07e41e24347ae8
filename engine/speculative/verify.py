"""Verification: the rule that accepts a prefix of a draft against the target's outputs, losslessly.

Greedy: accept while the draft token equals the target's argmax; emit the argmax at the first
mismatch (or after the last draft). Sampled: standard speculative sampling — accept d_i with
probability min(1, p_i(d_i) / q_i(d_i)); on the first rejection sample from the renormalised
max(0, p_i - q_i); after K acceptances sample the bonus token from p_K.

A deterministic proposal (q_i one-hot at d_i: the n-gram pool's drafts) is verified by the target's
own sample instead: draw x from p_i as plain decoding would, accept d_i if x == d_i, else emit x.
That is the same rule (accept with probability p_i(d_i); a rejection's token is p_i without d_i,
renormalised, which is the residual), and it draws one number per emitted token, as plain decoding
does: with the same seed a lookup reply is plain decoding's reply, token for token.

Coupled (:mod:`engine.core.gumbel`): every position's token is the target's own Gumbel-max sample under the
noise of (seed, position), whatever the draft; a draft token is accepted while it equals that token. The reply is
then plain decoding's for the seed, in every mode, and each token is an exact sample of its p.

The target's outputs are read lazily, one position at a time (:class:`~engine.core.outputs.Outputs`
or a stack of rows): a round that rejects early never looks at the later positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from engine.core.gumbel import gumbel_sample
from engine.core.sampling import Dist, SamplingParams, sample, to_dist

from .types import Verdict


class TargetRows(Protocol):
    """Per position of a verify batch: its argmax, and its truncated distribution."""

    def argmax(self, r: int) -> int: ...

    def dist(self, r: int, params: SamplingParams) -> Dist: ...


class LogitRows:
    """:class:`TargetRows` over a stack of logits rows (tests, host checks)."""

    def __init__(self, rows: npt.NDArray[np.float32]) -> None:
        self.rows = rows

    def argmax(self, r: int) -> int:
        return int(np.argmax(self.rows[r]))

    def dist(self, r: int, params: SamplingParams) -> Dist:
        return to_dist(self.rows[r], params)


def _rows(rows: TargetRows | npt.NDArray[np.float32]) -> TargetRows:
    return LogitRows(rows) if isinstance(rows, np.ndarray) else rows


def verify_greedy(draft: Sequence[int], rows: TargetRows | npt.NDArray[np.float32],
                  is_eog: Callable[[int], bool]) -> Verdict:
    """``rows`` position i predicts draft[i]; position ``len(draft)`` the bonus."""
    out = _rows(rows)
    n = 0
    for i, d in enumerate(draft):
        best = out.argmax(i)
        if d != best:
            return Verdict(n, best)
        n += 1
        if is_eog(d):
            # Never accept past an end-of-generation token: it ends the reply.
            return Verdict(n - 1, d)
    return Verdict(n, out.argmax(len(draft)))


def verify_sampled(
    draft: Sequence[int],
    q: Sequence[Dist],
    rows: TargetRows | npt.NDArray[np.float32],
    params: SamplingParams,
    rng: np.random.Generator,
    is_eog: Callable[[int], bool],
) -> Verdict:
    """Speculative sampling with the stored draft distributions ``q`` (one per draft token)."""
    out = _rows(rows)
    for i, d in enumerate(draft):
        p = out.dist(i, params)
        qd = q[i].prob(d)
        if qd <= 0.0:
            raise AssertionError(f"draft token {d} has zero probability under its own q")
        if len(q[i].ids) == 1:  # deterministic: the target's own sample decides (see the module's note)
            x = sample(p, rng)
            if x != d:
                return Verdict(i, x)
        elif rng.random() >= min(1.0, p.prob(d) / qd):
            return Verdict(i, sample(residual(p, q[i]), rng))
        if is_eog(d):
            return Verdict(i, d)
    return Verdict(len(draft), sample(out.dist(len(draft), params), rng))


def verify_coupled(draft: Sequence[int], rows: TargetRows | npt.NDArray[np.float32], params: SamplingParams,
                   position: int, is_eog: Callable[[int], bool]) -> Verdict:
    """Verification by comparison: row i's token is the Gumbel-max of its p at absolute ``position + i``."""
    out = _rows(rows)
    for i, d in enumerate(draft):
        x = gumbel_sample(out.dist(i, params), params.seed, position + i)
        if x != d:
            return Verdict(i, x)
        if is_eog(d):
            return Verdict(i, d)
    n = len(draft)
    return Verdict(n, gumbel_sample(out.dist(n, params), params.seed, position + n))


def residual(p: Dist, q: Dist) -> Dist:
    """The renormalised max(0, p - q) on p's support (sparse: no vocabulary-sized array)."""
    order = np.argsort(q.ids, kind="stable")
    sq = q.ids[order]
    pos = np.searchsorted(sq, p.ids).clip(0, len(sq) - 1)
    qd = np.where(sq[pos] == p.ids, q.probs[order[pos]], 0.0)
    r = np.maximum(p.probs - qd, 0.0)
    total = r.sum()
    if total <= 0.0:
        # p == q on p's support: rejection had probability 0, so any p-sample is correct.
        return p
    keep = r > 0.0
    return Dist(p.ids[keep], r[keep] / total)

"""Verification: the rule that accepts a prefix of a draft against the target's logits, losslessly.

Greedy: accept while the draft token equals the target's argmax; emit the argmax at the first
mismatch (or after the last draft). Sampled: standard speculative sampling — accept d_i with
probability min(1, p_i(d_i) / q_i(d_i)); on the first rejection sample from the renormalised
max(0, p_i - q_i); after K acceptances sample the bonus token from p_K.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from engine.core.sampling import Dist, SamplingParams, argmax, sample, to_dist

from .types import Verdict


def verify_greedy(draft: Sequence[int], rows: npt.NDArray[np.float32], is_eog: Callable[[int], bool]) -> Verdict:
    """``rows[i]`` is the target's logits row predicting draft[i]; ``rows[len(draft)]`` the bonus."""
    n = 0
    for i, d in enumerate(draft):
        best = argmax(rows[i])
        if d != best:
            return Verdict(n, best)
        n += 1
        if is_eog(d):
            # Never accept past an end-of-generation token: it ends the reply.
            return Verdict(n - 1, d)
    return Verdict(n, argmax(rows[len(draft)]))


def verify_sampled(
    draft: Sequence[int],
    q: Sequence[Dist],
    rows: npt.NDArray[np.float32],
    params: SamplingParams,
    rng: np.random.Generator,
    is_eog: Callable[[int], bool],
) -> Verdict:
    """Speculative sampling with the stored draft distributions ``q`` (one per draft token)."""
    for i, d in enumerate(draft):
        p = to_dist(rows[i], params)
        pd = p.prob(d)
        qd = q[i].prob(d)
        if qd <= 0.0:
            raise AssertionError(f"draft token {d} has zero probability under its own q")
        if rng.random() < min(1.0, pd / qd):
            if is_eog(d):
                return Verdict(i, d)
            continue
        return Verdict(i, sample(residual(p, q[i]), rng))
    return Verdict(len(draft), sample(to_dist(rows[len(draft)], params), rng))


def residual(p: Dist, q: Dist) -> Dist:
    """The renormalised max(0, p - q) on p's support."""
    size = int(max(p.ids.max(), q.ids.max())) + 1
    qd = np.zeros(size, dtype=np.float64)
    qd[q.ids] = q.probs
    r = np.maximum(p.probs - qd[p.ids], 0.0)
    total = r.sum()
    if total <= 0.0:
        # p == q on p's support: rejection had probability 0, so any p-sample is correct.
        return p
    keep = r > 0.0
    return Dist(p.ids[keep], r[keep] / total)

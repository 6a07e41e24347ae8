"""Fan-out allocation: how many candidate next tokens to pre-speculate at each accepted count k.

``uniform`` gives every outcome position 0..K the same share. ``geometric`` is the SSD paper's
(Saguaro) allocation: with per-token acceptance rate a and hit power-law exponent r,
F_k ∝ a^(k/(1+r)) for k < K and F_K ∝ a^(K/(1+r)) · (1-a)^(-1/(1+r)), the extra weight at k = K.
Both return integers that sum to the budget M.
"""

from __future__ import annotations

import math
from collections.abc import Callable


def uniform(k: int, budget: int) -> list[int]:
    """Split ``budget`` branches evenly over the K+1 outcome positions (earlier positions first)."""
    base, extra = divmod(budget, k + 1)
    return [base + (1 if i < extra else 0) for i in range(k + 1)]


def geometric_weights(k: int, acceptance: float, r: float = 1.0) -> list[float]:
    a = min(max(acceptance, 0.01), 0.99)
    e = 1.0 / (1.0 + r)
    w = [a ** (i * e) for i in range(k)]
    w.append(a ** (k * e) * (1.0 - a) ** (-e))
    return w


def geometric(k: int, budget: int, acceptance: float, r: float = 1.0) -> list[int]:
    """Saguaro fan-out for ``budget`` branches, rounded by largest remainder to sum exactly to it."""
    return _round_to_budget(geometric_weights(k, acceptance, r), budget)


def _round_to_budget(weights: list[float], budget: int) -> list[int]:
    total = sum(weights)
    raw = [budget * w / total for w in weights]
    out = [math.floor(x) for x in raw]
    order = sorted(range(len(raw)), key=lambda i: (out[i] - raw[i], i))
    for i in order[: budget - sum(out)]:
        out[i] += 1
    return out


def allocate(k: int, budget: int, *, geometric_on: bool, acceptance: float, r: float = 1.0) -> list[int]:
    """The fan-out list (length K+1, sum ``budget``) for one round.

    A budget smaller than K+1 cannot be spread evenly, so it always goes where outcomes are likeliest.
    """
    if geometric_on or budget < k + 1:
        return geometric(k, budget, acceptance, r)
    return uniform(k, budget)


def fanout_fn(geometric: bool, acceptance: float) -> Callable[[int, int], list[int]]:
    """``allocate`` with the allocation and acceptance fixed, as the tree builder calls it."""

    def alloc(k: int, budget: int) -> list[int]:
        return allocate(k, budget, geometric_on=geometric, acceptance=acceptance)

    return alloc

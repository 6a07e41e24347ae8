"""Sampled regimes of the simulated machines: the real pair's rejection-sampled acceptance on the 2-core CPUs, and any
rejection-sampled regime under coupled (Gumbel-max) sampling.

Fitted from ``python -m engine.bench.coupled --scenarios A,B,C --prompts 8 --max-tokens 48`` (docs/benchmarks.md,
"CPU: coupled against rejection sampling"): the real pair, temperature 0.7, top-p 0.9, seed 7, K 4, ssd's tree of one
branch; both schemes run on each prompt. Only the rates those runs measured move; the rest of a regime (depth decay,
drift, branch overlap, copies) is the sampled regime's.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .regime import Regime

DEPTH_DECAY = 0.97  # Regime.depth_decay's default: the regimes below are fitted with it
MEASURED_K = 4  # the drafts' length in those runs
# The share of a 4-token draft accepted, the mean of the sd and ssd rows of scenarios A, B and C (auto's rows mix the
# pool's drafts and other lengths): rejection 0.734, 0.792, 0.759, 0.741, 0.759, 0.732; coupled 0.807, 0.822, 0.773,
# 0.773, 0.773, 0.773.
REJECTION_SHARE = (0.734 + 0.792 + 0.759 + 0.741 + 0.759 + 0.732) / 6
COUPLED_SHARE = (0.807 + 0.822 + 0.773 + 0.773 + 0.773 + 0.773) / 6
# ssd's hit rate with its one branch (the outcome where every draft token is accepted), scenarios A, B and C: rejection
# 0.508, 0.425, 0.431; coupled 0.624, 0.464, 0.464 (x 1.14). Not a parameter: the acceptance ratio alone predicts x 1.10
# for such a tree (tests/test_simulated.py checks the regimes reproduce it); a branch per position measures the draft's
# alternative after a rejection (TOP1_RATIO).
HIT_RATIO_ONE_BRANCH = (0.624 + 0.464 + 0.464) / (0.508 + 0.425 + 0.431)
# the draft's alternative after a rejection (Regime.top1): ssd's hit rate on the tiny pair with a branch per
# position, temperature 0.8, coupled 0.83 against rejection 0.69 (tests/test_coupled.py's set-up).
TOP1_RATIO = 0.83 / 0.69


def position_acceptance(share: float, k: int = MEASURED_K, decay: float = DEPTH_DECAY) -> float:
    """The per-position acceptance (Regime.accept) whose ``k``-token drafts have ``share`` of their tokens accepted."""
    lo, hi = 0.0, 1.0
    for _ in range(40):  # bisection: the share rises with the acceptance
        mid = (lo + hi) / 2
        reach, accepted = 1.0, 0.0
        for j in range(k):
            reach *= mid * decay**j
            accepted += reach
        lo, hi = (mid, hi) if accepted / k < share else (lo, mid)
    return (lo + hi) / 2


CPU_SAMPLED_ACCEPT = position_acceptance(REJECTION_SHARE)  # 0.915: the real pair, rejection sampling
ACCEPT_RATIO = position_acceptance(COUPLED_SHARE) / CPU_SAMPLED_ACCEPT  # 0.933 / 0.915: 1.019 per position


def coupled(regime: Regime) -> Regime:
    """``regime`` (rejection-sampled) as coupled sampling serves it."""
    return dataclasses.replace(regime, name=f"{regime.name}-coupled", accept=min(1.0, regime.accept * ACCEPT_RATIO),
                               top1=min(1.0, regime.top1 * TOP1_RATIO))

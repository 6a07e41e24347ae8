"""The coupled regime of the simulated machines: a rejection-sampled regime under coupled (Gumbel-max) sampling.

Fitted from docs/benchmarks.md, "CPU: coupled against rejection sampling" (rejection → coupled, the real pair on
2-core CPUs and the tiny pair's full tree). Only the two rates those runs measured move; the rest of the regime
(depth decay, drift, branch overlap, copies) is the sampled regime's.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.tools.simmachine import Regime

# acceptance: the mean over sd, ssd and auto of scenarios A, B and C, coupled (0.88 + 0.88 + 0.86) against
# rejection (0.90 + 0.85 + 0.82)
ACCEPT_RATIO = (0.88 + 0.88 + 0.86) / (0.90 + 0.85 + 0.82)
# the draft's alternative after a rejection (Regime.top1): ssd's hit rate on the tiny pair with a branch per
# position, temperature 0.8, coupled 0.83 against rejection 0.69. The one-branch tree's hit rate (0.66 → 0.61)
# is not used: that branch is the bonus token's, which the regime takes from acceptance, not from top1.
TOP1_RATIO = 0.83 / 0.69


def coupled(regime: Regime) -> Regime:
    """``regime`` (rejection-sampled) as coupled sampling serves it."""
    return dataclasses.replace(regime, name=f"{regime.name}-coupled", accept=min(1.0, regime.accept * ACCEPT_RATIO),
                               top1=min(1.0, regime.top1 * TOP1_RATIO))

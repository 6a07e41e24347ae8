"""What auto knows of the n-gram pool's drafts (draft-free lookup): how often a pool token is accepted.

A pool token's acceptance depends on its n-gram order and on its depth in the chain: the chain's first token is a
guess, a later one (the ones before it accepted) is most often a copy in progress. Each depth starts from the
acceptance one place shallower, so a few copies are enough to trust a long chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .figures import Ema, Ratio, Tally, enough, lookup_prior
from .knobs import LOOKUP_DEPTHS, STRETCH_ALPHA


@dataclass
class PoolFigures:
    """Pool tokens accepted by (n-gram order, chain depth); the cost model's part for lookup drafts."""

    lookup_accept: dict[tuple[int, int], Ratio] = field(default_factory=dict)
    # tokens the rounds between two of the pool's drafts emit, on average (no value: no two drafts yet); kept
    # across replies: a conversation that edits code goes on editing it
    pool_gap: Ema = field(default_factory=lambda: Ema(STRETCH_ALPHA))
    # the drafting rounds between two of the pool's drafts (catch-up and a cold start included) against their
    # plans' steady-state predictions: new text between the copies of a code edit is not what the draft met elsewhere
    gap_tally: Tally = field(default_factory=Tally)
    # a pool token's acceptance by (order, depth), kept until learn_lookup
    _accept_at: dict[tuple[int, int], float] = field(default_factory=dict, repr=False, compare=False)

    def lookup_acceptance(self, order: int, depth: int = 0) -> float:
        """P(a pool token of this n-gram order at this depth of its chain is accepted | the ones before were)."""
        key = (order, min(depth, LOOKUP_DEPTHS - 1))
        p = self._accept_at.get(key)
        if p is None:
            p = lookup_prior(order)
            for d in range(key[1] + 1):
                r = self.lookup_accept.get((order, d))
                p = r.value_with(p) if r is not None else p
            self._accept_at[key] = p
        return p

    def learn_lookup(self, orders: Sequence[int], accepted: int, depth: int = 0) -> None:
        """A chain's outcome: its first ``accepted`` tokens accepted, the next one (if any) rejected; ``depth``
        is the chain place of its first token (a chain scored piece by piece)."""
        for i, order in enumerate(orders[: accepted + 1]):
            key = (order, min(depth + i, LOOKUP_DEPTHS - 1))
            self.lookup_accept.setdefault(key, Ratio(lookup_prior(order))).add(i < accepted)
        self._accept_at.clear()

    def gap_factor(self) -> float:
        """How far drafting between the pool's drafts ran from its predictions (1 until enough such rounds)."""
        return self.gap_tally.factor(tokens=True) if enough(self.gap_tally) else 1.0

    def lookup_expected(self, orders: Sequence[int]) -> list[float]:
        """Expected tokens of a round verifying the first L tokens of a pool draft, for L = 0..len."""
        out, reach = [1.0], 1.0
        for depth, order in enumerate(orders):
            reach *= self.lookup_acceptance(order, depth)
            out.append(out[-1] + reach)
        return out

"""The plan space auto chooses from: ar, sd with a draft of K tokens, ssd with K levels and a tree of some branches,
and the pool's lookup draft."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from engine.core.mode import Mode


class Plan(NamedTuple):
    """One round's plan; a tuple, so that the dozens of lookups by plan a decision makes hash in C."""

    mode: Mode  # ar, sd, ssd or lookup (the pool's draft, of variable length: no K)
    k: int = 0
    budget: int = 0  # tree branches (ssd)

    def __str__(self) -> str:
        if self.mode in (Mode.AR, Mode.LOOKUP):
            return str(self.mode)
        return f"{self.mode}(K={self.k}" + (f", M={self.budget})" if self.mode == Mode.SSD else ")")


AR, LOOKUP = Plan(Mode.AR), Plan(Mode.LOOKUP)  # the two plans without a K


def tree_budgets(k: int, most: int) -> list[int]:
    """The tree sizes weighed for a draft of K tokens, at most ``most`` branches, smallest first: one branch, two,
    and one to three candidates for each of the K + 1 outcomes."""
    return sorted({min(most, budget) for budget in (1, 2, k + 1, 2 * (k + 1), 3 * (k + 1))})


def plan_space(ks: range | list[int], most: int) -> list[Plan]:
    """ar, sd and ssd at each K of ``ks`` (ssd with each tree of :func:`tree_budgets`); no lookup (its length
    is the pool's match, not a plan's)."""
    return [AR, *(Plan(Mode.SD, k) for k in ks), *(Plan(Mode.SSD, k, b) for k in ks for b in tree_budgets(k, most))]


@dataclass(frozen=True, slots=True)
class MeasuredRate:
    """auto's figure for one mode on this machine: its best plan there and the tokens per second predicted
    from what it measured (verify, draft and tree times, acceptance, hit rate)."""

    mode: Mode  # ar, sd or ssd
    plan: str  # e.g. "sd(K=3)"
    tokens_per_second: float

"""The fixed modes teach auto: every round of ar, sd or ssd feeds the machine's cost model.

auto's picture of the machine (verify time by width, draft time per token, tree levels, acceptance, cache
hits, measured against predicted per plan) is kept by the engine across replies. Rounds run in a fixed mode
measure the same things, so they are folded into the same model: after a reply in sd or ssd, auto starts
from what that reply measured instead of probing the machine again. lookup rounds teach the model
themselves (:meth:`engine.speculative.lookup.Lookup.learn`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core.mode import Mode

from .costmodel import CostModel
from .learning import RoundLearner
from .plan import Plan, tree_budgets
from .ssd import SSDOptions
from .types import RoundResult

if TYPE_CHECKING:
    from engine.config import GenerationParams


class RoundObserver:
    """Folds the rounds of one fixed-mode generation into ``model``, as the plan each round ran.

    Rounds are only collected while the reply runs (no work inside a round) and folded in by :meth:`finish`,
    before the next generation can read the model."""

    def __init__(self, model: CostModel, k: int, budget: int, *, draft: bool, mode: Mode, geometric: bool) -> None:
        self._learner = RoundLearner(model, geometric=geometric)
        self._plans = {Mode.AR: Plan(Mode.AR), Mode.SD: Plan(Mode.SD, k), Mode.SSD: Plan(Mode.SSD, k, budget)}
        self._rounds: list[RoundResult] = []
        # Fixed ssd's sd rounds (while its cache keeps missing) run on ssd's split threads where the machine splits
        # its cores: their draft and verify times are ssd's, not sd's.
        self._split_sd = mode == Mode.SSD and model.split

    def round(self, rr: RoundResult) -> None:
        self._rounds.append(rr)

    def finish(self) -> None:
        model = self._learner.model
        for rr in self._rounds:
            plan = self._plans.get(rr.mode)
            if plan is not None and (plan.mode == Mode.AR or rr.draft is not None):
                self._learner.learn(plan, rr, split_threads=self._split_sd and rr.mode == Mode.SD)
                model.rounds += 1  # the mode was just measured: auto need not probe it again soon
                model.last_run[plan.mode] = model.rounds
        self._rounds.clear()


def observer_for(model: CostModel, params: GenerationParams, budget: int, *, draft: bool) -> RoundObserver | None:
    """A fixed mode's rounds teach auto's cost model (auto and lookup teach it themselves); ``budget`` is fixed
    ssd's tree, which its rounds are filed under (ar and sd run no ssd round)."""
    if params.mode in (Mode.LOOKUP, Mode.AUTO):
        return None
    return RoundObserver(model, params.k, budget, draft=draft, mode=params.mode, geometric=params.geometric)


def tree_budget(model: CostModel, params: GenerationParams) -> int:
    """The tree fixed-mode ssd builds: the budget asked for, else fan-out x (K + 1) cut to the tree that pays
    on this machine (its cost model: on a CPU draft every branch costs real time). Worked out once a reply,
    before its first round: the mode builds it, the observer files the rounds under it."""
    most = SSDOptions(k=params.k, fanout=params.fanout, budget=params.budget).tree_budget
    return most if params.budget else fitted_budget(model, params.k, most, early_stop=params.early_stop)


def fitted_budget(model: CostModel, k: int, most: int, *, early_stop: bool) -> int:
    """The tree for a fixed K on this machine: of the sizes up to ``most`` (:func:`tree_budgets`, and ``most``
    itself) whose tree fits one verify, the one with the best predicted rate; ``most`` while the machine has
    no measured draft and verify times, the smallest tree when none fits (a CPU draft pays for every branch)."""
    if most <= 1 or model.draft_token.value is None or 1 not in model.verify:
        return most
    sizes = sorted({*tree_budgets(k, most), most})
    fits = [b for b in sizes if model.fits_window(k, b, early_stop)] or sizes[:1]
    return max(fits, key=lambda b: (model.rate(Plan(Mode.SSD, k, b)), -b))

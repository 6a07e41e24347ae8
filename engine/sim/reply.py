"""A simulated reply's truth: its prompt, the tokens the target emits, which are copied from the prompt and which lie
in the draft's hard runs (engine/sim/regime.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .regime import Regime

VOCAB = 32_000  # token ids a simulated reply draws from (wide enough that random text repeats no n-gram)


@dataclass
class Reply:
    """One reply's truth: the prompt, the tokens the target emits, and which of them are copied from the prompt."""

    prompt: list[int]
    truth: list[int]
    copied: list[bool]
    hard: list[bool] | None = None  # the tokens in hard runs (Regime.hard_share)

    @staticmethod
    def make(regime: Regime, rng: np.random.Generator, length: int) -> Reply:
        if not regime.copies:
            prompt = [int(t) for t in rng.integers(100, VOCAB, 48)]
            said = [int(t) for t in rng.integers(100, VOCAB, length + 16)]
            return Reply(prompt, said, [False] * len(said), _hard_runs(regime, rng, len(said)))
        prompt = [int(t) for t in rng.integers(100, VOCAB, 600)]  # the file being edited
        truth: list[int] = []
        copied: list[bool] = []
        at = 0
        while len(truth) < length + 16:
            span = int(rng.integers(30, 90))
            at = at if at + span < len(prompt) else 0
            truth += prompt[at : at + span]
            copied += [True] * span
            at += span + int(rng.integers(0, 6))  # an edit: a few tokens of the file left out ...
            new = int(rng.integers(3, 12))  # ... and a few new ones written
            truth += [int(t) for t in rng.integers(100, VOCAB, new)]
            copied += [False] * new
        return Reply(prompt, truth, copied)


def _hard_runs(regime: Regime, rng: np.random.Generator, n: int) -> list[bool] | None:
    """Which of ``n`` tokens lie in hard runs: a two-state chain whose runs average ``hard_run`` tokens and cover
    ``hard_share`` of the reply."""
    if regime.hard_share <= 0:
        return None
    leave_hard = 1 / regime.hard_run
    enter_hard = leave_hard * regime.hard_share / (1 - regime.hard_share)  # the chain's share of hard tokens
    u, hard, out = rng.random(n), False, []
    for x in u:
        hard = bool(x >= leave_hard) if hard else bool(x < enter_hard)
        out.append(hard)
    return out

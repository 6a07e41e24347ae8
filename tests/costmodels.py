"""A cost model as earlier replies leave it: the measured machine several tests start from."""

from __future__ import annotations

from engine.speculative.costmodel import CostModel

ROUNDS = 4  # each figure's samples: past the few an Ema needs to settle


def measured(verify: dict[int, float], draft_token: float, accepted: tuple[int, int] | None = (3, 4),
             rounds: int = ROUNDS) -> CostModel:
    """Verify seconds by width, a draft token's seconds and (accepted, drafted) per sd round, ``rounds`` times."""
    m = CostModel()
    for _ in range(rounds):
        for width, seconds in verify.items():
            m.add_verify(width, seconds)
        m.draft_token.add(draft_token)
        if accepted is not None:
            m.acceptance.add_round(*accepted)
    return m

"""How a simulated reply's drafts fare (a :class:`Regime`): the half of a simulated machine's profile that the
reply's text sets, apart from the machine (engine/sim/machine.py) and the reply's truth (engine/sim/reply.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Regime:
    """How a reply's drafts fare."""

    name: str
    accept: float  # per-position acceptance of a draft token (the first position)
    depth_decay: float = 0.97  # each later draft position is accepted this much less often
    drift_to: float | None = None  # acceptance after the reply's midpoint (None: no drift)
    top1: float = 0.45  # the draft's best alternative is the target's token after a rejection
    branch_power: float = 0.7  # f branches at one outcome count as f**branch_power guesses (they guess alike)
    copies: bool = False  # the reply copies long stretches of its prompt (a code edit)
    copy_accept: float = 0.97  # a draft token's acceptance inside a copied stretch
    # Chat text comes in stretches: runs of tokens the draft rarely gets (hard_accept) among ones it nearly always
    # gets, so a draft is mostly all accepted or rejected at once (0: every position as ``accept`` says).
    hard_share: float = 0.0  # the share of the reply's tokens in hard runs
    hard_run: float = 3.0  # a hard run's mean length (tokens)
    hard_accept: float = 0.15

    def acceptance(self, pos: int, half: int) -> float:
        return self.drift_to if self.drift_to is not None and pos >= half else self.accept

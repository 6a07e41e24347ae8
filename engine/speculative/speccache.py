"""The speculation cache: pre-drafted continuations keyed by the verification outcome they assume."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from engine.core.sampling import Dist


@dataclass(slots=True)
class Branch:
    """One pre-speculated outcome: the target accepts ``accepted`` drafts, then emits ``token``.

    ``tokens`` are the draft's continuation after ``token``; ``q`` the exact distributions each was
    sampled from (None at temperature 0); ``top`` the best ids of each tree row, for the next fork.
    """

    accepted: int
    token: int
    seq_id: int
    pos0: int
    tokens: list[int] = field(default_factory=list)
    q: list[Dist] = field(default_factory=list)
    top: list[npt.NDArray[np.int64]] = field(default_factory=list)

    @property
    def depth(self) -> int:
        return len(self.tokens)


class SpecCache:
    """Branches of the latest round only; a new tree replaces them all."""

    def __init__(self) -> None:
        self._branches: dict[tuple[int, int], Branch] = {}
        self.base_len = -1  # committed length the branches were built on

    def reset(self, base_len: int = -1) -> None:
        self._branches.clear()
        self.base_len = base_len

    def add(self, branch: Branch) -> None:
        self._branches[(branch.accepted, branch.token)] = branch

    def lookup(self, committed_len: int, accepted: int, token: int) -> Branch | None:
        """The branch for outcome (accepted, token), if it was built on the right prefix and has drafted."""
        if self.base_len < 0 or committed_len != self.base_len + accepted + 1:
            return None
        b = self._branches.get((accepted, token))
        return b if b is not None and b.depth > 0 else None

    def branches(self) -> list[Branch]:
        return list(self._branches.values())

    def __len__(self) -> int:
        return len(self._branches)

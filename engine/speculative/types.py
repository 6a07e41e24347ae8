"""What the speculation parts exchange: drafts, verdicts, round events, draft requests, and the two seams.

:class:`Verifier` (the target side) and :class:`DraftSource` (what serves drafts: the draft thread,
or the drafter inline) are small protocols, so the steps, the SSD fallback and auto's planner run
against fakes in unit tests without any model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from engine.core.mode import Mode
from engine.core.sampling import Dist

IdRow = npt.NDArray[np.int64]

CACHE, JIT, NGRAM = "cache", "jit", "ngram"  # where a draft came from
ROUND_SYNC = 2  # tokens a round's own draft sync decodes at most: the last accepted draft token, the target's next


@dataclass(slots=True)
class Draft:
    """Draft tokens for one round, with the exact q each was sampled from (None when greedy)."""

    tokens: list[int]
    q: list[Dist] | None
    source: str = JIT  # CACHE (a speculation-cache hit), JIT (the draft model, now) or NGRAM (prompt lookup)
    top: list[IdRow] = field(default_factory=list)  # best ids of the rows that produced the tokens
    serve_s: float = 0.0
    catchup_s: float = 0.0  # JIT: the part of serve_s the draft model spent on tokens it had not seen (after ar rounds)
    catchup_tokens: int = 0  # how many tokens that catch-up decoded
    orders: list[int] = field(default_factory=list)  # NGRAM: the n-gram order that predicted each token
    expected: float = 1.0  # NGRAM: the tokens the cost model expects a round verifying this draft to emit

    @property
    def hit(self) -> bool:
        return self.source == CACHE


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of accepting a draft: ``accepted`` drafts, then the ``next_token`` the target emits."""

    accepted: int
    next_token: int
    restore_s: float = 0.0  # a recurrent state's checkpoint, its restore and the accepted tokens decoded again

    def tokens(self, draft: Sequence[int]) -> list[int]:
        return [*draft[: self.accepted], self.next_token]


@dataclass(slots=True)
class TreeStats:
    """One speculation tree's build: its levels (decodes one token deeper on every branch), branches, and
    seconds in all, of them ``glue_s`` on the one-token decode of the draft's last token (the tree's first row)
    and ``level_s`` on the levels."""

    levels: int = 0
    branches: int = 0
    seconds: float = 0.0
    glue_s: float = 0.0
    level_s: float = 0.0


PlanRates = tuple[tuple[str, float], ...]  # (mode, predicted tok/s of its best plan), best first


@dataclass(frozen=True, slots=True)
class RoundResult:
    """The one event a round reports: what it emitted, which step and speculator ran, and how it went."""

    tokens: list[int]
    mode: Mode  # the step that ran: ar, sd, ssd or lookup
    speculator: str | None = None  # where the draft came from: CACHE, JIT or NGRAM; None for ar
    drafted: int = 0
    accepted: int = 0
    hit: bool | None = None  # None: not an SSD round, or the forced first miss
    verify_s: float = 0.0  # restore_s included: the round's cost on a recurrent state
    restore_s: float = 0.0  # of it, a recurrent state's checkpoint and going back to it (see Verdict)
    wait_s: float = 0.0  # time the target spent waiting for the draft (sd inline: drafting itself)
    new_shape: bool = False  # the verify's batch shape was new to the target's context: its time is not the width's
    trees: tuple[TreeStats, ...] = ()  # speculation trees the draft side finished since the previous round
    why: str = ""  # why this round's step was chosen (reported when the step differs from the previous one)
    rates: PlanRates = ()  # auto: predicted tok/s of the best plan per mode, best first
    draft: Draft | None = field(default=None, repr=False, compare=False)  # for planners; not a statistic

    @property
    def next_token(self) -> int:
        return self.tokens[-1]


@dataclass(frozen=True, slots=True)
class DraftRequest:
    """What the target knows after a round: the committed tokens and how many drafts it accepted."""

    committed: tuple[int, ...]
    accepted: int  # drafts accepted last round; -1: no previous speculative round (forces a miss)
    k: int  # draft length K
    budget: int  # branches in the tree to build after serving; 0: no tree (an sd round)
    backup: str = JIT  # what drafts on a cache miss
    geometric: bool = False
    acceptance: float = 0.8  # running per-token acceptance, for the geometric fan-out
    early_stop: bool = True  # cut the tree short when the next request arrives
    draft_threads: int = 0  # set the draft context's threads before serving (0: leave)


class Verifier(Protocol):
    """The target side of a round."""

    @property
    def committed(self) -> list[int]: ...

    @property
    def new_shape(self) -> bool:
        """Whether the latest verify's batch shape was new to the context (its graph was built first)."""
        ...

    def verify(self, draft: Draft) -> Verdict:
        """Run the pending token and ``draft`` through the target, accept a prefix, commit it."""
        ...

    def set_threads(self, n: int) -> None: ...


class DraftSource(Protocol):
    """Serves one draft per request: the draft thread (ssd, auto) or the drafter on the caller's thread (sd)."""

    def request(self, req: DraftRequest) -> None: ...

    def reply(self) -> tuple[Draft, tuple[TreeStats, ...]]:
        """The requested draft, and the trees finished since the previous reply."""
        ...

    def close(self) -> None: ...

    def set_threads(self, n: int) -> None:
        """The draft context's threads, once idle (after ``close``)."""
        ...


class DraftMaker(Protocol):
    """The draft model's side as a draft source uses it (:class:`~engine.speculative.drafter.Drafter`)."""

    max_branches: int

    def serve(self, committed: Sequence[int], accepted: int, k: int, backup: str) -> Draft: ...

    def build_tree(self, committed: Sequence[int], draft: Draft, depth: int, budget: int,
                   fanout: Callable[[int, int], list[int]], interrupt: Callable[[], bool]) -> TreeStats: ...

    def set_threads(self, n: int) -> None: ...

    def reset(self) -> None: ...

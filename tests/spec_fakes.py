"""Fakes for the two speculation seams (engine.speculative.types.Verifier and DraftSource): no model, no thread.

The fake target knows one "true" continuation and accepts a draft's prefix that matches it, as a
greedy target would. The fake draft source serves what a test scripts: a hit or a miss, with or
without the target's next token among the draft's top candidates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engine.speculative.types import CACHE, JIT, Draft, DraftRequest, TreeStats, Verdict

TRUTH = [1000 + i for i in range(10_000)]  # the target's greedy continuation: position p holds TRUTH[p]
WRONG = 7  # a token the target never emits


class FakeTarget:
    """Accepts the longest draft prefix that matches TRUTH, then emits TRUTH's next token."""

    def __init__(self) -> None:
        self.committed: list[int] = [TRUTH[0]]
        self.threads: list[int] = []
        self.verified: list[list[int]] = []
        self.new_shape = False  # a fake verify's time is never a graph build

    def verify(self, draft: Draft) -> Verdict:
        self.verified.append(list(draft.tokens))
        pos = len(self.committed)
        n = 0
        while n < len(draft.tokens) and draft.tokens[n] == TRUTH[pos + n]:
            n += 1
        verdict = Verdict(n, TRUTH[pos + n])
        self.committed.extend(verdict.tokens(draft.tokens))
        return verdict

    def set_threads(self, n: int) -> None:
        self.threads.append(n)


@dataclass
class Script:
    """What the fake draft source answers for the i-th request (0-based)."""

    hit: Callable[[int], bool] = lambda i: False  # serve from the "cache" (ssd requests only)
    right: Callable[[int], int] = lambda i: 0  # how many leading draft tokens match the target
    predicts: Callable[[int], bool] = lambda i: False  # the target's next token is among the top candidates


@dataclass
class FakeDrafts:
    """Serves scripted drafts of length K; records every request."""

    script: Script = field(default_factory=Script)
    requests: list[DraftRequest] = field(default_factory=list)
    closed: bool = False
    threads: list[int] = field(default_factory=list)

    def request(self, req: DraftRequest) -> None:
        self.requests.append(req)

    def reply(self) -> tuple[Draft, tuple[TreeStats, ...]]:
        i = len(self.requests) - 1
        req = self.requests[i]
        pos = len(req.committed)
        right = min(self.script.right(i), req.k)
        tokens = [TRUTH[pos + j] if j < right else WRONG for j in range(req.k)]
        top = []
        for j in range(req.k):
            alt = TRUTH[pos + j] if self.script.predicts(i) else WRONG + 1
            top.append(np.array([tokens[j], alt], dtype=np.int64))
        hit = req.accepted >= 0 and self.script.hit(i)
        return Draft(tokens, None, CACHE if hit else JIT, top=top, serve_s=0.001), ()

    def close(self) -> None:
        self.closed = True

    def set_threads(self, n: int) -> None:
        self.threads.append(n)

"""The sequences of one target context, a reply on each: which one a new reply takes, and how many are busy."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from engine.speculative.target import Target

from .onethread import OneThread

T = TypeVar("T")


class Slots:
    """Targets over the sequences of one context; a reply holds one from its start to its end.

    ``lock`` guards the context: a decode, or a whole round of a reply running alone, holds it; :meth:`run` makes
    it on the one decoding thread.
    """

    def __init__(self, targets: Sequence[Target]) -> None:
        self.targets = list(targets)
        self._one = OneThread("target-decodes") if len(self.targets) > 1 else None
        self.lock = threading.Lock()
        self._cond = threading.Condition()
        self._busy: set[int] = set()
        self._shared: set[int] = set()  # replies in shared rounds now (engine.batch.rounds)
        self._freed = {t.seq: 0.0 for t in self.targets}  # when each was last given back

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` holding :attr:`lock`, where the context's decodes run (:mod:`engine.batch.onethread`; the caller's
        thread for a context of one sequence). The lock is taken there, never held while waiting for that thread."""
        def locked() -> T:
            with self.lock:
                return fn()

        return locked() if self._one is None else self._one.call(locked)

    def close(self) -> None:
        if self._one is not None:
            self._one.close()
            self._one = None

    @property
    def size(self) -> int:
        return len(self.targets)

    @property
    def busy(self) -> int:
        return len(self._busy)

    @property
    def shared(self) -> int:
        return len(self._shared)

    def alone(self) -> bool:
        """Whether at most one reply is running (it may then run its own mode)."""
        return len(self._busy) <= 1

    def take(self, prompt: Sequence[int], timeout: float) -> Target | None:
        """The free sequence that reuses most of ``prompt``; on a tie, one next to a busy sequence (a shared round
        decodes consecutive ids at once: engine.batch.rounds), then the longest idle. None after ``timeout``."""
        end = time.monotonic() + timeout
        with self._cond:
            while len(self._busy) == len(self.targets):
                left = end - time.monotonic()
                if left <= 0 or not self._cond.wait(left):
                    if len(self._busy) == len(self.targets):
                        return None
            free = [t for t in self.targets if t.seq not in self._busy]
            near = {seq + step for seq in self._busy for step in (-1, 1)}
            best = max(free, key=lambda t: (t.kv.reusable(prompt), t.seq in near, -self._freed[t.seq]))
            self._busy.add(best.seq)
            return best

    def share(self, target: Target, on: bool) -> None:
        """``target``'s reply now runs in shared rounds (or no longer)."""
        with self._cond:
            (self._shared.add if on else self._shared.discard)(target.seq)
            self._cond.notify_all()

    def give(self, target: Target) -> None:
        with self._cond:
            self._busy.discard(target.seq)
            self._shared.discard(target.seq)
            self._freed[target.seq] = time.monotonic()
            self._cond.notify_all()

    def each(self) -> list[tuple[int, bool, bool]]:
        """Every sequence: (id, busy, in shared rounds)."""
        with self._cond:
            return [(t.seq, t.seq in self._busy, t.seq in self._shared) for t in self.targets]

"""As many generations at a time as the engine makes at once: a FIFO gate with a bounded waiting line, and the
counters the app shows."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from dataclasses import replace

from .config import FinishedRequest, RunningRequest

RECENT = 20


class QueueFull(Exception):
    """Every place in the waiting line is taken."""


class Gate:
    """Lets ``places`` requests at a time use the engine (its replies at once); up to ``max_queue`` more wait in
    arrival order.

    ``acquire`` and ``release`` run on the server's event loop; the counters may be read from any thread.
    """

    def __init__(self, max_queue: int, places: int = 1) -> None:
        self.max_queue = max_queue
        self.places = places
        self._holders = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._lock = threading.Lock()
        self._running: dict[str, RunningRequest] = {}
        self._recent: deque[FinishedRequest] = deque(maxlen=RECENT)
        self.served = 0
        self.rejected = 0
        self.failed = 0

    @property
    def queued(self) -> int:
        return len(self._waiters)

    @property
    def busy(self) -> bool:
        """Every place is held (a new request waits)."""
        return self._holders >= self.places

    @property
    def holders(self) -> int:
        return self._holders

    async def acquire(self, *, unbounded: bool = False) -> None:
        """Wait for the engine; raises :class:`QueueFull` at once when the line is full (unless ``unbounded``)."""
        if not self.busy and not self._waiters:
            self._holders += 1
            return
        if len(self._waiters) >= self.max_queue and not unbounded:
            with self._lock:
                self.rejected += 1
            raise QueueFull
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut in self._waiters:
                self._waiters.remove(fut)
            elif fut.done() and not fut.cancelled():  # handed the engine just as we gave up: pass it on
                self.release()
            raise

    def release(self) -> None:
        """Hand the place to the next waiter, or give it back."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._holders = max(0, self._holders - 1)

    def reset(self) -> None:
        """Forget the engine's holders and the waiting line (a fresh start after the server stopped)."""
        self._waiters.clear()  # futures of the old, closed event loop
        self._holders = 0
        with self._lock:
            self._running.clear()

    # -- counters (any thread) --------------------------------------------------------------------
    def started(self, running: RunningRequest) -> None:
        with self._lock:
            self._running[running.id] = running

    def progressed(self, request_id: str, completion_tokens: int) -> None:
        with self._lock:
            if (now := self._running.get(request_id)) is not None:
                self._running[request_id] = replace(now, completion_tokens=completion_tokens)

    def finished(self, done: FinishedRequest) -> None:
        with self._lock:
            self.served += 1
            self._recent.append(done)
            self._running.pop(done.id, None)

    def count_failure(self) -> None:
        with self._lock:
            self.failed += 1

    @property
    def running(self) -> RunningRequest | None:
        """The request running longest (None when none runs)."""
        with self._lock:
            return next(iter(self._running.values()), None)

    @property
    def all_running(self) -> tuple[RunningRequest, ...]:
        with self._lock:
            return tuple(self._running.values())

    @property
    def recent(self) -> tuple[FinishedRequest, ...]:
        with self._lock:
            return tuple(self._recent)

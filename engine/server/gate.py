"""One generation at a time: a FIFO gate with a bounded waiting line, and the counters the app shows."""

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
    """Lets one request at a time use the engine; up to ``max_queue`` more wait in arrival order.

    ``acquire`` and ``release`` run on the server's event loop; the counters may be read from any thread.
    """

    def __init__(self, max_queue: int) -> None:
        self.max_queue = max_queue
        self._busy = False
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._lock = threading.Lock()
        self._running: RunningRequest | None = None
        self._recent: deque[FinishedRequest] = deque(maxlen=RECENT)
        self.served = 0
        self.rejected = 0
        self.failed = 0

    @property
    def queued(self) -> int:
        return len(self._waiters)

    @property
    def busy(self) -> bool:
        return self._busy

    async def acquire(self, *, unbounded: bool = False) -> None:
        """Wait for the engine; raises :class:`QueueFull` at once when the line is full (unless ``unbounded``)."""
        if not self._busy and not self._waiters:
            self._busy = True
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
        """Hand the engine to the next waiter, or mark it free."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._busy = False

    def reset(self) -> None:
        """Forget the engine's holder and the waiting line (a fresh start after the server stopped)."""
        self._waiters.clear()  # futures of the old, closed event loop
        self._busy = False
        with self._lock:
            self._running = None

    # -- counters (any thread) --------------------------------------------------------------------
    def started(self, running: RunningRequest) -> None:
        with self._lock:
            self._running = running

    def progressed(self, request_id: str, completion_tokens: int) -> None:
        with self._lock:
            if self._running is not None and self._running.id == request_id:
                self._running = replace(self._running, completion_tokens=completion_tokens)

    def finished(self, done: FinishedRequest) -> None:
        with self._lock:
            self.served += 1
            self._recent.append(done)
            if self._running is not None and self._running.id == done.id:
                self._running = None

    def count_failure(self) -> None:
        with self._lock:
            self.failed += 1

    @property
    def running(self) -> RunningRequest | None:
        with self._lock:
            return self._running

    @property
    def recent(self) -> tuple[FinishedRequest, ...]:
        with self._lock:
            return tuple(self._recent)

"""One thread for every decode of a context shared by several replies.

llama.cpp's CPU backend (OpenMP) keeps a team of worker threads per calling thread, and a team spins a while after
its decode: decodes from several reply threads leave several teams fighting over the cores (on 2 cores a 3-row
decode took 211 ms instead of 130). Run on one thread, they share one team, as one reply at a time always did.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class _Result:
    def __init__(self) -> None:
        self.value: object = None
        self.error: BaseException | None = None
        self.done = threading.Event()


class OneThread:
    """Runs the callables it is given on a thread of its own, one at a time, for the caller who waits."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], object], _Result] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the thread (at once when already on it); its result, or its exception raised here."""
        if threading.current_thread() is self._thread:
            return fn()
        out = _Result()
        self._jobs.put((fn, out))
        out.done.wait()
        if out.error is not None:
            raise out.error
        return out.value  # type: ignore[return-value]

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join()

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, out = job
            try:
                out.value = fn()
            except BaseException as exc:  # handed to the caller, who raises it on its own thread
                out.error = exc
            finally:
                out.done.set()

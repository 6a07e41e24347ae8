"""ProcessGeneration: one generation in the engine process, read a round at a time off the pipe and handed on a
token at a time, as :class:`~engine.Generation` hands them; and the wait for a request's answer."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from engine.config import GenerationParams
from engine.generation import TokenEvent
from engine.stats import GenerationStats

from . import protocol as p
from .runner import ChildProcess, Stopped

STOP_POLL_S = 0.02  # how often a waiting generation looks at its stop Event (well inside one round)


def answer(events: queue.Queue[object], rid: int) -> Any:
    """Wait for the Done of a request; raise for Failed or a stopped process."""
    while True:
        ev = events.get()
        if isinstance(ev, p.Done):
            return ev.value
        if isinstance(ev, p.Failed):
            raise p.error_of(ev)
        if isinstance(ev, Stopped):
            raise p.EngineStopped(f"{p.STOPPED}{ev.cause}")


class ProcessGeneration:
    """One generation in the engine process, iterated like :class:`~engine.Generation`.

    ``stats`` is the latest snapshot (complete after the end); ``stop`` (or the caller's Event) reaches
    the child within :data:`STOP_POLL_S`, and the engine stops at its next round boundary.
    """

    def __init__(self, proc: ChildProcess, prompt: Sequence[int], params: GenerationParams,
                 stop: threading.Event | None) -> None:
        self._proc = proc
        self._halt = stop or threading.Event()
        self._sent_stop = False
        self._ended = False
        self.stats = GenerationStats(mode=params.mode)
        self._shown_round: int | None = None
        self._left_out = False
        self.tokens: list[int] = []
        self.text_parts: list[str] = []
        self.rid, self._events = proc.request(lambda rid: p.Generate(rid, tuple(prompt), params))

    def __iter__(self) -> Iterator[TokenEvent]:
        try:
            while not self._ended:
                ev = self._next()
                if not isinstance(ev, p.Round):
                    continue
                # Once stopped, only the rest of the round shown last: the rounds the engine ran before the Stop
                # reached it are left out, so a stop ends the reply within one round, as in-process.
                if self._halt.is_set() and ev.round != self._shown_round:
                    self._left_out = True
                    continue
                self._shown_round = ev.round
                if ev.stats is not None:
                    self.stats = ev.stats
                self.stats.seconds = max(self.stats.seconds, ev.seconds)  # the stats describe every token out
                last = len(ev.tokens)
                for i, (token, text, from_draft) in enumerate(zip(ev.tokens, ev.texts, ev.drafted, strict=True), 1):
                    self.tokens.append(token)
                    self.text_parts.append(text)
                    self.stats.set_count(len(self.tokens))
                    yield TokenEvent(token, text, from_draft, ev.round, i == last)
        finally:
            self.close()

    def _next(self) -> object:
        while True:
            if self._halt.is_set():
                self._send_stop()
            try:
                ev = self._events.get(timeout=STOP_POLL_S)
            except queue.Empty:
                continue
            if isinstance(ev, p.Done):
                self.stats = ev.value
                self._end()
            elif isinstance(ev, p.Failed):
                self._end()
                raise p.error_of(ev)
            elif isinstance(ev, Stopped):
                self._end()
                self.stats.finish_reason = self.stats.finish_reason or "engine stopped"
                raise p.EngineStopped(f"{p.STOPPED}{ev.cause}")
            return ev

    def _send_stop(self) -> None:
        if not self._sent_stop:
            self._sent_stop = True
            try:
                self._proc.send(p.Stop(self.rid))
            except p.EngineStopped:
                pass  # the Stopped event follows

    def _end(self) -> None:
        self._ended = True
        self._proc.forget(self.rid)
        if self._left_out:  # the statistics count what the reply holds, whichever snapshot they are
            self.stats.set_count(len(self.tokens))

    def stop(self) -> None:
        """Ask the generation to end after the round in progress; returns at once."""
        self._halt.set()

    def close(self) -> None:
        """End the generation and wait until the engine has let go of it (idempotent; never raises)."""
        self._halt.set()
        while not self._ended:
            try:
                self._next()
            except p.EngineStopped:
                return
            except Exception:  # the generation's own error was the caller's to read, not close()'s
                return
        if not self.stats.finish_reason:
            self.stats.finish_reason = "stopped"

    @property
    def text(self) -> str:
        return "".join(self.text_parts)



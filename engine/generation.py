"""One generation: the token events and the handle that stops or closes it from any thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

from .stats import GenerationStats


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One generated token; ``text`` may be empty while a multi-byte character is incomplete. ``ends_round``: no
    other token of its round follows (the engine process sends a round's tokens in one message at that one)."""

    token: int
    text: str
    from_draft: bool
    round: int
    ends_round: bool = True


class Generation:
    """An iterator of :class:`TokenEvent`; ``stats``, ``tokens`` and ``text`` are complete after it ends.

    :meth:`stop` and :meth:`close` work from any thread and end the generation within one round.
    """

    def __init__(self, events: Generator[TokenEvent, None, None], stats: GenerationStats, tokens: list[int],
                 halt: threading.Event) -> None:
        self._events = events
        self._halt = halt  # checked by the decoding loop between rounds, like the caller's stop Event
        self._step = threading.RLock()  # held while the loop runs, i.e. for at most one round at a time
        self._ended = False
        self.stats = stats
        self.tokens = tokens
        self.text_parts: list[str] = []

    def __iter__(self) -> Iterator[TokenEvent]:
        try:
            while True:
                with self._step:
                    if self._ended:
                        return
                    try:
                        ev = next(self._events)
                    except StopIteration:
                        self._ended = True
                        return
                self.text_parts.append(ev.text)
                yield ev
        finally:
            self.close()

    def stop(self) -> None:
        """Ask the generation to end after the round in progress; returns at once."""
        self._halt.set()

    def close(self) -> None:
        """End the generation (if still running) and release the engine; idempotent.

        From another thread while that thread runs a round, this waits for the round to finish.
        """
        self._halt.set()
        with self._step:
            if self._ended:
                return
            self._ended = True
            self._events.close()
            if not self.stats.finish_reason:
                self.stats.finish_reason = "stopped"

    def run(self, on_token: Callable[[TokenEvent], None] | None = None) -> Generation:
        for ev in self:
            if on_token is not None:
                on_token(ev)
        return self

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

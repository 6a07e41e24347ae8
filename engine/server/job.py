"""One generation on a worker thread, its text handed to the event loop piece by piece."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace

from engine import ContextFullError, Engine, EngineError, Generation, GenerationParams, GenerationStats, ParameterError
from engine.chat.budget import ThinkingBudget
from engine.chat.holdback import first_marker, held_tail
from engine.process import EngineProcess, EngineStopped, protocol
from engine.process.generation import ProcessGeneration

from .errors import APIError

log = logging.getLogger(__name__)

# What the server generates on: an engine here (tests, scripts), or one in its own process (``serve``, the app),
# whose death ends the requests in flight with EngineStopped and leaves the server up.
ServedEngine = Engine | EngineProcess

_FINISH = {"stop": "stop", "length": "length", "context": "length", "stopped": "stop"}


class StopMatcher:
    """Cuts streamed text at the first stop string, holding back a tail that may start one (:mod:`engine.chat.holdback`,
    the rule the reply splitter follows for its markers)."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]
        self._buf = ""
        self.hit = False

    def feed(self, text: str) -> str:
        """The text that is safe to send now; sets ``hit`` when a stop string is complete."""
        if not self.stops:
            return text
        self._buf += text
        cut, _ = first_marker(self._buf, self.stops)
        if cut >= 0:
            self.hit = True
            out, self._buf = self._buf[:cut], ""
            return out
        keep = len(self._buf) - held_tail(self._buf, self.stops)
        out, self._buf = self._buf[:keep], self._buf[keep:]
        return out

    def flush(self) -> str:
        out, self._buf = self._buf, ""
        return out


@dataclass(frozen=True, slots=True)
class MiddleEnd:
    """Where a fill-in-the-middle reply ends besides its end-of-generation tokens: at one of ``tokens`` (the FIM
    tokens, :func:`~engine.core.fim.fim_ends`), or before ``text`` (the suffix's head, cut like a stop string)."""

    tokens: frozenset[int]
    text: str | None


@dataclass(slots=True)
class Outcome:
    """How a generation ended; complete once :meth:`Job.pieces` is exhausted."""

    stats: GenerationStats | None = None  # None if the engine refused to start
    finish_reason: str = "stop"
    error: EngineError | None = None
    cancelled: bool = False
    reasoning_tokens: int = 0  # of the reply's tokens, those that were thinking


_END = object()


class Job:
    """Runs ``engine.generate`` on its own thread; :meth:`cancel` stops it within one round.

    ``on_token(n)`` is called on the worker thread after each token, ``on_end(outcome)`` once when the engine
    is free again (also after an error or a cancel).
    """

    def __init__(
        self,
        engine: ServedEngine,
        prompt: Sequence[int],
        params: GenerationParams,
        stops: Sequence[str],
        on_token: Callable[[int], None],
        on_end: Callable[[Outcome], None],
        budget: ThinkingBudget | None = None,
        middle: MiddleEnd | None = None,
    ) -> None:
        self._engine = engine
        self._budget = budget
        self._prompt = list(prompt)
        self._params = params
        self._matcher = StopMatcher([*stops, middle.text] if middle is not None and middle.text else stops)
        self._ends = middle.tokens if middle is not None else frozenset()
        self._on_token = on_token
        self._on_end = on_end
        self._stop = threading.Event()
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._thread = threading.Thread(target=self._work, name="ssd-chat-server-gen", daemon=True)
        self.outcome = Outcome()
        self._over = False  # the generation running stopped at the thinking budget

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """Ask the generation to stop (any thread); the engine checks between rounds. No-op once it ended."""
        if self._thread.is_alive() and not self._stop.is_set():
            self.outcome.cancelled = True
            self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    async def pieces(self) -> AsyncIterator[str]:
        """The reply's text as it is made (never empty strings); then ``outcome`` is final."""
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            assert isinstance(item, str)
            yield item

    def _put(self, item: object) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            pass

    def _work(self) -> None:
        gen = None
        made = 0  # tokens of the generations before the one running (a thinking block closed by the budget)
        try:
            prompt, params = self._prompt, self._params
            while gen is None or self._close_thinking(gen):
                if gen is not None:  # the budget is spent: the block's end is written and the answer follows
                    assert self._budget is not None and self._budget.close is not None
                    close = self._engine.markup_tokens(self._budget.close)
                    made += len(gen.tokens) + len(close)
                    prompt = [*prompt, *gen.tokens, *close]
                    params = replace(params, max_tokens=max(1, params.max_tokens - len(gen.tokens) - len(close)))
                    self._put(self._matcher.feed(self._budget.close))
                    self._budget.closed()
                gen = self._engine.generate(prompt, params, self._stop)
                self._run(gen, made)
            gen.close()
            if not self._matcher.hit:
                tail = self._matcher.flush()
                if tail:
                    self._put(tail)
            self.outcome.finish_reason = "stop" if self._matcher.hit else _FINISH.get(gen.stats.finish_reason, "stop")
        except EngineError as exc:
            self.outcome.error = exc
        except Exception as exc:  # never let a worker thread die silently; the reply says what failed
            log.exception("generation failed")
            self.outcome.error = EngineError(f"generation failed: {type(exc).__name__}: {exc}")
        finally:
            if gen is not None:
                gen.close()
                self.outcome.stats = gen.stats
                if made:
                    gen.stats.set_count(gen.stats.new_tokens + made)
            if self._budget is not None:
                self.outcome.reasoning_tokens = self._budget.spent
            try:
                self._on_end(self.outcome)
            finally:
                self._put(_END)

    def _run(self, gen: Generation | ProcessGeneration, made: int) -> None:
        """Send ``gen``'s text until it ends, a stop string, a stop, or the thinking budget."""
        self._over = False
        for n, ev in enumerate(gen, made + 1):
            if ev.token in self._ends:  # the middle is over: the token is not part of it
                self._matcher.hit = True
                break
            text = self._matcher.feed(ev.text)
            if text:
                self._put(text)
            self._on_token(n)
            if self._matcher.hit or self._stop.is_set():
                break
            if self._budget is not None and self._budget.feed(ev.text):
                self._over = True
                break

    def _close_thinking(self, gen: Generation | ProcessGeneration) -> bool:
        """Whether ``gen`` stopped at the thinking budget with room left for the answer."""
        gen.close()
        return self._over and not self._stop.is_set() and gen.stats.finish_reason != "length"


def engine_failure(exc: Exception) -> APIError:
    """The reply for an engine error raised during a generation."""
    if isinstance(exc, ContextFullError):
        return APIError(400, str(exc), code="context_length_exceeded")
    if isinstance(exc, ParameterError):
        return APIError(400, str(exc), code="invalid_value")
    if isinstance(exc, EngineStopped):  # "the engine stopped: killed by SIGBUS (...)": the cause, as it is
        return APIError(503, str(exc), code="engine_stopped")
    return APIError(503, f"the engine could not generate: {exc}", code="engine_unavailable")


def engine_state(engine: ServedEngine) -> str:
    """``"restarting"`` while ``serve``'s engine process is started again after it stopped, else ``"ready"``
    (a stopped engine process of the app's starts again with the next request)."""
    return "restarting" if isinstance(engine, EngineProcess) and engine.state == "restarting" else "ready"


def longest_piece(engine: ServedEngine) -> int:
    """The most bytes of text one token of the target's vocabulary stands for."""
    return engine.longest_piece() if isinstance(engine, EngineProcess) else protocol.longest_piece(engine)

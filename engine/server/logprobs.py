"""``logprobs`` / ``top_logprobs``: the engine a job generates on, with the row tap on
(:mod:`engine.speculative.logprobs`), and the figures in OpenAI's two shapes (chat's ``content`` entries,
completions' ``tokens`` / ``token_logprobs`` / ``top_logprobs`` / ``text_offset``).

An engine here taps its target on the generating thread; an engine in a process of its own runs the tapped
generation as a task there (:mod:`.logprob_task`) and reports each token with its figures and the bytes of the
tokens they name: the server holds no copy of the target's vocabulary.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from engine import Engine, GenerationParams, GenerationStats
from engine.generation import TokenEvent
from engine.process import EngineProcess
from engine.speculative.logprobs import Figures, TappedGeneration

from .job import ServedEngine
from .logprob_task import TASK, pieces

_POLL_S = 0.02  # how often a waiting generation in the engine process looks at its stop Event


class _EitherStop(threading.Event):
    """Set when this one is set or the caller's is: a task in the engine process has one stop Event."""

    def __init__(self, other: threading.Event | None) -> None:
        super().__init__()
        self._other = other

    def is_set(self) -> bool:
        return super().is_set() or (self._other is not None and self._other.is_set())


class ProcessTapped:
    """A tapped generation in the engine process, iterated like a Generation (``stats`` complete after it); the
    bytes of the tokens its figures name land in ``known``."""

    def __init__(self, engine: EngineProcess, prompt: Sequence[int], params: GenerationParams,
                 stop: threading.Event | None, top: int, sink: list[Figures | None], known: dict[int, bytes]) -> None:
        self.stats = GenerationStats(mode=params.mode, prompt_tokens=len(prompt))
        self.tokens: list[int] = []
        self._sink = sink
        self._known = known
        self._halt = _EitherStop(stop)
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._ended = False
        args = (tuple(prompt), params, top)

        def run() -> None:
            try:
                stats = engine.run_task(TASK, args, self._halt, lambda v: self._events.put(("token", v)))
                self._events.put(("done", stats))
            except BaseException as exc:  # handed to the iterating thread, which raises it there
                self._events.put(("error", exc))

        self._thread = threading.Thread(target=run, name="ssd-chat-server-logprobs", daemon=True)
        self._thread.start()

    def _next(self) -> tuple[str, Any]:
        while True:
            try:
                return self._events.get(timeout=_POLL_S)
            except queue.Empty:
                continue

    def __iter__(self) -> Iterator[TokenEvent]:
        try:
            while not self._ended:
                kind, value = self._next()
                if kind == "token":
                    token, text, from_draft, n_round, figures, named = value
                    self.tokens.append(token)
                    self._known.update(named)  # before the figures: a reader of the sink finds their texts
                    self._sink.append(figures)
                    yield TokenEvent(token, text, from_draft, n_round)
                else:
                    self._end(kind, value)
        finally:
            self.close()

    def _end(self, kind: str, value: Any) -> None:
        self._ended = True
        if kind == "error":
            raise value
        self.stats = value

    def close(self) -> None:
        """Stop the task and wait until the engine has let go of it (idempotent; never raises)."""
        self._halt.set()
        while not self._ended:
            kind, value = self._next()
            if kind != "token":
                try:
                    self._end(kind, value)
                except Exception:  # the generation's own error was the caller's to read
                    return
        if not self.stats.finish_reason:
            self.stats.finish_reason = "stopped"


class TappedEngine:
    """What a :class:`~.job.Job` generates on when the request asks for logprobs; the figures of each token the
    job reads land in ``sink``, in order."""

    def __init__(self, engine: ServedEngine, top: int) -> None:
        self._engine = engine
        self.top = top
        self.sink: list[Figures | None] = []
        self._known: dict[int, bytes] = {}  # the bytes of the tokens the figures name (the engine process's)
        self._read = 0

    def generate(self, prompt: Sequence[int], params: GenerationParams,
                 stop: threading.Event | None = None) -> Any:
        if isinstance(self._engine, Engine):
            return TappedGeneration(self._engine, prompt, params, stop, self.top, self.sink)
        return ProcessTapped(self._engine, prompt, params, stop, self.top, self.sink, self._known)

    def markup_tokens(self, text: str) -> list[int]:
        return self._engine.markup_tokens(text)

    def served(self) -> ServedEngine:
        """This, as the engine a Job takes (it uses ``generate`` and ``markup_tokens`` alone)."""
        return cast(ServedEngine, self)

    def pieces(self, figures: Sequence[Figures | None]) -> Mapping[int, bytes]:
        """The bytes of the tokens ``figures`` name: the engine's own model here, else what its process sent."""
        if isinstance(self._engine, Engine):
            return {t: b for f in figures for t, b in pieces(self._engine.target_model, f).items()}
        return self._known

    def take(self) -> list[Figures | None]:
        """The figures that came since the last take (the worker thread appends; this reads up to a length)."""
        n = len(self.sink)
        out, self._read = self.sink[self._read:n], n
        return out


def _piece(known: Mapping[int, bytes], token: int) -> tuple[str, list[int]]:
    raw = known[token]
    return raw.decode("utf-8", "replace"), list(raw)


def chat_entries(known: Mapping[int, bytes], figures: Sequence[Figures | None]) -> list[dict[str, Any]]:
    """Chat's ``logprobs.content`` entries: token, logprob, bytes and the top alternatives."""
    out: list[dict[str, Any]] = []
    for f in figures:
        if f is None:
            continue
        token, lp, best = f
        text, raw = _piece(known, token)
        tops = []
        for t, tlp in best:
            ttext, traw = _piece(known, t)
            tops.append({"token": ttext, "logprob": tlp, "bytes": traw})
        out.append({"token": text, "logprob": lp, "bytes": raw, "top_logprobs": tops})
    return out


def chat_logprobs(known: Mapping[int, bytes], figures: Sequence[Figures | None]) -> dict[str, Any]:
    """Chat's ``logprobs`` object; ``known``: the bytes of the tokens the figures name."""
    return {"content": chat_entries(known, figures), "refusal": None}


def text_logprobs(known: Mapping[int, bytes], figures: Sequence[Figures | None], offset: int = 0) -> dict[str, Any]:
    """Completions' ``logprobs`` object; ``offset``: characters of the reply before these tokens."""
    tokens: list[str] = []
    values: list[float] = []
    tops: list[dict[str, float]] = []
    offsets: list[int] = []
    for f in figures:
        if f is None:
            continue
        token, lp, best = f
        text = _piece(known, token)[0]
        tokens.append(text)
        values.append(lp)
        tops.append({_piece(known, t)[0]: tlp for t, tlp in best})
        offsets.append(offset)
        offset += len(text)
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}


class _Recorded:
    """A generation whose events' texts are kept (in ``texts``) as the job reads them."""

    def __init__(self, gen: Any, texts: list[str]) -> None:
        self._gen = gen
        self._texts = texts

    def __iter__(self) -> Iterator[TokenEvent]:
        try:
            for ev in self._gen:
                self._texts.append(ev.text)
                yield ev
        finally:
            self.close()

    @property
    def stats(self) -> GenerationStats:
        return cast(GenerationStats, self._gen.stats)

    @property
    def tokens(self) -> list[int]:
        return list(self._gen.tokens)

    def close(self) -> None:
        self._gen.close()


class Recorder:
    """What a job generates on when the reply must say which stop string ended it: the text the job read, stop
    strings included (the reply's own text has them cut)."""

    def __init__(self, engine: ServedEngine | TappedEngine) -> None:
        self._engine = engine
        self.texts: list[str] = []

    def generate(self, prompt: Sequence[int], params: GenerationParams,
                 stop: threading.Event | None = None) -> Any:
        return _Recorded(self._engine.generate(prompt, params, stop), self.texts)

    def markup_tokens(self, text: str) -> list[int]:
        return self._engine.markup_tokens(text)

    def served(self) -> ServedEngine:
        return cast(ServedEngine, self)

    def stop_hit(self, stops: Sequence[str]) -> str | None:
        """The stop string that ended the reply: the one that occurs first in the text read (None if none does)."""
        text = "".join(self.texts)
        found = [(text.find(s), i) for i, s in enumerate(stops) if s and s in text]
        return stops[min(found)[1]] if found else None

"""EngineWorker: one QObject on its own QThread that runs the engine and reports through signals.

The protocol per request is fixed: ``generation_started``, then ``token_generated`` and
``stats_changed`` as tokens arrive, then exactly one of ``generation_finished`` or ``failed``.
Loading emits ``state_changed(LOADING)`` then ``model_loaded`` or ``failed``.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from PySide6.QtCore import QObject, Signal, Slot

from engine import ChatMessage, Engine, EngineConfig, GenerationParams, first_difference

from .boundary import WorkerBoundary


class EngineState(enum.Enum):
    """What the engine is doing; it alone decides which controls are enabled."""

    IDLE = "no model"
    LOADING = "loading model"
    READY = "ready"
    GENERATING = "generating"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class LoadRequest:
    """Load a pair (``draft`` may be None, then only ``ar`` is possible)."""

    config: EngineConfig
    label: str


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    """A chat turn to answer; ``stop`` is set by :meth:`EngineWorker.request_stop`."""

    request_id: int
    messages: tuple[tuple[str, str], ...]
    params: GenerationParams
    stop: threading.Event = field(default_factory=threading.Event, compare=False)


@dataclass(frozen=True, slots=True)
class FinishedReply:
    """A finished (or stopped) reply: its text, runs of draft/non-draft characters and final stats."""

    request_id: int
    text: str
    runs: tuple[tuple[int, bool], ...]
    stats: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Verification:
    """Result of "Verify exactness": greedy ``ar`` against greedy speculative decoding."""

    mode: str
    identical: bool
    ar_tokens: int
    spec_tokens: int
    first_difference: int | None
    ar_text: str
    spec_text: str
    stopped: bool


class EngineSignals(QObject):
    """The signals of :class:`EngineWorker`, declared once; :class:`EngineHost` re-emits the same set.

    Signals:
        state_changed(EngineState): the engine state moved.
        model_loaded(str): a model pair is loaded; the payload describes it.
        generation_started(int): a request began (payload: its id).
        token_generated(str, bool): text of one token and whether it came from an accepted draft.
        stats_changed(dict): the engine's running stats (``GenerationStats.to_dict()``), at most every
            ``STATS_INTERVAL_S`` and once more at the end.
        generation_finished(FinishedReply): the reply ended (done, length, stopped...).
        verification_finished(Verification): "Verify exactness" finished.
        failed(str): a readable one-line error; the worker stays usable.
    """

    state_changed = Signal(object)
    model_loaded = Signal(str)
    generation_started = Signal(int)
    token_generated = Signal(str, bool)
    stats_changed = Signal(object)
    generation_finished = Signal(object)
    verification_finished = Signal(object)
    failed = Signal(str)

    @classmethod
    def signal_names(cls) -> list[str]:
        """The names of the signals declared on this class."""
        return [name for name, value in vars(EngineSignals).items() if isinstance(value, Signal)]


class EngineWorker(EngineSignals):
    """Owns the :class:`Engine` (created and used only on its thread) and emits what it does."""

    STATS_INTERVAL_S = 0.1

    def __init__(self) -> None:
        super().__init__()
        self._engine: Engine | None = None
        self._stops: set[threading.Event] = set()
        self._stops_lock = threading.Lock()
        self._next_id = 0

    # -- called from the UI thread ----------------------------------------------------------------
    def new_request(self, messages: Sequence[tuple[str, str]], params: GenerationParams) -> GenerateRequest:
        """Make a request whose stop Event :meth:`request_stop` can reach (thread-safe)."""
        with self._stops_lock:
            self._next_id += 1
            req = GenerateRequest(self._next_id, tuple(messages), params)
            self._stops.add(req.stop)
        return req

    def request_stop(self) -> None:
        """Stop every pending or running request at the next round boundary (thread-safe, direct call)."""
        with self._stops_lock:
            for ev in self._stops:
                ev.set()

    # -- slots, run on the worker thread ----------------------------------------------------------
    @Slot(object)
    def load(self, request: LoadRequest) -> None:
        """Load a model pair, replacing the current one."""
        self._close_engine()
        self.state_changed.emit(EngineState.LOADING)
        with WorkerBoundary(f"Could not load {request.label}", self.failed.emit) as job:
            self._engine = Engine(request.config)
        if job.failed:
            self.state_changed.emit(EngineState.FAILED)
            return
        self.model_loaded.emit(request.label)
        self.state_changed.emit(EngineState.READY)

    @Slot(object)
    def generate(self, request: GenerateRequest) -> None:
        """Answer a chat turn, streaming tokens."""
        eng = self._engine_or_fail(request)
        if eng is None:
            return
        self.state_changed.emit(EngineState.GENERATING)
        self.generation_started.emit(request.request_id)
        text: list[str] = []
        runs: list[tuple[int, bool]] = []
        with WorkerBoundary("Generation failed", self.failed.emit) as job:
            gen = eng.generate(eng.messages_tokens(_chat(request.messages)), request.params, request.stop)
            last = time.perf_counter()
            for ev in gen:
                if ev.text:
                    text.append(ev.text)
                    _extend_runs(runs, len(ev.text), ev.from_draft)
                    self.token_generated.emit(ev.text, ev.from_draft)
                now = time.perf_counter()
                if now - last >= self.STATS_INTERVAL_S:
                    last = now
                    self.stats_changed.emit(gen.stats.to_dict())
            final = gen.stats.to_dict()
        self._forget(request)
        if job.failed:
            self.state_changed.emit(EngineState.READY)
            return
        self.stats_changed.emit(final)
        self.generation_finished.emit(FinishedReply(request.request_id, "".join(text), tuple(runs), final))
        self.state_changed.emit(EngineState.READY)

    @Slot(object)
    def verify(self, request: GenerateRequest) -> None:
        """Run the prompt greedily with ``ar`` and with ``request.params.mode``; compare the tokens."""
        eng = self._engine_or_fail(request)
        if eng is None:
            return
        self.state_changed.emit(EngineState.GENERATING)
        with WorkerBoundary("Verification failed", self.failed.emit) as job:
            tokens = eng.messages_tokens(_chat(request.messages))
            ar = eng.generate(tokens, replace(request.params, mode="ar"), request.stop).run()
            spec = eng.generate(tokens, request.params, request.stop).run()
            a, b = list(ar.tokens), list(spec.tokens)
            diff = first_difference(a, b)
            at = diff or 0
            result = Verification(
                mode=request.params.mode, identical=diff is None, ar_tokens=len(a), spec_tokens=len(b),
                first_difference=diff,
                ar_text=eng.detokenize(a[max(0, at - 8): at + 12]) if diff is not None else ar.text,
                spec_text=eng.detokenize(b[max(0, at - 8): at + 12]) if diff is not None else spec.text,
                stopped=request.stop.is_set())
        self._forget(request)
        if not job.failed:
            self.verification_finished.emit(result)
        self.state_changed.emit(EngineState.READY)

    @Slot()
    def unload(self) -> None:
        """Free the engine."""
        self._close_engine()
        self.state_changed.emit(EngineState.IDLE)

    def close_engine(self) -> None:
        """Free the engine from any thread once the worker thread has stopped."""
        self._close_engine()

    # -- helpers ----------------------------------------------------------------------------------
    def _engine_or_fail(self, request: GenerateRequest) -> Engine | None:
        """The loaded engine, or None after telling the UI that no model is loaded."""
        if self._engine is None:
            self._forget(request)
            self.failed.emit("No model is loaded: pick a model pair in the model manager.")
        return self._engine

    def _close_engine(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def _forget(self, request: GenerateRequest) -> None:
        with self._stops_lock:
            self._stops.discard(request.stop)


def _extend_runs(runs: list[tuple[int, bool]], length: int, from_draft: bool) -> None:
    """Add ``length`` characters to the runs of (length, came from an accepted draft)."""
    if runs and runs[-1][1] == from_draft:
        runs[-1] = (runs[-1][0] + length, from_draft)
    else:
        runs.append((length, from_draft))


def _chat(messages: Sequence[tuple[str, str]]) -> list[ChatMessage]:
    return [cast(ChatMessage, {"role": role, "content": content}) for role, content in messages]

"""EngineWorker: one QObject on its own QThread that runs the engine and reports through signals.

The protocol per request is fixed: ``generation_started``, then ``token_generated`` and
``stats_changed`` as tokens arrive, then exactly one of ``generation_finished`` or ``failed``.
Loading emits ``state_changed(LOADING)`` then ``model_loaded`` or ``failed``.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from PySide6.QtCore import QObject, QThread, Signal, Slot

from engine import Engine, EngineConfig, EngineError, GenerationParams, GenerationStats
from engine.chat import Message as ChatMessage
from engine.verify import first_difference

log = logging.getLogger(__name__)


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
class LiveStats:
    """A snapshot while generating (rates are None until they mean something)."""

    mode: str
    new_tokens: int
    draft_tokens: int
    tokens_per_second: float
    ttft_s: float | None
    acceptance_rate: float | None
    hit_rate: float | None


@dataclass(frozen=True, slots=True)
class Reply:
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


class ModeTracker:
    """Follows which mode ran the latest round, from the engine's live ``rounds_by_mode`` counters."""

    def __init__(self, requested: str) -> None:
        self.requested = requested
        self.current = requested
        self._counts: dict[str, int] = {}

    def update(self, stats: GenerationStats) -> str:
        """The mode of the most recent round (``"auto → ssd"`` when auto picked it)."""
        for mode, n in stats.rounds_by_mode.items():
            if n > self._counts.get(mode, 0):
                self.current = mode
        self._counts = dict(stats.rounds_by_mode)
        if self.requested == "auto" and self.current != "auto":
            return f"auto → {self.current}"
        return self.current


def live_stats(stats: GenerationStats, mode: str, new_tokens: int, draft_tokens: int,
               elapsed: float) -> LiveStats:
    """Rates from the engine's running counters (they are updated every round)."""
    return LiveStats(
        mode=mode,
        new_tokens=new_tokens,
        draft_tokens=draft_tokens,
        tokens_per_second=new_tokens / elapsed if elapsed > 0 else 0.0,
        ttft_s=stats.ttft_s or None,
        acceptance_rate=stats.accepted / stats.drafted if stats.drafted else None,
        hit_rate=stats.hits / stats.lookups if stats.lookups else None,
    )


class EngineWorker(QObject):
    """Owns the :class:`Engine` (created and used only on its thread) and emits what it does.

    Signals:
        state_changed(EngineState): the engine state moved.
        model_loaded(str): a model pair is loaded; the payload describes it.
        generation_started(int): a request began (payload: its id).
        token_generated(str, bool): text of one token and whether it came from an accepted draft.
        stats_changed(LiveStats): running stats, at most every ``STATS_INTERVAL_S``.
        generation_finished(Reply): the reply ended (done, length, stopped...).
        verification_finished(Verification): "Verify exactness" finished.
        failed(str): a readable one-line error; the worker stays usable.
    """

    STATS_INTERVAL_S = 0.1

    state_changed = Signal(object)
    model_loaded = Signal(str)
    generation_started = Signal(int)
    token_generated = Signal(str, bool)
    stats_changed = Signal(object)
    generation_finished = Signal(object)
    verification_finished = Signal(object)
    failed = Signal(str)

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
        try:
            self._engine = Engine(request.config)
        except EngineError as exc:
            self._fail(f"Could not load {request.label}: {exc}", EngineState.FAILED)
            return
        except Exception as exc:  # worker boundary: never let an error escape into Qt
            log.exception("loading %s failed", request.label)
            self._fail(f"Could not load {request.label}: {type(exc).__name__}: {exc}", EngineState.FAILED)
            return
        self.model_loaded.emit(request.label)
        self.state_changed.emit(EngineState.READY)

    def _engine_or_fail(self, request: GenerateRequest) -> Engine | None:
        """The loaded engine, or None after telling the UI that no model is loaded."""
        if self._engine is None:
            self._forget(request)
            self.failed.emit("No model is loaded: pick a model pair in the model manager.")
        return self._engine

    @Slot(object)
    def generate(self, request: GenerateRequest) -> None:
        """Answer a chat turn, streaming tokens."""
        eng = self._engine_or_fail(request)
        if eng is None:
            return
        self.state_changed.emit(EngineState.GENERATING)
        self.generation_started.emit(request.request_id)
        text: list[str] = []
        runs: list[list[Any]] = []
        try:
            tokens = eng.messages_tokens(_chat(request.messages))
            gen = eng.generate(tokens, request.params, request.stop)
            t0 = time.perf_counter()
            last = t0
            count = drafted = 0
            modes = ModeTracker(request.params.mode)
            for ev in gen:
                count += 1
                drafted += int(ev.from_draft)
                if ev.text:
                    text.append(ev.text)
                    if runs and runs[-1][1] == ev.from_draft:
                        runs[-1][0] += len(ev.text)
                    else:
                        runs.append([len(ev.text), ev.from_draft])
                    self.token_generated.emit(ev.text, ev.from_draft)
                now = time.perf_counter()
                if now - last >= self.STATS_INTERVAL_S:
                    last = now
                    self.stats_changed.emit(live_stats(gen.stats, modes.update(gen.stats), count, drafted,
                                                       now - t0))
            final = gen.stats.to_dict()
            final["draft_tokens"] = drafted
        except EngineError as exc:
            self._fail(str(exc), EngineState.READY)
            return
        except Exception as exc:  # worker boundary
            log.exception("generation failed")
            self._fail(f"Generation failed: {type(exc).__name__}: {exc}", EngineState.READY)
            return
        finally:
            self._forget(request)
        self.stats_changed.emit(live_stats(gen.stats, modes.update(gen.stats), count, drafted,
                                           gen.stats.seconds))
        self.generation_finished.emit(Reply(request.request_id, "".join(text),
                                            tuple((int(n), bool(d)) for n, d in runs), final))
        self.state_changed.emit(EngineState.READY)

    @Slot(object)
    def verify(self, request: GenerateRequest) -> None:
        """Run the prompt greedily with ``ar`` and with ``request.params.mode``; compare the tokens."""
        eng = self._engine_or_fail(request)
        if eng is None:
            return
        self.state_changed.emit(EngineState.GENERATING)
        try:
            tokens = eng.messages_tokens(_chat(request.messages))
            ar_params = request.params.__class__(
                mode="ar", max_tokens=request.params.max_tokens, sampling=request.params.sampling)
            ar = eng.generate(tokens, ar_params, request.stop).run()
            spec = eng.generate(tokens, request.params, request.stop).run()
        except EngineError as exc:
            self._fail(str(exc), EngineState.READY)
            return
        except Exception as exc:  # worker boundary
            log.exception("verification failed")
            self._fail(f"Verification failed: {type(exc).__name__}: {exc}", EngineState.READY)
            return
        finally:
            self._forget(request)
        a, b = list(ar.tokens), list(spec.tokens)
        diff = first_difference(a, b)
        at = diff or 0
        self.verification_finished.emit(Verification(
            mode=request.params.mode, identical=diff is None, ar_tokens=len(a), spec_tokens=len(b),
            first_difference=diff,
            ar_text=eng.detokenize(a[max(0, at - 8): at + 12]) if diff is not None else ar.text,
            spec_text=eng.detokenize(b[max(0, at - 8): at + 12]) if diff is not None else spec.text,
            stopped=request.stop.is_set()))
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
    def _close_engine(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def _forget(self, request: GenerateRequest) -> None:
        with self._stops_lock:
            self._stops.discard(request.stop)

    def _fail(self, message: str, state: EngineState) -> None:
        log.warning("%s", message)
        self.failed.emit(message)
        self.state_changed.emit(state)


def _chat(messages: Sequence[tuple[str, str]]) -> list[ChatMessage]:
    return [cast(ChatMessage, {"role": role, "content": content}) for role, content in messages]


WORKER_SIGNALS = ("state_changed", "model_loaded", "generation_started", "token_generated", "stats_changed",
                  "generation_finished", "verification_finished", "failed")


class EngineHost(QObject):
    """Owns the worker thread: posts requests to the worker and shuts it down cleanly.

    The worker's signals are re-emitted by the host (a queued signal-to-signal connection), so
    whatever connects to the host runs on the UI thread.

    Signals:
        load_requested(LoadRequest), generate_requested(GenerateRequest),
        verify_requested(GenerateRequest), unload_requested(): queued to the worker's slots.
        state_changed, model_loaded, generation_started, token_generated, stats_changed,
        generation_finished, verification_finished, failed: as on :class:`EngineWorker`.
    """

    state_changed = Signal(object)
    model_loaded = Signal(str)
    generation_started = Signal(int)
    token_generated = Signal(str, bool)
    stats_changed = Signal(object)
    generation_finished = Signal(object)
    verification_finished = Signal(object)
    failed = Signal(str)

    load_requested = Signal(object)
    generate_requested = Signal(object)
    verify_requested = Signal(object)
    unload_requested = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine_thread = QThread()
        self.engine_thread.setObjectName("engine")
        self.worker = EngineWorker()
        self.worker.moveToThread(self.engine_thread)
        self.load_requested.connect(self.worker.load)
        self.generate_requested.connect(self.worker.generate)
        self.verify_requested.connect(self.worker.verify)
        self.unload_requested.connect(self.worker.unload)
        for name in WORKER_SIGNALS:
            getattr(self.worker, name).connect(getattr(self, name))
        self.engine_thread.start()
        self._shut = False

    def load(self, config: EngineConfig, label: str) -> None:
        """Ask the worker to load a pair."""
        self.load_requested.emit(LoadRequest(config, label))

    def generate(self, messages: Sequence[tuple[str, str]], params: GenerationParams) -> int:
        """Ask for a reply; returns the request id."""
        req = self.worker.new_request(messages, params)
        self.generate_requested.emit(req)
        return req.request_id

    def verify(self, messages: Sequence[tuple[str, str]], params: GenerationParams) -> int:
        """Ask for an exactness check of ``params.mode`` against ``ar``."""
        req = self.worker.new_request(messages, params)
        self.verify_requested.emit(req)
        return req.request_id

    def request_stop(self) -> None:
        """Stop the running generation within one round."""
        self.worker.request_stop()

    def shutdown(self, timeout_ms: int = 30000) -> None:
        """Stop any generation, end the thread and free the engine (idempotent)."""
        if self._shut:
            return
        self._shut = True
        self.worker.request_stop()
        self.engine_thread.quit()
        if not self.engine_thread.wait(timeout_ms):
            log.error("the engine thread did not stop within %d ms", timeout_ms)
            return
        self.worker.close_engine()

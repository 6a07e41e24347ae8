"""EngineWorker: one QObject on its own QThread that drives the engine process and reports through signals.

The engine itself runs in a process of its own (:class:`~engine.process.EngineProcess`): a native fault
there ends that process, not the app. The reply in flight then fails with "the engine stopped: <cause>",
``engine_stopped`` says so at once, and the next request starts the process again with the same pair.

The protocol per request is fixed: ``generation_started``, then ``token_generated`` (the answer),
``thinking_generated`` and ``stats_changed`` as tokens arrive, then exactly one of ``generation_finished``
or ``failed``. A reply's text is split into thinking and answer here (:mod:`app.worker.chat_setup`).
Loading emits ``state_changed(LOADING)`` then ``model_loaded`` or ``failed``.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from app.server.slot import ServerEvent, ServerRequest, ServerSlot
from app.worker import chat_setup
from app.worker.boundary import WorkerBoundary
from app.worker.chat_setup import ChatChoice, ReplyPiece, ReplyText, ToolCall, Turn
from engine import (
    DROP_OLDEST,
    EngineConfig,
    EngineProcess,
    GenerationParams,
    Mode,
    NoChatTemplateError,
    drafting_warning,
)


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
    messages: tuple[Turn, ...]  # (role, content) or, for a reply, (role, content, its thinking)
    params: GenerationParams
    stop: threading.Event = field(default_factory=threading.Event, compare=False)
    overflow: str = DROP_OLDEST  # what a chat longer than the context does (engine.OVERFLOW_POLICIES)
    chat: ChatChoice = field(default_factory=ChatChoice)  # the thinking switch; a template picked for the model


@dataclass(frozen=True, slots=True)
class FinishedReply:
    """A finished (or stopped) reply: its answer's text, runs of draft/non-draft characters, final stats (with
    ``thinking_s`` where it thought) and its thinking."""

    request_id: int
    text: str
    runs: tuple[tuple[int, bool], ...]
    stats: dict[str, Any]
    reasoning: str = ""
    calls: tuple[ToolCall, ...] = ()  # the offered tools it called, for the app to run with the user's consent


class EngineSignals(QObject):
    """The signals of :class:`EngineWorker`, declared once; :class:`EngineHost` re-emits the same set.

    Signals:
        state_changed(EngineState): the engine state moved.
        model_loaded(str): a model pair is loaded; the payload describes it.
        generation_started(int): a request began (payload: its id).
        context_fitted(int, int): the chat was cut to fit the context (request id, oldest turns left out).
        token_generated(str, bool): the answer's text of one token and whether it came from an accepted draft.
        thinking_generated(str): the thinking's text of one token (shown apart, above the answer).
        format_read(ModelFormat): the loaded model's chat format (after :meth:`read_format`, or a reply refused for
            want of a template).
        stats_changed(dict): the engine's running stats (``GenerationStats.to_dict()``) after every token's text, so
            the line under the reply counts what it shows, and once more at the end.
        generation_finished(FinishedReply): the reply ended (done, length, stopped...).
        verification_progressed(VerifyProgress): how far "Verify exactness" is (per pass).
        verification_finished(Verification): "Verify exactness" finished.
        server_changed(ServerEvent): the local server started, stopped, could not start, or the app waits.
        rates_measured(dict): auto's measured rates per mode (``Engine.measured_rates()``) after a reply.
        cache_used(CacheUse): what the prompt cache holds after a reply (Settings shows it).
        engine_stopped(str): the engine process died unasked (payload: why); the next request restarts it.
        failed(str): a readable one-line error; the worker stays usable.
    """

    state_changed = Signal(object)
    model_loaded = Signal(str)
    generation_started = Signal(int)
    context_fitted = Signal(int, int)
    token_generated = Signal(str, bool)
    thinking_generated = Signal(str)
    format_read = Signal(object)
    stats_changed = Signal(object)
    generation_finished = Signal(object)
    verification_progressed = Signal(object)
    verification_finished = Signal(object)
    server_changed = Signal(object)
    rates_measured = Signal(object)
    cache_used = Signal(object)
    engine_stopped = Signal(str)
    failed = Signal(str)

    @classmethod
    def signal_names(cls) -> list[str]:
        """The names of the signals declared on this class."""
        return [name for name, value in vars(EngineSignals).items() if isinstance(value, Signal)]


class EngineWorker(EngineSignals):
    """Owns the :class:`EngineProcess` (created and used only on its thread) and emits what it does."""

    def __init__(self) -> None:
        super().__init__()
        self._engine: EngineProcess | None = None
        self._stops: set[threading.Event] = set()
        self._stops_lock = threading.Lock()
        self._next_id = 0
        self._label = ""
        self.server = ServerSlot()

    # -- called from the UI thread ----------------------------------------------------------------
    def new_request(self, messages: Sequence[Turn], params: GenerationParams,
                    overflow: str = DROP_OLDEST, chat: ChatChoice | None = None) -> GenerateRequest:
        """Make a request whose stop Event :meth:`request_stop` can reach (thread-safe)."""
        with self._stops_lock:
            self._next_id += 1
            req = GenerateRequest(self._next_id, tuple(messages), params, overflow=overflow, chat=chat or ChatChoice())
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
        """Load a model pair, replacing the current one (the local server stops first)."""
        self._stop_server("Stopped: the model pair changed. Switch it on again to serve the new pair.")
        self._close_engine()
        self.state_changed.emit(EngineState.LOADING)
        with WorkerBoundary(f"Could not load {request.label}", self.failed.emit) as job:
            self._engine = EngineProcess(request.config, on_stopped=self.engine_stopped.emit)
        if job.failed or self._engine is None:
            self.state_changed.emit(EngineState.FAILED)
            return
        self._label = request.label
        self.model_loaded.emit(f"{request.label} ({self._engine.placement.text})")  # where its layers went
        self.state_changed.emit(EngineState.READY)

    @Slot()
    def restart(self) -> bool:
        """Start the engine process again with the same pair (after it stopped); whether it is running."""
        eng = self._engine
        if eng is None or not isinstance(eng, EngineProcess) or eng.alive:
            return eng is not None
        self.state_changed.emit(EngineState.LOADING)
        with WorkerBoundary("Could not restart the engine", self.failed.emit) as job:
            eng.restart()
        if job.failed:
            self.state_changed.emit(EngineState.READY)  # the pair stays chosen: the next message tries again
            return False
        self.model_loaded.emit(f"{self._label} ({eng.placement.text})")
        self.state_changed.emit(EngineState.READY)
        return True

    @Slot(object)
    def generate(self, request: GenerateRequest) -> None:
        """Answer a chat turn, streaming tokens."""
        eng = self._engine_or_fail(request)
        if eng is None or not self.restart():
            self._forget(request)
            return
        self.state_changed.emit(EngineState.GENERATING)
        self.generation_started.emit(request.request_id)
        reply: ReplyText | None = None
        with WorkerBoundary("Generation failed", self.failed.emit) as job, \
                self.server.hold(request.stop, self._on_server_busy):
            try:
                fitted, splitter = chat_setup.prepare(eng, request.messages, request.chat,
                                                      max_tokens=request.params.max_tokens, policy=request.overflow)
            except NoChatTemplateError:
                self.format_read.emit(chat_setup.model_format(eng, request.chat.template))  # the app's offer
                raise
            if fitted.dropped_turns:
                self.context_fitted.emit(request.request_id, fitted.dropped_turns)
            reply = ReplyText(splitter)
            gen = eng.generate(fitted.tokens, request.params, request.stop)
            for ev in gen:
                if ev.text:
                    self._emit_pieces(reply.feed(ev.text, ev.from_draft), ev.from_draft)
                self.stats_changed.emit(gen.stats.to_dict())  # after the text: the view shows the two together
            self._emit_pieces(reply.finish(), False)
            final = {**gen.stats.to_dict(), **reply.stats()}  # every generated token counts, thinking's too
            warning = drafting_warning(gen.stats, eng.placement)  # a fixed sd/ssd that cannot pay here
            if warning:
                final["warning"] = warning
            if request.params.mode == Mode.AUTO:
                self.rates_measured.emit(eng.measured_rates())
            self.cache_used.emit(eng.prompt_cache_use())
        self._forget(request)
        if job.failed or reply is None:
            self.state_changed.emit(EngineState.READY)
            return
        self.stats_changed.emit(final)
        self.generation_finished.emit(FinishedReply(request.request_id, "".join(reply.content), tuple(reply.runs),
                                                    final, "".join(reply.reasoning), tuple(reply.calls)))
        self.state_changed.emit(EngineState.READY)

    @Slot(object)
    def verify(self, request: GenerateRequest) -> None:
        """Run the prompt greedily with ``ar`` and with ``request.params.mode``; compare the tokens."""
        eng = self._engine_or_fail(request)
        if eng is None or not self.restart():
            self._forget(request)
            return
        self.state_changed.emit(EngineState.GENERATING)
        with WorkerBoundary("Verification failed", self.failed.emit) as job, \
                self.server.hold(request.stop, self._on_server_busy):
            result = eng.verify_exactness(chat_setup.chat_messages(request.messages), request.params, request.stop,
                                          self.verification_progressed.emit)
        self._forget(request)
        if not job.failed:
            self.verification_finished.emit(result)
        self.state_changed.emit(EngineState.READY)

    @Slot(str)
    def read_format(self, template: str) -> None:
        """Read the loaded model's chat format with ``template`` (a builtin name, plain text, or "": its own)."""
        eng = self._engine
        if eng is not None:
            with WorkerBoundary("Could not read the model's chat format", self.failed.emit):
                self.format_read.emit(chat_setup.model_format(eng, template))

    @Slot(object)
    def start_server(self, request: ServerRequest) -> None:
        """Serve the loaded pair over HTTP; a port that is taken is reported through ``server_changed``."""
        if self._engine is None:
            self.server_changed.emit(ServerEvent(message="Load a model pair first.", error=True))
            return
        with WorkerBoundary("Could not start the local server", self._on_server_failed) as job:
            started = self.server.start(self._engine, request)
        if not job.failed:
            self.server_changed.emit(ServerEvent(started, f"Serving {started.model_id}."))

    @Slot()
    def stop_server(self) -> None:
        """Stop serving (a request in progress stops within one round)."""
        self._stop_server("Stopped.")

    @Slot()
    def unload(self) -> None:
        """Free the engine."""
        self._stop_server("Stopped: the model pair was unloaded.")
        self._close_engine()
        self.state_changed.emit(EngineState.IDLE)

    def close_engine(self) -> None:
        """Free the engine from any thread once the worker thread has stopped (the server stops first)."""
        self.server.stop()
        self._close_engine()

    # -- helpers ----------------------------------------------------------------------------------
    def _engine_or_fail(self, request: GenerateRequest) -> EngineProcess | None:
        """The loaded engine, or None after telling the UI that no model is loaded."""
        if self._engine is None:
            self._forget(request)
            self.failed.emit("No model is loaded: pick a model pair in the model manager.")
        return self._engine

    def _stop_server(self, why: str) -> None:
        if self.server.stop():
            self.server_changed.emit(ServerEvent(message=why))

    def _on_server_failed(self, message: str) -> None:
        self.server_changed.emit(ServerEvent(message=message, error=True))

    def _on_server_busy(self) -> None:
        self.server_changed.emit(ServerEvent(self.server.server, "The app waits for the server's request to end."))

    def _close_engine(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def _forget(self, request: GenerateRequest) -> None:
        with self._stops_lock:
            self._stops.discard(request.stop)

    def _emit_pieces(self, pieces: list[ReplyPiece], from_draft: bool) -> None:
        for p in pieces:
            if p.kind == chat_setup.THINKING_PIECE:
                self.thinking_generated.emit(p.text)
            else:
                self.token_generated.emit(p.text, from_draft)

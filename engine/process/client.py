"""EngineProcess: an :class:`~engine.Engine` in a process of its own, used as if it were here.

It offers what the app's worker and the server use of an Engine (``generate``, ``messages_tokens``,
``tokenize``, ``n_ctx``, ``placement``, ``files``...), so they stay as they were. When the process dies,
whatever was waiting on it raises :class:`EngineStopped` ("the engine stopped: killed by SIGBUS (...)"),
and the next request (or :meth:`EngineProcess.restart`) starts a new one with the same pair. With
``auto_restart`` (``serve``) a supervisor does that by itself, waiting longer after each crash that follows
a short run, and requests meanwhile get EngineStopped.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from engine.batch.promptcache import CacheUse
from engine.chat.format import ChatFormat
from engine.chat.prepare import ChatRequest, PreparedChat
from engine.chat.rendering import Message
from engine.config import EngineConfig, GenerationParams
from engine.speculative import exactness
from engine.speculative.exactness import Verification, VerifyProgress
from engine.speculative.plan import MeasuredRate

from . import protocol as p
from .generation import STOP_POLL_S, ProcessGeneration, answer
from .runner import DEADLINES, Backoff, ChildProcess, Deadlines

log = logging.getLogger(__name__)


class EngineProcess:
    """A loaded pair in an engine process; raises what ``Engine`` raises, plus :class:`EngineStopped`.

    ``on_stopped(cause)`` is called (on a background thread) when the process dies unasked.
    """

    def __init__(self, config: EngineConfig, *, auto_restart: bool = False,
                 on_stopped: Callable[[str], None] | None = None, deadlines: Deadlines = DEADLINES,
                 backoff: Backoff | None = None) -> None:
        """``deadlines``: when a process that is alive but stuck is ended; ``backoff``: the waits before the
        supervisor's restarts (auto_restart), which a 503's Retry-After tells."""
        self.config = config
        self.deadlines = deadlines
        self.auto_restart = auto_restart
        self.on_stopped = on_stopped
        # "ready"; after a crash "restarting" (auto_restart, until loaded again) or "stopped" (the next request
        # starts it again); "closed"
        self.state = "loading"
        self.cause = ""  # why the last process ended unasked
        self.restarts = 0
        self.start_error = ""  # why the supervisor's last start failed ("" once one loads)
        self._backoff = backoff or Backoff()
        self._start_at = 0.0  # when the supervisor starts the next process (monotonic)
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._proc = self._spawn()

    def _spawn(self) -> ChildProcess:
        proc = ChildProcess(on_stopped=self._on_stopped, deadlines=self.deadlines)
        try:
            proc.start()
            rid, events = proc.request(lambda rid: p.Load(rid, self.config))
            loaded: p.LoadedPair = answer(events, rid)
        except BaseException:
            proc.close()
            raise
        self.n_ctx, self.placement, self.files = loaded.n_ctx, loaded.placement, loaded.files
        self.n_vocab = loaded.n_vocab
        self.replies_at_once = loaded.replies_at_once
        self._backoff.started()
        self.state = "ready"
        return proc

    @property
    def alive(self) -> bool:
        return self._proc.alive

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def child(self) -> ChildProcess:
        """The process now running; its ``request`` sends protocol messages as they are."""
        return self._proc

    def restart(self) -> None:
        """Start a new engine process with the same pair (the old one is ended first); no-op while one runs."""
        with self._lock:
            if self._closed.is_set():
                raise p.EngineStopped("the engine was closed")
            if self._proc.alive:  # another caller restarted it meanwhile
                return
            self._proc.close()
            self.state = "restarting"
            self._proc = self._spawn()
            self.restarts += 1
            self.start_error = ""

    def _on_stopped(self, cause: str) -> None:
        self.cause = cause
        self.state = "restarting" if self.auto_restart else "stopped"
        if self.on_stopped is not None:
            self.on_stopped(cause)
        if self.auto_restart:
            threading.Thread(target=self._supervise, name="engine-restart", daemon=True).start()

    def _next_start(self) -> float:
        delay = self._backoff.next_delay()
        self._start_at = time.monotonic() + delay
        return delay

    @property
    def retry_after_s(self) -> int:
        """Whole seconds until the supervisor's next start (at least 1): what a 503's ``Retry-After`` says."""
        return max(1, math.ceil(self._start_at - time.monotonic()))

    def _supervise(self) -> None:
        """Restart with back-off until a start loads the pair (or the engine is closed)."""
        while not self._closed.wait(self._next_start()):
            if self.alive:  # restarted meanwhile (the app's Restart engine, a request)
                return
            try:
                self.restart()
                log.warning("the engine process was restarted after it stopped (%s)", self.cause)
                return
            except Exception as exc:  # a load error (the file is gone...): keep trying, slower each time
                self.start_error = str(exc) or type(exc).__name__
                log.error("restarting the engine process failed: %s", exc)

    def _live(self) -> ChildProcess:
        """The engine process; one that stopped (without auto_restart) is started again first: the next request
        restarts it. With auto_restart, a request meanwhile gets EngineStopped."""
        if self.state == "stopped" and not self._proc.alive:
            self.restart()
        return self._proc

    # -- the Engine surface -----------------------------------------------------------------------
    def generate(self, prompt: Sequence[int], params: GenerationParams,
                 stop: threading.Event | None = None) -> ProcessGeneration:
        self.files.check()  # ModelFileChangedError before sending: a file cut short would kill the process
        return ProcessGeneration(self._live(), prompt, params, stop)

    def call(self, name: str, *args: Any) -> Any:
        """Run a quick engine method (:data:`~engine.process.protocol.CALLS`) in the process."""
        rid, events = self._live().request(lambda rid: p.Call(rid, name, args))
        return answer(events, rid)

    def tokenize(self, text: str) -> list[int]:
        return list(self.call("tokenize", text))

    def messages_tokens(self, messages: Sequence[Message], variables: Mapping[str, Any] | None = None,
                        template: str | None = None, tools: list[dict[str, Any]] | None = None) -> list[int]:
        return list(self.call("messages_tokens", list(messages), dict(variables or {}), template, tools))

    def chat_format(self, template: str | None = None) -> ChatFormat:
        return cast(ChatFormat, self.call("chat_format", template))

    def reply_section(self, messages: Sequence[Message], variables: Mapping[str, Any] | None = None,
                      template: str | None = None, tools: list[dict[str, Any]] | None = None) -> str:
        return str(self.call("reply_section", list(messages), dict(variables or {}), template, tools))

    def prepare_chat(self, request: ChatRequest) -> PreparedChat:
        """The chat fitted to the context in the process, in one request (every render and count stays there)."""
        return cast(PreparedChat, self.call("prepare_chat", request))

    def fim_prompt(self, prefix: str, suffix: str) -> tuple[list[int], frozenset[int]]:
        """The fill-in-the-middle prompt and the tokens that end the middle, read in the process."""
        tokens, ends = self.call("fim_prompt", prefix, suffix)
        return list(tokens), frozenset(ends)

    def suggested_template(self) -> str | None:
        """The builtin template that fits the target's vocabulary or architecture, or None."""
        return cast("str | None", self.call("suggested_template"))

    def chat_tokens(self, prompt: str, system: str | None = None) -> list[int]:
        return list(self.call("chat_tokens", prompt, system))

    def markup_tokens(self, text: str) -> list[int]:
        return list(self.call("markup_tokens", text))

    def detokenize(self, tokens: Sequence[int]) -> str:
        return str(self.call("detokenize", list(tokens)))

    def measured_rates(self) -> dict[str, MeasuredRate]:
        return dict(self.call("measured_rates"))

    def prompt_cache_use(self) -> CacheUse:
        use: CacheUse = self.call("prompt_cache_use")
        return use

    def longest_piece(self) -> int:
        """The most bytes of text one token of the target's vocabulary stands for."""
        return int(self.call("longest_piece"))

    def run_task(self, target: str, args: tuple[Any, ...], stop: threading.Event,
                 report: Callable[[Any], object]) -> Any:
        """Run ``module:function(engine, *args, stop, report)`` in the process; its reports come to ``report``."""
        proc = self._live()
        rid, events = proc.request(lambda rid: p.Task(rid, target, args))
        sent_stop = False
        while True:
            if stop.is_set() and not sent_stop:
                sent_stop = True
                proc.send(p.Stop(rid))
            try:
                ev = events.get(timeout=STOP_POLL_S)
            except queue.Empty:
                continue
            if isinstance(ev, p.Progress):
                report(ev.value)
                continue
            proc.forget(rid)
            events.put(ev)
            return answer(events, rid)

    def verify_exactness(self, messages: Sequence[Message], params: GenerationParams, stop: threading.Event,
                         report: Callable[[VerifyProgress], object]) -> Verification:
        """"Verify exactness" in the process: ``messages`` decoded with ``ar`` and with ``params.mode``, compared."""
        task = f"{exactness.run_check.__module__}:{exactness.run_check.__name__}"
        return cast(Verification, self.run_task(task, (list(messages), params), stop, report))

    def close(self) -> None:
        """End the process (idempotent); a generation in progress stops."""
        self._closed.set()
        self.state = "closed"
        with self._lock:
            self._proc.close()

    def __enter__(self) -> EngineProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The engine process itself: one :class:`~engine.Engine`, requests read on the main thread, work on another.

The main thread reads requests: ``Stop`` and ``Call`` are answered at once (so Stop reaches a
generation within a round, and tokenizing runs beside it, as in-process), the rest queue for the
work thread, which runs them one at a time. The child ends when its parent does: the pipe reads
end-of-file, and a watcher on the parent's sentinel covers a parent that dies mid-send.
"""

from __future__ import annotations

import importlib
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing import parent_process
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from engine.generation import TokenEvent
from engine.native import abort
from engine.stats import GenerationStats

from . import faults
from . import protocol as p

# A generation's statistics ride on a Round at most this often (the app's chat view repaints at 30 Hz); every
# Round carries the count's time, so the parent's count and rate follow every token.
STATS_INTERVAL_S = 0.03
BEAT_S = 1.0  # how often the child says it is alive; the parent's deadlines are many of these


class _Ticking(threading.Event):
    """A stop Event whose every look counts as progress: the engine looks between rounds and prompt chunks."""

    def __init__(self, tick: Callable[[], None]) -> None:
        super().__init__()
        self._tick = tick

    def is_set(self) -> bool:
        self._tick()
        return super().is_set()


class _Forward(logging.Handler):
    """Sends the child's log records at WARNING and above to the parent."""

    def __init__(self, send: Callable[[object], None]) -> None:
        super().__init__(logging.WARNING)
        self._send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._send(p.Log(record.levelno, record.name, record.getMessage()))
        except Exception:  # a closed pipe: the parent is gone and the child is about to exit
            pass


class Child:
    """The request loop around one engine (none until a ``Load``)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.engine: Any = None
        self._send_lock = threading.Lock()
        self._work: queue.Queue[p.Request | None] = queue.Queue()
        self._stops: dict[int, threading.Event] = {}
        self._stops_lock = threading.Lock()
        self._progress = time.monotonic()  # the last sign that the work in hand moves on
        self._working = 0  # generations and tasks in hand (a Load may take minutes without a sign)

    def _tick(self) -> None:
        self._progress = time.monotonic()

    def _beat(self) -> None:
        while True:
            time.sleep(BEAT_S)
            stalled = time.monotonic() - self._progress if self._working else 0.0
            try:
                self.send(p.Beat(stalled))
            except (OSError, ValueError):  # the parent is gone
                return

    def send(self, event: object) -> None:
        with self._send_lock:
            self.conn.send(event)

    def run(self) -> None:
        worker = threading.Thread(target=self._work_loop, name="engine-work", daemon=True)
        worker.start()
        self.send(p.Hello(p.VERSION, os.getpid()))
        threading.Thread(target=self._beat, name="engine-beat", daemon=True).start()
        while True:
            try:
                req = self.conn.recv()
            except (EOFError, OSError):  # the parent is gone: nobody to answer
                os._exit(0)
            if isinstance(req, p.Close):
                self._stop(p.ALL)
                self._work.put(None)
                worker.join()
                return
            if isinstance(req, p.Stop):
                self._stop(req.rid)
            elif isinstance(req, p.Call):
                self._call(req)
            else:
                if isinstance(req, p.Generate | p.Task):
                    with self._stops_lock:
                        self._stops[req.rid] = _Ticking(self._tick)
                if isinstance(req, p.Generate) and self.engine is not None and self.engine.replies_at_once > 1:
                    # replies side by side: each on a thread of its own (the engine shares their decodes)
                    threading.Thread(target=self._serve, args=(req,), name=f"engine-reply-{req.rid}",
                                     daemon=True).start()
                else:
                    self._work.put(req)

    def _stop(self, rid: int) -> None:
        with self._stops_lock:
            for key, ev in self._stops.items():
                if rid in (p.ALL, key):
                    ev.set()

    def _call(self, req: p.Call) -> None:
        try:
            if self.engine is None:
                raise p.EngineStopped("no model pair is loaded in the engine process")
            if req.name not in p.CALLS:
                raise ValueError(f"not an engine call: {req.name}")
            if req.name == "longest_piece":  # not a method of Engine's
                value: Any = p.longest_piece(self.engine)
            else:
                value = getattr(self.engine, req.name)(*req.args)
            self.send(p.Done(req.rid, value))
        except Exception as exc:
            self.send(p.failure(req.rid, exc))

    def _work_loop(self) -> None:
        while (req := self._work.get()) is not None:
            self._serve(req)
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def _serve(self, req: p.Request) -> None:
        self._tick()
        working = isinstance(req, p.Generate | p.Task)
        self._working += working
        try:
            if isinstance(req, p.Load):
                self._load(req)
            elif isinstance(req, p.Generate):
                self._generate(req)
            elif isinstance(req, p.Task):
                self._task(req)
        except Exception as exc:  # the boundary: every request ends with Done or Failed
            logging.getLogger(__name__).debug("request %d failed", req.rid, exc_info=True)
            self.send(p.failure(req.rid, exc))
        finally:
            self._working -= working
            with self._stops_lock:
                self._stops.pop(req.rid, None)

    def _stop_event(self, rid: int) -> threading.Event:
        with self._stops_lock:
            return self._stops.setdefault(rid, _Ticking(self._tick))

    def _load(self, req: p.Load) -> None:
        from engine.engine import Engine

        if self.engine is not None:
            self.engine.close()
            self.engine = None
        self.engine = engine = Engine(req.config)
        self.send(p.Done(req.rid, p.LoadedPair(req.config, engine.n_ctx, engine.placement, engine.files,
                                              engine.target_model.n_vocab, engine.replies_at_once)))

    def _generate(self, req: p.Generate) -> None:
        if self.engine is None:
            raise p.EngineStopped("no model pair is loaded in the engine process")
        fault_at = abort.fault_after()
        gen = self.engine.generate(list(req.prompt), req.params, self._stop_event(req.rid))
        last = time.perf_counter()
        held: list[TokenEvent] = []  # the round's tokens out so far: sent together at its last one
        for n, ev in enumerate(gen, 1):
            self._tick()
            held.append(ev)
            if n == fault_at:
                self._send_round(req.rid, held, gen.stats.seconds)
                abort.raise_abort(f"test fault after {n} tokens")
            if ev.ends_round:
                now = time.perf_counter()
                due = now - last >= STATS_INTERVAL_S
                last = now if due else last
                self._send_round(req.rid, held, gen.stats.seconds, gen.stats if due else None)
                held = []
        if held:  # a reply that ended inside a round (an end-of-generation token, max_tokens)
            self._send_round(req.rid, held, gen.stats.seconds)
        self.send(p.Done(req.rid, gen.stats))

    def _send_round(self, rid: int, events: list[TokenEvent], seconds: float,
                    stats: GenerationStats | None = None) -> None:
        self.send(p.Round(rid, events[0].round, tuple(e.token for e in events), tuple(e.text for e in events),
                          tuple(e.from_draft for e in events), seconds, stats))

    def _task(self, req: p.Task) -> None:
        module, _, name = req.target.partition(":")
        if not module.startswith("engine."):  # the process runs engine code only, never the app's
            raise ValueError(f"not an engine task: {req.target}")
        fn = getattr(importlib.import_module(module), name)
        def report(value: object) -> None:
            self._tick()
            self.send(p.Progress(req.rid, value))

        value = fn(self.engine, *req.args, self._stop_event(req.rid), report)
        self.send(p.Done(req.rid, value))


def _watch_parent() -> None:
    """End this process when its parent has gone (its sentinel becomes ready)."""
    parent = parent_process()
    if parent is None:
        return
    wait([parent.sentinel])
    os._exit(0)


def _write_last_words(message: str) -> None:
    """ggml is about to abort(): leave its message where the parent reads the child's last words."""
    os.write(2, f"\n{faults.ABORT_MARK}{message}\n".encode("utf-8", "replace"))


def main(conn: Connection, stderr_path: str) -> None:  # pragma: no cover - runs in the engine process
    """The engine process's entry point (a ``multiprocessing`` target)."""
    faults.redirect_stderr(Path(stderr_path))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's: it stops the child in order
    abort.install(_write_last_words)
    threading.Thread(target=_watch_parent, name="parent-watch", daemon=True).start()
    child = Child(conn)
    root = logging.getLogger()
    root.addHandler(_Forward(child.send))
    root.setLevel(logging.WARNING)
    child.run()

"""The parent's side of one engine process: start it, route its events, notice its end and say why.

A reader thread receives every event and puts it on the queue of the request it belongs to. When
the pipe ends, the process is reaped and its end put in words (:func:`~engine.process.faults.describe_exit`);
every request still waiting gets :class:`~engine.process.protocol.EngineStopped` with that cause, and
``on_stopped`` is called once (not after :meth:`ChildProcess.close`).
"""

from __future__ import annotations

import atexit
import itertools
import logging
import queue
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ParameterError

from . import faults
from . import protocol as p

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # a fresh interpreter imports llama.cpp; a slow disk on a first start takes a while
CLOSE_TIMEOUT_S = 10.0  # a Close waits for the round in progress and for the engine to free its memory
REAP_TIMEOUT_S = 5.0  # after the pipe ends, for the exit code to be readable
SILENT_S = 15.0  # no event at all this long (the child beats every second): stopped (SIGSTOP) or starved
STALLED_S = 120.0  # work with no token, round, prompt chunk or report this long: stuck (a driver, a lost peer)
WATCH_S = 1.0  # how often the silence is looked at


@dataclass(frozen=True, slots=True)
class Deadlines:
    """When the parent ends a child that is alive but stuck: ``silent_s`` with no event at all (the child beats
    every second), ``stalled_s`` with work in hand and no progress. A test sets them short."""

    silent_s: float = SILENT_S
    stalled_s: float = STALLED_S

    def __post_init__(self) -> None:
        if self.silent_s <= WATCH_S or self.stalled_s <= 0:
            raise ParameterError(f"deadlines must be over {WATCH_S:.0f} s of silence and over 0 s of stall, "
                                 f"got {self.silent_s} s and {self.stalled_s} s")


DEADLINES = Deadlines()  # a child's, unless told otherwise


_running: weakref.WeakSet[ChildProcess] = weakref.WeakSet()


@atexit.register  # registered after multiprocessing's own exit handler, so it runs first: nothing waits on a child
def _close_all() -> None:
    for proc in list(_running):
        proc.kill()


class Stopped:
    """Put on a request's queue when the process has ended (the request gets no Done)."""

    def __init__(self, cause: str) -> None:
        self.cause = cause


class ChildProcess:
    """One running engine process; :meth:`start` it, :meth:`request` work, :meth:`close` it (idempotent)."""

    def __init__(self, on_stopped: Callable[[str], None] | None = None, deadlines: Deadlines = DEADLINES) -> None:
        self.on_stopped = on_stopped
        self.deadlines = deadlines
        self.cause = ""  # why it ended; "" while it runs
        self._ids = itertools.count(1)
        self._queues: dict[int, queue.Queue[object]] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._closing = False
        self._folder = Path(tempfile.mkdtemp(prefix="ssd-chat-engine-"))
        self._stderr = self._folder / "stderr.txt"
        ctx = faults.spawn_context()
        self._conn, child_conn = ctx.Pipe()
        from .child import main

        # not a daemon: the engine starts children of its own (the CPU check's probe); _close_all ends it
        self.process = ctx.Process(target=main, args=(child_conn, str(self._stderr)), name="ssd-chat-engine")
        self._child_conn = child_conn
        self._reader = threading.Thread(target=self._read, name="engine-events", daemon=True)
        self.pid = 0
        self.heard = time.monotonic()  # the last event from the child
        self._stuck = ""  # why the child was ended as stuck; "" unless it was

    @property
    def alive(self) -> bool:
        return not self.cause and self.process.is_alive()

    def start(self) -> None:
        """Start the child and wait for its Hello; :class:`EngineStopped` if it does not come."""
        self.process.start()
        self._child_conn.close()  # the parent's copy: the pipe then ends when the child does
        if not self._conn.poll(START_TIMEOUT_S):
            self.kill()
            raise p.EngineStopped(f"the engine process did not start within {START_TIMEOUT_S:.0f} s")
        try:
            hello = self._conn.recv()
        except (EOFError, OSError):
            self.process.join(REAP_TIMEOUT_S)
            raise p.EngineStopped("the engine process could not start: " + self._describe()) from None
        if not isinstance(hello, p.Hello) or hello.version != p.VERSION:
            self.kill()
            raise p.EngineStopped(f"the engine process speaks protocol {getattr(hello, 'version', '?')}, "
                                  f"not {p.VERSION}: the installation is broken; reinstall ssd-chat")
        self.pid = hello.pid
        _running.add(self)
        self.heard = time.monotonic()
        self._reader.start()
        threading.Thread(target=self._watch, name="engine-watch", daemon=True).start()

    def request(self, make: Callable[[int], p.Request]) -> tuple[int, queue.Queue[object]]:
        """Send ``make(rid)`` with a fresh id; the events for it arrive on the returned queue."""
        rid = next(self._ids)
        events: queue.Queue[object] = queue.Queue()
        with self._lock:
            if self.cause:
                raise p.EngineStopped(f"{p.STOPPED}{self.cause}")
            self._queues[rid] = events
        try:
            self.send(make(rid))
        except p.EngineStopped:
            self.forget(rid)
            raise
        return rid, events

    def send(self, message: p.Request) -> None:
        """Send one request; :class:`EngineStopped` if the pipe is closed."""
        try:
            with self._send_lock:
                self._conn.send(message)
        except (OSError, ValueError) as exc:  # a broken pipe, or a closed connection
            raise p.EngineStopped(f"{p.STOPPED}{self.cause or exc}") from None

    def forget(self, rid: int) -> None:
        with self._lock:
            self._queues.pop(rid, None)

    def close(self) -> None:
        """Ask the child to finish and exit; kill it if it does not within :data:`CLOSE_TIMEOUT_S`."""
        self._closing = True
        if self.process.pid is not None and self.process.is_alive():
            try:
                self.send(p.Close())
            except p.EngineStopped:
                pass
            self.process.join(CLOSE_TIMEOUT_S)
        self.kill()
        self._cleanup()

    def kill(self) -> None:
        """End the child at once (SIGKILL) and reap it."""
        self._closing = True
        if self.process.pid is not None and self.process.is_alive():
            self.process.kill()
            self.process.join(REAP_TIMEOUT_S)
        self._conn.close()

    def _read(self) -> None:
        while True:
            try:
                event = self._conn.recv()
            except (EOFError, OSError, ValueError):
                break
            self.heard = time.monotonic()
            if isinstance(event, p.Beat):
                if event.stalled_s > self.deadlines.stalled_s:
                    self._end_stuck(f"stuck: its work made no progress for {event.stalled_s:.0f} s")
                continue
            if isinstance(event, p.Log):
                logging.getLogger(f"engine-process.{event.name}").log(event.level, "%s", event.message)
                continue
            with self._lock:
                events = self._queues.get(event.rid)
            if events is not None:
                events.put(event)
        self._ended()

    def _watch(self) -> None:
        """End a child that has gone silent past its deadline; its end then reads as any other."""
        while not self._closing and not self.cause:
            time.sleep(WATCH_S)
            silent = time.monotonic() - self.heard
            if silent > self.deadlines.silent_s and not self._closing and not self.cause:
                self._end_stuck(f"hung: no sign of life for {silent:.0f} s (stopped, or starved of CPU)")

    def _end_stuck(self, why: str) -> None:
        """Kill a child that is alive but stuck; the requests waiting on it get ``why`` as the cause."""
        if self._stuck or self._closing:
            return
        self._stuck = why
        log.error("the engine process is %s; it is ended and started again", why)
        if self.process.pid is not None and self.process.is_alive():
            self.process.kill()  # SIGKILL ends a stopped process too

    def _ended(self) -> None:
        self.process.join(REAP_TIMEOUT_S)
        cause = "closed" if self._closing and not self.process.exitcode else self._stuck or self._describe()
        with self._lock:
            self.cause = cause
            waiting, self._queues = list(self._queues.values()), {}
        if not self._closing:  # told before the requests waiting on it, so their failure can say what follows
            log.error("the engine process stopped: %s", cause)
            if self.on_stopped is not None:
                self.on_stopped(cause)
        for events in waiting:
            events.put(Stopped(cause))
        self._cleanup()

    def _describe(self) -> str:
        return faults.describe_exit(self.process.exitcode, faults.read_tail(self._stderr))

    def _cleanup(self) -> None:
        if self.process.is_alive():
            return
        for path in (self._stderr, self._folder):
            try:
                path.unlink() if path.is_file() else path.rmdir()
            except OSError:
                pass


RESTART_FIRST_S = 0.5  # a passing cause (the OOM killer, a lost RPC peer) is gone by then: back almost at once
RESTART_MOST_S = 30.0  # a cause that stays (a model file gone) is retried twice a minute, never in a busy loop
RESTART_STABLE_S = 60.0  # a process that ran this long died of something new: start again from the first delay


class Backoff:
    """Delays between restarts: doubling from ``first_s`` to ``most_s``; a process that ran ``stable_s`` resets it."""

    def __init__(self, first_s: float = RESTART_FIRST_S, most_s: float = RESTART_MOST_S,
                 stable_s: float = RESTART_STABLE_S) -> None:
        self.first_s, self.most_s, self.stable_s = first_s, most_s, stable_s
        self._next = first_s
        self._started = time.monotonic()

    def started(self) -> None:
        self._started = time.monotonic()

    def next_delay(self) -> float:
        """The wait before the next start (after a process ended)."""
        if time.monotonic() - self._started >= self.stable_s:
            self._next = self.first_s
        delay, self._next = self._next, min(self.most_s, self._next * 2)
        return delay


"""The local server over the worker's engine, driven from the engine thread: start, stop, and the app's turns.

While the server runs it generates on the same engine as the app, one at a time: the app's own
generation waits in the server's line (:meth:`ServerSlot.hold`) for the request in progress to end.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine import Engine, EngineProcess, GenerationParams, server

WAIT_SLICE_S = 0.25  # how often a waiting app generation looks at its Stop


@dataclass(frozen=True, slots=True)
class ServerRequest:
    """Serve the loaded pair on 127.0.0.1:``port``; ``generation`` sets the mode and speculation settings."""

    port: int
    generation: GenerationParams


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """What the server did: it listens (``server`` set), it stopped, or it could not start (``error``)."""

    server: server.LocalServer | None = None
    message: str = ""
    error: bool = False


class ServerSlot:
    """Holds the :class:`~engine.server.LocalServer` of the engine the worker owns (used on the engine thread)."""

    def __init__(self) -> None:
        self.server: server.LocalServer | None = None

    def start(self, engine: Engine | EngineProcess, request: ServerRequest) -> server.LocalServer:
        """Serve ``engine``; raises :class:`~engine.server.ServerError` if the port is taken."""
        self.stop()
        config = server.ServerConfig(port=request.port, generation=request.generation)
        started = server.LocalServer(engine, config)
        started.start()
        self.server = started
        return started

    def stop(self) -> bool:
        """Stop serving (its generation in progress stops within a round); whether it was running."""
        running, self.server = self.server, None
        if running is None:
            return False
        running.stop()
        return True

    @contextlib.contextmanager
    def hold(self, stop: threading.Event, waiting: Callable[[], object]) -> Iterator[None]:
        """The engine for the app's own generation; :class:`~engine.server.ServerError` if ``stop`` came first.

        While the server's request runs, the app waits in the server's line; each slice rejoins it at
        the end, so a steady stream of requests can keep the app waiting until Stop.
        """
        current = self.server
        if current is None:
            yield
            return
        with contextlib.ExitStack() as turn:
            got = told = False
            while not got and not stop.is_set():
                try:
                    turn.enter_context(current.exclusive(WAIT_SLICE_S))
                    got = True
                except server.ServerError:  # a server request still holds the engine
                    if not told:
                        told = True
                        waiting()
            if not got:
                raise server.ServerError("stopped while the local server's request still held the engine")
            yield

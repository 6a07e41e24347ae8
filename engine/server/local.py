"""Run the server in-process on a background thread, around an engine that is already loaded."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator
from types import FrameType

import uvicorn

from engine import EngineError

from .app import create_app
from .config import ServerConfig, ServerStatus
from .conns import ACCEPT_BATCH, Bursts, ConnectionLimits, guarded_protocol
from .gate import Gate
from .job import ServedEngine
from .service import Service

log = logging.getLogger(__name__)


class ServerError(EngineError):
    """The server could not start (the port is taken, the host does not exist, ...)."""


WILDCARDS = ("0.0.0.0", "::", "")  # hosts that mean "every address of this machine"


def _as_ctrl_c(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/v1"


def machine_addresses(ipv6: bool) -> list[str]:
    """This machine's own addresses other machines may reach it by (no loopback), best first."""
    found: list[str] = []
    family = socket.AF_INET6 if ipv6 else socket.AF_INET
    probe = "2001:db8::1" if ipv6 else "192.0.2.1"  # documentation addresses: routed, never sent to (UDP connect)
    with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((probe, 9))
        found.append(str(s.getsockname()[0]))
    with contextlib.suppress(OSError):
        for *_, addr in socket.getaddrinfo(socket.gethostname(), None, family, socket.SOCK_STREAM):
            found.append(str(addr[0]))
    return [a for a in dict.fromkeys(found) if not a.startswith(("127.", "::1", "fe80:"))]


def listening_urls(host: str, port: int) -> list[str]:
    """The API bases clients can use: the loopback one first, then, for a wildcard host, each address of this
    machine (``0.0.0.0`` listens on all IPv4 addresses, ``::`` on all addresses)."""
    if host not in WILDCARDS:
        return [_url(host, port)]
    ipv6 = host == "::"
    return [_url("::1" if ipv6 else "127.0.0.1", port)] + [_url(a, port) for a in machine_addresses(ipv6)]


class LocalServer:
    """An OpenAI-compatible HTTP server for one loaded :class:`~engine.Engine`, on its own thread.

    The engine stays the caller's: the server never closes it. While the server runs it generates on
    the engine one request at a time; the caller must not generate on the same engine meanwhile (a new
    generation closes the one still open, so one of the two replies would be cut short): use
    :meth:`exclusive`.

    Example:
        >>> server = LocalServer(engine, ServerConfig(port=0))
        >>> server.start()               # returns once it listens; raises ServerError otherwise
        >>> server.url                   # 'http://127.0.0.1:54321/v1'
        >>> server.status().served       # poll from any thread (e.g. a 500 ms timer)
        >>> server.stop()                # stops any running generation, frees the port
    """

    def __init__(self, engine: ServedEngine, config: ServerConfig | None = None,
                 connections: ConnectionLimits | None = None) -> None:
        self.engine = engine
        self.config = config or ServerConfig()
        self.connections = connections or ConnectionLimits()  # deadlines and the cap, before any request is read
        self.gate = Gate(self.config.max_queue, engine.replies_at_once)
        self.app = create_app(engine, self.config, self.gate)
        self._service: Service = self.app.state.service
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        # set when the server thread ends; Ctrl+C during Thread.join can make is_alive() False too early (3.11)
        self._ended = threading.Event()
        self._ended.set()
        self._port = 0
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.started and not self._ended.is_set()

    @property
    def url(self) -> str:
        """The API base clients use (``base_url`` of the openai client); "" when not listening."""
        return _url(self.config.host, self._port) if self.running else ""

    @property
    def urls(self) -> list[str]:
        """Every API base clients may use (one, unless the host is a wildcard); [] when not listening."""
        return listening_urls(self.config.host, self._port) if self.running else []

    @property
    def port(self) -> int:
        return self._port

    @property
    def model_id(self) -> str:
        """The name clients send as ``model``."""
        return self._service.model_id

    def status(self) -> ServerStatus:
        g = self.gate
        return ServerStatus(url=self.url, listening=self.running, served=g.served, running=g.running, busy=g.busy,
                            queued=g.queued, rejected=g.rejected, failed=g.failed, recent=g.recent)

    def start(self, timeout: float = 10.0) -> None:
        """Bind the port and serve on a daemon thread; returns once it accepts connections."""
        if not self._ended.is_set():
            raise ServerError("the server is already running")
        sock = self._bind()
        self.gate.reset()
        self._service.closing = False
        self._port = int(sock.getsockname()[1])
        # the protocol as a class (with the connection limits), no websockets: fewer modules imported by name
        # (easier to freeze); an accept batch no larger than the file descriptors kept for it
        cfg = uvicorn.Config(self.app, log_config=None, access_log=self.config.access_log, lifespan="off",
                             http=guarded_protocol(self.connections, Bursts()), backlog=ACCEPT_BATCH, ws="none",
                             timeout_graceful_shutdown=3, log_level="warning")
        self._server = uvicorn.Server(cfg)
        self._error = None
        self._thread = threading.Thread(target=self._serve, args=(sock,), name="ssd-chat-server", daemon=True)
        self._ended.clear()
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if self._ended.is_set() or time.monotonic() > deadline:
                self.stop()
                sock.close()
                raise ServerError(f"the server did not start on {self.config.host}:{self._port}"
                                  + (f": {self._error}" if self._error else ""))
            time.sleep(0.01)
        log.info("serving %s on %s", self._service.model_id, self.url)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving: cancel the running generation, close connections, free the port. Idempotent."""
        self._service.cancel_all()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            if not self._ended.wait(timeout):
                log.warning("the server thread did not stop within %.0f s", timeout)
        for job in list(self._service.jobs.values()):
            job.join(timeout)
        self._service.jobs.clear()
        self._thread = None

    @contextlib.contextmanager
    def exclusive(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the engine for the caller's own generation (e.g. the app's chat) while the server runs.

        Waits (on the calling thread, never the server's) for the running request to end, ahead of no
        one: it takes its place at the end of the waiting line, whatever the line's bound. Requests that
        arrive meanwhile wait or get 429 as usual. Raises :class:`ServerError` after ``timeout`` seconds.
        """
        loop = self._loop
        if loop is None or not self.running:
            yield
            return
        fut = asyncio.run_coroutine_threadsafe(self.gate.acquire(unbounded=True), loop)
        try:
            fut.result(timeout)
        except TimeoutError:
            if not fut.cancel():  # it got the engine just now
                self._release(loop)
            raise ServerError(f"the engine stayed busy with server requests for {timeout} s") from None
        try:
            yield
        finally:
            self._release(loop)

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.call_soon_threadsafe(self.gate.release)
        except RuntimeError:  # the server has stopped meanwhile
            pass

    def wait(self) -> None:
        """Block until the server stops (the CLI's foreground). On the main thread SIGTERM (a service manager's
        stop, ``kill``) raises KeyboardInterrupt meanwhile, so the caller stops the server as it does on Ctrl+C."""
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _as_ctrl_c) if main else None
        try:
            while not self._ended.wait(0.5):
                pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _bind(self) -> socket.socket:
        host, port = self.config.host, self.config.port
        try:
            family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        except socket.gaierror as exc:
            raise ServerError(f"cannot listen on {host!r}: {exc.strerror}") from exc
        sock = socket.socket(family, kind, proto)
        try:
            if hasattr(socket, "SO_EXCLUSIVEADDRUSE"):  # Windows: refuse a port another process listens on
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
            else:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        return sock

    def _serve(self, sock: socket.socket) -> None:
        server = self._server
        assert server is not None

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            await server.serve(sockets=[sock])

        try:
            asyncio.run(main())
        except BaseException as exc:  # the thread's boundary: keep the reason for start()
            self._error = exc
            log.exception("the server stopped with an error")
        finally:
            self._loop = None
            sock.close()
            self._ended.set()

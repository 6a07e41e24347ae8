"""A TCP relay that holds every chunk for a set delay in each direction and counts the bytes: a slow link between
this machine's RPC client and server, for tests and bench scenario R (latency only, no bandwidth cap).

Each direction of each connection has a reader, which stamps what it reads, and a writer, which sends each
chunk once its delay has passed, so chunks keep their order and spacing (a single sleeping thread would add
the delay once per chunk in a row).
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time

CHUNK = 1 << 16  # bytes read at a time


class DelayProxy:
    """Listens on 127.0.0.1 (a free port unless given) and relays to ``upstream`` with ``delay_s`` each way."""

    def __init__(self, upstream: tuple[str, int], delay_s: float, port: int = 0) -> None:
        self.upstream = upstream
        self.delay_s = delay_s
        self.sent_up = 0  # client -> server bytes
        self.sent_down = 0  # server -> client bytes
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port: int = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._socks += [client, server]
            self._pipe(client, server, up=True)
            self._pipe(server, client, up=False)

    def _pipe(self, src: socket.socket, dst: socket.socket, *, up: bool) -> None:
        held: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def read() -> None:
            while True:
                try:
                    data = src.recv(CHUNK)
                except OSError:
                    data = b""
                with self._lock:  # counted as read: a reply is in the count before the client can have it
                    if up:
                        self.sent_up += len(data)
                    else:
                        self.sent_down += len(data)
                held.put((time.perf_counter() + self.delay_s, data))
                if not data:
                    return

        def write() -> None:
            while True:
                due, data = held.get()
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    return
                try:
                    dst.sendall(data)
                except OSError:
                    return

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=write, daemon=True).start()

    def counts(self) -> tuple[int, int]:
        """(client -> server, server -> client) bytes read so far (each passed on once its delay is over)."""
        with self._lock:
            return self.sent_up, self.sent_down

    def cut(self) -> None:
        """Drop every relayed connection (a link cut with a reset); new ones are still taken."""
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

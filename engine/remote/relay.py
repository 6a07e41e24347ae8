"""The link meter: llama.cpp reaches each remote machine through a counting relay on 127.0.0.1 in the process that
holds the connection, which counts the bytes each way and sees whether the server owes an answer.

A relay per endpoint (:func:`route`, started once per process) takes each of llama.cpp's connections (a model
load opens several) and pairs it with one to the real server: a thread per direction reads, counts and
writes on, with no delay. Either side ending ends both (the RPC server serves one client at a time, so a
connection left half open would keep the next one waiting). Reading llama.cpp's framing (:mod:`.wire`)
tells which requests the server answers, so a server that owes an answer and has said nothing for the
deadline is silent whatever llama.cpp was doing (a load, a decode): :mod:`.deadline` ends the process.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

from engine.native import rpc

from . import deadline
from .endpoints import Endpoint
from .wire import ANSWERED, CMD_COUNT, CONNECT_TIMEOUT_S, probe

CHUNK = 1 << 18  # bytes read at a time: a load streams the whole model through, a decode's messages are small
REQUEST_HEAD, REPLY_HEAD = 9, 8  # cmd (1 byte) | size (u64 LE); a reply: size (u64 LE)


class Framer:
    """Splits one direction of an RPC connection into messages: a header of ``head`` bytes that ends with the
    payload's size (u64 LE), then the payload."""

    def __init__(self, head: int) -> None:
        self.head = head
        self._buf = bytearray()
        self._skip = 0  # payload bytes of the current message still to come

    def feed(self, data: bytes) -> tuple[list[int], int]:
        """The first byte of each header completed in ``data`` (a request's command), and the messages completed."""
        starts: list[int] = []
        done, i, n = 0, 0, len(data)
        while i < n:
            if self._skip:
                take = min(self._skip, n - i)
                self._skip -= take
                i += take
                done += not self._skip
                continue
            need = self.head - len(self._buf)
            self._buf += data[i:i + need]
            i += min(need, n - i)
            if len(self._buf) < self.head:
                break
            (self._skip,) = struct.unpack_from("<Q", self._buf, self.head - 8)
            starts.append(self._buf[0])
            self._buf.clear()
            done += not self._skip
        return starts, done


class _Link:
    """One of llama.cpp's connections, paired with one to the server."""

    def __init__(self, relay: Relay, client: socket.socket, server: socket.socket) -> None:
        self.relay, self.client, self.server = relay, client, server
        self._lock = threading.Lock()
        self._owed = 0  # answers the server owes
        self._since = 0.0  # when it last answered, or was asked with nothing owed
        self._sending = 0.0  # when a write to the server began that has not finished (0: none)
        self._framed = True  # False once a command is not protocol 7's: counted, no longer judged
        self._closed = False
        self._up, self._down = Framer(REQUEST_HEAD), Framer(REPLY_HEAD)

    def start(self) -> None:
        for args in ((self.client, self.server, True), (self.server, self.client, False)):
            threading.Thread(target=self._pipe, args=args, name="rpc-relay", daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, up: bool) -> None:
        while True:
            try:
                data = src.recv(CHUNK)
            except OSError:
                data = b""
            if not data:
                self.close()
                return
            # counted as read, before it is passed on: a round's answer is in the count before its reader sees it
            self.relay.count(len(data), up)
            if up:
                self._up_read(data)
            else:
                self._down_read(data)
            try:
                dst.sendall(data)
            except OSError:
                self.close()
                return
            finally:
                if up:
                    self._sending = 0.0

    def _up_read(self, data: bytes) -> None:
        cmds, _ = self._up.feed(data)
        with self._lock:
            asks = sum(c in ANSWERED for c in cmds)
            if asks and not self._owed:
                self._since = time.monotonic()
            self._owed += asks
            self._framed = self._framed and all(c < CMD_COUNT for c in cmds)
            self._sending = time.monotonic()

    def _down_read(self, data: bytes) -> None:
        _, answers = self._down.feed(data)
        with self._lock:
            self._owed = max(0, self._owed - answers)
            self._since = time.monotonic()

    def silent_s(self, now: float) -> float:
        """How long the server has owed an answer and said nothing, or not taken what was sent (0: it owes none)."""
        with self._lock:
            if self._closed:
                return 0.0
            owed = now - self._since if self._owed and self._framed else 0.0
            return max(owed, now - self._sending if self._sending else 0.0)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        self.relay.forget(self)


class Relay:
    """Listens on 127.0.0.1 (a free port) and relays each connection to ``endpoint``, counting the bytes."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.sent = 0  # this machine -> the server
        self.received = 0  # the server -> this machine
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, name="rpc-relay-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection((self.endpoint.host, self.endpoint.port), timeout=CONNECT_TIMEOUT_S)
            except OSError:  # llama.cpp's connection ends unanswered: "server crashed", named by engine.native.abort
                client.close()
                continue
            server.settimeout(None)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, server)
            with self._lock:
                self._links.append(link)
            link.start()

    def count(self, n: int, up: bool) -> None:
        with self._lock:
            if up:
                self.sent += n
            else:
                self.received += n

    def forget(self, link: _Link) -> None:
        with self._lock:
            if link in self._links:
                self._links.remove(link)

    def silent_s(self, now: float) -> float:
        """The longest silence among this relay's connections (0: the server owes nothing)."""
        with self._lock:
            links = list(self._links)
        return max((link.silent_s(now) for link in links), default=0.0)

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close()


_lock = threading.Lock()
_relays: dict[Endpoint, Relay] = {}


def route(endpoint: Endpoint) -> str:
    """The address llama.cpp connects to for ``endpoint``: this process's relay to it (started at the first call,
    watched by the deadline from then on)."""
    with _lock:
        relay = _relays.get(endpoint)
        if relay is None:
            relay = _relays[endpoint] = Relay(endpoint)
            deadline.watch(relay)
        return relay.address


def add_server(endpoint: Endpoint) -> tuple[int, ...]:
    """llama.cpp connected to ``endpoint`` through this process's relay to it, and the machine's devices: probed
    first, once (llama.cpp aborts the process where it cannot connect, and hangs while the server is busy)."""

    def probed_route() -> str:
        probe(endpoint, devices=False)
        return route(endpoint)

    return rpc.add_server(str(endpoint), probed_route)


def totals() -> tuple[int, int] | None:
    """(sent, received) bytes over every remote link of this process so far; None where it has none."""
    with _lock:
        relays = list(_relays.values())
    if not relays:
        return None
    return sum(r.sent for r in relays), sum(r.received for r in relays)

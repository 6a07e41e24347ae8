"""Connections before they are requests: a cap on open connections, a deadline for a request's headers, and
one log line per burst of refusals. All of it runs in the HTTP protocol, before any guard or the API key.

A client that opens connections and never finishes their headers (a "slowloris") would otherwise hold every
file descriptor the process may open, so that the server could accept no one (and log each failed accept).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

# A request's headers are a few hundred bytes: any client sends them in well under this, on any link.
HEADER_DEADLINE_S = 10.0
# The largest body (4 MiB) arrives in about 32 s at 1 Mbit/s; a client slower than that is holding a slot.
BODY_DEADLINE_S = 60.0
# Connections accepted in one go before any is seen by the protocol (uvicorn's ``backlog``, also the kernel's queue).
ACCEPT_BATCH = 128
# File descriptors kept for everything but counted connections: one accept batch, and the log, the engine's
# pipes, the app's own files.
FD_RESERVE = 2 * ACCEPT_BATCH
# Connections allowed however high the file limit: far beyond one user's clients, and each one costs memory.
MAX_CONNECTIONS = 1024
# A burst of refusals ends after this long without one; the next refusal then logs a line again.
BURST_QUIET_S = 30.0

REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
           b"connection: close\r\ncontent-length: %d\r\n\r\n%s")
TIMEOUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
           b"content-length: %d\r\n\r\n%s")
REFUSED_BODY = (b'{"error": {"message": "this server has as many connections open as it keeps; try again", '
                b'"type": "server_error", "param": null, "code": "too_many_connections"}}')


def default_cap() -> int:
    """The most connections kept open: this process's file limit less :data:`FD_RESERVE`, at most
    :data:`MAX_CONNECTIONS` (and at least 16, for a tiny limit)."""
    if sys.platform == "win32":  # sockets are handles there, with no per-process limit like RLIMIT_NOFILE
        return MAX_CONNECTIONS
    import resource

    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, soft - FD_RESERVE))


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """How long a request's headers and body may take, and how many connections stay open (0: :func:`default_cap`)."""

    header_s: float = HEADER_DEADLINE_S
    body_s: float = BODY_DEADLINE_S
    max_connections: int = 0

    def cap(self) -> int:
        return self.max_connections or default_cap()


class _AcceptErrors(logging.Filter):
    """asyncio logs a traceback for every accept that finds no free file descriptor: one line per burst instead."""

    def __init__(self, bursts: Bursts) -> None:
        super().__init__()
        self.bursts = bursts
        self._last = -float("inf")

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("socket.accept() out of system resource"):
            return True
        now, last = time.monotonic(), self._last
        self._last = now
        record.exc_info = record.exc_text = None
        record.msg, record.args = "no file descriptor is free to accept a connection (the process's file limit)", ()
        return now - last > self.bursts.quiet_s


class Bursts:
    """Logs one line when a burst of refusals starts (with the count of the burst before, if any)."""

    def __init__(self, quiet_s: float = BURST_QUIET_S) -> None:
        self.quiet_s = quiet_s
        self._last = -float("inf")
        self._in_burst = 0

    def note(self, cap: int) -> None:
        now = time.monotonic()
        if now - self._last > self.quiet_s:
            before = f" (the last burst: {self._in_burst:,})" if self._in_burst else ""
            log.warning("%d connections are open, the most this server keeps: it closes the oldest that have not "
                        "finished a request and refuses the rest until the load passes%s", cap, before)
            self._in_burst = 0
        self._in_burst += 1
        self._last = now


def guarded_protocol(limits: ConnectionLimits, bursts: Bursts) -> type[H11Protocol]:
    """uvicorn's h11 protocol with :class:`ConnectionLimits` applied (a class, as uvicorn's ``http`` takes)."""
    cap = limits.cap()
    asyncio_log = logging.getLogger("asyncio")
    for f in [f for f in asyncio_log.filters if isinstance(f, _AcceptErrors)]:
        asyncio_log.removeFilter(f)
    asyncio_log.addFilter(_AcceptErrors(bursts))
    # connections still waiting for their request's headers (or idle between requests), oldest first
    waiting: OrderedDict[H11Protocol, None] = OrderedDict()

    class Guarded(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= cap:
                bursts.note(cap)
                if waiting:  # the newcomer takes the place of the longest-waiting unfinished request
                    oldest, _ = waiting.popitem(last=False)
                    oldest.transport.close()
                else:  # every connection is a request being answered: refuse this one
                    self._refused = True
                    transport.write(REFUSED % (len(REFUSED_BODY), REFUSED_BODY))
                    transport.close()
                    return
            super().connection_made(transport)
            self._wait_for_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            self._stop_timer()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:  # a request's headers are complete: now its body has a deadline
                self._stop_timer()
                if self.cycle.more_body:
                    self._timer = self.loop.call_later(limits.body_s, self._too_slow, self.cycle)
            elif cycle is not None and not cycle.more_body and self._timer is not None:
                self._stop_timer()  # the body is complete

        def on_response_complete(self) -> None:
            cycle = self.cycle
            super().on_response_complete()
            if self.cycle is cycle and not self.transport.is_closing() and not cycle.more_body:
                self._wait_for_headers()  # idle until the next request's headers

        def _wait_for_headers(self) -> None:
            self._stop_timer()
            self._timer = self.loop.call_later(limits.header_s, self._too_slow, None)
            waiting[self] = None

        def _stop_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            waiting.pop(self, None)

        def _too_slow(self, cycle: Any) -> None:
            self._timer = None
            waiting.pop(self, None)
            if self.transport.is_closing():
                return
            if cycle is not None and not cycle.response_started:
                what = f"the request body did not arrive within {limits.body_s:g} s".encode()
                body = b'{"error": {"message": "%s", "type": "invalid_request_error", "param": null, ' \
                       b'"code": "request_timeout"}}' % what
                self.transport.write(TIMEOUT % (len(body), body))
            self.transport.close()

    return Guarded

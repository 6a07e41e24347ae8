"""A stand-in Hub that misbehaves as a hostile peer would, on 127.0.0.1 over real HTTP.

HEAD answers as the Hub does (``X-Linked-Size``, ``X-Linked-Etag`` = SHA-256, ``X-Repo-Commit``) for the one
file it declares; GET then does what :attr:`Hostile.body` says: ``endless`` (no Content-Length, the declared bytes
then more until the client hangs up; a ``Range`` request gets a 206 that does the same), ``trickle`` (one byte
every ``trickle_s``), ``redirect`` (a 302 to itself, forever), ``short`` / ``long`` (a clean answer whose
Content-Length is half / twice the declared size).
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.hub_server import COMMIT, LocalServer

_RANGE = re.compile(r"^bytes=(\d+)-$")
PIECE = 64 << 10
GIVE_UP_BYTES = 64 << 20  # an endless body ends here, so a client that never stops fails instead of hanging
GIVE_UP_S = 4.0  # a trickle ends (and drops the connection) after this long, for the same reason


@dataclass
class Hostile:
    """What the server declares and how its GET misbehaves; ``sent`` counts body bytes written."""

    repo: str
    filename: str
    data: bytes
    body: str = "endless"
    trickle_s: float = 0.2
    sent: int = 0
    gets: int = 0

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _head(self, status: int, length: int | None, extra: dict[str, str]) -> None:
        h = self.server.hostile
        self.send_response(status)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{h.sha256}"')
        self.send_header("X-Linked-Etag", f'"{h.sha256}"')
        self.send_header("X-Linked-Size", str(len(h.data)))
        if length is not None:
            self.send_header("Content-Length", str(length))
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()

    def do_HEAD(self) -> None:
        self._head(200, len(self.server.hostile.data), {})

    def do_GET(self) -> None:
        h = self.server.hostile
        h.gets += 1
        rng = _RANGE.match(self.headers.get("Range", ""))
        start = int(rng[1]) if rng else 0
        try:
            if h.body == "redirect":
                self._head(302, 0, {"Location": self.path})
            elif h.body == "endless":
                self.close_connection = True
                crange = {"Content-Range": f"bytes {start}-{len(h.data) - 1}/{len(h.data)}"} if rng else {}
                self._head(206 if rng else 200, None, {"Connection": "close", **crange})
                self._write(h.data[start:])
                zeros = bytes(PIECE)
                while h.sent < GIVE_UP_BYTES:
                    self._write(zeros)
            elif h.body == "trickle":
                self._head(200, len(h.data), {})
                t0 = time.monotonic()
                for i in range(len(h.data)):
                    if time.monotonic() - t0 > GIVE_UP_S:
                        self.close_connection = True
                        return
                    self._write(h.data[i : i + 1])
                    time.sleep(h.trickle_s)
            else:
                body = h.data[: len(h.data) // 2] if h.body == "short" else h.data * 2
                self._head(200, len(body), {})
                self._write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _write(self, body: bytes) -> None:
        for i in range(0, len(body), PIECE):
            piece = body[i : i + PIECE]
            self.wfile.write(piece)
            self.wfile.flush()
            self.server.hostile.sent += len(piece)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hostile: Hostile


class HostileHub(LocalServer):
    """The hostile server, misbehaving as :attr:`hostile` says."""

    def __init__(self, hostile: Hostile) -> None:
        self.hostile = hostile
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.hostile = hostile
        super().__init__(httpd)

"""A stand-in Hub whose API answers something other than the JSON it documents, on 127.0.0.1 over real HTTP.

Every API request (``/api/...``) gets :attr:`Garbage.body` with status 200: a JSON object where a list is
expected, a bare number, an HTML page, JSON cut off mid-way, bytes that are not UTF-8, or (``"hostile-ids"``) a
well-formed answer whose repository ids carry control characters and run on for kilobytes. A file's HEAD or GET
(``/{repo}/resolve/...``) is a 404, as for a file that is not there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.hub_server import LocalServer

LONG_NAME = "x" * 5000  # a repository name far past any the Hub allows (96 characters)
HOSTILE_ID = "evil/\x1b[2J\x1b]0;pwned\x07name\r\nforged line\x00" + LONG_NAME
BODIES: dict[str, bytes] = {
    "object": b'{"models": [], "error": null}',
    "number": b"42",
    "html": b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>",
    "cut": b'[{"id": "acme/model-GGUF", "downloads": 10, "likes',
    "bad-utf8": b'[{"id": "acme/\xff\xfe\xc3(-GGUF", "downloads": 1}]',
    "list-of-numbers": b"[1, 2, 3]",
}
KINDS = sorted(BODIES)


def hostile_body(path: str) -> bytes:
    """A Hub-shaped answer for ``path`` whose repository ids are :data:`HOSTILE_ID`."""
    if path.startswith("/api/models?") or path == "/api/models":
        return json.dumps([{"id": HOSTILE_ID, "downloads": 5, "likes": 1, "gated": False, "private": False}]).encode()
    if "/tree/" in path:
        return json.dumps([{"type": "file", "path": "model-Q4_K_M.gguf", "size": 1000, "oid": "0" * 40}]).encode()
    return json.dumps({"id": HOSTILE_ID, "sha": "0" * 40, "siblings": [], "gated": False, "private": False}).encode()


@dataclass
class Garbage:
    """What the API answers: a key of :data:`BODIES`, or ``"hostile-ids"``."""

    body: str = "object"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _serve(self) -> None:
        if not self.path.startswith("/api/"):
            self._send(404, b'{"error": "Entry not found"}', "application/json")
            return
        which = self.server.garbage.body
        body = hostile_body(self.path) if which == "hostile-ids" else BODIES[which]
        self._send(200, body, "text/html" if which == "html" else "application/json")

    do_HEAD = _serve
    do_GET = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    garbage: Garbage


class GarbageHub(LocalServer):
    """The server, answering as :attr:`garbage` says."""

    def __init__(self, garbage: Garbage) -> None:
        self.garbage = garbage
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.garbage = garbage
        super().__init__(httpd)

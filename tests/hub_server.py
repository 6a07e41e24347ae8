"""A local stand-in for the Hugging Face Hub: the ``resolve`` endpoints huggingface_hub calls, and failures.

The API that ``HfApi`` calls (search, model info, tree) is answered by :mod:`tests.hub_api`.

Serves HEAD and GET ``/{owner}/{repo}/resolve/{revision}/{filename}`` on 127.0.0.1 with the headers
``get_hf_file_metadata`` reads (``X-Repo-Commit``, ``ETag``, ``X-Linked-Etag`` = SHA-256,
``X-Linked-Size``, ``Content-Length``) and ``Range`` support (206 / ``Content-Range``).
"""

from __future__ import annotations

import hashlib
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

from tests import hub_api

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_PATH = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
PIECE = 16 << 10


@dataclass(frozen=True)
class Request:
    """One request the server saw."""

    method: str
    path: str
    headers: dict[str, str]

    @property
    def range(self) -> str | None:
        return self.headers.get("range")


@dataclass
class HubState:
    """What the server serves and how it misbehaves; tests change it between calls."""

    files: dict[tuple[str, str], bytes] = field(default_factory=dict)
    advertised_sha: dict[tuple[str, str], str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)  # repo -> token it requires
    cut_after: dict[tuple[str, str], int] = field(default_factory=dict)  # drop a whole-file GET once after N bytes
    slow_s: float = 0.0  # pause between 16 KiB pieces of a body
    ranges: bool = True
    repo_meta: dict[str, dict[str, object]] = field(default_factory=dict)  # downloads, likes, base_model
    gated: set[str] = field(default_factory=set)  # listed and described; files need the token in ``tokens``
    rate_limited: int = 0  # the next N API requests answer HTTP 429
    retry_after: str | None = "1"
    api_slow_s: float = 0.0  # pause before each API answer
    page_size: int = 1000  # search results per page, as the Hub's cap
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, repo: str, filename: str, data: bytes) -> str:
        """Serve ``data`` as ``repo/filename``; returns its SHA-256."""
        self.files[(repo, filename)] = data
        return hashlib.sha256(data).hexdigest()

    def gets(self, filename: str | None = None) -> list[Request]:
        """GET requests for files (optionally for one file name)."""
        with self.lock:
            gets = [r for r in self.requests if r.method == "GET" and "/resolve/" in r.path]
        return [r for r in gets if filename is None or r.path.endswith(filename)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _error(self, status: int, code: str, message: str) -> None:
        body = f'{{"error": "{message}"}}'.encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    @property
    def server_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _serve(self) -> None:
        st = self.server.state
        with st.lock:
            headers = {k.lower(): v for k, v in self.headers.items()}
            st.requests.append(Request(self.command, self.path, headers))
        if self.path.startswith("/api/"):
            hub_api.answer(self, st)
            return
        m = _PATH.match(self.path)
        if not m:
            self._error(404, "RepoNotFound", "Repository not found")
            return
        repo, name = m["repo"], m["file"]
        need = st.tokens.get(repo)
        if need is not None and self.headers.get("Authorization") != f"Bearer {need}":
            self._error(401, "RepoNotFound", "Invalid username or password.")
            return
        data = st.files.get((repo, name))
        if data is None or m["rev"] not in ("main", COMMIT):
            self._error(404, "EntryNotFound", f"{name} does not exist on main")
            return
        sha = st.advertised_sha.get((repo, name), hashlib.sha256(data).hexdigest())
        start, end, status = 0, len(data) - 1, 200
        rng = _RANGE.match(self.headers.get("Range", ""))
        if rng and st.ranges and self.command == "GET":
            start = int(rng[1])
            end = min(int(rng[2]), len(data) - 1) if rng[2] else len(data) - 1
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{sha}"')
        self.send_header("X-Linked-Etag", f'"{sha}"')
        self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("Content-Length", str(end - start + 1))
        if st.ranges:
            self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.end_headers()
        if self.command == "HEAD":
            return
        body = data[start : end + 1]
        with st.lock:
            # a cut hits the first GET of the whole file or its rest, not a header's range request
            cut = st.cut_after.pop((repo, name), None) if not (rng and rng[2]) else None
        if cut is not None:
            body = body[:cut]
        try:
            for i in range(0, len(body), PIECE):
                self.wfile.write(body[i : i + PIECE])
                if st.slow_s:
                    self.wfile.flush()
                    time.sleep(st.slow_s)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return
        if cut is not None:
            self.close_connection = True  # fewer bytes than Content-Length, then the connection drops

    do_HEAD = _serve
    do_GET = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up is not the server's fault
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class LocalServer:
    """An HTTP server on 127.0.0.1 at a free port, in a background thread; use as a context manager."""

    def __init__(self, httpd: ThreadingHTTPServer) -> None:
        self._httpd = httpd
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class HubServer(LocalServer):
    """The stand-in Hub, serving :attr:`state`."""

    def __init__(self) -> None:
        self.state = HubState()
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.state = self.state
        super().__init__(httpd)


def hub_environment(monkeypatch: object, url: str, home: str) -> None:
    """Point huggingface_hub at ``url`` for one test, with no token, telemetry or Xet.

    ``HF_ENDPOINT`` and ``HF_TOKEN`` are read by engine.hub at call time. huggingface_hub reads
    ``HF_HUB_DISABLE_TELEMETRY`` / ``HF_HUB_DISABLE_XET`` / ``HF_HUB_OFFLINE`` once, at import, into
    ``huggingface_hub.constants``: the environment is set for subprocesses and the constants for this
    process (telemetry off also stops its once-a-day ``/api/agent-harnesses`` fetch). ``HF_HOME``
    hides any saved token.
    """
    import pytest
    from huggingface_hub import constants

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", home)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

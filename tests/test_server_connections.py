"""The local server against connections that never finish a request (a "slowloris"): a deadline for the headers
and for the body, a cap on open connections below the file limit, one log line per burst. A real server on
127.0.0.1 with real sockets; the last test runs ``serve`` under a lowered file limit, as the issue's probe did."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from engine import Engine, EngineConfig
from engine.server import LocalServer, ServerConfig
from engine.server.conns import ConnectionLimits
from tests.server_helpers import WITH_CTRL_C, error_of, stop, wait_until
from tests.tiny_models import TinyPair

pytestmark = pytest.mark.timeout(180)

KEY = "k"
CAP = 16  # the in-process server's connection cap
DEADLINE_S = 0.5  # the in-process server's header and body deadlines
FILE_LIMIT = 400  # the serve process's file limit: its cap is 1024 less the reserve, or this less the reserve
SLOW = FILE_LIMIT + 50  # slow connections opened against it: more than it may hold open
PARTIAL = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "  # headers never finished


@pytest.fixture(scope="module")
def engine(tiny: TinyPair) -> Iterator[Engine]:
    with Engine(EngineConfig(str(tiny.target), None, n_ctx=2048, threads=1)) as eng:
        yield eng


@contextmanager
def serve(engine: Engine, limits: ConnectionLimits) -> Iterator[LocalServer]:
    """A started server with an API key and these connection limits on a free port; stopped afterwards."""
    server = LocalServer(engine, ServerConfig(port=0, api_key=KEY), limits)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(engine: Engine) -> Iterator[LocalServer]:
    with serve(engine, ConnectionLimits(header_s=DEADLINE_S, body_s=DEADLINE_S, max_connections=CAP)) as srv:
        yield srv


def slow(port: int, data: bytes = PARTIAL) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(data)
    return sock


def closed(sock: socket.socket) -> bool:
    """Whether the server has closed it (what it sent before is read and dropped)."""
    sock.setblocking(False)
    try:
        while data := sock.recv(65536):
            del data
        return True
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def models(url: str, timeout: float = 10.0) -> httpx.Response:
    return httpx.get(url + "/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=timeout)


def test_unfinished_headers_are_closed_at_their_deadline_before_the_key_is_asked(server: LocalServer) -> None:
    sock = slow(server.port)  # no API key: it is never read, the headers are never finished
    try:
        wait_until(lambda: closed(sock), "the server closes a request whose headers never end", limit_s=20)
    finally:
        sock.close()
    assert models(server.url).status_code == 200


def test_a_body_that_does_not_arrive_in_time_is_a_408(server: LocalServer) -> None:
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{").encode()
    with slow(server.port, head) as sock:
        sock.settimeout(20)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    status, _, body = reply.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 408")
    assert json.loads(body)["error"]["code"] == "request_timeout"
    assert models(server.url).status_code == 200


def test_at_the_cap_the_longest_unfinished_requests_make_room(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="engine.server.conns")
    limits = ConnectionLimits(header_s=120, body_s=120, max_connections=CAP)  # no deadline passes meanwhile
    with serve(engine, limits) as server:
        socks = [slow(server.port) for _ in range(3 * CAP)]
        try:
            at_the_cap(server, socks)
        finally:
            for s in socks:
                s.close()
    lines = [r for r in caplog.records if r.name == "engine.server.conns"]
    assert len(lines) == 1 and "the most this server keeps" in lines[0].getMessage()


def at_the_cap(server: LocalServer, socks: list[socket.socket]) -> None:
    # a client with a whole request is served at once, the cap full of unfinished ones or not
    for _ in range(3):
        assert models(server.url, timeout=5).status_code == 200
    wait_until(lambda: sum(closed(s) for s in socks[: 2 * CAP]) == 2 * CAP,
               "the oldest unfinished connections are closed to make room")
    assert not any(closed(s) for s in socks[-CAP // 2:])  # the newest still wait, until their deadline


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX file limit (RLIMIT_NOFILE)")
def test_more_slow_connections_than_the_file_limit_leave_the_server_serving(tiny: TinyPair) -> None:
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    argv = [sys.executable, "-c", WITH_CTRL_C, "serve", "--target", str(tiny.target), "--port", "0",
            "--ctx", "2048", "--threads", "1", "--api-key", KEY]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, hard)))
    assert proc.stderr is not None
    line = next((ln for ln in proc.stderr if ln.startswith("serving ")), "")
    rest: list[str] = []  # drained: a server blocked writing to a full pipe would stop answering
    drain = threading.Thread(target=lambda: rest.extend(proc.stderr or ()), daemon=True)
    drain.start()
    url = line.split()[1]
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    socks: list[socket.socket] = []
    try:
        socks = [slow(port) for _ in range(SLOW)]
        reply = models(url, timeout=10)
        assert reply.status_code == 200, reply.text
        assert error_of(httpx.get(url + "/models", timeout=10), 401)["code"] == "invalid_api_key"
    finally:
        for s in socks:
            s.close()
        assert stop(proc) == 0
    drain.join(10)
    proc.stderr.close()  # read to its end by the drain
    err = "".join(rest)
    assert err.count("the most this server keeps") == 1, err[-3000:]
    assert len(err) < 2000, err[-3000:]  # one line for the burst, nothing per connection

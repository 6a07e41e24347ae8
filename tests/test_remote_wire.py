"""Remote machines without llama.cpp's RPC: endpoint lists, the HELLO probe against real sockets, the delay proxy,
placement's words for a remote target, and what a build without RPC says."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from engine.core.placement import Placement
from engine.errors import ParameterError
from engine.native.rpc import NO_RPC, REBUILD, available
from engine.remote import RemoteError, parse_endpoint, parse_endpoints, probe
from engine.remote.proxy import DelayProxy
from engine.tiny.models import TinyPair
from tests.rpc_helpers import free_port

pytestmark = pytest.mark.timeout(60)


def test_endpoints_parse_and_say_what_is_wrong() -> None:
    assert [str(e) for e in parse_endpoints("10.0.0.2:50052, gpu-box:6000,[::1]:7")] == \
        ["10.0.0.2:50052", "gpu-box:6000", "[::1]:7"]
    assert parse_endpoint("desk").port == 50052
    assert parse_endpoint("127.0.0.2:1").loopback and not parse_endpoint("192.168.1.9:1").loopback
    for bad, words in [("host:0", "1 to 65535"), ("host:x", "1 to 65535"), (":5", "no host"),
                       ("fe80::1:5", "brackets"), ("", "empty")]:
        with pytest.raises(ParameterError, match=words):
            parse_endpoints(bad)
    with pytest.raises(ParameterError, match="named twice"):
        parse_endpoints("a:1,a:1")


def test_a_closed_port_is_named_with_what_to_run_there() -> None:
    port = free_port()
    with pytest.raises(RemoteError) as err:
        probe(parse_endpoint(f"127.0.0.1:{port}"))
    assert f"cannot reach remote machine 127.0.0.1:{port}" in str(err.value)
    assert "python -m engine rpc-server" in str(err.value)


@contextmanager
def listener(answer: bytes | None) -> Iterator[int]:
    """A TCP server that answers the first request with ``answer`` (None: accepts and never answers, as an RPC
    server does while it serves another client)."""
    srv = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def run() -> None:
        conn, _ = srv.accept()
        held.append(conn)
        if answer is not None:
            conn.recv(1 + 8 + 24)
            conn.sendall(answer)

    threading.Thread(target=run, daemon=True).start()
    try:
        yield int(srv.getsockname()[1])
    finally:
        for c in held:
            c.close()
        srv.close()


def test_a_server_that_never_says_hello_is_busy_not_a_hang() -> None:
    with listener(None) as port:
        t0 = time.monotonic()
        with pytest.raises(RemoteError, match=f"127.0.0.1:{port} is busy: its RPC server serves one client"):
            probe(parse_endpoint(f"127.0.0.1:{port}"), hello_timeout=0.5)
        assert time.monotonic() - t0 < 10


def test_another_protocol_major_is_refused_by_name() -> None:
    reply = struct.pack("<Q", 28) + bytes([6, 1, 0, 0]) + bytes(24)
    with listener(reply) as port, pytest.raises(RemoteError, match=r"speaks llama\.cpp RPC protocol 6\.1"):
        probe(parse_endpoint(f"127.0.0.1:{port}"), devices=False)


def test_the_proxy_delays_each_way_and_counts_bytes() -> None:
    with socket.create_server(("127.0.0.1", 0)) as srv:

        def echo() -> None:
            conn, _ = srv.accept()
            with conn:
                while data := conn.recv(100):
                    conn.sendall(data * 2)

        threading.Thread(target=echo, daemon=True).start()
        with DelayProxy(srv.getsockname(), 0.05) as proxy:
            with socket.create_connection(("127.0.0.1", proxy.port)) as c:
                t0 = time.perf_counter()
                c.sendall(b"ping")
                got = c.recv(100)
                rtt = time.perf_counter() - t0
            assert got == b"pingping" and rtt >= 0.1
            time.sleep(0.1)
            assert proxy.counts() == (4, 8)


def test_placement_names_the_remote_machines() -> None:
    pl = Placement(-1, 0, 24, 8, True, True, remote=("10.0.0.2:50052",))
    assert pl.text == "target 24/24 layers on remote 10.0.0.2:50052, draft on the CPU"
    assert pl.memory_key == "GPU layers 24 0, remote 10.0.0.2:50052"
    assert Placement(0, 0, 24, 8, True, True).memory_key == "GPU layers 0 0"


@pytest.mark.skipif(available(), reason="this build has RPC: the rebuild message is for builds without it")
def test_a_build_without_rpc_says_so_in_one_line_with_the_rebuild_command(tiny: TinyPair) -> None:
    for argv in (["generate", "--target", str(tiny.target), "--prompt", "Hi", "--rpc", "127.0.0.1:50052"],
                 ["rpc-server", "--port", str(free_port())]):
        r = subprocess.run([sys.executable, "-m", "engine", *argv], capture_output=True, text=True, timeout=60,
                           check=False)
        assert r.returncode == 2
        assert r.stderr.strip().splitlines()[-1] == f"error: {NO_RPC}"
        assert REBUILD in r.stderr and "Traceback" not in r.stderr

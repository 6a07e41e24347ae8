"""RPC servers for tests: ``python -m engine rpc-server`` as child processes on 127.0.0.1, and the skip reason a
build without RPC gives."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine.remote import RemoteError, parse_endpoint, probe
from engine.remote.native import NO_RPC, available

needs_rpc = pytest.mark.skipif(not available(), reason=NO_RPC)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_rpc_server(port: int, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """An RPC server child on 127.0.0.1:``port`` (one CPU thread), once it answers HELLO."""
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "engine", "rpc-server", "--port", str(port), "--threads", "1",
                                 *args], stdout=out, stderr=subprocess.STDOUT)
    ep = parse_endpoint(f"127.0.0.1:{port}")
    deadline = time.monotonic() + 60
    while True:
        try:
            probe(ep, devices=False)
            return proc
        except RemoteError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"rpc-server did not start: {log.read_text(errors='replace')[-2000:]}") from None
            time.sleep(0.2)


def end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    proc.wait(timeout=30)


@contextmanager
def rpc_server(tmp_path: Path, port: int | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``(endpoint, process)`` of a running RPC server, ended afterwards."""
    port = port or free_port()
    proc = start_rpc_server(port, tmp_path / f"rpc-{port}.log")
    try:
        yield f"127.0.0.1:{port}", proc
    finally:
        end(proc)


def address(endpoint: str) -> tuple[str, int]:
    """``(host, port)`` of a ``HOST:PORT`` string."""
    host, port = endpoint.rsplit(":", 1)
    return host, int(port)


def generate_argv(target: Path, rpc: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "engine", "generate", "--target", str(target), "--rpc", rpc, "--threads", "1",
            "--draft-threads", "1", "--ctx", "512", "--prompt", "Hello", *args]

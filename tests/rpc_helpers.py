"""RPC servers for tests: ``python -m engine rpc-server`` as child processes on 127.0.0.1, and the skip reason a
build without RPC gives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine.bench.remote_link import free_port, start_server
from engine.native.rpc import NO_RPC, available

__all__ = ["address", "end", "free_port", "generate_argv", "needs_rpc", "rpc_server", "start_server"]

needs_rpc = pytest.mark.skipif(not available(), reason=NO_RPC)


def end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    proc.wait(timeout=30)


@contextmanager
def rpc_server(tmp_path: Path, port: int | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``(endpoint, process)`` of a running RPC server, ended afterwards."""
    port = port or free_port()
    proc = start_server(port, tmp_path / f"rpc-{port}.log")
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

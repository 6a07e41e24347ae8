"""Scenario R's link: RPC server children on this machine (``python -m engine rpc-server``, one thread each) and
the delaying proxies in front of them, one proxy per server, all with the same delay each way."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.errors import EngineError
from engine.remote import RemoteError, parse_endpoint, probe
from engine.remote.proxy import DelayProxy

SERVER_THREADS = 1  # each server's CPU threads: two servers and the draft share this host's two cores
START_S = 60.0  # an RPC server child answers HELLO within this (a Python start and llama.cpp's backend load)
POLL_S = 0.2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, log: Path) -> subprocess.Popen[bytes]:
    """An RPC server child on 127.0.0.1:``port``, once it answers HELLO; EngineError with its log's tail if not."""
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "engine", "rpc-server", "--port", str(port),
                                 "--threads", str(SERVER_THREADS)], stdout=out, stderr=subprocess.STDOUT)
    ep = parse_endpoint(f"127.0.0.1:{port}")
    deadline = time.monotonic() + START_S
    while True:
        try:
            probe(ep, devices=False)
            return proc
        except RemoteError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                tail = log.read_text(errors="replace")[-500:]
                raise EngineError(f"the RPC server for scenario R on port {port} did not start: {tail}") from None
            time.sleep(POLL_S)


@contextlib.contextmanager
def servers(n: int, folder: Path) -> Iterator[list[int]]:
    """``n`` fresh RPC server children (their ports), ended on the way out. Fresh ones for each client process:
    a server serves one client at a time, and llama.cpp may hold its connection until its process ends."""
    procs: list[subprocess.Popen[bytes]] = []
    ports: list[int] = []
    try:
        for _ in range(n):
            ports.append(free_port())
            procs.append(start_server(ports[-1], folder / f"rpc-{ports[-1]}.log"))
        yield ports
    finally:
        for p in procs:
            p.kill()
            p.wait()


@contextlib.contextmanager
def proxies(ports: list[int], delay_ms: float) -> Iterator[list[DelayProxy]]:
    """A :class:`DelayProxy` adding ``delay_ms`` each way in front of each server port, closed on the way out."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(DelayProxy(("127.0.0.1", p), delay_ms / 1000)) for p in ports]


def snapshot(links: list[DelayProxy]) -> list[tuple[int, int]]:
    """Each proxy's (up, down) bytes relayed so far."""
    return [p.counts() for p in links]


def since(links: list[DelayProxy], before: list[tuple[int, int]]) -> dict[str, Any]:
    """The bytes relayed since ``before``: up and down summed over the proxies, and each proxy's [up, down]."""
    each = [[u - u0, d - d0] for (u, d), (u0, d0) in zip(snapshot(links), before, strict=True)]
    return {"bytes_up": sum(u for u, _ in each), "bytes_down": sum(d for _, d in each), "bytes_by_server": each}

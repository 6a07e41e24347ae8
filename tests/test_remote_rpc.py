"""The target on another machine over llama.cpp's RPC, with real RPC servers (``python -m engine rpc-server``) as
child processes on 127.0.0.1 and the tiny models: greedy output equal to local ar in every mode, and each failure
said naming the endpoint (a killed server, a frozen one, a busy one); skipped in a build without RPC."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from engine import EngineConfig, GenerationParams
from engine.core.sampling import SamplingParams
from engine.engine import Engine
from engine.process import EngineProcess
from engine.remote.deadline import DEADLINE_ENV
from engine.remote.proxy import DelayProxy
from engine.tiny.models import TinyPair
from tests.rpc_helpers import address, end, free_port, generate_argv, needs_rpc, rpc_server, start_server
from tests.server_helpers import client, serve, wait_until

pytestmark = [pytest.mark.long, needs_rpc, pytest.mark.timeout(300)]

MODES = ("ar", "sd", "ssd", "lookup", "auto")
N = 32  # tokens per reply: several rounds in every mode

ALL_MODES = """
import json, sys
from engine import EngineConfig, GenerationParams
from engine.core.sampling import SamplingParams
from engine.engine import Engine
target, draft, rpc, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cfg = EngineConfig(target, draft, n_ctx=512, threads=1, draft_threads=1, rpc=tuple(rpc.split(",")))
out = {}
with Engine(cfg) as eng:
    prompt = eng.tokenize("Once upon a time")
    for mode in sys.argv[5:]:
        gen = eng.generate(prompt, GenerationParams(mode=mode, max_tokens=n, sampling=SamplingParams(0.0)))
        out[mode] = [ev.token for ev in gen]
    out["placement"] = eng.placement.text
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with rpc_server(tmp_path_factory.mktemp("rpc")) as (endpoint, _proc):
        yield endpoint


def test_greedy_over_rpc_equals_local_ar_in_every_mode(tiny: TinyPair, server: str) -> None:
    with Engine(EngineConfig(str(tiny.target), n_ctx=512, threads=1)) as eng:  # no RPC in this process
        prompt = eng.tokenize("Once upon a time")
        local = [ev.token for ev in eng.generate(prompt, GenerationParams(max_tokens=N, sampling=SamplingParams(0.0)))]
    # the RPC client runs in a child: any RPC failure aborts the process that holds the connection
    r = subprocess.run([sys.executable, "-c", ALL_MODES, str(tiny.target), str(tiny.draft_related), server, str(N),
                        *MODES], capture_output=True, text=True, timeout=240, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["placement"] == f"target 3/3 layers on remote {server}, draft on the CPU"
    for mode in MODES:
        assert got[mode] == local, mode


def _reading(proc: subprocess.Popen[bytes]) -> list[bytes]:
    """The output of ``proc`` as it comes (a thread drains stdout)."""
    got: list[bytes] = []

    def pump() -> None:
        assert proc.stdout is not None
        while chunk := os.read(proc.stdout.fileno(), 4096):
            got.append(chunk)

    threading.Thread(target=pump, daemon=True).start()
    return got


def _last_line(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stderr is not None
    err = proc.stderr.read().decode("utf-8", "replace")
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    return err.strip().splitlines()[-1]


def test_a_server_killed_mid_reply_ends_generate_with_one_line_naming_it(tiny: TinyPair, tmp_path: Path) -> None:
    port = free_port()
    srv = start_server(port, tmp_path / "rpc.log")
    try:
        with DelayProxy(("127.0.0.1", port), 0.01) as proxy:  # 20 ms a token: the reply is long under way
            with subprocess.Popen(generate_argv(tiny.target, proxy.endpoint, "--max-tokens", "1500"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:  # its pipes closed after
                out = _reading(proc)
                wait_until(lambda: len(b"".join(out)) > 0, "the reply began", limit_s=120)
                srv.kill()
                assert proc.wait(timeout=60) == 2
                line = _last_line(proc)
    finally:
        end(srv)
    assert line.startswith("error: the engine stopped: llama.cpp aborted: ")
    assert "Remote RPC server crashed" in line and proxy.endpoint in line


def test_a_frozen_server_runs_into_the_deadline(tiny: TinyPair, tmp_path: Path) -> None:
    with rpc_server(tmp_path) as (endpoint, srv):
        env = {**os.environ, DEADLINE_ENV: "2"}
        with DelayProxy(address(endpoint), 0.01) as proxy:
            with subprocess.Popen(generate_argv(tiny.target, proxy.endpoint, "--max-tokens", "1500"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
                out = _reading(proc)
                wait_until(lambda: len(b"".join(out)) > 0, "the reply began", limit_s=120)
                os.kill(srv.pid, signal.SIGSTOP)  # a silent partition: no reset, no answer
                assert proc.wait(timeout=60) == 2
                line = _last_line(proc)
    assert line == (f"error: the engine stopped: llama.cpp aborted: ssd-chat:0: remote machine {proxy.endpoint} gave "
                    "no answer for 2 s (frozen, or the network cut): the engine stopped waiting")


def _read(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from a stream (a reply may arrive in more than one segment)."""
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        assert chunk, f"the server closed the connection after {len(got)} bytes"
        got += chunk
    return got


def test_a_second_client_hears_busy_not_a_hang(tiny: TinyPair, server: str) -> None:
    host, port = server.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as first:  # the first client: HELLO answered
        first.sendall(struct.pack("<BQ", 14, 24) + bytes(24))
        assert _read(first, 9)[8] == 7  # the reply's size (8 bytes), then the protocol's major version
        t0 = time.monotonic()
        r = subprocess.run(generate_argv(tiny.target, server, "--max-tokens", "4"), capture_output=True, text=True,
                           timeout=120, check=False)
    assert r.returncode == 2 and time.monotonic() - t0 < 60
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: remote machine {server} is busy: its RPC server "
                                                        "serves one client at a time")


def test_serve_answers_503_while_the_remote_is_gone_and_recovers(tiny: TinyPair, tmp_path: Path) -> None:
    port = free_port()
    srv = start_server(port, tmp_path / "rpc.log")
    endpoint = f"127.0.0.1:{port}"
    eng = EngineProcess(EngineConfig(str(tiny.target), n_ctx=512, threads=1, rpc=(endpoint,)), auto_restart=True)
    try:
        with serve(eng) as http:
            def ask(n: int) -> int:
                reply = client(http).chat.completions.create(
                    model="target", messages=[{"role": "user", "content": "Hi"}], max_tokens=n, temperature=0)
                return int(reply.usage.completion_tokens) if reply.usage else 0

            assert ask(4) == 4
            end(srv)
            with pytest.raises(openai.InternalServerError) as err:
                ask(4)
            assert err.value.status_code == 503 and endpoint in err.value.message
            with pytest.raises(openai.InternalServerError):  # gone still: the restarts cannot load
                ask(4)
            srv = start_server(port, tmp_path / "rpc.log")
            wait_until(lambda: eng.state == "ready", "the engine loaded again", limit_s=120)
            assert ask(4) == 4
    finally:
        eng.close()
        end(srv)


def test_rpc_server_warns_off_loopback_and_says_what_is_wrong(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "engine", "rpc-server", "--host", "0.0.0.0", "--port", str(port),
                             "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith(f"WARNING: the RPC server on 0.0.0.0:{port} has no authentication and no encryption")
        assert proc.stderr.readline().startswith(f"serving CPU on 0.0.0.0:{port} for one client at a time")
        taken = subprocess.run([sys.executable, "-m", "engine", "rpc-server", "--port", str(port)],
                               capture_output=True, text=True, timeout=60, check=False)
        assert taken.returncode == 2 and taken.stderr.strip().splitlines()[-1].startswith(
            f"error: cannot listen on 127.0.0.1:{port} (Address already in use)")
    finally:
        proc.kill()
        proc.communicate(timeout=30)  # reaped, its pipe closed
    bad = subprocess.run([sys.executable, "-m", "engine", "rpc-server", "--device", "NOPE0"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert bad.returncode == 2
    line = bad.stderr.strip().splitlines()[-1]
    assert line.startswith("error: no device named NOPE0 here; this machine has: ") and "CPU" in line


def test_two_machines_split_the_target_and_stay_exact(tiny: TinyPair, server: str, tmp_path: Path) -> None:
    with Engine(EngineConfig(str(tiny.target), n_ctx=512, threads=1)) as eng:
        prompt = eng.tokenize("Once upon a time")
        local = [ev.token for ev in eng.generate(prompt, GenerationParams(max_tokens=N, sampling=SamplingParams(0.0)))]
    with rpc_server(tmp_path) as (second, _proc), DelayProxy(address(server), 0) as a, \
            DelayProxy(address(second), 0) as b:
        r = subprocess.run([sys.executable, "-c", ALL_MODES, str(tiny.target), str(tiny.draft_related),
                            f"{a.endpoint},{b.endpoint}", str(N), "ar", "ssd"],
                           capture_output=True, text=True, timeout=240, check=False)
        weights = (a.counts()[0], b.counts()[0])
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["placement"] == f"target 3/3 layers on remote {a.endpoint}, {b.endpoint}, draft on the CPU"
    assert got["ar"] == local and got["ssd"] == local
    assert min(weights) > 100_000, weights  # each machine was sent a share of the layers


def test_tensor_split_gives_each_machine_its_share(tiny: TinyPair, server: str, tmp_path: Path) -> None:
    with rpc_server(tmp_path) as (second, _proc), DelayProxy(address(server), 0) as a, \
            DelayProxy(address(second), 0) as b:
        r = subprocess.run(generate_argv(tiny.target, f"{a.endpoint},{b.endpoint}", "--tensor-split", "1,0",
                                         "--max-tokens", "4"), capture_output=True, text=True, timeout=120, check=False)
        weights = (a.counts()[0], b.counts()[0])
        bad = subprocess.run(generate_argv(tiny.target, f"{a.endpoint},{b.endpoint}", "--tensor-split", "1"),
                             capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert weights[0] > 100_000 > weights[1], weights  # every remote layer on the first machine, none on the second
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == "error: --tensor-split gives 1 share for 2 remote devices"

"""``serve`` with the engine in its own process: a native fault mid-reply ends that reply with an error naming the
cause (a stream's error event, or a 503), the HTTP server stays up, /health says the engine is restarting, and after
the automatic restart the next request succeeds (the official openai client throughout)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from engine import EngineConfig
from engine.process import EngineProcess
from engine.server import LocalServer
from tests.process_helpers import pid_alive
from tests.server_helpers import client, error_of, serve, start_serve, stop, wait_until
from tests.tiny_models import TinyPair

pytestmark = pytest.mark.timeout(180)

LONG = 1900  # tokens asked for: seconds of tiny-model decoding, so a kill after the first pieces lands mid-reply


@pytest.fixture
def served(tiny: TinyPair) -> Iterator[tuple[EngineProcess, LocalServer]]:
    """What ``serve`` runs: a restarting engine process behind the HTTP server."""
    eng = EngineProcess(EngineConfig(str(tiny.target), n_ctx=2048, threads=1), auto_restart=True)
    pids = [eng.pid]
    eng.on_stopped = lambda _cause: pids.append(0)
    try:
        with serve(eng) as server:
            yield eng, server
    finally:
        pids.append(eng.pid)
        eng.close()
        assert not any(pid_alive(pid) for pid in pids if pid), "an engine process was left behind"


def health(server: LocalServer) -> dict[str, Any]:
    return dict(httpx.get(server.url.removesuffix("/v1") + "/health", timeout=10).json())


def ask(server: LocalServer, **extra: Any) -> Any:
    return client(server).chat.completions.create(
        model="target", messages=[{"role": "user", "content": "Once upon a time"}], temperature=0,
        **{"max_tokens": LONG, **extra})


@pytest.mark.parametrize(("sig", "name"), [(signal.SIGKILL, "SIGKILL"), (signal.SIGBUS, "SIGBUS"),
                                           (signal.SIGABRT, "SIGABRT")])
def test_a_stream_cut_by_a_dead_engine_ends_with_its_cause(served: tuple[EngineProcess, LocalServer],
                                                           sig: signal.Signals, name: str) -> None:
    eng, server = served
    assert health(server)["engine"] == "ready"
    first = eng.pid
    pieces: list[str] = []
    with pytest.raises(openai.APIError) as err:
        for chunk in ask(server, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
                if len(pieces) == 2:
                    os.kill(first, sig)
    assert f"the engine stopped: killed by {name}" in err.value.message
    assert len(pieces) >= 2
    assert health(server)["engine"] == "restarting"  # the front answers meanwhile
    wait_until(lambda: health(server)["engine"] == "ready", "the engine restarted", limit_s=60)
    assert eng.pid != first and not pid_alive(first)
    again = ask(server, max_tokens=8)
    assert again.choices[0].finish_reason == "length" and again.usage.completion_tokens == 8
    assert server.status().failed >= 1


def test_a_whole_reply_cut_by_a_dead_engine_is_a_503_and_so_is_a_request_meanwhile(
        served: tuple[EngineProcess, LocalServer]) -> None:
    eng, server = served
    first = eng.pid
    eng.on_stopped = None
    server.gate.progressed = lambda _rid, n: os.kill(first, signal.SIGKILL) if n == 3 else None  # type: ignore
    with pytest.raises(openai.InternalServerError) as err:
        ask(server)
    assert err.value.status_code == 503
    assert "the engine stopped: killed by SIGKILL" in err.value.message
    del server.gate.progressed
    body = {"model": "target", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    if eng.state == "restarting":  # refused at once, with the cause and a Retry-After
        r = httpx.post(server.url + "/chat/completions", json=body, timeout=30)
        if r.status_code == 503:
            assert error_of(r, 503)["code"] == "engine_restarting" and "SIGKILL" in r.json()["error"]["message"]
            assert r.headers["Retry-After"]
    wait_until(lambda: eng.state == "ready", "the engine restarted", limit_s=60)
    assert ask(server, max_tokens=4).usage.completion_tokens == 4


def _children(pid: int) -> list[int]:
    """The engine processes a process started (multiprocessing's resource tracker left out)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return [c for c in found if b"spawn_main" in _cmdline(c)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads a process's children from /proc")
def test_the_serve_command_outlives_its_engine(tiny: TinyPair) -> None:
    proc, line, rest = start_serve(tiny)
    try:
        url = line.split()[1]
        engines = _children(proc.pid)
        assert len(engines) == 1
        os.kill(engines[0], signal.SIGKILL)
        with openai.OpenAI(base_url=url, api_key="x", max_retries=0) as oai:
            wait_until(lambda: len(_children(proc.pid)) == 1 and _children(proc.pid) != engines,
                       "serve started a new engine process", limit_s=60)
            wait_until(lambda: httpx.get(url.removesuffix("/v1") + "/health").json()["engine"] == "ready",
                       "the engine is ready again", limit_s=60)
            reply = oai.completions.create(model="target", prompt="Hello", max_tokens=3, temperature=0)
            assert reply.usage is not None and reply.usage.completion_tokens == 3
        assert proc.poll() is None
    finally:
        code = stop(proc)
    assert code == 0, "".join(rest)
    assert not pid_alive(engines[0])
    assert "Traceback" not in "".join(rest)


def test_the_apps_server_starts_a_stopped_engine_with_its_next_request(tiny: TinyPair) -> None:
    """The app's engine restarts on demand (no supervisor): a server request after a crash starts it again."""
    with EngineProcess(EngineConfig(str(tiny.target), n_ctx=2048, threads=1)) as eng, serve(eng) as server:
        first = eng.pid
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: eng.state == "stopped", "the engine process is seen dead")
        assert health(server)["engine"] == "ready"  # the next request is served
        assert ask(server, max_tokens=5).usage.completion_tokens == 5
        assert eng.pid != first and eng.restarts == 1
    assert not pid_alive(first) and not pid_alive(eng.pid)

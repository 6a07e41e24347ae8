"""Helpers for the local-server tests: a real server on a free loopback port, clients, the CLI's reference text."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from engine import Engine, EngineConfig
from engine.server import LocalServer, ServerConfig
from engine.server.job import ServedEngine
from tests.tiny_models import TinyPair
from tests.tool_models import write_tools_model

CTX = 2048  # the server tests' context: room for a tool list, a schema's grammar and a reply


@contextmanager
def serve(engine: ServedEngine, **config: Any) -> Iterator[LocalServer]:
    """A started server on 127.0.0.1 and a free port; stopped (and checked stopped) afterwards."""
    server = LocalServer(engine, ServerConfig(port=0, **config))
    server.start()
    try:
        yield server
    finally:
        for made in _clients.pop(id(server), ()):
            made.close()
        server.stop()
        assert not server.running


_clients: dict[int, list[openai.OpenAI]] = {}  # the clients made for each server serve() runs, closed as it stops


def client(server: LocalServer, key: str = "unused") -> openai.OpenAI:
    """The official client, with no retries (a 429 or 5xx must surface as it is); closed when ``serve`` stops the
    server (its sockets are never left to the garbage collector)."""
    made = openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=60.0)
    _clients.setdefault(id(server), []).append(made)
    return made


def one_thread(target: Path | str, draft: Path | str | None, n_ctx: int = CTX, **extra: Any) -> EngineConfig:
    """A pair as the server tests load it: one CPU thread for each model (the host has two cores, shared)."""
    return EngineConfig(str(target), str(draft) if draft else None, n_ctx=n_ctx, threads=1, draft_threads=1,
                        **extra)


@contextmanager
def tools_engine(folder: Path) -> Iterator[Engine]:
    """The tool-calling tiny pair (tests/tool_models.py: a target, and a noisy copy of it as the draft), written in
    ``folder`` and loaded."""
    target = write_tools_model(folder / "target.gguf")
    draft = write_tools_model(folder / "draft.gguf", noise=0.05)
    with Engine(one_thread(target, draft)) as eng:
        yield eng


def module_server(**config: Any) -> Any:
    """A module's ``server`` fixture: its ``engine`` fixture behind a started server (``config``: ServerConfig's
    fields). A module sets ``server = module_server()``."""

    @pytest.fixture(scope="module")
    def server(engine: ServedEngine) -> Iterator[LocalServer]:
        with serve(engine, **config) as srv:
            yield srv

    return server


def module_client(key: str = "unused") -> Any:
    """A module's ``oai`` fixture: the official client of its ``server`` fixture."""

    @pytest.fixture(scope="module")
    def oai(server: LocalServer) -> openai.OpenAI:
        return client(server, key)

    return oai


def at_once(fns: list[Callable[[], Any]]) -> list[Any]:
    """Each ``fn`` on its own thread, started together; their results in order."""
    out: list[Any] = [None] * len(fns)
    errors: list[BaseException] = []
    start = threading.Barrier(len(fns))

    def one(i: int) -> None:
        try:
            start.wait()
            out[i] = fns[i]()
        except BaseException as exc:  # reported below, with the reply it belongs to
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return out


def chat_body(model: str, content: str = "Hello there", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


def wait_until(check: Callable[[], bool], what: str, limit_s: float = 30.0) -> None:
    """Poll until ``check()`` holds; fail naming ``what`` after ``limit_s`` (a bound, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.02)


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """The OpenAI-style error object of a reply, after checking its status and shape."""
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    body = response.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"]
    return dict(err)


def cli_text(target: Path, prompt: str, max_tokens: int, *, chat: bool, system: str | None = None,
             ctx: int = 2048) -> str:
    """What ``python -m engine generate --mode ar [--chat]`` prints for ``prompt`` (greedy; one thread, like
    the tests' engine)."""
    argv = [sys.executable, "-m", "engine", "generate", "--target", str(target), "--mode", "ar", "--prompt", prompt,
            "--max-tokens", str(max_tokens), "--ctx", str(ctx), "--temperature", "0", "--threads", "1", "--json"]
    if chat:
        argv.append("--chat")
    if system:
        argv += ["--system", system]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    return str(json.loads(r.stdout)["text"])


@contextmanager
def hang_up_later(server: LocalServer, body: dict[str, Any]) -> Iterator[None]:
    """POST ``body`` to /v1/chat/completions over a raw socket, and close it (the client leaves) on exit."""
    data = json.dumps(body).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head + data)
        yield


# ``python -m engine`` with Ctrl+C handled even where the tests run with SIGINT ignored (a background job of a
# non-interactive shell: its children inherit the ignored signal, and Python then installs no handler for it)
WITH_CTRL_C = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
               "sys.argv[0] = 'engine'; runpy.run_module('engine', run_name='__main__', alter_sys=True)")


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any] | str]:
    """Decode the ``data:`` lines of an SSE stream: JSON objects, and the closing "[DONE]"."""
    for line in lines:
        if line.startswith("data: "):
            data = line[len("data: "):]
            yield data if data == "[DONE]" else json.loads(data)


def start_serve(tiny: TinyPair, *args: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    """``python -m engine serve`` on a free port: the process, its start-up line, and its stderr lines after."""
    argv = [sys.executable, "-c", WITH_CTRL_C, "serve", "--target", str(tiny.target), "--port", "0", "--ctx", "2048",
            "--threads", "1", *args]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = ""
    for line in proc.stderr:
        if line.startswith("serving "):
            break
    rest: list[str] = []  # drained: a server blocked writing to a full pipe would never exit
    pipe = proc.stderr

    def drain() -> None:
        with pipe:  # closed at its end, once the process has exited
            rest.extend(pipe)

    _drains[proc.pid] = threading.Thread(target=drain, daemon=True)
    _drains[proc.pid].start()
    return proc, line, rest


_drains: dict[int, threading.Thread] = {}  # start_serve's stderr readers, joined by stop


def stop(proc: subprocess.Popen[str], *, signalled: bool = False) -> int:
    """Ctrl+C (unless ``signalled`` already: a second one would cut the orderly stop short) and the exit code."""
    if proc.poll() is None:
        if not signalled:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    code = proc.wait()
    drain = _drains.pop(proc.pid, None)
    if drain is not None:
        drain.join(30)  # every line read and the pipe closed
    return code

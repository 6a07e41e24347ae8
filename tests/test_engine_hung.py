"""An engine process that is alive but stuck (SIGSTOP) mid-reply: the parent ends it past its silence deadline,
the reply is a 503 naming the hang, /health says restarting, and the restarted engine answers."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from engine import EngineConfig
from engine.process import RemoteEngine, runner
from engine.server import LocalServer
from tests.process_helpers import pid_alive
from tests.server_helpers import client, serve, wait_until
from tests.test_serve_engine_process import LONG, health
from tests.tiny_models import TinyPair

pytestmark = pytest.mark.timeout(180)

SILENT_S = 3.0  # the deadline under test: the child beats every second, so three missed beats end it


@pytest.fixture
def served(tiny: TinyPair, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RemoteEngine, LocalServer]]:
    monkeypatch.setattr(runner, "SILENT_S", SILENT_S)
    eng = RemoteEngine(EngineConfig(str(tiny.target), n_ctx=2048, threads=1), auto_restart=True)
    try:
        with serve(eng) as server:
            yield eng, server
    finally:
        eng.close()


def ask(server: LocalServer, **extra: Any) -> Any:
    return client(server).chat.completions.create(
        model="target", messages=[{"role": "user", "content": "Once upon a time"}], temperature=0,
        **{"max_tokens": LONG, **extra})


def test_a_stopped_engine_is_ended_past_its_deadline_and_the_reply_is_a_503(
        served: tuple[RemoteEngine, LocalServer]) -> None:
    eng, server = served
    first = eng.pid
    server.gate.progressed = lambda _rid, n: os.kill(first, signal.SIGSTOP) if n == 3 else None  # type: ignore
    start = time.monotonic()
    with pytest.raises(openai.InternalServerError) as err:
        ask(server)
    waited = time.monotonic() - start
    del server.gate.progressed
    assert err.value.status_code == 503 and "hung: no sign of life for" in err.value.message
    assert SILENT_S <= waited < SILENT_S + 10  # ended at the deadline, not left hanging
    assert not pid_alive(first)
    assert eng.retry_after_s >= 1
    wait_until(lambda: health(server)["engine"] == "ready", "the engine restarted", limit_s=60)
    assert eng.pid != first
    assert ask(server, max_tokens=4).usage.completion_tokens == 4


def test_an_idle_engine_is_not_ended_by_the_watch(served: tuple[RemoteEngine, LocalServer]) -> None:
    eng, server = served
    first = eng.pid
    time.sleep(SILENT_S * 2)  # beats keep an idle child alive past the deadline
    assert eng.pid == first and eng.state == "ready"
    assert ask(server, max_tokens=4).usage.completion_tokens == 4

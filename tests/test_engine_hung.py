"""An engine process that is alive but stuck mid-reply, through a real server: stopped (SIGSTOP: no beats) or
stalled (beating, while its remote target's RPC server is stopped under a decode). The supervisor ends it at its
declared deadline, the reply is a 503 naming the hang, a request meanwhile gets a 503 whose Retry-After is the
restart's back-off, /health says restarting and why, and the restarted engine answers."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from engine import EngineConfig
from engine.errors import ParameterError
from engine.process import EngineProcess
from engine.process.runner import Backoff, Deadlines
from engine.server import LocalServer
from tests.process_helpers import pid_alive
from tests.rpc_helpers import needs_rpc, rpc_server
from tests.server_helpers import client, error_of, serve, wait_until
from tests.test_serve_engine_process import LONG, health
from tests.tiny_models import TinyPair

pytestmark = [pytest.mark.long, pytest.mark.timeout(180)]

DEADLINE_S = 3.0  # the deadlines under test: the child beats every second, so three missed beats end it
LATE_S = 10.0  # past the deadline, the most its end may take on a loaded 2-core host (a watch, a kill, a reap)
BACKOFF_S = 4.0  # the supervisor's first wait: a request in it meets the restarting engine
HUNG = "hung: no sign of life for"
STUCK = "stuck: its work made no progress for"


@contextmanager
def served(config: EngineConfig, deadlines: Deadlines) -> Iterator[tuple[EngineProcess, LocalServer]]:
    """What ``serve`` runs (a restarting engine process behind the HTTP server), with the deadlines given."""
    eng = EngineProcess(config, auto_restart=True, deadlines=deadlines, backoff=Backoff(first_s=BACKOFF_S))
    try:
        with serve(eng) as server:
            yield eng, server
    finally:
        eng.close()


def ask(server: LocalServer, **extra: Any) -> Any:
    return client(server).chat.completions.create(
        model="target", messages=[{"role": "user", "content": "Once upon a time"}], temperature=0,
        **{"max_tokens": LONG, **extra})


def stuck_mid_reply(eng: EngineProcess, server: LocalServer, stick: Callable[[], None], why: str,
                    unstick: Callable[[], None] = lambda: None) -> None:
    """``stick()`` at the reply's third token; everything the module's text says, up to the restarted engine's
    answer (``unstick()`` once the child has been ended)."""
    first = eng.pid
    with pytest.MonkeyPatch.context() as patch:  # the server's count of the reply's tokens, as they come
        patch.setattr(server.gate, "progressed", lambda _rid, n: stick() if n == 3 else None)
        start = time.monotonic()
        with pytest.raises(openai.InternalServerError) as err:
            ask(server)
        waited = time.monotonic() - start
    unstick()
    assert err.value.status_code == 503 and why in err.value.message, err.value.message
    assert DEADLINE_S <= waited < DEADLINE_S + LATE_S  # ended at the deadline, not left hanging
    assert not pid_alive(first)
    seen = health(server)
    assert seen["engine"] == "restarting" and why in seen["cause"] and seen["start_error"] == "", seen
    meanwhile = httpx.post(server.url + "/chat/completions", timeout=30, json={
        "model": "target", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
    refused = error_of(meanwhile, 503)
    assert refused["code"] == "engine_restarting" and why in refused["message"]
    assert 1 <= int(meanwhile.headers["Retry-After"]) <= BACKOFF_S  # the supervisor's next start
    wait_until(lambda: health(server)["engine"] == "ready", "the engine restarted", limit_s=60)
    assert eng.pid != first and eng.restarts == 1
    assert ask(server, max_tokens=4).usage.completion_tokens == 4


def test_a_stopped_engine_is_ended_at_its_silence_deadline(tiny: TinyPair) -> None:
    config = EngineConfig(str(tiny.target), n_ctx=2048, threads=1)
    with served(config, Deadlines(silent_s=DEADLINE_S)) as (eng, server):
        stuck_mid_reply(eng, server, lambda: os.kill(eng.pid, signal.SIGSTOP), HUNG)


@needs_rpc
def test_an_engine_whose_remote_target_stops_answering_is_ended_at_its_stall_deadline(
        tiny: TinyPair, tmp_path: Path) -> None:
    with rpc_server(tmp_path) as (endpoint, rpc):
        config = EngineConfig(str(tiny.target), n_ctx=2048, threads=1, rpc=(endpoint,))
        with served(config, Deadlines(stalled_s=DEADLINE_S)) as (eng, server):
            stuck_mid_reply(eng, server, lambda: os.kill(rpc.pid, signal.SIGSTOP), STUCK,
                            unstick=lambda: os.kill(rpc.pid, signal.SIGCONT))


def test_an_idle_engine_is_not_ended_by_the_watch(tiny: TinyPair) -> None:
    config = EngineConfig(str(tiny.target), n_ctx=2048, threads=1)
    with served(config, Deadlines(silent_s=DEADLINE_S, stalled_s=DEADLINE_S)) as (eng, server):
        first = eng.pid
        time.sleep(DEADLINE_S * 2)  # beats keep an idle child alive past both deadlines
        assert eng.pid == first and eng.state == "ready"
        assert ask(server, max_tokens=4).usage.completion_tokens == 4


def test_deadlines_are_checked() -> None:
    with pytest.raises(ParameterError, match="deadlines must be over"):
        Deadlines(silent_s=0.5)  # under the watch's period: an idle child between two beats would be ended
    with pytest.raises(ParameterError, match="deadlines must be over"):
        Deadlines(stalled_s=0)
